"""Errors that reach the user as one line, never as a traceback."""

from __future__ import annotations

import importlib.util


class UserError(Exception):
    """Bad input or misuse: the CLI prints ``specgauge: error: <message>`` and exits 2."""

    exit_code = 2


def require_extra(extra: str, *modules: str) -> None:
    """Raise a :class:`UserError` naming the pip extra when any of ``modules`` is missing."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise UserError(
            f"this command needs the '{extra}' extra ({', '.join(missing)} not installed): "
            f"pip install 'specgauge[{extra}]'"
        )
