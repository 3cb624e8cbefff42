"""The command lines that serve the re-laid copies with PyPI's CPU build of vLLM (0.32.0).

What this CPU needs, found by running it (see docs/real-engines.md):

* ``LD_PRELOAD`` of tcmalloc (Debian's ``libtcmalloc-minimal4``) and of the Intel OpenMP runtime
  that the wheel's ``intel-openmp`` requirement puts in ``<venv>/lib/libiomp5.so``: vLLM's CPU
  worker warns and runs slower without them (``vllm/platforms/cpu.py``);
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
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from specgauge.shipped_models import DEFAULT, ShippedModel

TCMALLOC_CANDIDATES = ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
                       "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
                       "/usr/lib64/libtcmalloc_minimal.so.4")
KV_CACHE_GIB = 1
DTYPE = "float32"
EAGLE3_DEPTH = 3
NGRAM_DEPTH = 4
SERVED_NAME = "specgauge-target"

Method = Literal["plain", "eagle3", "ngram"]
METHODS: tuple[Method, ...] = ("plain", "eagle3", "ngram")


class SetupError(RuntimeError):
    """The vLLM set-up is missing a piece (the venv, tcmalloc, the laid-out models)."""


@dataclass(frozen=True)
class VllmSetup:
    """Where the vLLM virtualenv and the re-laid checkpoints are."""

    venv: Path
    target: Path
    draft: Path
    max_model_len: int   # the shipped model's context (ShippedModel.context)
    eager: bool = True

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def tcmalloc(self) -> str:
        """The tcmalloc library to preload; a :class:`SetupError` naming the package if missing."""
        for path in TCMALLOC_CANDIDATES:
            if Path(path).exists():
                return path
        raise SetupError("libtcmalloc_minimal.so.4 not found: install Debian's libtcmalloc-minimal4 "
                         "(apt-get install libtcmalloc-minimal4)")

    def iomp(self) -> Path:
        """The Intel OpenMP runtime installed by vllm-cpu's intel-openmp requirement."""
        return self.venv / "lib" / "libiomp5.so"

    def check(self) -> None:
        """Raise :class:`SetupError` naming the first missing piece."""
        for path, what in ((self.python, "the vLLM virtualenv (make vllm)"), (self.iomp(), "libiomp5.so (make vllm)"),
                           (self.target / "config.json", "the re-laid target (make vllm)"),
                           (self.draft / "config.json", "the re-laid drafter (make vllm)")):
            if not path.exists():
                raise SetupError(f"{path} is missing: {what}")
        self.tcmalloc()

    def environment(self) -> dict[str, str]:
        """Environment variables a vLLM server needs on this CPU (see the module doc)."""
        return {"LD_PRELOAD": f"{self.tcmalloc()}:{self.iomp()}", "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),
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

    def argv(self, method: Method, port: int | str, *, depth: int | None = None,
             speculative_config: dict | None = None, extra: tuple[str, ...] = ()) -> list[str]:
        """The full command (``env VAR=… python -m vllm.entrypoints.openai.api_server …``): it runs
        as it is under a shell and after :func:`shlex.split` (a launch-command arm)."""
        env = [f"{k}={v}" for k, v in self.environment().items()]
        argv = ["env", *env, str(self.python), "-m", "vllm.entrypoints.openai.api_server",
                *self.server_args(port, extra=extra)]
        config = speculative_config if speculative_config is not None else self.speculative_config(method, depth)
        if config is not None:
            argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
        return argv

    def command_line(self, method: Method, port: int | str = "{port}", **kwargs) -> str:
        """:meth:`argv` as one shell line (``{port}`` left bare for a launch-command arm)."""
        return shlex.join(self.argv(method, port, **kwargs)).replace("'{port}'", "{port}")


def default_setup(root: Path, model: ShippedModel = DEFAULT) -> VllmSetup:
    """The layout ``make vllm`` writes under the repository root ``root`` for the shipped ``model``
    (``.cache/vllm-models/<name>/target`` and ``…/draft``), served at the model's context."""
    root = root.resolve()
    models = root / ".cache" / "vllm-models" / model.name
    return VllmSetup(venv=root / ".venv-vllm", target=models / "target", draft=models / "draft",
                     max_model_len=model.context)
