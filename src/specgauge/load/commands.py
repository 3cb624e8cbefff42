"""CLI commands of the benchmark part: ``bench``, ``runs``, ``show``, ``export``.

Heavy imports (numpy, aiohttp, rich tables) stay inside the command bodies.
"""

from __future__ import annotations

import math
import signal
import sys
from pathlib import Path

import click

from specgauge.client.endpoint import API_NAMES  # light module: no aiohttp at import time
from specgauge.errors import UserError

DB_OPTION_HELP = "results store (an SQLite file)"
EXIT_TERMINATED = 128 + signal.SIGTERM
# Options that define a run's load; --resume takes them from the stored run instead.
RUN_DEFINING_OPTIONS = ("url", "api", "suite", "concurrency", "rate", "num_requests", "duration", "arrival",
                        "burstiness", "max_concurrency", "warmup", "seed", "max_tokens", "temperature",
                        "model", "tokenizer", "max_error_rate")


class _NumberList(click.ParamType):
    """A comma-separated list of positive numbers: ``1,8,64``."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.name = "INT,INT,..." if kind is int else "NUM,NUM,..."

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        items = [part.strip() for part in str(value).split(",")]
        numbers = []
        for item in items:
            try:
                number = self.kind(item)
            except ValueError:
                self.fail(f"{value!r}: {item!r} is not {'an integer' if self.kind is int else 'a number'}",
                          param, ctx)
            if not (number > 0 and math.isfinite(number)):
                self.fail(f"{value!r}: every value must be > 0 (got {item})", param, ctx)
            numbers.append(number)
        return tuple(numbers)


def _parse_headers(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    headers = []
    for raw in values:
        name, sep, value = raw.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"{raw!r} is not NAME:VALUE", param_hint="'--header'")
        headers.append((name.strip(), value.strip()))
    return tuple(headers)


def _one_line_validation_error(exc) -> UserError:
    """A pydantic ValidationError as one line naming the option."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error.get("loc", ()) if not isinstance(p, int))
        message = error.get("msg", "invalid").removeprefix("Value error, ")
        name = "URL" if field == "url" else f"--{field.replace('_', '-')}"
        parts.append(f"{name}: {message}" if field else message)
    return UserError("; ".join(parts))


def _write_text(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _console(*, stderr: bool = False):
    """A rich console; 160 columns wide when the output is a file or pipe, not a terminal."""
    from rich.console import Console

    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=160)


def _print_run(store, run_id: int, *, to_stderr: bool) -> None:
    from specgauge.report.terminal import run_table

    _console(stderr=to_stderr).print(run_table(store.get_run(run_id), store.get_points(run_id)))


@click.command("bench")
@click.argument("url", required=False)
@click.option("--api", type=click.Choice(API_NAMES), help="wire format of the server")
@click.option("--concurrency", type=_NumberList(int), help="closed-loop points, e.g. 1,8,64 (1 = single stream)")
@click.option("--rate", type=_NumberList(float), help="open-loop points in requests/s, e.g. 2,4")
@click.option("--num-requests", type=click.IntRange(min=1), help="measured requests per point")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="seconds per point")
@click.option("--max-tokens", type=click.IntRange(min=1), help="output tokens per request (else the suite's)")
@click.option("--suite", default="smoke", show_default=True, help="built-in suite NAME[@VERSION] or a .jsonl file")
@click.option("--arrival", type=click.Choice(["poisson", "gamma"]), default="poisson", show_default=True)
@click.option("--burstiness", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="gamma shape (< 1 burstier); needs --arrival gamma")
@click.option("--max-concurrency", type=click.IntRange(min=1), help="cap on in-flight open-loop requests")
@click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True,
              help="warm-up requests per point, excluded from every figure")
