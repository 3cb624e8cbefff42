"""``compare --suite FILE --single-stream-requests N``: N single-stream requests per domain tag.

The single stream over a multi-domain suite is one run split by its requests' domain tags
(:func:`specgauge.compare.collect.split_by_domain`). A run sends shuffled passes over its suite, so
N requests *in all* over a suite of six domains leave some domains with none. Here the run gets a
derived suite of up to N prompts per domain (a seeded choice, kept in file order) and exactly one
pass over it: every domain gets N requests, or all it has — the shortfall is named per domain
before anything runs. The derived file lives beside the store, so both arms, every round and a
resume read the same prompts.

The suite's layout (``specbench`` or ``mtbench``, from the importer's notes on each request) picks
the per-category table printed in the field's own layout (:mod:`specgauge.report.field_layout`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from specgauge.load.workload import write_derived_suite
from specgauge.suites.model import Suite
from specgauge.suites.registry import load_suite

# suites/importers/records.py notes each imported question "specbench question N; category C"
# ("mtbench question N" for MT-bench): the layout the per-category table follows
LAYOUT_NOTES = {"specbench": "specbench question", "mtbench": "mtbench question"}


@dataclass(frozen=True)
class PerDomainSuite:
    """The single stream's derived suite: its path, requests (one pass), layout and shortfalls."""

    path: str
    num_requests: int
    layout: str | None
    shortfalls: tuple[str, ...]


def suite_layout(suite: Suite) -> str | None:
    """``specbench`` / ``mtbench`` when every request was imported from that format, else None."""
    for layout, mark in LAYOUT_NOTES.items():
        if all((r.notes or "").startswith(mark) for r in suite.requests):
            return layout
    return None


def per_domain_choice(suite: Suite, per_domain: int, seed: int) -> tuple[Suite, list[str]]:
    """``suite`` cut to at most ``per_domain`` requests per domain tag (a ``Random(seed)`` choice in
    each domain, in file order), and one line per domain that has fewer."""
    by_domain: dict[str, list[int]] = {}
    for index, request in enumerate(suite.requests):
        by_domain.setdefault(request.domain, []).append(index)
    rng = random.Random(seed)
    keep: set[int] = set()
    shortfalls = []
    for domain in sorted(by_domain):
        indices = by_domain[domain]
        if len(indices) < per_domain:
            shortfalls.append(f"domain '{domain}' of suite '{suite.name}' has {len(indices)} prompt"
                              f"{'s' if len(indices) != 1 else ''}: it gets {len(indices)} of the {per_domain} "
                              f"single-stream requests per arm asked")
            keep.update(indices)
        else:
            keep.update(rng.sample(indices, per_domain))
    requests = tuple(r for i, r in enumerate(suite.requests) if i in keep)
    # the suite's own name and version (its content hash tells the two apart): the stages name one suite
    derived = Suite(name=suite.name, version=suite.version, requests=requests,
                    description=f"{suite.ref}: up to {per_domain} prompts per domain tag (seed {seed}), the "
                                f"single stream of specgauge compare --suite")
    return derived, shortfalls


def per_domain_suite_file(suite_ref: str, per_domain: int, seed: int, work_dir: Path) -> PerDomainSuite:
    """Write the derived suite of :func:`per_domain_choice` under ``work_dir``; what it holds."""
    suite = load_suite(suite_ref)
    derived, shortfalls = per_domain_choice(suite, per_domain, seed)
    return PerDomainSuite(path=write_derived_suite(derived, work_dir), num_requests=len(derived.requests),
                          layout=suite_layout(suite), shortfalls=tuple(shortfalls))
