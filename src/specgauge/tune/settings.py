"""A tuned schedule in each engine's own form, exact and ready to paste.

- vLLM: ``--speculative-config '<json>'``: the arm's method and draft model,
  ``num_speculative_tokens`` = the largest K, and ``num_speculative_tokens_per_batch_size`` = the
  schedule (3-item entries, or 5-item with a context axis), checked by vLLM's rules
  (``specgauge.speculation_schedule``; vllm/v1/spec_decode/dynamic/utils.py, vllm/config/speculative.py).
- SGLang: ``--speculative-adaptive --speculative-adaptive-config FILE`` with one tier per batch-size
  range, keyed by its first batch size, ``{"candidate_steps": [K]}`` (one candidate: the measured
  depth, so SGLang's within-tier strategy has nothing to second-guess), checked by
  ``analysis.server_settings.validate_sglang_adaptive_config`` (SGLang's
  python/sglang/srt/speculative/adaptive_spec_params.py). SGLang has no context axis: each tier
  takes the smallest K over the context bands. EAGLE/EAGLE3 with ``--speculative-eagle-topk 1`` only.
- The embedded engine: ``--speculative-num-steps <max K> --speculative-schedule '<json>'``.
"""

from __future__ import annotations

import json
import shlex

from specgauge.analysis.results import ServerSetting, SpeculationSetup
from specgauge.analysis.server_settings import (SGLANG_ADAPTIVE_ALGORITHMS, SGLANG_ALGORITHM_OF_VLLM,
                                                SGLANG_CONFIG_FILE, SGLANG_CPU_ADAPTIVE_FLAGS, SGLANG_CPU_NOTE,
                                                validate_sglang_adaptive_config, validate_vllm_config,
                                                vllm_base_config)
from specgauge.tune.choice import TunedSchedule


def vllm_schedule_setting(schedule: TunedSchedule, setup: SpeculationSetup,
                          base_config: dict | None = None) -> ServerSetting:
    """vLLM's complete ``--speculative-config`` carrying ``schedule``."""
    if schedule.max_depth == 0:
        return ServerSetting(server="vllm", setting="omit --speculative-config",
                             note="no depth beat plain decoding beyond the noise at any measured level")
    config, said = vllm_base_config(setup, base_config)
    said = [s for s in said if not s.startswith("draft depth unknown")]  # the schedule sets the depth
    config["num_speculative_tokens"] = schedule.max_depth
    config["num_speculative_tokens_per_batch_size"] = schedule.as_json_list()
    validate_vllm_config(config)
    text = json.dumps(config, separators=(", ", ": "))
    form = "5-item [bs_lo, bs_hi, ctx_lo, ctx_hi, K]" if schedule.context_axis else "[bs_lo, bs_hi, K]"
    note = (f"dynamic speculative decoding: {form} entries, K draft tokens in each range (0 = no drafting), "
            f"a batch size past the last range keeps its K (vllm/v1/spec_decode/dynamic/utils.py)")
    return ServerSetting(server="vllm", setting=f"--speculative-config {shlex.quote(text)}",
                         note="; ".join([note, *said]))


def sglang_adaptive_config(schedule: TunedSchedule) -> dict:
    """SGLang's adaptive config for ``schedule``: a tier per batch-size range (smallest K over the
    context bands), neighbouring tiers with the same K merged."""
    per_range: dict[int, int] = {}
    for entry in schedule.entries:
        per_range[entry[0]] = min(per_range.get(entry[0], entry[-1]), entry[-1])
    config: dict = {"strategy": "ema"}
    previous = None
    for lo in sorted(per_range):
        if per_range[lo] != previous:
            config[str(lo)] = {"candidate_steps": [per_range[lo]]}
            previous = per_range[lo]
    validate_sglang_adaptive_config(config)
    return config


def sglang_schedule_setting(schedule: TunedSchedule, setup: SpeculationSetup) -> ServerSetting:
    """SGLang's ``--speculative-adaptive-config`` file for ``schedule``."""
    if schedule.max_depth == 0:
        return ServerSetting(server="sglang", setting="omit --speculative-algorithm",
                             note="no depth beat plain decoding beyond the noise at any measured level")
    algorithm = (setup.method or "").upper() if setup.engine in ("sglang", "specgauge") else \
        SGLANG_ALGORITHM_OF_VLLM.get(setup.method or "", "")
    said = []
    if algorithm and algorithm not in SGLANG_ADAPTIVE_ALGORITHMS:
        said.append(f"the arms ran {algorithm}: SGLang's adaptive speculation supports only EAGLE/EAGLE3 "
                    f"(adaptive_spec_params.py adaptive_unsupported_reason)")
    if schedule.context_axis:
        said.append("SGLang has no context-length axis: each tier takes the smallest depth over the context bands")
    cpu = f" {SGLANG_CPU_ADAPTIVE_FLAGS}" if setup.device == "cpu" else ""
    if cpu:
        said.append(SGLANG_CPU_NOTE)
    config = sglang_adaptive_config(schedule)
    note = (f"write {SGLANG_CONFIG_FILE} with the JSON below: each key is the first batch size of a tier, "
            f"candidate_steps its draft steps (0 = no drafting); SGLang pads a batch to its CUDA-graph batch "
            f"size before choosing the tier (adaptive_step_router.py)")
    return ServerSetting(server="sglang",
                         setting=f"--speculative-num-steps {schedule.max_depth} --speculative-eagle-topk 1 "
                                 f"--speculative-num-draft-tokens {schedule.max_depth + 1} "
                                 f"--speculative-adaptive --speculative-adaptive-config {SGLANG_CONFIG_FILE}{cpu}",
                         note="; ".join([note, *said]), config_file=SGLANG_CONFIG_FILE, config_text=json.dumps(config))


def engine_schedule_setting(schedule: TunedSchedule, algorithm: str = "EAGLE3") -> ServerSetting:
    """``specgauge serve``'s flags for ``schedule``."""
    if schedule.max_depth == 0:
        return ServerSetting(server="specgauge", setting="--speculative-algorithm NONE",
                             note="no depth beat plain decoding beyond the noise at any measured level")
    text = json.dumps(schedule.as_json_list(), separators=(",", ":"))
    return ServerSetting(server="specgauge",
                         setting=f"--speculative-algorithm {algorithm} --speculative-num-steps {schedule.max_depth} "
                                 f"--speculative-schedule {shlex.quote(text)}",
                         note="the embedded engine applies vLLM's schedule rules (docs/tune.md)")


def schedule_settings(schedule: TunedSchedule, setup: SpeculationSetup | None = None,
                      vllm_base: dict | None = None) -> tuple[ServerSetting, ...]:
    """The schedule for SGLang, vLLM and the embedded engine."""
    setup = setup or SpeculationSetup()
    algorithm = (setup.method or "EAGLE3").upper() if setup.engine == "specgauge" else "EAGLE3"
    return (sglang_schedule_setting(schedule, setup), vllm_schedule_setting(schedule, setup, vllm_base),
            engine_schedule_setting(schedule, algorithm))
