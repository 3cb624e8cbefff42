"""Running ``specgauge`` in a child process, the one way every test does it (``conftest.py``'s
``cli`` fixture is the same function; ``cli_here`` runs it in this process instead)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The deadline of one command; a busy machine is slow, a hung command must still end the test.
CLI_TIMEOUT_S = 600
# The caller's colour settings are left out: the tests read plain text.
COLOUR_VARIABLES = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment less the colour settings, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k not in COLOUR_VARIABLES}, **(extra or {})}


def run_cli(*args, timeout: float = CLI_TIMEOUT_S, cwd: Path | str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m specgauge ARGS`` (this tree's code: conftest sets PYTHONPATH), stdout and stderr
    captured as text; ``env`` adds variables."""
    return subprocess.run([sys.executable, "-m", "specgauge", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=cli_env(env), stdin=subprocess.DEVNULL)


def spawn_cli(*args, env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """``python -m specgauge ARGS`` started, not waited for (a test that signals or stops it)."""
    return subprocess.Popen([sys.executable, "-m", "specgauge", *map(str, args)], env=cli_env(env), **popen)


def one_line_error(result: subprocess.CompletedProcess, *needles: str, code: int = 2) -> str:
    """Assert ``result`` failed with exit ``code`` and one line on stderr holding every needle; the line."""
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def wait_until(condition, *, timeout_s: float, what: str, every_s: float = 0.02):
    """Poll ``condition()`` until it returns something true (returned) or ``timeout_s`` passes
    (an ``AssertionError`` naming ``what``). The deadline is a safety net for a hung child; the
    condition is what the test waits for, never a fixed sleep."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)


def stored_request_count(db) -> int:
    """Requests committed to the results store ``db`` so far (0 before the file exists)."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return 0
    try:
        return connection.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    except sqlite3.OperationalError:   # not created yet
        return 0
    finally:
        connection.close()
