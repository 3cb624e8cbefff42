"""A trace as a suite the load runner sends: one request per selected trace line, in trace
order, each with its trace time (``build_info["trace"]["times_s"]``: seconds from the replay's
start, before ``--trace-speed``), its recorded output length and, for a length-only trace,
prompt text from a named suite (:mod:`specgauge.load.traces.text`).

Lengths the server's context cannot hold (prompt + output > context) follow ``fit``:

- ``scale``: both lengths times context / (prompt + output), rounded down (at least 1 each);
- ``clip``: the output capped at half the context, then the prompt cut to what is left;
- ``skip``: the request is left out.

Its hash blocks are cut to the blocks the new prompt length covers. A timed JSONL's own prompts
are never rewritten: those that do not fit are left out (counted) whatever ``fit`` says. Each
rule's count is in the summary the run stores.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from specgauge.errors import UserError
from specgauge.load.traces.formats import TraceLine
from specgauge.load.traces.selection import TraceSelection, select
from specgauge.load.traces.text import BlockText
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest
from specgauge.suites.registry import load_suite

Fit = Literal["scale", "clip", "skip"]
FITS = ("scale", "clip", "skip")
TRACE_DOMAIN = "trace"


@dataclass(frozen=True)
class TraceSource:
    """What to replay and how: the file, its format, the slice, the fit rule and the text source."""

    path: str
    fmt: str
    selection: TraceSelection = TraceSelection()
    fit: Fit = "scale"
    text_from: str | None = None


@dataclass
class FitCounts:
    """How many requests each rule touched, and why any were left out."""

    scaled: int = 0
    clipped: int = 0
    skipped: int = 0        # too long for the context (--trace-fit skip, or a timed JSONL's own prompt)
    failed_in_log: int = 0  # 0 output tokens recorded (BurstGPT's failed requests)


@dataclass(frozen=True)
class BuiltTrace:
    """The trace as a suite, and the facts a run reports about it."""

    suite: Suite
    times_s: tuple[float, ...]
    with_output_lengths: bool
    counts: FitCounts
    inexact_lengths: int
    notes: tuple[str, ...]


def fit_lengths(prompt: int, output: int, context: int | None, fit: Fit) -> tuple[int, int, str | None]:
    """``(prompt, output)`` after the fit rule (module doc), and what was done (None: fits, or
    ``"skip"``: leave it out)."""
    if context is None or prompt + output <= context:
        return prompt, output, None
    if fit == "skip":
        return prompt, output, "skip"
    if fit == "clip":
        output = min(output, max(1, context // 2))
        return max(1, min(prompt, context - output)), output, "clip"
    factor = context / (prompt + output)
    new_prompt, new_output = max(1, math.floor(prompt * factor)), max(1, math.floor(output * factor))
    while new_prompt + new_output > context and new_prompt > 1:
        new_prompt -= 1
    return new_prompt, new_output, "scale"


def _source_text(suite_ref: str) -> str:
    suite = load_suite(suite_ref)
    return "\n\n".join(request.text() for request in suite.requests)


def _notes(line: TraceLine, trace_s: float, extra: str = "") -> str:
    parts = [f"trace line {line.line}", f"t={trace_s:.3f} s"]
    if line.session_id is not None:
        parts.append(f"session {line.session_id}")
    return "; ".join(parts) + extra


def build_trace(source: TraceSource, *, tokenizer=None, context: int | None = None, count_tokens=None,
                served_overhead: int = 0) -> BuiltTrace:
    """The requests of ``source`` as a suite (module doc). ``tokenizer``: token-exact prompts;
    ``context``: the server's context (None: not checked); ``count_tokens(request)``: a timed
    JSONL request's prompt tokens as served (None: not checked); ``served_overhead``: tokens the
    chat template adds around one user message, taken off each length-only prompt so that the
    server sees the trace's length."""
    counts = FitCounts()
    requests, times = [], []
    text = None
    all_outputs = True
    for timed in select(source.path, source.fmt, source.selection):
        line = timed.request
        if line.output_length == 0:
            counts.failed_in_log += 1
            continue
        if line.input_length is not None:
            if text is None:
                if not source.text_from:
                    raise UserError(f"trace {source.path} has lengths but no prompt text: name a suite to take "
                                    f"the text from with --trace-text-from (e.g. coding)")
                text = BlockText(_source_text(source.text_from), tokenizer)
            prompt_len, output_len, done = fit_lengths(line.input_length, int(line.output_length or 1), context,
                                                       source.fit)
            if done == "skip":
                counts.skipped += 1
                continue
            if done is not None:
                setattr(counts, {"scale": "scaled", "clip": "clipped"}[done],
                        getattr(counts, {"scale": "scaled", "clip": "clipped"}[done]) + 1)
            blocks = line.hash_ids
            if line.block_tokens:
                blocks = blocks[:math.ceil(prompt_len / line.block_tokens)]
            body = text.prompt(max(1, prompt_len - served_overhead), blocks, line.block_tokens, ("line", line.line))
            request = SuiteRequest(prompt=body, max_tokens=output_len, domain=TRACE_DOMAIN,
                                   source=f"trace:{Path(source.path).name}",
                                   notes=_notes(line, timed.trace_s, f"; input {prompt_len} tokens; output "
                                                                     f"{output_len}; {len(blocks)} hash blocks"))
        else:
            all_outputs = all_outputs and line.output_length is not None
            max_tokens = line.output_length or line.max_tokens or 128
            if line.messages is not None:
                request = SuiteRequest(messages=tuple(ChatMessage(role=r, content=c) for r, c in line.messages),
                                       max_tokens=max_tokens, domain=TRACE_DOMAIN,
                                       source=f"trace:{Path(source.path).name}", notes=_notes(line, timed.trace_s))
            else:
                request = SuiteRequest(prompt=line.prompt, max_tokens=max_tokens, domain=TRACE_DOMAIN,
                                       source=f"trace:{Path(source.path).name}", notes=_notes(line, timed.trace_s))
            if context is not None and count_tokens is not None and count_tokens(request) + max_tokens > context:
                counts.skipped += 1
                continue
        requests.append(request)
        times.append(max(0.0, timed.trace_s - source.selection.window[0]))
    if not requests:
        raise UserError(f"trace {source.path}: no request to replay in the selection (window "
                        f"{_window_text(source.selection)}; {counts.skipped} too long for the context, "
                        f"{counts.failed_in_log} failed in the log)")
    inexact = text.inexact if text is not None and tokenizer is not None else 0
    suite = Suite(name=_suite_name(source, context, len(requests)), requests=tuple(requests),
                  description=f"trace {source.path} ({source.fmt}), {len(requests)} requests replayed at their "
                              f"trace times",
                  build_info={"trace": {"file": str(source.path), "format": source.fmt,
                                        "times_s": [round(t, 6) for t in times]}})
    return BuiltTrace(suite=suite, times_s=tuple(times), with_output_lengths=all_outputs, counts=counts,
                      inexact_lengths=inexact, notes=tuple(_summary_notes(source, counts, inexact, tokenizer,
                                                                        context, text is not None)))


