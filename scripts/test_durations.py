"""Where a test run's time goes, from pytest's JUnit XML: per folder, per module and the slowest tests.

    .venv/bin/python -m pytest --junitxml=/tmp/run.xml ...
    python scripts/test_durations.py /tmp/run.xml [--top 25] [--against /tmp/before.xml]

Each test's time in the XML is its call plus its share of set-up and tear-down (pytest's
``junit_duration_report = total``, the default), so a module- or session-scoped fixture's cost
lands on the first test that needs it. With ``--against`` a second run's figures stand beside the
first's (before/after). Under ``pytest -n 2`` the folder sums add up the two workers' time: the
wall time is about half of their total.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ElementTree
from collections import defaultdict


def read_cases(path: str) -> dict[str, float]:
    """``{"tests/folder/test_x.py::name": seconds}`` for every test case in the JUnit file."""
    cases = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        cases[f"tests/{module.removeprefix('tests/')}.py::{case.get('name')}"] = float(case.get("time", 0))
    return cases


def folder_of(test_id: str) -> str:
    parts = test_id.split("::")[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else "tests (top level)"


def totals(cases: dict[str, float], key) -> dict[str, tuple[float, int]]:
    sums: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for test_id, seconds in cases.items():
        sums[key(test_id)][0] += seconds
        sums[key(test_id)][1] += 1
    return {name: (seconds, count) for name, (seconds, count) in sums.items()}


def table(title: str, rows: dict[str, tuple[float, int]], other: dict[str, tuple[float, int]] | None,
          limit: int | None = None) -> None:
    print(f"\n{title}")
    ordered = sorted(rows.items(), key=lambda item: -item[1][0])[:limit]
    for name, (seconds, count) in ordered:
        line = f"  {seconds:8.1f} s  {count:5d} tests  {name}"
        if other is not None:
            before = other.get(name)
            line += f"   (was {before[0]:.1f} s, {before[1]} tests)" if before else "   (new)"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("junit_xml")
    parser.add_argument("--top", type=int, default=25, help="slowest tests listed")
    parser.add_argument("--against", metavar="XML", help="another run's JUnit XML, shown beside (before/after)")
    args = parser.parse_args()
    cases = read_cases(args.junit_xml)
    other = read_cases(args.against) if args.against else None
    print(f"{len(cases)} tests, {sum(cases.values()):.1f} s of test time"
          + (f" (against {len(other)} tests, {sum(other.values()):.1f} s)" if other else ""))
    table("by folder", totals(cases, folder_of), totals(other, folder_of) if other else None)
    table("by module", totals(cases, lambda t: t.split("::")[0]),
          totals(other, lambda t: t.split("::")[0]) if other else None, args.top)
    table("slowest tests", {t: (s, 1) for t, s in cases.items()},
          {t: (s, 1) for t, s in other.items()} if other else None, args.top)


if __name__ == "__main__":
    main()
