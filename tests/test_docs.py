"""The README's headline result is the newest dated demo run in docs/results.md."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_ROW = re.compile(r"^\| (?P<when>2\d{3}-\d\d-\d\d ~?\d\d:\d\d) \|(?P<cells>.*)\|$")
FIGURE = re.compile(r"\d+\.\d+x? \[\d+\.\d+, \d+\.\d+\]")


def demo_rows() -> list[tuple[str, list[str]]]:
    """The demo table of docs/results.md: (when, cells), in the order written (newest first)."""
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    section = text.split("## Demo (`make demo`)", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = DEMO_ROW.match(line)
        if match:
            rows.append((match["when"].lstrip("~"), [c.strip() for c in match["cells"].split(" | ")]))
    return rows


def test_the_demo_table_is_newest_first():
    whens = [when.replace("~", "") for when, _ in demo_rows()]
    assert len(whens) >= 2 and whens == sorted(whens, reverse=True)


def test_the_readme_quotes_the_newest_demo_run():
    when, cells = demo_rows()[0]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    headline = readme.split("## Current result", 1)[1].split("\n## ", 1)[0]
    day, time = when.split()
    assert f"{day} {time}" in " ".join(headline.split()), f"the README does not quote the newest demo run, {when}"
    coding = FIGURE.search(cells[2])   # host, wall, coding, ...
    assert coding and coding.group(0).rstrip("x") in headline.replace("x [", " ["), cells[2]


def test_benchmarks_readme_names_every_script():
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z0-9_]+\.py)` \|", readme, re.MULTILINE))
    assert listed == {p.name for p in (ROOT / "benchmarks").glob("*.py")}


def test_no_benchmark_script_imports_another():
    """Scripts share code through ``benchmarks/benchkit/`` (or the package), never by importing a script."""
    import ast

    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
    offenders = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{path.name} imports {name}" for name in names if name.split(".")[0] in scripts]
    assert scripts and not offenders, offenders
