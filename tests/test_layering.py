"""The parts of ``src/specgauge`` depend on each other in one direction only (docs/architecture.md).

The import graph is read with ``ast`` (no module is imported): every ``import`` and ``from ...
import`` of a ``specgauge`` module, at module level or inside a function, is an edge. Checked:

* no import cycle between modules;
* no import from a lower part into a higher one (``ALLOWED`` below is the layering);
* no private name (``_x``) imported from another part's module: what two parts share is public.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src" / "specgauge"

# The measuring side, lowest first: a part may import the parts of lower layers (and BASE).
MEASUREMENT_LAYERS: tuple[tuple[str, ...], ...] = (
    ("suites",),             # prompt suites: the model, versioning, built-ins, importers
    ("client",),             # SSE decoding, endpoint adapters, request records, server metrics
    ("store", "analysis"),   # SQLite store; metrics, paired statistics, crossover, verdict, results model
    ("report",),             # terminal, HTML, plots, exports
    ("load",),               # the load runner and the `bench` command
    ("compare",),            # two arms, A/B scheduling, baselines, the demo
    ("tune",),               # the draft-depth schedule: measured per depth with compare's arms, chosen, verified
)
# The embedded engine and how its weights are made; no part of the measuring side imports them,
# except compare (the demo starts `specgauge serve`; the fit check reads its tokenizer) and tune
# (it starts `specgauge serve` per depth).
ENGINE_LAYERS: tuple[tuple[str, ...], ...] = (("engine",), ("train",))
BASE = frozenset({"specgauge", "errors", "output_paths", "speculation_schedule", "shipped_models",
                  "tokenizer_option", "server_setup", "cli_options"})  # the package root
# (`__version__`), `errors.py`, `output_paths.py` (output files and names checked before a command runs),
# vLLM's draft-depth schedule rules (pure), which the engine and the measuring side both apply, the
# registry of shipped models (pure data: where a name's target, drafter and tokenizer are) and the
# `--tokenizer PATH|NAME` option type built on it, what the real-engine set-ups share (server_setup),
# and the command-line options every command shares


def _allowed() -> dict[str, frozenset[str]]:
    allowed: dict[str, frozenset[str]] = {"specgauge": frozenset(), "errors": frozenset(),
                                          "output_paths": frozenset({"errors"}), "speculation_schedule": frozenset(),
                                          "shipped_models": frozenset(),
                                          "tokenizer_option": frozenset({"shipped_models"}),
                                          "server_setup": frozenset({"shipped_models"}),
                                          "cli_options": frozenset({"errors"})}
    for layers in (MEASUREMENT_LAYERS, ENGINE_LAYERS):
        below: set[str] = set(BASE)
        for layer in layers:
            for part in layer:
                allowed[part] = frozenset(below)
            below |= set(layer)
    allowed["compare"] |= {"engine"}
    allowed["tune"] |= {"engine"}  # tune starts `specgauge serve` per depth (engine.launch)
    allowed["testing"] = BASE  # test servers (scripted, lean) speak the wire formats by themselves
    allowed["vllm_setup"] = BASE  # `make vllm`: lays out vLLM-servable copies of the shipped weights
    allowed["model_setup"] = BASE  # `make model`: obtains and converts the models set-up brings in
    # `make sglang`: the same copies (vllm_setup.layout) with the drafter's layer ids in SGLang's
    # meaning (engine's config_for_engine), served with compare --engine sglang's own flags
    allowed["sglang_setup"] = BASE | {"vllm_setup", "compare", "engine"}
    everything = frozenset(allowed) | {"cli"}
    allowed["cli"] = everything  # the one thin entry: every command delegates to its part
    return allowed


ALLOWED = _allowed()

@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``names`` (empty for a whole module) from ``imported``, at ``line``."""

    importer: str
    imported: str
    line: int
    names: tuple[str, ...] = ()


def module_names(root: Path) -> dict[str, Path]:
    """Every module under the package directory ``root``, by dotted name (a package by its own)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_edges(root: Path) -> list[Edge]:
    """Every import of a module of the package ``root`` by another, read from the source."""
    modules = module_names(root)
    edges = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _nearest_module(alias.name, modules)
                    if target:
                        edges.append(Edge(name, target, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, package)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules:
                        edges.append(Edge(name, submodule, node.lineno))
                    elif (target := _nearest_module(base, modules)):
                        edges.append(Edge(name, target, node.lineno, (alias.name,)))
    return [edge for edge in edges if edge.importer != edge.imported]


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(anchor + ([node.module] if node.module else []))


def _nearest_module(dotted: str, modules: dict[str, Path]) -> str | None:
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def part_of(module: str) -> str:
    """``specgauge.load.bench`` → ``load``; ``specgauge.cli`` → ``cli``; ``specgauge`` → ``specgauge``."""
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0]
    return "cli" if parts[1] == "__main__" else parts[1]


def import_cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def layer_violations(edges: list[Edge], allowed: dict[str, frozenset[str]]) -> list[str]:
    """One line per import from a part into one it may not import (or from a part not in ``allowed``)."""
    found = set()
    for edge in edges:
        importer, imported = part_of(edge.importer), part_of(edge.imported)
        if importer not in allowed:
            found.add(f"{edge.importer}: part {importer!r} is not in the layering")
        elif importer != imported and imported not in allowed[importer]:
            found.add(f"{edge.importer}:{edge.line} imports {edge.imported} ({importer} may not import {imported})")
    return sorted(found)


def private_imports(edges: list[Edge]) -> dict[tuple[str, str], list[str]]:
    """Private names (``_x``, not dunders) imported from a module of another part, by (importer, imported)."""
    found: dict[tuple[str, str], list[str]] = {}
    for edge in edges:
        if part_of(edge.importer) == part_of(edge.imported):
            continue
        private = [n for n in edge.names if n.startswith("_") and not n.startswith("__")]
        if private:
            found.setdefault((edge.importer, edge.imported), []).extend(private)
    return found


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return import_edges(PACKAGE_ROOT)


def test_the_walk_sees_the_package(edges):
    importers = {edge.importer for edge in edges}
    assert {"specgauge.cli", "specgauge.load.bench", "specgauge.engine.core.engine"} <= importers
    assert any(e.importer == "specgauge.load.bench" and e.imported == "specgauge.load.runner"
               and e.names == ("run_point",) for e in edges)


def test_every_part_is_in_the_layering():
    parts = {part_of(name) for name in module_names(PACKAGE_ROOT)}
    assert parts - set(ALLOWED) == set()


def test_no_import_cycles(edges):
    assert import_cycles(edges) == []


def test_no_import_from_a_lower_part_into_a_higher_one(edges):
    assert layer_violations(edges, ALLOWED) == []


def test_no_private_names_shared_between_parts(edges):
    assert private_imports(edges) == {}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "specgauge" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "specgauge"


def test_the_checks_catch_a_cycle_an_upward_import_and_a_private_one(tmp_path):
    package = _write(tmp_path, {
        "__init__.py": "",
        "client/__init__.py": "",
        "client/records.py": "def helper():\n    from specgauge.report import html\n",
        "report/__init__.py": "",
        "report/html.py": "from specgauge.client.records import helper\n",
        "load/__init__.py": "",
        "load/commands.py": "from ..client.records import _private\n",
    })
    edges = import_edges(package)
    assert import_cycles(edges) == [["specgauge.client.records", "specgauge.report.html"]]
    assert layer_violations(edges, ALLOWED) == [
        "specgauge.client.records:2 imports specgauge.report.html (client may not import report)"]
    assert private_imports(edges) == {("specgauge.load.commands", "specgauge.client.records"): ["_private"]}