@click.option("--seed", type=int, default=0, show_default=True, help="prompt order and arrival times")
@click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--model", help="model name (else auto-detected from /v1/models)")
@click.option("--api-key", help="bearer token (else $OPENAI_API_KEY); never stored")
@click.option("--header", "headers", multiple=True, metavar="NAME:VALUE", help="extra HTTP header (repeatable)")
@click.option("--tokenizer", type=click.Path(exists=True), help="local tokenizer for token counts per chunk")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="flag points whose error rate is above this")
@click.option("--output-json", metavar="FILE", help="write the run as JSON ('-' for stdout)")
@click.option("--db", default="specgauge.db", show_default=True, help=DB_OPTION_HELP)
@click.option("--resume", "resume_run_id", type=int, metavar="RUN_ID", help="finish an interrupted run")
@click.pass_context
def bench_command(ctx: click.Context, **options) -> None:
    """Benchmark the server at URL over one or more load points; every request is stored."""
    import asyncio

    from specgauge.load.runner import run_async
    from specgauge.report.export import run_document
    from specgauge.store import Store

    headers = _parse_headers(options["headers"])
    if options["resume_run_id"] is not None:
        work = _prepare_resume(ctx, options, headers)
    else:
        work = _prepare_new_run(options, headers)
    try:
        summary, store_path = run_async(work)
    except asyncio.CancelledError:  # SIGTERM (see _terminate_on_sigterm): the run is marked interrupted
        click.echo("specgauge: terminated", err=True)
        raise click.exceptions.Exit(EXIT_TERMINATED) from None
    output_json = options["output_json"]
    with Store.open(store_path, create=False) as store:
        _print_run(store, summary.run_id, to_stderr=output_json == "-")
        if output_json:
            import json

            document = run_document(store.get_run(summary.run_id), store.get_points(summary.run_id))
            _write_text(output_json, json.dumps(document, indent=2) + "\n")


def _prepare_new_run(options: dict, headers: tuple[tuple[str, str], ...]):
    """Validate a new run's options (no file created, nothing sent); the coroutine that runs it."""
    from pydantic import ValidationError

    from specgauge.load.bench_config import BenchConfig
    from specgauge.store import Store
    from specgauge.suites.registry import load_suite

    if not options["url"]:
        raise click.UsageError("missing URL (or give --resume RUN_ID)")
    if not options["api"]:
        raise click.UsageError(f"missing --api (one of: {', '.join(API_NAMES)})")
    try:
        config = BenchConfig(
            url=options["url"], api=options["api"], suite=options["suite"],
            concurrency=options["concurrency"] or (), rates=options["rate"] or (),
            num_requests=options["num_requests"], duration_s=options["duration"], arrival=options["arrival"],
            burstiness=options["burstiness"], max_concurrency=options["max_concurrency"],
            warmup=options["warmup"], seed=options["seed"], max_tokens=options["max_tokens"],
            temperature=options["temperature"], model=options["model"], api_key=options["api_key"],
            headers=headers, tokenizer_path=options["tokenizer"], max_error_rate=options["max_error_rate"])
    except ValidationError as exc:
        raise _one_line_validation_error(exc) from None
    load_suite(config.suite)  # an unknown suite fails before the store file is created
    config.point_specs()
    db = options["db"]
    if Path(db).exists():  # a bad --db file fails before the server is contacted
        Store.open(db, create=False).close()
    return _checked_run(config, db)


def _prepare_resume(ctx: click.Context, options: dict, headers: tuple[tuple[str, str], ...]):
    """Check a ``--resume`` is well formed and its run exists; the coroutine that finishes it."""
    from specgauge.store import Store

    given = [name for name in RUN_DEFINING_OPTIONS
             if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]
    if given:
        shown = "URL" if given[0] == "url" else "--" + given[0].replace("_", "-")
        raise click.UsageError(f"--resume takes every setting from the stored run; drop {shown}")
    run_id, db = options["resume_run_id"], options["db"]
    with Store.open(db, create=False) as store:
        store.get_run(run_id)  # an unknown id: one line, before anything runs
    return _resume(run_id, db, options["api_key"], headers)