def _window_text(selection: TraceSelection) -> str:
    start, end = selection.window
    return f"{start:g}-{'' if end is None else f'{end:g}'} s"


def _suite_name(source: TraceSource, context: int | None, count: int) -> str:
    """``trace-NAME-DIGEST``: the digest covers what decides the requests (and their times,
    which the suite's content hash leaves out)."""
    path = Path(source.path)
    try:
        stat = path.stat()
        identity = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    except OSError:
        identity = str(path)
    key = (f"{identity}|{source.fmt}|{source.selection}|{source.fit}|{source.text_from}|{context}|{count}")
    return f"trace-{path.stem}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _summary_notes(source: TraceSource, counts: FitCounts, inexact: int, tokenizer, context: int | None,
                   length_only: bool) -> list[str]:
    notes = []
    fitted = [f"{n} {what}" for n, what in ((counts.scaled, "scaled"), (counts.clipped, "clipped"),
                                            (counts.skipped, "left out")) if n]
    if fitted:
        notes.append(f"trace lengths past the server's {context}-token context: {', '.join(fitted)} "
                     f"(--trace-fit {source.fit})")
    if counts.failed_in_log:
        notes.append(f"{counts.failed_in_log} trace requests with 0 output tokens (failed in the log) left out")
    if length_only:
        exact = "token-exact with the tokenizer" if tokenizer is not None else \
            "approximate: no tokenizer known, a word of the suite stands for a token"
        notes.append(f"trace prompts: text from suite '{source.text_from}', equal hash blocks equal text; lengths "
                     f"{exact}" + (f" ({inexact} not exact)" if inexact else ""))
    if length_only and context is None:
        notes.append("the server reports no context length: trace lengths sent as recorded")
    return notes


def suite_trace_times(suite: Suite) -> list[float] | None:
    """The trace times (seconds from the replay's start) of a suite :func:`build_trace` made."""
    trace = (suite.build_info or {}).get("trace")
    return list(trace["times_s"]) if isinstance(trace, dict) and "times_s" in trace else None
