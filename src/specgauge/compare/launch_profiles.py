"""Launch profiles: both arms' command lines built from one engine, model and speculative method
(``compare --engine vllm|sglang|specgauge``). The baseline is the engine without speculation, the
speculative arm the same command plus the speculation flags, so the arms differ in nothing else.

Flags, as the engines define them today:

- vLLM: ``vllm serve MODEL`` (``vllm/entrypoints/cli/serve.py``: the positional ``model_tag``)
  with ``--host``/``--port`` and ``--speculative-config JSON`` whose keys are
  ``SpeculativeConfig`` fields (``vllm/config/speculative.py``): ``method`` (a
  ``SpeculativeMethod``: ``eagle``, ``eagle3``, ``ngram``, ``draft_model``, ``mtp``, ...),
  ``model`` (the draft model) and ``num_speculative_tokens``.
- SGLang: ``python -m sglang.launch_server --model-path M`` with ``--speculative-algorithm``
  (``EAGLE``, ``EAGLE3``, ``NEXTN``, ``STANDALONE``, ``NGRAM``), ``--speculative-draft-model-path``,
  ``--speculative-num-steps``, ``--speculative-eagle-topk`` and ``--speculative-num-draft-tokens``
  (``python/sglang/srt/server_args.py``; with top-k 1 SGLang sets the draft tokens to
  num-steps + 1 itself, so that is what is written).
- specgauge: ``specgauge serve`` arguments (an ``engine`` arm), SGLang's flag names.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Literal

from specgauge.errors import UserError

Engine = Literal["vllm", "sglang", "specgauge"]
ENGINES: tuple[str, ...] = ("vllm", "sglang", "specgauge")
DEFAULT_NUM_SPECULATIVE_TOKENS = 3
DRAFTLESS_METHODS = ("ngram",)   # methods that need no draft model (prompt lookup)
# A method as the user writes it (any case) -> each engine's own name for it.
_VLLM_METHODS = {"eagle": "eagle", "eagle3": "eagle3", "ngram": "ngram", "draft_model": "draft_model",
                 "standalone": "draft_model", "mtp": "mtp", "nextn": "mtp"}
_SGLANG_METHODS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "ngram": "NGRAM", "draft_model": "STANDALONE",
                   "standalone": "STANDALONE", "mtp": "NEXTN", "nextn": "NEXTN"}
_SPECGAUGE_METHODS = {"eagle3": "EAGLE3", "ngram": "NGRAM"}


@dataclass(frozen=True)
class LaunchProfile:
    """What both arms run: ``engine`` serving ``model``; the speculative arm adds ``method`` with
    ``draft_model`` and ``num_speculative_tokens`` (draft tokens per verify step; SGLang's
    num-steps). ``eagle_topk``: SGLang's and specgauge's draft-tree branching (1 = a chain).
    ``server_args``: further arguments given to both arms alike (``--max-num-seqs 64``)."""

    engine: Engine
    model: str | None
    method: str
    draft_model: str | None = None
    num_speculative_tokens: int = DEFAULT_NUM_SPECULATIVE_TOKENS
    eagle_topk: int = 1
    server_args: str = ""


@dataclass(frozen=True)
class ArmCommands:
    """Both arms as ``compare`` takes them: ``kind`` is ``command`` (a shell line with ``{port}``)
    or ``engine`` (``specgauge serve`` arguments)."""

    kind: Literal["command", "engine"]
    baseline: str
    speculative: str

    def as_options(self) -> str:
        """The same arms as the raw options a user can copy and edit."""
        flag = "cmd" if self.kind == "command" else "engine"
        return (f"--baseline-{flag} {shlex.quote(self.baseline)} "
                f"--speculative-{flag} {shlex.quote(self.speculative)}")


def build_arm_commands(profile: LaunchProfile) -> ArmCommands:
    """Both arms' command lines for ``profile``; a :class:`UserError` (one line) names what is
    missing or unknown. Pure: nothing is started."""
    method = profile.method.strip().lower()
    table = {"vllm": _VLLM_METHODS, "sglang": _SGLANG_METHODS, "specgauge": _SPECGAUGE_METHODS}[profile.engine]
    if method not in table:
        raise UserError(f"--method {profile.method!r}: {profile.engine} takes one of {', '.join(sorted(table))}")
    if profile.engine != "specgauge" and not profile.model:
        raise UserError(f"--engine {profile.engine} needs --model (the target model's path or hub name)")
    if method not in DRAFTLESS_METHODS and not profile.draft_model and profile.engine != "specgauge":
        raise UserError(f"--method {method} needs --draft-model (the drafter's path or hub name)")
    if profile.num_speculative_tokens < 1 or profile.eagle_topk < 1:
        raise UserError("--num-speculative-tokens and --eagle-topk must be at least 1")
    try:
        extra = shlex.split(profile.server_args)
    except ValueError as exc:
        raise UserError(f"--server-args: cannot parse {profile.server_args!r} ({exc})") from None
    name = table[method]
    if profile.engine == "vllm":
        return _vllm(profile, name, extra)
    if profile.engine == "sglang":
        return _sglang(profile, name, extra)
    return _specgauge(profile, name, extra)


def _line(argv: list[str]) -> str:
    return shlex.join(argv).replace("'{port}'", "{port}")


def _vllm(profile: LaunchProfile, method: str, extra: list[str]) -> ArmCommands:
    base = ["vllm", "serve", profile.model, "--host", "127.0.0.1", "--port", "{port}", *extra]
    config: dict = {"method": method}
    if profile.draft_model and method not in DRAFTLESS_METHODS:
        config["model"] = profile.draft_model
    config["num_speculative_tokens"] = profile.num_speculative_tokens
    speculative = [*base, "--speculative-config", json.dumps(config, separators=(",", ":"))]
    return ArmCommands("command", _line(base), _line(speculative))


def sglang_flags(profile: LaunchProfile, algorithm: str) -> list[str]:
    """SGLang's speculation flags for ``profile`` and ``algorithm`` (SGLang's name: EAGLE3, NGRAM…)."""
    flags = ["--speculative-algorithm", algorithm]
    if profile.draft_model and algorithm != "NGRAM":
        flags += ["--speculative-draft-model-path", profile.draft_model]
    if algorithm == "NGRAM":   # SGLang's n-gram takes the verified tokens per step only
        return flags + ["--speculative-num-draft-tokens", str(profile.num_speculative_tokens + 1)]
    flags += ["--speculative-num-steps", str(profile.num_speculative_tokens),
              "--speculative-eagle-topk", str(profile.eagle_topk)]
    if profile.eagle_topk == 1:
        flags += ["--speculative-num-draft-tokens", str(profile.num_speculative_tokens + 1)]
    return flags


def _sglang(profile: LaunchProfile, algorithm: str, extra: list[str]) -> ArmCommands:
    base = ["python", "-m", "sglang.launch_server", "--model-path", profile.model, "--host", "127.0.0.1",
            "--port", "{port}", *extra]
    return ArmCommands("command", _line(base), _line([*base, *sglang_flags(profile, algorithm)]))


def _specgauge(profile: LaunchProfile, algorithm: str, extra: list[str]) -> ArmCommands:
    base = [*(["--model", profile.model] if profile.model else []), *extra]
    flags = ["--speculative-algorithm", algorithm]
    if algorithm == "NGRAM":
        flags += ["--speculative-num-steps", str(profile.num_speculative_tokens)]
    else:
        flags += sglang_flags(profile, algorithm)[2:]
    return ArmCommands("engine", shlex.join([*base, "--speculative-algorithm", "NONE"]),
                       shlex.join([*base, *flags]))
