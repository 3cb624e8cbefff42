"""Helpers shared by the tests against real engines (``tests/vllm``, ``tests/sglang``).

Servers are launched with :class:`specgauge.compare.arms.LaunchedServer` (a free loopback port,
waits until ``/health`` answers or the process exits, stops the process group), from the command
lines of :mod:`specgauge.vllm_setup.serve` and :mod:`specgauge.sglang_setup.serve`.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from specgauge.client.server_metrics import parse_prometheus
from specgauge.compare.arms import ArmSpec, LaunchedServer
from specgauge.server_setup import ServerSetup, SetupError

REPO = Path(__file__).resolve().parents[1]
# A bound on waiting for a server to answer (a condition, not a timed assert): a real engine takes
# 1-4 minutes to start on two busy cores.
START_TIMEOUT_S = 1200.0
CLI_TIMEOUT_S = 3000


def checked(setup: ServerSetup) -> ServerSetup:
    """``setup`` when every piece is there; a test *failure* (never a skip) naming the missing one."""
    try:
        setup.check()
    except SetupError as exc:
        pytest.fail(f"the real engine is not set up ({exc}); run `make {setup.make_target}`", pytrace=False)
    return setup


def command(argv: list[str]) -> str:
    """A launch command (with ``{port}``) as ``compare --*-cmd`` takes it."""
    return shlex.join(argv)


@contextlib.contextmanager
def launched(argv: list[str], log_dir: Path) -> Iterator[LaunchedServer]:
    """Start ``argv`` (with ``{port}`` where the port goes) and stop its process group on exit."""
    spec = ArmSpec(name="speculative", kind="command", value=command(argv))
    server = LaunchedServer(spec, start_timeout_s=START_TIMEOUT_S, log_dir=log_dir)
    with server:
        yield server


def metrics(url: str) -> dict[tuple[str, tuple], float]:
    """``/metrics`` as ``{(name, sorted labels without engine/model_name): value}``."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    out: dict[tuple[str, tuple], float] = {}
    for name, labels, value in parse_prometheus(text):
        key = (name, tuple(sorted((k, v) for k, v in labels.items() if k not in ("engine", "model_name"))))
        out[key] = out.get(key, 0.0) + value
    return out


def counter(snapshot: dict, name: str, **labels: str) -> float:
    """One counter's value in a :func:`metrics` snapshot (0 when absent)."""
    return snapshot.get((name, tuple(sorted(labels.items()))), 0.0)


def total(snapshot: dict, name: str) -> float:
    """One metric summed over all its label sets in a :func:`metrics` snapshot (0 when absent)."""
    return sum(value for (metric, _labels), value in snapshot.items() if metric == name)


def post(url: str, path: str, body: dict, timeout: float = 300) -> dict:
    """One JSON POST, its JSON answer."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def chat(url: str, prompt: str, max_tokens: int = 24) -> dict:
    """One non-streamed chat completion at temperature 0."""
    return post(url, "/v1/chat/completions", {"model": "specgauge-target", "max_tokens": max_tokens,
                                              "messages": [{"role": "user", "content": prompt}], "temperature": 0})


def specgauge(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m specgauge ARGS`` (this tree's code: conftest sets PYTHONPATH)."""
    return subprocess.run([sys.executable, "-m", "specgauge", *args], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, cwd=cwd, stdin=subprocess.DEVNULL, env=env)