def _terminate_on_sigterm() -> None:
    """Let SIGTERM cancel the running sweep like Ctrl-C does, so the run is marked interrupted."""
    import asyncio

    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def _checked_run(config, db: str):
    """Check the server answers before the store file is created, then run the sweep."""
    from specgauge.client.endpoint import Endpoint
    from specgauge.client.probe import check_reachable
    from specgauge.load.bench import run_benchmark
    from specgauge.report.terminal import RichProgress
    from specgauge.store import Store

    await check_reachable(Endpoint(base_url=config.url, api=config.api, api_key=config.api_key,
                                   headers=config.headers))
    _terminate_on_sigterm()
    with Store.open(db) as store:
        return await run_benchmark(config, store, RichProgress(db=db)), store.path


async def _resume(run_id: int, db: str, api_key: str | None, headers: tuple[tuple[str, str], ...]):
    from specgauge.load.bench import resume_benchmark
    from specgauge.report.terminal import RichProgress
    from specgauge.store import Store

    _terminate_on_sigterm()
    with Store.open(db, create=False) as store:
        return await resume_benchmark(run_id, store, RichProgress(db=db), api_key=api_key, headers=headers), store.path


@click.command("runs")
@click.option("--db", default="specgauge.db", show_default=True, help=DB_OPTION_HELP)
def runs_command(db: str) -> None:
    """List the stored runs, then the comparisons (ids like c3: 'specgauge show c3')."""
    from specgauge.report.terminal import comparisons_table, runs_table
    from specgauge.store import Store

    with Store.open(db, create=False) as store:
        _console().print(runs_table([(run, store.get_points(run.id)) for run in store.list_runs()]))
        comparisons = [(row, store.comparison_runs(row.id)) for row in store.list_comparisons()]
    if comparisons:
        _console().print(comparisons_table(comparisons))


@click.command("show")
@click.argument("run_id", metavar="ID")
@click.option("--db", default="specgauge.db", show_default=True, help=DB_OPTION_HELP)
def show_command(run_id: str, db: str) -> None:
    """Show a run's summary table (ID like 7: one row per point) or a comparison's verdict (ID like c3)."""
    from specgauge.report.commands import load_report, parse_report_id
    from specgauge.report.verdict_table import verdict_renderable
    from specgauge.store import Store

    ref = parse_report_id(run_id)
    with Store.open(db, create=False) as store:
        if ref.kind == "run":
            _print_run(store, ref.id, to_stderr=False)
            return
        data, _ = load_report(store, ref)
    _console().print(verdict_renderable(data))


@click.command("export")
@click.argument("run_id", type=int)
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
@click.option("--output", default="-", show_default=True, help="file to write ('-' for stdout)")
@click.option("--requests", "per_request", is_flag=True, help="one row per request instead of per point")
@click.option("--db", default="specgauge.db", show_default=True, help=DB_OPTION_HELP)
def export_command(run_id: int, fmt: str, output: str, per_request: bool, db: str) -> None:
    """Export a run's points (or, with --requests, every request) as JSON or CSV."""
    import json

    from specgauge.report.export import iter_request_documents, point_document, run_document, to_csv
    from specgauge.store import Store

    with Store.open(db, create=False) as store:
        run, points = store.get_run(run_id), store.get_points(run_id)
        if per_request:
            docs = list(iter_request_documents(store, run_id))
            text = to_csv(docs) if fmt == "csv" else json.dumps({"run_id": run_id, "requests": docs}, indent=2) + "\n"
        elif fmt == "csv":
            text = to_csv({"run_id": run_id, **point_document(p)} for p in points)
        else:
            text = json.dumps(run_document(run, points), indent=2) + "\n"
    _write_text(output, text)


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    for command in (bench_command, runs_command, show_command, export_command):
        app.add_command(command)
