"""The ``--trace*`` options of ``bench`` (docs/traces.md) and the :class:`TraceConfig` they make."""

from __future__ import annotations

from typing import Callable

import click

from specgauge.load.traces.formats import FORMATS
from specgauge.load.traces.replay import FITS

TRACE_OPTION_NAMES = ("trace", "trace_format", "trace_speed", "trace_window", "trace_max_requests", "trace_sort",
                      "trace_fit", "trace_text_from")


def _window(ctx, param, value):
    if value is None:
        return None
    from specgauge.errors import UserError
    from specgauge.load.traces.selection import parse_window

    try:
        return parse_window(value)
    except UserError as exc:
        raise click.BadParameter(str(exc).removeprefix("--trace-window "), ctx=ctx, param=param) from None


def trace_options(command: Callable) -> Callable:
    """Add the ``--trace*`` options to ``command``."""
    options = [
        click.option("--trace", metavar="FILE",
                     help="replay a timed trace: each request sent at its trace time, open loop (docs/traces.md)"),
        click.option("--trace-format", type=click.Choice(FORMATS),
                     help="the trace's format (default: detected from its first line; vllm-timed is never guessed)"),
        click.option("--trace-speed", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
                     metavar="X", help="replay X times faster than recorded"),
        click.option("--trace-window", callback=_window, metavar="START-END",
                     help="replay only this slice of the trace, in seconds from its first request (e.g. 60-120)"),
        click.option("--trace-max-requests", type=click.IntRange(min=1), metavar="N",
                     help="replay at most the first N requests (of the window)"),
        click.option("--trace-sort", is_flag=True,
                     help="sort the trace by timestamp (else a timestamp going back is an error); holds the "
                          "window's lines in memory"),
        click.option("--trace-fit", type=click.Choice(FITS), default="scale", show_default=True,
                     help="a length-only request past the server's context: scale both lengths down, clip "
                          "(output to half the context, then the prompt), or skip it; counted in the report"),
        click.option("--trace-text-from", metavar="SUITE",
                     help="the suite whose text fills a length-only trace's prompts (equal hash blocks: equal text)"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def trace_config(options: dict):
    """The :class:`~specgauge.load.bench_config.TraceConfig` of the options, or None without ``--trace``;
    a ``--trace-*`` option without ``--trace`` is a usage error."""
    if options.get("trace") is None:
        given = [name for name in TRACE_OPTION_NAMES[1:] if options.get(name) not in (None, False, 1.0, "scale")]
        if given:
            raise click.UsageError(f"--{given[0].replace('_', '-')} needs --trace FILE")
        return None
    from pathlib import Path

    from specgauge.load.bench_config import TraceConfig

    if not Path(options["trace"]).is_file():
        raise click.UsageError(f"--trace: no such file: {options['trace']}")
    return TraceConfig(path=options["trace"], format=options["trace_format"], speed=options["trace_speed"],
                       window=options["trace_window"] or (0.0, None), max_requests=options["trace_max_requests"],
                       sort=options["trace_sort"], fit=options["trace_fit"], text_from=options["trace_text_from"])
