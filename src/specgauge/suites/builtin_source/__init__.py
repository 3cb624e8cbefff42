"""Python sources of the built-in suites; ``python -m specgauge.suites.builtin_source`` writes the JSONL files.

The shipped ``suites/builtin/NAME@VERSION.jsonl`` files must equal what :func:`render_all` produces (a
test checks it). Changing a prompt here changes its suite's hash: give the changed suite a new version
(add ``NAME@2`` beside ``NAME@1``) rather than editing a released file. Released versions: every domain
suite and ``mixed`` at 1 (from the modules in :data:`DOMAIN_MODULES`); ``agentic@2`` (from
:mod:`.agentic_v2`); ``sessions@1``, multi-turn sessions (from :mod:`.sessions`).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from specgauge.suites.builtin_source import agentic, agentic_v2, chat, coding, encyclopedic, reasoning, sessions
from specgauge.suites.model import Suite

DOMAIN_MODULES = (coding, agentic, reasoning, encyclopedic, chat)
VERSION = 1
MIXED_PER_DOMAIN = 12


def domain_suites() -> list[Suite]:
    """The five domain suites, version 1."""
    return [Suite(name=m.NAME, version=VERSION, description=m.DESCRIPTION, requests=tuple(m.requests()))
            for m in DOMAIN_MODULES]


def newer_suites() -> list[Suite]:
    """The suites released after version 1: ``agentic@2``, ``sessions@1``."""
    return [Suite(name=m.NAME, version=m.VERSION, description=m.DESCRIPTION, requests=tuple(m.requests()))
            for m in (agentic_v2, sessions)]


def mixed_suite(suites: list[Suite]) -> Suite:
    """``mixed@1``: :data:`MIXED_PER_DOMAIN` evenly spaced requests of each domain suite, interleaved."""
    picks = []
    for suite in suites:
        step = len(suite.requests) / MIXED_PER_DOMAIN
        picks.append([suite.requests[int(i * step)] for i in range(MIXED_PER_DOMAIN)])
    interleaved = tuple(r for group in zip(*picks) for r in group)
    return Suite(name="mixed", version=VERSION, requests=interleaved,
                 description=(f"A stratified mix of the five built-in domain suites ({MIXED_PER_DOMAIN} evenly spaced "
                              "requests of each, interleaved). Intended max_tokens: as in each domain suite."))


def render(suite: Suite) -> str:
    """The JSONL text of ``suite``, byte for byte what :func:`write_suite_jsonl` writes."""
    out = io.StringIO()
    out.write(json.dumps({"suite": suite.header()}, sort_keys=True) + "\n")
    for request in suite.requests:
        out.write(json.dumps(request.canonical(), sort_keys=True, ensure_ascii=False) + "\n")
    return out.getvalue()


def render_all() -> dict[str, str]:
    """File name → JSONL text for every generated built-in suite."""
    suites = domain_suites()
    return {f"{s.name}@{s.version}.jsonl": render(s) for s in [*suites, mixed_suite(suites), *newer_suites()]}


def write_all(directory: Path) -> list[Path]:
    """Write every generated suite into ``directory``."""
    written = []
    for file_name, text in render_all().items():
        path = directory / file_name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
