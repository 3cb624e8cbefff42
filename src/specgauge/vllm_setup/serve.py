"""The command lines that serve the re-laid copies with PyPI's CPU build of vLLM (0.32.0).

What this CPU needs, found by running it (see docs/real-engines.md):

* ``LD_PRELOAD`` of tcmalloc and the venv's Intel OpenMP runtime (``specgauge.server_setup``):
  vLLM's CPU worker warns and runs slower without them (``vllm/platforms/cpu.py``);
* ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache; ``vllm/envs.py``): the default 0 lets vLLM take a
  share of the machine's memory; 1 GiB is plenty for these 6-layer models (the 4k target's float32
  KV is 12 KiB a token: 87,000 tokens, 21 full 4,096-token contexts);
* ``--dtype float32``: faster than bfloat16 on a CPU without AMX, and the re-laid copy is float32;
* ``--max-model-len``: the shipped model's context (512 for specgauge-8m, 4,096 for specgauge-9m-4k);
* ``python -m vllm.entrypoints.openai.api_server``: the wheel's ``vllm`` console script crashes;
* ``HF_HUB_OFFLINE=1``: everything is local; no hub look-up;
* ``--enforce-eager`` (``VllmSetup.eager``): no torch.compile warm-up; engine start-up took 4.5 s
  instead of 79 s here, which is what makes launch-command arms and the integration tests bearable.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specgauge.server_setup import METHODS, SERVED_NAME, Method, ServerSetup, SetupError
from specgauge.shipped_models import FIRST, ShippedModel

__all__ = ["METHODS", "Method", "SetupError", "VllmSetup", "default_setup"]

KV_CACHE_GIB = 1
DTYPE = "float32"
EAGLE3_DEPTH = 3
NGRAM_DEPTH = 4


@dataclass(frozen=True)
class VllmSetup(ServerSetup):
    """Where the vLLM virtualenv and the re-laid checkpoints are."""

    max_model_len: int = 512   # the shipped model's context (ShippedModel.context)
    eager: bool = True
    make_target = "vllm"
    venv_dir = ".venv-vllm"
    models_dir = "vllm-models"
    module = "vllm.entrypoints.openai.api_server"

    def context_flag(self) -> str:
        return f"--max-model-len {self.max_model_len}"

    def environment(self) -> dict[str, str]:
        """Environment variables a vLLM server needs on this CPU (see the module doc)."""
        return {"LD_PRELOAD": self.preload(), "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),
                "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}

    def speculative_config(self, method: Method, depth: int | None = None) -> dict | None:
        """vLLM's ``--speculative-config`` for ``method`` (``vllm/config/speculative.py``)."""
        if method == "plain":
            return None
        if method == "eagle3":
            return {"method": "eagle3", "model": str(self.draft), "num_speculative_tokens": depth or EAGLE3_DEPTH}
        return {"method": "ngram", "num_speculative_tokens": depth or NGRAM_DEPTH,
                "prompt_lookup_min": 2, "prompt_lookup_max": 5}

    def server_args(self, port: int | str, *, extra: tuple[str, ...] = ()) -> list[str]:
        """vLLM's arguments common to every method (model, dtype, context, loopback port)."""
        return ["--model", str(self.target), "--served-model-name", SERVED_NAME, "--dtype", DTYPE,
                "--max-model-len", str(self.max_model_len), "--host", "127.0.0.1", "--port", str(port),
                *(["--enforce-eager"] if self.eager else []), *extra]

    def method_args(self, method: Method, depth: int | None, override: object) -> list[str]:
        """``--speculative-config JSON``: ``override`` (a dict) if given, else ``method``'s."""
        config = override if override is not None else self.speculative_config(method, depth)
        return [] if config is None else ["--speculative-config", json.dumps(config, separators=(",", ":"))]

    def argv(self, method: Method, port: int | str, *, depth: int | None = None, override: object = None,
             speculative_config: dict | None = None, extra: tuple[str, ...] = ()) -> list[str]:
        """:meth:`ServerSetup.argv`; ``speculative_config`` is vLLM's name for ``override``."""
        config = speculative_config if speculative_config is not None else override
        return super().argv(method, port, depth=depth, override=config, extra=extra)


def default_setup(root: Path, model: ShippedModel = FIRST) -> VllmSetup:
    """The layout ``make vllm`` writes under the repository root ``root`` for the shipped ``model``
    (``.cache/vllm-models/<name>/target`` and ``…/draft``), served at the model's context."""
    return VllmSetup(**VllmSetup.paths(root, model), max_model_len=model.context)
