"""The two arms of a comparison: an already running server (URL), a launch command, or the
embedded engine with a configuration. A launched arm gets a free loopback port (``{port}`` in
its command), is health-checked until it answers, and is stopped (its process group) afterwards.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from specgauge.errors import UserError

ArmKind = Literal["url", "command", "engine"]
HEALTH_PATHS = ("/health", "/v1/models")
LOG_TAIL_LINES = 6
STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class ArmSpec:
    """What one arm is. ``value``: the URL, the launch command (with ``{port}``), or ``serve`` arguments."""

    name: Literal["baseline", "speculative"]
    kind: ArmKind
    value: str

    def __post_init__(self) -> None:
        if self.kind == "url" and not self.value.startswith(("http://", "https://")):
            raise UserError(f"--{self.name} {self.value!r}: must be a URL starting with http:// or https://")
        if self.kind == "command" and "{port}" not in self.value:
            raise UserError(f"--{self.name}-cmd: the command must contain {{port}} (the port it should listen on), "
                            f"got {self.value!r}")
        if self.kind != "url":
            try:
                shlex.split(self.value)
            except ValueError as exc:
                raise UserError(f"--{self.name}-{'cmd' if self.kind == 'command' else 'engine'}: cannot parse "
                                f"{self.value!r} ({exc})") from None

    @property
    def launched(self) -> bool:
        return self.kind != "url"

    def argv(self, port: int) -> list[str]:
        """The process to start on ``port`` (launched arms only)."""
        if self.kind == "command":
            return shlex.split(self.value.replace("{port}", str(port)))
        return [sys.executable, "-m", "specgauge", "serve", *shlex.split(self.value),
                "--host", "127.0.0.1", "--port", str(port)]

    def describe(self) -> str:
        if self.kind == "engine":
            return f"specgauge serve {self.value}".strip()
        return self.value


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LaunchedServer:
    """A server process started for one arm; a context manager that stops it on exit."""

    def __init__(self, spec: ArmSpec, *, start_timeout_s: float, log_dir: Path | None = None) -> None:
        self.spec = spec
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        directory = Path(log_dir) if log_dir else Path(tempfile.gettempdir())
        directory.mkdir(parents=True, exist_ok=True)
        self.log_path = directory / f"specgauge-{spec.name}-{self.port}.log"
        self._start_timeout_s = start_timeout_s
        self._process: subprocess.Popen | None = None

    def start(self) -> "LaunchedServer":
        """Start the process and wait until it answers; a crash or timeout is a one-line UserError."""
        argv = self.spec.argv(self.port)
        with open(self.log_path, "wb") as log:
            try:
                self._process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                 start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            except OSError as exc:
                raise UserError(f"{self.spec.name} arm: cannot start {argv[0]!r} ({exc.strerror or exc})") from None
        deadline = time.monotonic() + self._start_timeout_s
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise UserError(f"{self.spec.name} arm exited with code {code} before answering on port {self.port}; "
                                f"log {self.log_path}: {self.log_tail()}")
            if self._answers():
                return self
            time.sleep(0.2)
        self.stop()
        raise UserError(f"{self.spec.name} arm did not answer on {self.url} within {self._start_timeout_s:g} s "
                        f"(--start-timeout); log {self.log_path}: {self.log_tail()}")

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        """The process's exit code once it has exited (waiting up to ``wait_s`` for it), else None."""
        process = self._process
        if process is None:
            return None
        try:
            return process.wait(timeout=wait_s) if wait_s > 0 else process.poll()
        except subprocess.TimeoutExpired:
            return None

    def _answers(self) -> bool:
        for path in HEALTH_PATHS:
            try:
                with urllib.request.urlopen(self.url + path, timeout=2) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError, ValueError):
                continue
        return False

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the arm's log joined on one line ('(empty log)' when it wrote nothing)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        tail = [line.strip() for line in text.strip().splitlines()[-lines:] if line.strip()]
        return " | ".join(tail) if tail else "(empty log)"

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after a grace period; idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> "LaunchedServer":
        return self.start()

    def __exit__(self, exc_type, *exc: object) -> None:
        self.stop()
        if exc_type is None:   # a clean run: the log is of no further use
            self.log_path.unlink(missing_ok=True)
