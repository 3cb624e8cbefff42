"""The command lines that serve the laid-out copies with SGLang's CPU path (upstream 2f14d6c,
built by ``make sglang``).

What this CPU needs, found by running it (docs/real-engines.md):

* ``SGLANG_USE_CPU_ENGINE=1`` (``python/sglang/srt/platforms/__init__.py``) and ``--device cpu``;
* ``LD_PRELOAD`` of tcmalloc and the venv's Intel OpenMP runtime (``specgauge.server_setup``;
  SGLang's docs/platforms/cpu_server.md);
* ``--dtype bfloat16``: ``auto`` picked float16 for the float32 copies and produced garbage;
* ``--attention-backend intel_amx``: what SGLang picks on an x86 CPU anyway (``_handle_cpu_backends``
  in ``python/sglang/srt/server_args.py``), said outright: its kernels need AVX-512 with
  AVX512-BF16, and on a CPU without AMX SGLang's start-up would switch it to ``torch_native``
  (no EAGLE there) unless ``scripts/sglang-cpu.patch`` lifts that fallback, which it does;
* ``--max-total-tokens`` (KV cache tokens): without it SGLang sized its KV cache to 17.8 GB of RAM;
* ``--context-length``: the shipped model's context (512 or 4,096);
* ``--disable-overlap-schedule``: the CPU path runs without the overlap scheduler;
* ``--cuda-graph-backend-decode disabled``: a CPU has no CUDA graphs, but SGLang's adaptive
  speculation (``--speculative-adaptive``) builds a decode graph runner for each of its states
  unless this says not to (``build_adaptive_runtime_state`` in
  ``python/sglang/srt/speculative/eagle_worker_v2.py``), and the ``intel_amx`` backend has none
  (``NotImplementedError`` in ``init_cuda_graph_state``); plain and EAGLE-3 serving are unchanged;
* ``--enable-metrics``: the Prometheus gauges (``sglang:spec_accept_length`` …), read by bench;
* ``HF_HUB_OFFLINE=1``: everything is local;
* ``--nccl-port``, below the ephemeral port range: SGLang picks its torch.distributed port with
  ``get_free_port()`` (``PortArgs.init_new`` in server_args.py) before its HTTP server binds
  ``--port``, and the OS can hand it that very port, which a launcher had just found free: then the
  scheduler holds the port, uvicorn fails with "address already in use" and the server never
  answers (seen once in about fifteen starts here). A port outside the ephemeral range cannot be
  the launcher's.

Flags as ``python/sglang/srt/server_args.py`` defines them; the speculation flags are
:func:`specgauge.compare.launch_profiles.sglang_flags`, what ``compare --engine sglang`` writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specgauge.compare.launch_profiles import LaunchProfile, sglang_flags
from specgauge.server_setup import METHODS, SERVED_NAME, Method, ServerSetup, SetupError
from specgauge.shipped_models import FIRST, ShippedModel

__all__ = ["METHODS", "Method", "SetupError", "SglangSetup", "default_setup"]

DTYPE = "bfloat16"
ATTENTION_BACKEND = "intel_amx"   # the module doc says why it is given
MAX_TOTAL_TOKENS = 16384
EAGLE3_DEPTH = 3
NGRAM_DEPTH = 3
ALGORITHMS = {"eagle3": "EAGLE3", "ngram": "NGRAM"}
CPU_GRAPH_FLAGS = ("--cuda-graph-backend-decode", "disabled")   # the module doc says why


@dataclass(frozen=True)
class SglangSetup(ServerSetup):
    """Where the SGLang virtualenv and the laid-out checkpoints are."""

    context_length: int = 512   # the shipped model's context (ShippedModel.context)
    make_target = "sglang"
    venv_dir = ".venv-sglang"
    models_dir = "sglang-models"
    module = "sglang.launch_server"
    built_marker = ".installed-2f14d6c"   # the Makefile's SGLANG_STAMP
    extra_last = True   # advised flags (--speculative-num-steps 5 …) override the method's defaults

    def context_flag(self) -> str:
        return f"--context-length {self.context_length}"

    def environment(self) -> dict[str, str]:
        """Environment variables an SGLang server needs on this CPU (see the module doc)."""
        return {"SGLANG_USE_CPU_ENGINE": "1", "LD_PRELOAD": self.preload(), "HF_HUB_OFFLINE": "1",
                "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}

    def cpu_args(self) -> list[str]:
        """What this CPU and these models need beside the model and port (the module doc): also
        ``compare --engine sglang --server-args``."""
        return ["--device", "cpu", "--dtype", DTYPE, "--attention-backend", ATTENTION_BACKEND,
                "--context-length", str(self.context_length),
                "--max-total-tokens", str(MAX_TOTAL_TOKENS), "--disable-overlap-schedule",
                *CPU_GRAPH_FLAGS, "--enable-metrics"]

    def server_args(self, port: int | str, *, extra: tuple[str, ...] = ()) -> list[str]:
        """SGLang's arguments common to every method (model, device, dtype, KV size, loopback port;
        with a numeric port, the torch.distributed port too, see the module doc)."""
        nccl = ["--nccl-port", str(nccl_port(port))] if isinstance(port, int) else []
        return ["--model-path", str(self.target), "--served-model-name", SERVED_NAME, *self.cpu_args(),
                "--host", "127.0.0.1", "--port", str(port), *nccl, *extra]

    def method_args(self, method: Method, depth: int | None, override: object) -> list[str]:
        """The speculation flags of ``method`` (``override``, a list of flags, replaces them)."""
        if override is not None:
            return list(override)
        if method == "plain":
            return []
        default = EAGLE3_DEPTH if method == "eagle3" else NGRAM_DEPTH
        profile = LaunchProfile(engine="sglang", model=str(self.target), method=method,
                                draft_model=str(self.draft) if method == "eagle3" else None,
                                num_speculative_tokens=depth or default)
        return sglang_flags(profile, ALGORITHMS[method])


def nccl_port(port: int, low: int = 20000, span: int = 10000) -> int:
    """A free loopback port in ``[low, low + span)`` (below Linux's ephemeral range, 32768 up), the
    first from ``low + port % span``: for SGLang's ``--nccl-port`` (module doc)."""
    import socket

    for offset in range(span):
        candidate = low + (port + offset) % span
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    raise SetupError(f"no free port in {low}-{low + span - 1} for SGLang's --nccl-port")


def default_setup(root: Path, model: ShippedModel = FIRST) -> SglangSetup:
    """The layout ``make sglang`` writes under the repository root ``root`` for the shipped ``model``
    (``.cache/sglang-models/<name>/target`` and ``…/draft``), served at the model's context."""
    return SglangSetup(**SglangSetup.paths(root, model), context_length=model.context)
