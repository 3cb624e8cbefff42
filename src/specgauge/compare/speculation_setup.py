"""What the speculative arm is — engine, method, draft depth, draft model — read from its launch
command or engine arguments, else from the server's ``/server_info`` (SGLang and the embedded
engine list their ``speculative_*`` server arguments there; vLLM exposes no speculative config over
HTTP, so a vLLM URL arm stays unknown and the advice says so).

Flags read: vLLM ``--speculative-config JSON`` (vllm/config/speculative.py: ``method``, ``model``,
``num_speculative_tokens``) and ``--max-num-seqs``; SGLang and ``specgauge serve``
``--speculative-algorithm``, ``--speculative-num-steps``, ``--speculative-eagle-topk``,
``--speculative-draft-model-path``, ``--max-running-requests``, ``--device`` (python/sglang/srt/server_args.py).
"""

from __future__ import annotations

import json
import shlex

from specgauge.analysis.drafted_depth import DepthAt
from specgauge.analysis.results import SpeculationSetup
from specgauge.speculation_schedule import draft_tokens_at, normalize_schedule, parse_schedule


def _flags(argv: list[str]) -> dict[str, str]:
    """``--flag value`` and ``--flag=value`` pairs of ``argv`` (the last one wins)."""
    out: dict[str, str] = {}
    for i, item in enumerate(argv):
        if not item.startswith("--"):
            continue
        if "=" in item:
            name, value = item.split("=", 1)
            out[name] = value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[item] = argv[i + 1]
    return out


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def from_arguments(argv: list[str], *, engine_hint: str | None = None) -> tuple[SpeculationSetup, dict | None]:
    """The setup a launch command (or ``serve`` arguments) states, and its vLLM config when it has one."""
    flags = _flags(argv)
    if "--speculative-config" in flags:
        try:
            config = json.loads(flags["--speculative-config"])
        except json.JSONDecodeError:
            config = None
        if isinstance(config, dict):
            return SpeculationSetup(engine="vllm", method=config.get("method"), draft_model=config.get("model"),
                                    num_speculative_tokens=_int(config.get("num_speculative_tokens")),
                                    max_num_seqs=_int(flags.get("--max-num-seqs")), source="launch command"), config
    algorithm = flags.get("--speculative-algorithm")
    if algorithm is None and engine_hint is None:
        return SpeculationSetup(), None
    engine = engine_hint or "sglang"
    return SpeculationSetup(
        engine=engine, method=algorithm.upper() if algorithm else None,
        num_speculative_tokens=_int(flags.get("--speculative-num-steps")),
        eagle_topk=_int(flags.get("--speculative-eagle-topk")),
        draft_model=flags.get("--speculative-draft-model-path"),
        max_num_seqs=_int(flags.get("--max-running-requests")), device=flags.get("--device"),
        source="engine arguments" if engine == "specgauge" else "launch command"), None


def from_server_info(info: object, *, engine: str = "sglang") -> SpeculationSetup:
    """The setup SGLang's (or the embedded engine's) ``/server_info`` states."""
    if not isinstance(info, dict) or not info.get("speculative_algorithm"):
        return SpeculationSetup()
    return SpeculationSetup(
        engine=engine, method=str(info["speculative_algorithm"]).upper(),  # type: ignore[arg-type]
        num_speculative_tokens=_int(info.get("speculative_num_steps")),
        eagle_topk=_int(info.get("speculative_eagle_topk")),
        draft_model=info.get("speculative_draft_model_path"),
        max_num_seqs=_int(info.get("max_running_requests")),
        device=info.get("device") if isinstance(info.get("device"), str) else None, source="server_info")


def declared_setup(config: dict) -> tuple[SpeculationSetup, dict]:
    """The setup a URL arm declares with ``--speculative-arm-config`` (vLLM's ``--speculative-config`` form)."""
    setup, _ = from_arguments(["--speculative-config", json.dumps(config)])
    return setup.model_copy(update={"source": "--speculative-arm-config"}), config


def speculation_setup(kind: str, value: str, fingerprint: dict | None) -> tuple[SpeculationSetup, dict | None]:
    """The speculative arm's setup: its launch command or engine arguments first, then what its
    server says; fields missing from the first are filled from the second."""
    stated, config = SpeculationSetup(), None
    if kind in ("command", "engine"):
        try:
            argv = shlex.split(value)
        except ValueError:
            argv = []
        stated, config = from_arguments(argv, engine_hint="specgauge" if kind == "engine" else None)
    served = from_server_info((fingerprint or {}).get("server_info"),
                              engine="specgauge" if kind == "engine" else "sglang")
    if stated.engine is None:
        return served, config
    filled = {k: v for k, v in served.model_dump().items()
              if k not in ("engine", "source") and getattr(stated, k) is None and v is not None}
    return stated.model_copy(update=filled), config


def configured_depth(kind: str, value: str, setup: SpeculationSetup, vllm_config: dict | None) -> DepthAt | None:
    """The draft tokens the speculative arm was set to run at each batch size, or None where that
    is unknown or chosen by the server itself (an adaptive controller, a tree's node budget):
    vLLM's ``num_speculative_tokens`` and its ``num_speculative_tokens_per_batch_size`` schedule
    (vllm/config/speculative.py); the embedded engine's ``--speculative-num-steps`` with its
    ``--speculative-schedule`` or ``--speculative-disable-above``; SGLang's ``--speculative-num-steps``
    (python/sglang/srt/server_args.py; ``--speculative-adaptive`` chooses per step: unknown)."""
    if vllm_config is not None:
        depth = _int(vllm_config.get("num_speculative_tokens"))
        schedule = vllm_config.get("num_speculative_tokens_per_batch_size")
        if not depth:
            return None
        if schedule:
            try:
                entries = normalize_schedule(schedule)
            except ValueError:
                return None
            return lambda batch: draft_tokens_at(entries, depth, batch)
        return lambda batch: depth
    flags = {}
    if kind in ("command", "engine"):
        try:
            flags = _flags(shlex.split(value))
        except ValueError:
            return None
    depth = setup.num_speculative_tokens
    if (setup.method in (None, "NONE") or not depth or (setup.eagle_topk or 1) > 1
            or "--speculative-adaptive" in value.split()):
        return None
    if "--speculative-schedule" in flags:
        try:
            entries = parse_schedule(flags["--speculative-schedule"])
        except ValueError:
            return None
        return lambda batch: draft_tokens_at(entries, depth, batch)
    limit = _int(flags.get("--speculative-disable-above"))
    return lambda batch: 0 if limit is not None and batch > limit else depth
