"""The checks the tests make, counted at a git revision: test functions, ``assert`` statements, and
calls that check a failure (``pytest.raises``, ``one_line_error``): a change that speeds the tests up
must not lower them without saying which went and why.

    python scripts/count_assertions.py [REV ...]      # default: HEAD
"""

from __future__ import annotations

import ast
import subprocess
import sys

FAILURE_CHECKS = ("raises", "one_line_error", "_one_line_error", "assert_one_line_error")


def _called_name(call: ast.Call) -> str:
    return getattr(call.func, "attr", getattr(call.func, "id", ""))


def count(rev: str) -> dict[str, int]:
    """``{"tests", "asserts", "failure_checks"}`` over every ``tests/**.py`` at ``rev``."""
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "tests"], capture_output=True, text=True,
                            check=True).stdout.split()
    totals = {"tests": 0, "asserts": 0, "failure_checks": 0}
    for path in (p for p in listed if p.endswith(".py")):
        source = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assert):
                totals["asserts"] += 1
            elif isinstance(node, ast.Call) and _called_name(node) in FAILURE_CHECKS:
                totals["failure_checks"] += 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                totals["tests"] += 1
    return totals


def main() -> None:
    for rev in sys.argv[1:] or ["HEAD"]:
        figures = count(rev)
        print(f"{rev}: {figures['tests']} test functions, {figures['asserts']} assert statements, "
              f"{figures['failure_checks']} failure checks (pytest.raises, one_line_error)")


if __name__ == "__main__":
    main()
