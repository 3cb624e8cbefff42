"""Output files named on the command line are checked before any work starts (one line, exit 2)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from specgauge.errors import UserError

SUITE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_output_file(path: str | None, option: str) -> None:
    """Raise :class:`UserError` unless ``path`` (``-`` = stdout, None = not asked for) can be
    written: its folder exists and is writable, and it is not a folder itself."""
    if path is None or path == "-":
        return
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UserError(f"{option} {path}: cannot write: is a directory")
    if not folder.is_dir():
        raise UserError(f"{option} {path}: cannot write: no such directory {folder}")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UserError(f"{option} {path}: cannot write: not writable")


def check_suite_name(name: str, option: str = "--name") -> str:
    """A suite name is a name, not a path: letters, digits, '.', '_', '-' (not first), no '..'."""
    if not SUITE_NAME.match(name) or ".." in name:
        raise UserError(f"{option} {name!r}: a suite name is letters, digits, '.', '_' and '-' "
                        f"(not a path; give the file with --output)")
    return name
