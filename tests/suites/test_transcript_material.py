"""The material agentic@2 is built from: pinned standard-library excerpts and tool-output views."""

from __future__ import annotations

import hashlib

import pytest

from specgauge.suites.builtin_source.transcript_material import (RepoFile, StdlibExcerptMismatch, excerpt, git_diff,
                                                                   grep, view)


def test_excerpt_is_the_whole_definition_and_pinned_by_its_hash():
    source = excerpt("bisect.py", "insort_right", "")
    assert source.startswith("def insort_right(") and source.endswith("\n")
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert excerpt("bisect.py", "insort_right", digest[:16]) == source
    with pytest.raises(StdlibExcerptMismatch, match=r"bisect.py:insort_right differs .* expected 0000"):
        excerpt("bisect.py", "insort_right", "0000")
    with pytest.raises(StdlibExcerptMismatch, match="has no Nope.method"):
        excerpt("bisect.py", "Nope.method", "")


def test_views_number_the_real_lines():
    file = RepoFile("pkg/m.py", "".join(f"line {n}\n" for n in range(1, 11)))
    shown = view(file, 3, 5).splitlines()
    assert shown == ["[File: pkg/m.py (10 lines total)]", "(2 more lines above)", "3:line 3", "4:line 4", "5:line 5",
                     "(5 more lines below)"]
    assert grep(r"line 1\b|line 7", [file]).splitlines() == ["pkg/m.py:1:line 1", "pkg/m.py:7:line 7"]
    diff = git_diff(file, file.replace("line 4\n", "line four\n")).splitlines()
    assert diff[0] == "diff --git a/pkg/m.py b/pkg/m.py" and "-line 4" in diff and "+line four" in diff
