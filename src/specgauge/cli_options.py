"""The command-line vocabulary every command shares, declared once (docs/cli.md lists every option).

One spelling, one default and one meaning for the options several commands take: the results store
(``--db``), the secrets (``--api-key``, ``--header``), warm-up (``--warmup``), verification
(``--verify/--no-verify``) and the request counts (``--num-requests`` and its scaling rule); one
comma-list parameter type; one way to read ``--header NAME:VALUE``; one console for tables (160
columns when the output is not a terminal); pydantic validation errors as one line; text written to
a file or stdout.

The request-count vocabulary (the same in ``bench``, ``compare`` and ``tune``):

* ``--num-requests N`` (alias ``--num-prompts``, the name of vLLM's ``vllm bench serve`` and SGLang's
  ``bench_serving``: "Number of prompts to process", one load point per run there): measured
  requests per load point (and per arm). Warm-up requests are not counted.
* without it, a closed-loop point at concurrency ``c`` measures ``max(--min-requests,
  --requests-per-user x c)`` requests (each command has its own defaults for these two: how many
  points it measures differs).

Sources of the peers' names: ``vllm/benchmarks/serve.py`` (``add_cli_args``: ``--num-prompts``,
``--num-warmups``) and SGLang's ``python/sglang/bench_serving.py`` (``--num-prompts``,
``--warmup-requests``).

The sampling vocabulary (``bench``, ``compare``, ``tune``): ``--temperature``, ``--top-p`` and
``--top-k``, the names of ``vllm bench serve``'s "sampling parameters" group
(``vllm/benchmarks/serve.py``); at temperature > 0 every request also sends its own seed, derived
from ``--seed`` (``specgauge.client.sampling``), so a run can be repeated.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Callable

import click

from specgauge.errors import UserError

DEFAULT_DB = "specgauge.db"
DB_HELP = "results store (an SQLite file)"
DEFAULT_WARMUP = 1


def comma_list(text: str, kind: type = str, *, low: float | None = None, low_open: bool = False,
               high: float | None = None, finite: bool = True, choices: tuple[str, ...] | None = None,
               unique_sorted: bool = False, allow_empty: bool = False) -> tuple:
    """``"1,8,64"`` → ``(1, 8, 64)``: the comma-separated items of ``text`` as ``kind``, blanks
    dropped; a ``ValueError`` whose message names the bad item. ``low``/``high`` bound the values
    (``low_open``: strictly above ``low``); ``finite=False`` lets ``inf`` through; ``choices``
    restricts names; ``unique_sorted`` sorts and drops repeats; ``allow_empty`` accepts no items."""
    items = [part.strip() for part in str(text).split(",") if part.strip()]
    if not items and not allow_empty:
        raise ValueError(f"{text!r}: give at least one value")
    values = []
    for item in items:
        if choices is not None and item not in choices:
            raise ValueError(f"{text!r}: {item!r} is not one of {', '.join(choices)}")
        try:
            value = kind(item)
        except ValueError:
            raise ValueError(f"{text!r}: {item!r} is not {'an integer' if kind is int else 'a number'}") from None
        if kind is not str:
            if math.isnan(value) or (finite and not math.isfinite(value)):
                raise ValueError(f"{text!r}: {item!r} is not a finite number")
            if low is not None and (value <= low if low_open else value < low):
                raise ValueError(f"{text!r}: every value must be {'>' if low_open else '>='} {low:g} (got {item})")
            if high is not None and value > high:
                raise ValueError(f"{text!r}: every value must be <= {high:g} (got {item})")
        values.append(value)
    return tuple(sorted(set(values))) if unique_sorted else tuple(values)


class CommaList(click.ParamType):
    """A click parameter of :func:`comma_list` values: ``--concurrency 1,8,64``."""

    def __init__(self, kind: type = str, *, metavar: str | None = None, **rules) -> None:
        self.kind, self.rules = kind, rules
        self.name = metavar or {int: "INT,...", float: "NUM,..."}.get(kind, "NAME,...")

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            return comma_list(value, self.kind, **self.rules)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


POSITIVE_INTS = CommaList(int, low=0, low_open=True)
POSITIVE_NUMBERS = CommaList(float, low=0, low_open=True)


def parse_headers(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``("X-A: 1",)`` → ``(("X-A", "1"),)``; a value without ``NAME:`` is a one-line usage error."""
    headers = []
    for number, raw in enumerate(values, 1):
        name, sep, value = raw.partition(":")
        if not sep or not name.strip():  # the text is not echoed: it may be a token given without its name
            raise click.BadParameter(f"header {number} is not NAME:VALUE (its text is not shown: it may be a secret)",
                                     param_hint="'--header'")
        headers.append((name.strip(), value.strip()))
    return tuple(headers)


def _headers_callback(ctx, param, values):
    return parse_headers(values or ())


def _apply(function: Callable, options: list) -> Callable:
    for option in reversed(options):
        function = option(function)
    return function


