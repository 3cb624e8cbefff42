"""Real material for long agent transcripts: standard-library source excerpts and the tool outputs an
agent would see on them (``read_file`` views, ``grep -n`` hits, ``git diff``, pytest failures).

Excerpts are whole top-level functions or classes (or methods) cut from fixed standard-library files
with ``ast``; each is pinned by its sha256, so the suite built from them is the same on every CPython
3.11 install, and a standard library that differs fails loudly instead of silently changing a suite.
Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path


def stdlib_root() -> Path:
    """The directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


class StdlibExcerptMismatch(RuntimeError):
    """The running interpreter's standard library differs from the one a suite was built from."""


def excerpt(relpath: str, qualname: str, sha256_prefix: str) -> str:
    """The source of ``qualname`` (``func``, ``Class`` or ``Class.method``, decorators included) in the
    standard-library file ``relpath``; its sha256 must start with ``sha256_prefix``."""
    text = (stdlib_root() / relpath).read_text(encoding="utf-8").replace("\r\n", "\n")
    body, node = ast.parse(text).body, None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            raise StdlibExcerptMismatch(f"{relpath} has no {qualname}")
        body = node.body
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    source = "\n".join(text.splitlines()[start - 1:node.end_lineno]) + "\n"
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    if not digest.startswith(sha256_prefix):
        raise StdlibExcerptMismatch(
            f"stdlib {relpath}:{qualname} differs from the CPython 3.11 source the agentic suite was built "
            f"from (sha256 {digest[:16]}, expected {sha256_prefix}); regenerate the suite with CPython 3.11")
    return source


@dataclass(frozen=True)
class RepoFile:
    """A file of the (fictional) repository an agent works in."""

    path: str
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def line_of(self, snippet: str, occurrence: int = 1) -> int:
        """1-based number of the ``occurrence``-th line containing ``snippet``."""
        hits = [i for i, line in enumerate(self.lines, 1) if snippet in line]
        if len(hits) < occurrence:
            raise ValueError(f"{snippet!r} not in {self.path}")
        return hits[occurrence - 1]

    def replace(self, old: str, new: str) -> "RepoFile":
        if self.text.count(old) != 1:
            raise ValueError(f"{old!r} is not unique in {self.path}")
        return RepoFile(self.path, self.text.replace(old, new))


def view(file: RepoFile, start: int, end: int) -> str:
    """What ``read_file`` returns: the lines ``start..end`` numbered, SWE-agent's window style."""
    lines = file.lines
    end = min(end, len(lines))
    out = [f"[File: {file.path} ({len(lines)} lines total)]"]
    if start > 1:
        out.append(f"({start - 1} more lines above)")
    out += [f"{n}:{lines[n - 1]}" for n in range(start, end + 1)]
    if end < len(lines):
        out.append(f"({len(lines) - end} more lines below)")
    return "\n".join(out)


def grep(pattern: str, files: list[RepoFile]) -> str:
    """``grep -n -E pattern`` over ``files``: ``path:line:text`` for each matching line."""
    regex = re.compile(pattern)
    hits = [f"{f.path}:{n}:{line}" for f in files for n, line in enumerate(f.lines, 1) if regex.search(line)]
    return "\n".join(hits) if hits else "(no matches)"


def git_diff(before: RepoFile, after: RepoFile) -> str:
    """``git diff`` of one file's change (three lines of context)."""
    body = difflib.unified_diff(before.lines, after.lines, f"a/{before.path}", f"b/{after.path}", lineterm="")
    return f"diff --git a/{before.path} b/{after.path}\n" + "\n".join(body)


def pytest_failure(command: str, test_path: str, test_name: str, test_body: str, frames: list[tuple[RepoFile, str, str]],
                   error: str, passed: int) -> str:
    """pytest's ``-x`` report of one failing test. ``test_body``: the test's source, its failing line marked
    with a leading ``>``; ``frames``: (file, function, snippet of the line) down the traceback."""
    rule = "_" * 20
    out = [f"$ {command}", f"{test_path} " + "." * passed + "F", "=" * 30 + " FAILURES " + "=" * 30,
           f"{rule} {test_name} {rule}", ""]
    body = test_body.splitlines()
    out += [(">    " + line[1:]) if line.startswith(">") else "    " + line for line in body]  # pytest's marker
    test_line = next(i for i, line in enumerate(body, 1) if line.startswith(">"))
    out += ["", f"{test_path}:{10 + test_line}: ", "_ " * 20]
    for file, function, snippet in frames:
        line = file.line_of(snippet)
        out += [f"{file.path}:{line}: in {function}", f"    {file.lines[line - 1].strip()}"]
    out += [f"E   {line}" for line in error.splitlines()]
    out += ["=" * 25 + " short test summary info " + "=" * 25,
            f"FAILED {test_path}::{test_name} - {error.splitlines()[0]}",
            "!!!!!!!!!! stopping after 1 failures !!!!!!!!!!", f"1 failed, {passed} passed in 0.38s"]
    return "\n".join(out)


def action(thought: str, tool: str, **arguments: object) -> str:
    """An assistant turn: a THOUGHT line and one ACTION line with the tool call as JSON."""
    return f"THOUGHT: {thought}\nACTION: " + json.dumps({"tool": tool, "arguments": arguments})


def observation(result: object) -> str:
    """A user turn carrying a tool's result: text as it is, anything else as indented JSON."""
    return "OBSERVATION:\n" + (result if isinstance(result, str) else json.dumps(result, indent=1))
