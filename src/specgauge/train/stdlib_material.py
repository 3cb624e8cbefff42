"""Raw material found on every machine with Python: the standard library's source, its docstrings
and the ``pydoc_data`` topics. Read with ``ast`` only — nothing is imported, nothing executes."""

from __future__ import annotations

import ast
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

# Directory names whose files are tests, demos or vendored third-party code.
SKIPPED_DIRS = frozenset({
    "test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "turtledemo",
    "lib2to3", "ensurepip", "config-3", "lib-dynload",
})
# Generated tables and data dumps, not code a person wrote.
SKIPPED_FILES = frozenset({"topics.py", "_pydecimal.py", "_aix_support.py"})
MAX_FILE_BYTES = 200_000


@dataclass(frozen=True)
class SourceFile:
    """One standard-library module: its path relative to the stdlib root and its text."""

    relpath: str
    text: str

    @property
    def module(self) -> str:
        parts = self.relpath.removesuffix(".py").split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)


@dataclass(frozen=True)
class Docstring:
    """A documented object: ``module.qualname`` with its signature (functions) and docstring."""

    module: str
    qualname: str
    kind: str  # "module", "class" or "function"
    signature: str
    text: str


def stdlib_root() -> Path:
    """The directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def _is_generated(relpath: str) -> bool:
    # encodings/cp1252.py and friends are generated charmap tables.
    name = relpath.rsplit("/", 1)[-1]
    return relpath.startswith("encodings/") and name not in {"__init__.py", "aliases.py", "utf_8.py", "idna.py", "punycode.py"}


def iter_stdlib_files(root: Path | None = None) -> list[SourceFile]:
    """Every hand-written ``.py`` file of the standard library, sorted by path (deterministic)."""
    root = root or stdlib_root()
    files: list[SourceFile] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        parts = rel.split("/")
        if any(p in SKIPPED_DIRS or p.startswith(("test_", "config-")) for p in parts[:-1]):
            continue
        if parts[-1] in SKIPPED_FILES or parts[-1].startswith("test_") or _is_generated(rel):
            continue
        if path.stat().st_size > MAX_FILE_BYTES or path.stat().st_size < 200:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files.append(SourceFile(rel, text.replace("\r\n", "\n")))
    return files


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"({ast.unparse(node.args)}){returns}"


def docstrings_of(source: SourceFile, include_private: bool = False) -> list[Docstring]:
    """Module, class and function docstrings of one file, in source order (``_private`` names
    only with ``include_private``)."""
    try:
        tree = ast.parse(source.text)
    except SyntaxError:
        return []
    found: list[Docstring] = []
    module_doc = ast.get_docstring(tree)
    if module_doc:
        found.append(Docstring(source.module, "", "module", "", module_doc))

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name.startswith("_") and not include_private and node.name != "__init__":
                    continue
                qualname = f"{prefix}{node.name}"
                doc = ast.get_docstring(node)
                if isinstance(node, ast.ClassDef):
                    if doc:
                        found.append(Docstring(source.module, qualname, "class", "", doc))
                    visit(node.body, qualname + ".")
                elif doc:
                    found.append(Docstring(source.module, qualname, "function", _signature(node), doc))

    visit(tree.body, "")
    return found


def function_signatures(source: SourceFile) -> list[tuple[str, str, int]]:
    """Top-level public functions of a file as (name, signature, line number)."""
    try:
        tree = ast.parse(source.text)
    except SyntaxError:
        return []
    return [
        (node.name, _signature(node), node.lineno)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")
    ]


@dataclass(frozen=True)
class DocumentedFunction:
    """A public function or method with a docstring, and its source text."""

    module: str
    qualname: str
    signature: str
    doc: str
    code: str


def documented_functions(source: SourceFile) -> list[DocumentedFunction]:
    """Public functions and methods of one file that have a docstring, in source order."""
    try:
        tree = ast.parse(source.text)
    except SyntaxError:
        return []
    found: list[DocumentedFunction] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                doc = ast.get_docstring(node)
                code = ast.get_source_segment(source.text, node)
                if doc and code:
                    found.append(DocumentedFunction(source.module, f"{prefix}{node.name}", _signature(node), doc, code))

    visit(tree.body, "")
    return found


def askable_functions(files: list[SourceFile], max_code_chars: int) -> Iterator[tuple[SourceFile, int, DocumentedFunction]]:
    """(file, index in the file, function) for every documented function a chat request can be
    made of: a docstring of at least 40 characters, source of at most ``max_code_chars``. The
    sources that ask about functions (``code_questions``, ``code_requests``) share this choice."""
    for source in files:
        for index, fn in enumerate(documented_functions(source)):
            if len(fn.doc) >= 40 and len(fn.code) <= max_code_chars:
                yield source, index, fn


def pydoc_topics() -> list[tuple[str, str]]:
    """The language reference topics shipped in ``pydoc_data.topics`` as (title, text), sorted."""
    from pydoc_data.topics import topics

    return sorted((title, text.replace("\r\n", "\n")) for title, text in topics.items())