def db_option(function: Callable | None = None, *, default: str | None = DEFAULT_DB, help: str = DB_HELP):
    """``--db FILE``: the results store (``demo`` alone keeps it in its output folder)."""
    option = click.option("--db", default=default, show_default=default is not None, metavar="FILE", help=help)
    return option if function is None else option(function)


def secret_options(function: Callable) -> Callable:
    """``--api-key`` and ``--header NAME:VALUE`` (parsed into pairs): sent with every request, never
    stored; and how the connection is made, ``--insecure`` (https without certificate checks)."""
    return _apply(function, [
        click.option("--api-key", metavar="KEY", help="bearer token (else $OPENAI_API_KEY); never stored"),
        click.option("--header", "headers", multiple=True, metavar="NAME:VALUE", callback=_headers_callback,
                     help="extra HTTP header (repeatable); values never stored"),
        click.option("--insecure", is_flag=True, default=False,
                     help="https: do not check the server's certificate or host name (self-signed servers)"),
    ])


def warmup_option(function: Callable) -> Callable:
    """``--warmup N`` (vLLM's ``--num-warmups``, SGLang's ``--warmup-requests``)."""
    return click.option("--warmup", "--num-warmups", "--warmup-requests", "warmup", type=click.IntRange(min=0),
                        default=DEFAULT_WARMUP, show_default=True,
                        help="warm-up requests per point (and arm), excluded from every figure")(function)


def sampling_options(function: Callable) -> Callable:
    """``--temperature``, ``--top-p``, ``--top-k`` (module doc); top-p and top-k are sent only when given."""
    return _apply(function, [
        click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True,
                     help="sampling temperature (0 = greedy); above 0 each request sends its own seed from --seed"),
        click.option("--top-p", type=click.FloatRange(min=0, max=1, min_open=True),
                     help="nucleus sampling: keep the most likely tokens up to this probability (else not sent)"),
        click.option("--top-k", type=click.IntRange(min=-1),
                     help="keep the K most likely tokens; 0 or -1: no cut (else not sent)"),
    ])


def verify_option(what: str) -> Callable:
    """``--verify/--no-verify``: run the recommended setting and measure it; left out, it runs where
    the arms can run the setting (``what`` says what is run)."""
    return click.option("--verify/--no-verify", default=None,
                        help=f"{what} (default: on where the arms can run it)")


def request_count_options(*, min_requests: int, requests_per_user: int, scope: str = "point") -> Callable:
    """``--num-requests`` (alias ``--num-prompts``), ``--requests-per-user`` and ``--min-requests``
    (the module docstring says what they mean); ``scope`` names what one count covers."""
    def decorate(function: Callable) -> Callable:
        return _apply(function, [
            click.option("--num-requests", "--num-prompts", "num_requests", type=click.IntRange(min=1),
                         help=f"measured requests per {scope}; else max(--min-requests, --requests-per-user x "
                              f"concurrency)"),
            click.option("--requests-per-user", type=click.IntRange(min=1), default=requests_per_user,
                         show_default=True, help="without --num-requests: requests per unit of concurrency"),
            click.option("--min-requests", type=click.IntRange(min=1), default=min_requests, show_default=True,
                         help="without --num-requests: the fewest requests a closed-loop point measures"),
        ])
    return decorate


def given(ctx: click.Context, name: str) -> bool:
    """Whether option ``name`` came from the command line (or the environment), not its default."""
    return ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)


def console(*, stderr: bool = False):
    """A rich console; 160 columns wide when the output is a file or pipe, not a terminal."""
    from rich.console import Console

    terminal = Console(stderr=stderr)
    return terminal if terminal.is_terminal else Console(stderr=stderr, width=160)


def one_line_validation_error(exc) -> UserError:
    """A pydantic ``ValidationError`` as one line naming the option (``URL`` for the url field)."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error.get("loc", ()) if not isinstance(p, int))
        message = error.get("msg", "invalid").removeprefix("Value error, ")
        name = "URL" if field == "url" else f"--{field.replace('_', '-')}"
        parts.append(f"{name}: {message}" if field else message)
    return UserError("; ".join(parts))


def write_text(path: str, text: str) -> None:
    """``text`` to the file ``path`` (``-``: stdout); a failed write is a one-line error."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None



def think_time_options(function: Callable) -> Callable:
    """``--think-time-ms`` and ``--think-time-distribution``: a multi-turn session's pause before each
    later turn (load/sessions.py), seeded by ``--seed``."""
    return _apply(function, [
        click.option("--think-time-ms", type=click.FloatRange(min=0), default=0.0, show_default=True,
                     help="multi-turn sessions: pause (mean, ms) after an answer before the next turn"),
        click.option("--think-time-distribution", type=click.Choice(["fixed", "exponential", "uniform"]),
                     default="fixed", show_default=True,
                     help="the think time: fixed, or exponential / uniform(0, 2 x mean) drawn from --seed"),
    ])
