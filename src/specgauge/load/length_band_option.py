"""``--context-lengths LO-HI,...`` of ``tune`` and ``compare``: the option and its parsing (``load.length_bands``)."""

from __future__ import annotations

from typing import Callable

import click


def context_bands(ctx, param, value):
    """``1-128,129-384`` → ((1, 128), (129, 384)) (``load.length_bands.parse_bands``); a bad value is a usage error."""
    if value is None or isinstance(value, tuple):
        return value
    from specgauge.load.length_bands import parse_bands

    try:
        return parse_bands(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def context_lengths_option(help: str, name: str = "context_lengths") -> Callable:
    """``--context-lengths LO-HI,...`` parsed into bands, stored under ``name``."""
    return click.option("--context-lengths", name, callback=context_bands, metavar="LO-HI,...", help=help)
