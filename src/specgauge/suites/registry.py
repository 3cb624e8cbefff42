"""Find a suite by name (``coding``, ``coding@2``) or by path to a JSONL file.

Names are looked up in the extra search directories first (files ``NAME@VERSION.jsonl``), then in
the built-in directory; every stored version stays loadable, so ``coding@1`` works beside ``coding@2``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from specgauge.errors import UserError
from specgauge.suites.model import Suite, read_suite_jsonl

BUILTIN_DIR = Path(__file__).with_name("builtin")
# Extra directories of NAME@VERSION.jsonl files, os.pathsep-separated.
SEARCH_PATH_ENV = "SPECGAUGE_SUITE_PATH"


def _directories(search_dirs: Iterable[str | Path]) -> list[Path]:
    env = [p for p in os.environ.get(SEARCH_PATH_ENV, "").split(os.pathsep) if p]
    return [*(Path(d) for d in search_dirs), *(Path(d) for d in env), BUILTIN_DIR]


def suite_files(search_dirs: Iterable[str | Path] = ()) -> dict[str, dict[int, Path]]:
    """Every named suite file: name → version → path (earlier directories win on a clash)."""
    found: dict[str, dict[int, Path]] = {}
    for directory in _directories(search_dirs):
        for path in sorted(directory.glob("*@*.jsonl")):
            name, _, version = path.stem.partition("@")
            if version.isdigit():
                found.setdefault(name, {}).setdefault(int(version), path)
    return found


def builtin_suites(search_dirs: Iterable[str | Path] = ()) -> dict[str, list[int]]:
    """Suite names with their available versions (built-in plus any search directories)."""
    return {name: sorted(versions) for name, versions in sorted(suite_files(search_dirs).items())}


def load_suite(ref: str, search_dirs: Iterable[str | Path] = ()) -> Suite:
    """Load ``ref``: a path to a suite JSONL file, or a ``NAME`` / ``NAME@VERSION`` (the newest version
    when none is given) found in ``search_dirs``, ``$SPECGAUGE_SUITE_PATH`` or the built-in suites.
    Unknown names raise :class:`UserError`."""
    path = Path(ref)
    if path.suffix in {".jsonl", ".json"} or path.exists():
        if not path.exists():
            raise UserError(f"suite file not found: {ref}")
        return read_suite_jsonl(path)
    name, _, version = ref.partition("@")
    available = suite_files(search_dirs)
    if name not in available:
        known = ", ".join(sorted(available)) or "none"
        raise UserError(f"unknown suite '{ref}' (suites: {known}; or give a .jsonl path)")
    versions = sorted(available[name])
    if version:
        if not version.isdigit() or int(version) not in available[name]:
            raise UserError(f"suite '{name}' has no version {version} (versions: {versions})")
        chosen = int(version)
    else:
        chosen = versions[-1]
    return read_suite_jsonl(available[name][chosen])
