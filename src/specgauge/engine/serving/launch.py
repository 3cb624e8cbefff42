"""Start ``specgauge serve`` as a subprocess, wait until it is healthy, stop it cleanly.

Used by the benchmarks and the demo::

    with EngineProcess(["--model", model_dir]) as engine:
        requests.post(engine.url + "/v1/completions", ...)

Only the standard library is used here, so the core CLI can launch an engine without torch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque

from specgauge.errors import UserError

READY_PREFIX = "specgauge engine serving at "   # `serve` prints this, then its URL


class EngineStartError(UserError):
    """The engine died or never became healthy; the message ends with the tail of its log."""


class EngineProcess:
    """``python -m specgauge serve ARGS --port 0`` as a context manager exposing ``.url``."""

    def __init__(self, args: list[str], *, host: str = "127.0.0.1", start_timeout: float = 120.0,
                 stop_timeout: float = 10.0, env: dict[str, str] | None = None, log_lines: int = 40) -> None:
        self.args = list(args)
        self.host = host
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.env = env
        self.url: str | None = None
        self.process: subprocess.Popen | None = None
        self._log: deque[str] = deque(maxlen=log_lines)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self.log_file = tempfile.NamedTemporaryFile("w+", prefix="specgauge-serve-", suffix=".log", delete=False)

    @property
    def log_tail(self) -> str:
        return "\n".join(self._log)

    def _read_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.log_file.write(line)
            self.log_file.flush()
            line = line.rstrip("\n")
            self._log.append(line)
            if line.startswith(READY_PREFIX) and self.url is None:
                self.url = line[len(READY_PREFIX):].strip()
                self._ready.set()

    def _fail(self, why: str) -> None:
        self.stop()
        raise EngineStartError(f"engine {why} (full log: {self.log_file.name}); last log lines:\n{self.log_tail}")

    def start(self) -> "EngineProcess":
        """Launch and block until ``/health`` answers 200 (raises :class:`EngineStartError`)."""
        command = [sys.executable, "-m", "specgauge", "serve", *self.args, "--host", self.host, "--port", "0"]
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=env, start_new_session=True)
        self._reader = threading.Thread(target=self._read_output, name="engine-log", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._ready.wait(0.05):
            if self.process.poll() is not None:
                self._reader.join(2)
                self._fail(f"exited with code {self.process.returncode} at start")
            if time.monotonic() > deadline:
                self._fail(f"printed no URL within {self.start_timeout:.0f}s")
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            if self.process.poll() is not None:
                self._reader.join(2)
                self._fail(f"exited with code {self.process.returncode} before /health answered")
            if time.monotonic() > deadline:
                self._fail(f"/health did not answer within {self.start_timeout:.0f}s")
            time.sleep(0.05)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; returns the exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if self._reader is not None:
            self._reader.join(2)
        if process.stdout is not None:
            process.stdout.close()
        self.log_file.close()
        return process.returncode

    def __enter__(self) -> "EngineProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        os.unlink(self.log_file.name)
