"""``bench --trace``: the whole selection read once before anything is sent, so that a bad line
(file, line, field), an out-of-order timestamp or an unknown text suite is one line up front."""

from __future__ import annotations

from specgauge.errors import UserError
from specgauge.load.traces.formats import detect_format
from specgauge.load.traces.selection import TraceSelection, select
from specgauge.suites.registry import load_suite


def check_trace(trace) -> str:
    """Read ``trace`` (a :class:`~specgauge.load.bench_config.TraceConfig`) through its selection,
    streaming; its format (given or detected). Raises :class:`~specgauge.errors.UserError`."""
    fmt = trace.format or detect_format(trace.path)
    length_only = False
    for timed in select(trace.path, fmt, TraceSelection(trace.window, trace.max_requests, trace.sort)):
        length_only = length_only or timed.request.input_length is not None
    if length_only and not trace.text_from:
        raise UserError(f"trace {trace.path} has lengths but no prompt text: name a suite to take the text from "
                        f"with --trace-text-from (e.g. coding)")
    if length_only:
        load_suite(trace.text_from)
    return fmt
