"""Find a suite by built-in name (``coding``, ``coding@2``) or by path to a JSONL file."""

from __future__ import annotations

from pathlib import Path

from specgauge.errors import UserError
from specgauge.suites.model import Suite, read_suite_jsonl

BUILTIN_DIR = Path(__file__).with_name("builtin")


def builtin_suites() -> dict[str, list[int]]:
    """Built-in suite names with their available versions (files ``NAME@VERSION.jsonl``)."""
    found: dict[str, list[int]] = {}
    for path in sorted(BUILTIN_DIR.glob("*@*.jsonl")):
        name, _, version = path.stem.partition("@")
        found.setdefault(name, []).append(int(version))
    return {name: sorted(versions) for name, versions in found.items()}


def load_suite(ref: str) -> Suite:
    """Load ``ref``: a path to a suite JSONL file, or a built-in ``NAME`` / ``NAME@VERSION``
    (the newest version when none is given). Unknown names raise :class:`UserError`."""
    path = Path(ref)
    if path.suffix in {".jsonl", ".json"} or path.exists():
        if not path.exists():
            raise UserError(f"suite file not found: {ref}")
        return read_suite_jsonl(path)
    name, _, version = ref.partition("@")
    available = builtin_suites()
    if name not in available:
        known = ", ".join(sorted(available)) or "none"
        raise UserError(f"unknown suite '{ref}' (built-in suites: {known}; or give a .jsonl path)")
    if version:
        if not version.isdigit() or int(version) not in available[name]:
            raise UserError(f"suite '{name}' has no version {version} (versions: {available[name]})")
        chosen = int(version)
    else:
        chosen = available[name][-1]
    return read_suite_jsonl(BUILTIN_DIR / f"{name}@{chosen}.jsonl")
