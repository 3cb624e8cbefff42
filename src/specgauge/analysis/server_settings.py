"""The threshold in each engine's own form, and validators that apply the engines' own rules.

- vLLM: ``--speculative-config '<json>'`` with the arm's own method, draft model and depth, plus
  ``num_speculative_tokens_per_batch_size``: entries ``[bs_lo, bs_hi, K]``, inclusive ranges,
  the first starting at 1, sorted and non-overlapping, K ≥ 0 (0 = no drafting), K clamped to
  ``num_speculative_tokens``, gaps and the tail past the last range inheriting the previous K
  (vllm/v1/spec_decode/dynamic/utils.py ``validate_and_normalize_dynamic_sd_schedule`` and
  ``build_dynamic_sd_schedule_lookup``; the field in vllm/config/speculative.py, where newer
  versions call it ``speculative_token_schedule`` and keep ``num_speculative_tokens_per_batch_size``
  as an accepted alias; ``num_speculative_tokens`` must be > 0 there).
- SGLang: ``--speculative-adaptive --speculative-adaptive-config FILE``: FILE is a JSON object
  whose integer-string keys are batch-size tiers (a batch uses the largest key ≤ its size, after
  padding to a CUDA-graph batch size), each ``{"candidate_steps": [non-negative ints]}`` (0 = no
  drafting), optional ``"strategy": "ema" | "throughput_aware"``; the flag takes a *path* (the
  server ``open()``s it). Only EAGLE/EAGLE3 with ``--speculative-eagle-topk 1``
  (python/sglang/srt/speculative/adaptive_spec_params.py ``_load_adaptive_config``,
  ``resolve_adaptive_strategy``, ``adaptive_unsupported_reason``; adaptive_step_router.py
  ``batch_size_key_for_batch``; the flags in python/sglang/srt/server_args.py). On SGLang's CPU
  path the setting adds ``--cuda-graph-backend-decode disabled`` (``SGLANG_CPU_NOTE``).
- The embedded engine: ``--speculative-disable-above N``.
"""

from __future__ import annotations

import json
import shlex
from typing import Sequence

from specgauge.analysis.results import ServerSetting, SpeculationSetup
from specgauge.speculation_schedule import draft_tokens_at, normalize_schedule

DEFAULT_DEPTH = 3               # draft depth written when the arm's own is unknown (said in the note)
DEFAULT_MAX_NUM_SEQS = 256      # vLLM's usual --max-num-seqs, the last range's end when the arm's is unknown
SGLANG_CONFIG_FILE = "speculative_adaptive.json"
SGLANG_ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")
# On SGLang's CPU path (--device cpu) adaptive speculation also needs the decode CUDA graph turned
# off (eagle_worker_v2.py build_adaptive_runtime_state builds a graph runner per state otherwise,
# which the intel_amx attention backend cannot: NotImplementedError), and, at upstream 2f14d6c, a
# fix of its 0-step tier (scripts/sglang-cpu.patch, eagle_utils.py).
SGLANG_CPU_ADAPTIVE_FLAGS = "--cuda-graph-backend-decode disabled"
SGLANG_CPU_NOTE = ("SGLang's CPU path (--device cpu): --cuda-graph-backend-decode disabled, or the adaptive states' "
                   "CUDA-graph runners stop the server (NotImplementedError in init_cuda_graph_state); at upstream "
                   "2f14d6c its 0-step tier also needs specgauge's scripts/sglang-cpu.patch (eagle_utils.py: "
                   "'CHECK_EQ(candidates.scalar_type(), index_dtype) failed. Int vs Long' without it)")

# SGLang --speculative-algorithm → vLLM method, and back (the same kind of drafter).
VLLM_METHOD_OF_SGLANG = {"EAGLE3": "eagle3", "EAGLE": "eagle", "NGRAM": "ngram", "STANDALONE": "draft_model"}
SGLANG_ALGORITHM_OF_VLLM = {v: k for k, v in VLLM_METHOD_OF_SGLANG.items()}
METHODS_WITHOUT_MODEL = ("ngram", "ngram_gpu", "suffix")


# --- vLLM ------------------------------------------------------------------------------------------

def validate_vllm_schedule(schedule: object, num_speculative_tokens: int) -> list[tuple[int, ...]]:
    """A ``num_speculative_tokens_per_batch_size`` schedule checked by vLLM's rules
    (vllm/v1/spec_decode/dynamic/utils.py, applied by ``specgauge.speculation_schedule``); raises
    ``ValueError`` naming the broken rule. Returns the entries sorted: ``(bs_lo, bs_hi, K)`` for
    the 3-item form, ``(bs_lo, bs_hi, ctx_lo, ctx_hi, K)`` (last context range to infinity) for the 5-item one."""
    if not isinstance(num_speculative_tokens, int) or num_speculative_tokens <= 0:
        raise ValueError("num_speculative_tokens must be > 0")
    normalized = normalize_schedule(schedule)
    if all(len(entry) == 3 for entry in schedule):
        return [(bs_lo, bs_hi, k) for bs_lo, bs_hi, _, _, k in normalized]
    return normalized


