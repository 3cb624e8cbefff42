"""Which part of a trace is replayed, and when each request goes, read one line at a time.

Trace time is seconds since the trace's first request (its earliest, with ``sort``).
``window`` keeps the requests in ``[start, end]`` of trace time; ``max_requests`` the first N of
those. Without ``sort`` the file is streamed once and reading stops at the window's end or the
N-th request; a timestamp earlier than the line before it is an error. With ``sort`` the file
is read twice (its earliest timestamp, then the window) and the window's lines are held in memory
to be sorted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from specgauge.errors import UserError
from specgauge.load.traces.formats import TraceLine, read_trace

WINDOW = re.compile(r"^\s*(\d+(?:\.\d*)?)?\s*-\s*(\d+(?:\.\d*)?)?\s*$")


@dataclass(frozen=True)
class TraceSelection:
    """The slice of a trace to replay (trace seconds) and how fast."""

    window: tuple[float, float | None] = (0.0, None)
    max_requests: int | None = None
    sort: bool = False

    def __post_init__(self) -> None:
        start, end = self.window
        if start < 0 or (end is not None and end <= start):
            raise UserError(f"--trace-window must be START-END seconds with END > START >= 0 (got {start:g}-{end})")
        if self.max_requests is not None and self.max_requests < 1:
            raise UserError(f"--trace-max-requests must be >= 1 (got {self.max_requests})")


def parse_window(text: str) -> tuple[float, float | None]:
    """``"60-120"`` → (60.0, 120.0); ``"60-"`` → (60.0, None); ``"-30"`` → (0.0, 30.0)."""
    match = WINDOW.match(text)
    if not match or (match[1] is None and match[2] is None):
        raise UserError(f"--trace-window must be START-END in seconds, e.g. 60-120 (got {text!r})")
    start = float(match[1]) if match[1] is not None else 0.0
    end = float(match[2]) if match[2] is not None else None
    TraceSelection(window=(start, end))
    return start, end


@dataclass(frozen=True)
class Timed:
    """A selected trace request and its time in the trace (seconds since the trace's first request)."""

    request: TraceLine
    trace_s: float


def select(path: str | Path, fmt: str, selection: TraceSelection) -> Iterator[Timed]:
    """The requests of ``selection``, in trace-time order (module doc)."""
    if selection.sort:
        return iter(_sorted(path, fmt, selection))
    return _streamed(path, fmt, selection)


def _in_window(trace_s: float, selection: TraceSelection) -> bool:
    start, end = selection.window
    return trace_s >= start and (end is None or trace_s <= end)


def _streamed(path: str | Path, fmt: str, selection: TraceSelection) -> Iterator[Timed]:
    origin = previous = None
    taken = 0
    _, end = selection.window
    for request in read_trace(path, fmt):
        if previous is not None and request.timestamp_s < previous:
            raise UserError(f"{path}:{request.line}: field '{_time_field(fmt)}': earlier than the line before "
                            f"({request.timestamp_s:g} s < {previous:g} s); pass --trace-sort to sort the trace "
                            f"(it holds the window in memory)")
        previous = request.timestamp_s
        origin = request.timestamp_s if origin is None else origin
        trace_s = request.timestamp_s - origin
        if end is not None and trace_s > end:
            return
        if _in_window(trace_s, selection):
            yield Timed(request, trace_s)
            taken += 1
            if selection.max_requests is not None and taken >= selection.max_requests:
                return


def _sorted(path: str | Path, fmt: str, selection: TraceSelection) -> list[Timed]:
    origin = min((request.timestamp_s for request in read_trace(path, fmt)), default=0.0)
    kept = [Timed(request, request.timestamp_s - origin) for request in read_trace(path, fmt)
            if _in_window(request.timestamp_s - origin, selection)]
    kept.sort(key=lambda timed: (timed.trace_s, timed.request.line))
    return kept[:selection.max_requests] if selection.max_requests is not None else kept


def _time_field(fmt: str) -> str:
    return "Timestamp" if fmt == "burstgpt" else "timestamp"
