"""A streaming server with a known schedule in its own process, recording its own truth (when each
request arrived, when each chunk was written), and the prompts sent to it: shared by the client
benchmarks (``client_overhead.py``, ``client_scaleout.py``, ``store_overhead.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from specgauge.suites.model import Suite, SuiteRequest

SRC = Path(__file__).resolve().parents[2] / "src"

SUITE = Suite(name="overhead", requests=tuple(SuiteRequest(prompt=f"benchmark prompt {i} " * 8, max_tokens=64)
                                             for i in range(16)))


class ServerProcess:
    """A streaming server in its own process: the lean one by default (see
    :mod:`specgauge.testing.lean_server`), or ``--server scripted`` for the aiohttp test server."""

    def __init__(self, script: dict, module: str = "specgauge.testing.lean_server") -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.proc = subprocess.Popen([sys.executable, "-m", module,
                                      "--script", json.dumps(script)], stdout=subprocess.PIPE, env=env, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise SystemExit(f"scripted server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def truth(self) -> dict[str, dict]:
        with urllib.request.urlopen(self.url + "/_truth", timeout=30) as resp:
            return {t["request_id"]: t for t in json.loads(resp.read())}

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