def vllm_tokens_at(schedule: Sequence[Sequence[int]], num_speculative_tokens: int, batch_size: int,
                   context_length: int = 1) -> int:
    """Draft tokens vLLM uses at ``batch_size`` (and ``context_length``): the range's K (a gap or
    the tail inherits the previous range's), clamped to ``num_speculative_tokens`` (utils.py
    ``build_dynamic_sd_schedule_lookup``)."""
    validate_vllm_schedule([list(e) for e in schedule], num_speculative_tokens)
    return draft_tokens_at(normalize_schedule([list(e) for e in schedule]), num_speculative_tokens,
                           batch_size, context_length)


def validate_vllm_config(config: object) -> dict:
    """A ``--speculative-config`` object: a JSON object whose schedule passes vLLM's rules."""
    if not isinstance(config, dict):
        raise ValueError("--speculative-config must be a JSON object")
    depth = config.get("num_speculative_tokens")
    if not isinstance(depth, int) or depth <= 0:
        raise ValueError("num_speculative_tokens must be an integer > 0")
    schedule = config.get("num_speculative_tokens_per_batch_size")
    if schedule is not None:
        validate_vllm_schedule(schedule, depth)
    return config


def vllm_base_config(setup: SpeculationSetup, base_config: dict | None = None) -> tuple[dict, list[str]]:
    """The arm's own ``--speculative-config`` (method, draft model, depth) as far as it is known,
    and what had to be assumed (one sentence each)."""
    said: list[str] = []
    config = dict(base_config or {})
    method = config.get("method") or (setup.method if setup.engine == "vllm" else
                                      VLLM_METHOD_OF_SGLANG.get((setup.method or "").upper()))
    if method:
        config["method"] = method
    else:
        said.append("the speculative arm's method is unknown (a URL arm whose server does not say it): add your "
                    "\"method\" (and \"model\") to this JSON")
    if method not in METHODS_WITHOUT_MODEL and "model" not in config:
        if setup.draft_model:
            config["model"] = setup.draft_model
        elif method:
            said.append(f"the draft model is unknown: add \"model\": your {method} drafter")
    depth = config.get("num_speculative_tokens") or setup.num_speculative_tokens
    if not depth:
        depth = DEFAULT_DEPTH
        said.append(f"draft depth unknown: num_speculative_tokens {DEFAULT_DEPTH} (specgauge's default) — use yours")
    config["num_speculative_tokens"] = int(depth)
    return config, said


def threshold_schedule(threshold: int | None, depth: int, max_num_seqs: int) -> list[list[int]]:
    """The threshold as vLLM's ``num_speculative_tokens_per_batch_size`` entries: ``depth`` draft
    tokens at batch sizes 1..``threshold``, 0 (no drafting) above up to ``max_num_seqs``; ``None``
    (no threshold): ``depth`` everywhere; 0: no drafting anywhere. Checked by vLLM's rules
    (``specgauge.speculation_schedule``; vllm/v1/spec_decode/dynamic/utils.py)."""
    top = max(1, max_num_seqs)
    if threshold is None:
        schedule = [[1, top, depth]]
    elif threshold == 0:
        schedule = [[1, top, 0]]
    else:
        schedule = [[1, threshold, depth], [threshold + 1, max(threshold + 1, top), 0]]
    normalize_schedule(schedule)
    return schedule


def vllm_setting(threshold: int, setup: SpeculationSetup, base_config: dict | None = None) -> ServerSetting:
    """``--speculative-config '<json>'`` that speculates while at most ``threshold`` requests run
    (0: never), for the arm's own method; ``base_config`` is the arm's own config when known."""
    config, said = vllm_base_config(setup, base_config)
    depth = config["num_speculative_tokens"]
    top = setup.max_num_seqs
    if top is None:
        top = DEFAULT_MAX_NUM_SEQS
        said.append(f"{DEFAULT_MAX_NUM_SEQS} stands for your --max-num-seqs (batch sizes past the last range "
                    f"inherit its K anyway)")
    schedule = threshold_schedule(threshold, int(depth), top)
    if threshold == 0:
        meaning = "speculation never paid: 0 draft tokens at every batch size (or simply omit --speculative-config)"
    else:
        meaning = (f"{depth} draft tokens while at most {threshold} requests run, 0 (no drafting) above "
                   f"(dynamic speculative decoding, vllm/v1/spec_decode/dynamic/utils.py)")
    config["num_speculative_tokens_per_batch_size"] = schedule
    validate_vllm_config(config)
    text = json.dumps(config, separators=(", ", ": "))
    setting = f"--speculative-config {shlex.quote(text)}"
    return ServerSetting(server="vllm", setting=setting, note="; ".join([meaning, *said]))


# --- SGLang ----------------------------------------------------------------------------------------

