"""Helpers of the tests against a real SGLang (``make sglang`` builds it; ``make test-sglang`` runs
them): the shared ones (``tests/real_server_kit.py``), the set-up ``make sglang`` made, and the one
reason these tests skip: a CPU without AVX-512 and AVX512-BF16, which SGLang's CPU path needs."""
from __future__ import annotations

from pathlib import Path

import pytest
from real_server_kit import REPO, checked, post

from specgauge.sglang_setup.serve import SglangSetup, default_setup
from specgauge.shipped_models import FIRST, ShippedModel

# SGLang's CPU path: the intel_amx attention backend's kernels (sgl-kernel/csrc/cpu/CMakeLists.txt
# compiles them with -mavx512bf16 beside the AMX flags) run on AVX-512 with AVX512-BF16; AMX itself
# is not needed once scripts/sglang-cpu.patch lifts SGLang's start-up fallback that asked for it.
REQUIRED_CPU_FLAGS = ("avx512f", "avx512_bf16")


def missing_cpu_flag(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The first of REQUIRED_CPU_FLAGS this CPU lacks (None when it has them all)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return REQUIRED_CPU_FLAGS[0]
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return next((flag for flag in REQUIRED_CPU_FLAGS if flag not in flags), None)


_MISSING = missing_cpu_flag()
needs_avx512_bf16 = pytest.mark.skipif(_MISSING is not None,
                               reason=f"this CPU lacks {_MISSING}: SGLang's CPU path needs AVX-512 with AVX512-BF16")


def sglang_setup(model: ShippedModel = FIRST) -> SglangSetup:
    """The set-up ``make sglang`` made for the shipped ``model``; a test *failure* (never a skip)
    when a piece is missing."""
    return checked(default_setup(REPO, model))


def generate(url: str, text: str, max_new_tokens: int) -> dict:
    """One non-streamed ``POST /generate`` at temperature 0 (SGLang's native API)."""
    return post(url, "/generate", {"text": text, "sampling_params": {"max_new_tokens": max_new_tokens,
                                                                     "temperature": 0}})


def python_on_path(setup: SglangSetup, directory: Path) -> dict[str, str]:
    """An environment whose ``python`` is SGLang's, with what its CPU path needs set (a wrapper
    script in ``directory``): so a command written as a GPU user writes it, ``python -m
    sglang.launch_server …`` (``compare --engine sglang``), runs this SGLang. Only the wrapped
    interpreter gets the preloaded libraries, not specgauge's own process."""
    import os
    import shlex

    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "python"
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in setup.environment().items())
    wrapper.write_text(f'#!/bin/sh\nexec env {env} {shlex.quote(str(setup.python))} "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"}


def warmed_up(url: str, deadline_s: float = 600.0) -> None:
    """Wait until SGLang's own warm-up request (sent by the server once it is up,
    ``_wait_and_warmup`` in python/sglang/srt/entrypoints/http_server.py) is counted in its
    metrics, so a test's counter differences hold only its own requests."""
    import time

    from real_server_kit import metrics, total

    deadline = time.monotonic() + deadline_s
    while total(metrics(url), "sglang:num_requests_total") < 1:
        if time.monotonic() > deadline:
            pytest.fail(f"SGLang at {url} counted no warm-up request in {deadline_s:.0f} s", pytrace=False)
        time.sleep(0.5)


def serve_argv(method: str, *extra: str) -> list[str]:
    """``python -m specgauge.sglang_setup serve METHOD --port {port} -- EXTRA``: the set-up's own
    launcher, which also gives SGLang a ``--nccl-port`` clear of the HTTP port (sglang_setup/serve.py)."""
    import sys

    return [sys.executable, "-m", "specgauge.sglang_setup", "--root", str(REPO), "serve", method,
            "--port", "{port}", *(["--", *extra] if extra else [])]