def validate_sglang_adaptive_config(config: object) -> dict[int, list[int]]:
    """An adaptive config checked by SGLang's rules (adaptive_spec_params.py); returns the tiers
    ``{batch-size lower bound: candidate steps}``. Also requires a tier at 1, so every batch size
    is covered by a tier written for it."""
    if not isinstance(config, dict):
        raise ValueError("speculative adaptive config must be a JSON object")
    strategy = config.get("strategy", "ema")
    if strategy not in ("ema", "throughput_aware"):
        raise ValueError(f"'strategy' must be 'ema' or 'throughput_aware', got {strategy!r}")
    tiers: dict[int, list[int]] = {}
    for key, entry in config.items():
        if not isinstance(key, str) or not key.isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
            raise ValueError(f"BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}")
        tiers[int(key)] = sorted(set(steps))
    if not tiers:
        raise ValueError("the config must contain at least one integer-string batch-size key")
    if min(tiers) != 1:
        raise ValueError("the first batch-size tier must start at 1")
    return dict(sorted(tiers.items()))


def sglang_steps_at(config: dict, batch_size: int) -> list[int]:
    """The candidate steps SGLang uses at ``batch_size`` (no CUDA-graph padding): the tier with the
    largest key ≤ ``batch_size`` (adaptive_step_router.py ``batch_size_key_for_batch``)."""
    tiers = validate_sglang_adaptive_config(config)
    key = max((k for k in tiers if k <= batch_size), default=min(tiers))
    return tiers[key]


def sglang_setting(threshold: int, setup: SpeculationSetup) -> ServerSetting:
    """SGLang's own load-aware speculation for ``threshold`` (0: switch speculation off)."""
    algorithm = (setup.method or "").upper() if setup.engine in ("sglang", "specgauge") else \
        SGLANG_ALGORITHM_OF_VLLM.get(setup.method or "", "")
    if threshold == 0:
        return ServerSetting(server="sglang", setting="omit --speculative-algorithm",
                             note="speculation did not pay at any tested concurrency")
    said = []
    if algorithm and algorithm not in SGLANG_ADAPTIVE_ALGORITHMS:
        return ServerSetting(
            server="sglang", setting="(none: SGLang's adaptive speculation supports only EAGLE/EAGLE3)",
            note=f"the speculative arm runs {algorithm}; SGLang switches drafting by batch size only for "
                 f"EAGLE/EAGLE3 with --speculative-eagle-topk 1 (adaptive_spec_params.py "
                 f"adaptive_unsupported_reason): keep speculation only where at most {threshold} requests run "
                 f"by routing, or use EAGLE3")
    if not algorithm:
        said.append("the speculative arm's algorithm is unknown: this needs --speculative-algorithm EAGLE or EAGLE3")
    if setup.eagle_topk not in (None, 1):
        said.append(f"the arm uses --speculative-eagle-topk {setup.eagle_topk}: adaptive speculation needs 1")
    steps = setup.num_speculative_tokens
    if not steps:
        steps = DEFAULT_DEPTH
        said.append(f"draft steps unknown: {DEFAULT_DEPTH} (specgauge's default) — use your --speculative-num-steps")
    config = {"strategy": "ema", "1": {"candidate_steps": [int(steps)]},
              str(threshold + 1): {"candidate_steps": [0]}}
    validate_sglang_adaptive_config(config)
    cpu = ""
    if setup.device == "cpu":   # SGLang's CPU path: the module doc says why
        cpu = f" {SGLANG_CPU_ADAPTIVE_FLAGS}"
        said.append(SGLANG_CPU_NOTE)
    note = (f"write {SGLANG_CONFIG_FILE} with the JSON below: {steps} draft steps for batches of 1-{threshold}, "
            f"0 (no drafting) from {threshold + 1}; SGLang pads a batch to its CUDA-graph batch size before "
            f"choosing the tier, so a batch just under {threshold + 1} may already stop drafting; EAGLE/EAGLE3 "
            f"with --speculative-eagle-topk 1 only (adaptive_spec_params.py)")
    return ServerSetting(server="sglang",
                         setting=f"--speculative-adaptive --speculative-adaptive-config {SGLANG_CONFIG_FILE} "
                                 f"--speculative-eagle-topk 1{cpu}",
                         note="; ".join([note, *said]), config_file=SGLANG_CONFIG_FILE,
                         config_text=json.dumps(config))


# --- all engines -----------------------------------------------------------------------------------

def server_settings(threshold: int | None, setup: SpeculationSetup | None = None,
                    vllm_base_config: dict | None = None) -> tuple[ServerSetting, ...]:
    """How to apply ``threshold`` on SGLang, vLLM and the embedded engine (none for None)."""
    if threshold is None:
        return ()
    setup = setup or SpeculationSetup()
    engine = (ServerSetting(server="specgauge", setting="--speculative-algorithm NONE",
                            note="speculation did not pay at any tested concurrency") if threshold == 0 else
              ServerSetting(server="specgauge", setting=f"--speculative-disable-above {threshold}",
                            note=f"the embedded engine speculates only while at most {threshold} requests run"))
    return (sglang_setting(threshold, setup), vllm_setting(threshold, setup, vllm_base_config), engine)
