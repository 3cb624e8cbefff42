"""CLI commands of the benchmark part: ``bench``, ``runs``, ``show``, ``export``.

Heavy imports (numpy, aiohttp, rich tables) stay inside the command bodies.
"""

from __future__ import annotations

from pathlib import Path

import click

from specgauge.cli_options import (POSITIVE_INTS, POSITIVE_NUMBERS, console, db_option, one_line_validation_error,
                                   request_count_options, sampling_options, secret_options, think_time_options,
                                   warmup_option,
                                   write_text)
from specgauge.client.endpoint import API_NAMES  # light module: no aiohttp at import time
from specgauge.errors import UserError
from specgauge.tokenizer_option import TokenizerPath
from specgauge.load.peer_flags import PEER_RUN_OPTIONS, PeerFlagsCommand, peer_options
from specgauge.load.trace_options import TRACE_OPTION_NAMES, trace_config, trace_options
from specgauge.load.workers.options import placement_from, placement_options
from specgauge.output_paths import check_output_file

# Options that define a run's load; --resume takes them from the stored run instead.
RUN_DEFINING_OPTIONS = ("url", "api", "suite", "concurrency", "rate", "num_requests", "requests_per_user",
                        "min_requests", "duration", "arrival", "burstiness", "max_concurrency", "warmup", "seed",
                        "max_tokens", "temperature", "top_p", "top_k", "model", "tokenizer", "max_error_rate",
                        "think_time_ms", "think_time_distribution") + PEER_RUN_OPTIONS + TRACE_OPTION_NAMES


def _print_run(store, run_id: int, *, to_stderr: bool) -> None:
    from specgauge.report.terminal import run_notes, run_table
    from specgauge.report.turns_table import turns_table

    out, run, points = console(stderr=to_stderr), store.get_run(run_id), store.get_points(run_id)
    out.print(run_table(run, points))
    if (per_turn := turns_table(points)) is not None:
        out.print(per_turn)
    for line in run_notes(run, points):
        out.print(line, style="yellow" if line.startswith("warning") else None, soft_wrap=True, markup=False,
                      highlight=False)


@click.command("bench", cls=PeerFlagsCommand)
@click.argument("url", required=False)
@click.option("--api", type=click.Choice(API_NAMES), help="wire format of the server (default openai-chat)")
@click.option("--concurrency", type=POSITIVE_INTS, help="closed-loop points, e.g. 1,8,64 (1 = single stream)")
@click.option("--rate", type=POSITIVE_NUMBERS, help="open-loop points in requests/s, e.g. 2,4")
@request_count_options(min_requests=16, requests_per_user=4)
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="seconds per point")
@click.option("--max-tokens", type=click.IntRange(min=1), help="output tokens per request (else the suite's)")
@click.option("--suite", default="smoke", show_default=True, help="built-in suite NAME[@VERSION] or a .jsonl file")
@click.option("--arrival", type=click.Choice(["poisson", "gamma"]), default="poisson", show_default=True)
@click.option("--burstiness", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="gamma shape (< 1 burstier); needs --arrival gamma")
@click.option("--max-concurrency", type=click.IntRange(min=1),
              help="cap on requests in flight (open loop) and on --concurrency; alone: one closed-loop point")
@warmup_option
@click.option("--seed", type=int, default=0, show_default=True,
              help="prompt order, arrival times and (temperature > 0) each request's seed")
@sampling_options
@think_time_options
@click.option("--model", help="model name (else auto-detected from /v1/models)")
@secret_options
@click.option("--tokenizer", type=TokenizerPath(dir_okay=True),
              help="local tokenizer (or a shipped model's name) for token counts per chunk")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="flag points whose error rate is above this")
@click.option("--output-json", metavar="FILE", help="write the run as JSON ('-' for stdout)")
@db_option
@click.option("--resume", "resume_run_id", type=int, metavar="RUN_ID", help="finish an interrupted run")
@trace_options
@placement_options
@peer_options
@click.pass_context
def bench_command(ctx: click.Context, **options) -> None:
    """Benchmark the server at URL over one or more load points; every request is stored."""
    from specgauge.load.bench import RunStopped
    from specgauge.load.stop_signals import run_stoppable
    from specgauge.report.export import run_document
    from specgauge.store import Store

    headers = options["headers"]
    check_output_file(options["output_json"], "--output-json")   # before anything runs, not after
    placement = placement_from(options)
    if options["resume_run_id"] is not None:
        work = _prepare_resume(ctx, options, headers, placement)
    else:
        work = _prepare_new_run(options, headers, placement)
    try:
        summary, store_path = run_stoppable(work)  # SIGINT/SIGTERM: the run is marked interrupted, exit 130/143
    except RunStopped as stopped:  # the server stopped answering (exit 3), the store is full (4)
        raise stopped.with_resume(f"specgauge bench --resume {stopped.run_id} --db {options['db']}") from None
    output_json = options["output_json"]
    with Store.open(store_path, create=False) as store:
        _print_run(store, summary.run_id, to_stderr=output_json == "-")
        if output_json:
            import json

            document = run_document(store.get_run(summary.run_id), store.get_points(summary.run_id))
            write_text(output_json, json.dumps(document, indent=2) + "\n")
        if options["resume_run_id"] is None:
            _peer_results(store, summary.run_id, options, to_stderr=output_json == "-")


def _peer_results(store, run_id: int, options: dict, *, to_stderr: bool) -> None:
    """The vLLM-style summary (goodput, chosen percentiles) and the --save-result file, when asked."""
    from specgauge.load.peer_flags import wants_peer_summary
    from specgauge.report.peer_result import default_result_filename, run_results, summary_lines, write_results

    if not wants_peer_summary(options):
        return
    results = run_results(store, run_id)
    for line in summary_lines(results):
        click.echo(line, err=to_stderr)
    if options["save_result"] or options["result_filename"]:
        path = options["result_filename"] or default_result_filename(results)
        try:
            write_results(results, path)
        except OSError as exc:
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
        click.echo(f"wrote {path}", err=to_stderr)


def _prepare_new_run(options: dict, headers: tuple[tuple[str, str], ...], placement):
    """Validate a new run's options (no file created, nothing sent); the coroutine that runs it."""
    from pydantic import ValidationError

    from specgauge.load.bench_config import BenchConfig
    from specgauge.load.peer_flags import bench_settings, resolve_url
    from specgauge.store import Store
    from specgauge.suites.registry import load_suite

    url = resolve_url(options)
    if not url:
        raise click.UsageError("missing URL (or give --resume RUN_ID)")
    try:
        config = BenchConfig(
            url=url, suite=options["suite"], **bench_settings(options),
            duration_s=options["duration"], arrival=options["arrival"],
            burstiness=options["burstiness"], max_concurrency=options["max_concurrency"],
            warmup=options["warmup"], seed=options["seed"], max_tokens=options["max_tokens"],
            temperature=options["temperature"], top_p=options["top_p"], top_k=options["top_k"],
            model=options["model"], api_key=options["api_key"], insecure=options["insecure"],
            headers=headers, tokenizer_path=options["tokenizer"], max_error_rate=options["max_error_rate"],
            think_time_ms=options["think_time_ms"], think_time_distribution=options["think_time_distribution"],
            trace=trace_config(options))
    except ValidationError as exc:
        raise one_line_validation_error(exc) from None
    load_suite(config.suite)  # an unknown suite fails before the store file is created
    if config.trace is not None:   # a bad trace line or text suite: one line, before the server is contacted
        from specgauge.load.traces.check import check_trace

        check_trace(config.trace)
    if config.tokenizer_path:  # not a tokenizer file: one line before any run is created
        from specgauge.client.tokens import load_tokenizer

        load_tokenizer(config.tokenizer_path)
    from specgauge.load.capacity import check_capacity

    check_capacity(config.point_specs())  # connections this machine cannot open: one line, before any run
    db = options["db"]
    if Path(db).exists():  # a bad --db file fails before the server is contacted
        Store.open(db, create=False).close()
    return _checked_run(config, db, placement)


def _prepare_resume(ctx: click.Context, options: dict, headers: tuple[tuple[str, str], ...], placement):
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
        specs = [point.spec for point in store.get_points(run_id) if point.status != "done"]
    from specgauge.load.capacity import check_capacity
    from specgauge.load.plan import PointSpec

    check_capacity(PointSpec(**spec) for spec in specs)
    return _resume(run_id, db, options["api_key"], headers, placement)


async def _checked_run(config, db: str, placement):
    """Check the server answers before the store file is created, then run the sweep."""
    from specgauge.client.endpoint import Endpoint
    from specgauge.client.probe import check_reachable
    from specgauge.load.bench import run_benchmark
    from specgauge.load.workload import prepare_workload
    from specgauge.report.terminal import RichProgress
    from specgauge.store import Store

    probe = Endpoint(base_url=config.url, api=config.api, api_key=config.api_key, headers=config.headers,
                     insecure=config.insecure)
    await check_reachable(probe)
    config = await prepare_workload(config, probe, Path(db).resolve().parent)  # refusals: before the store exists
    with Store.open(db) as store:
        return await run_benchmark(config, store, RichProgress(db=db), placement=placement), store.path


async def _resume(run_id: int, db: str, api_key: str | None, headers: tuple[tuple[str, str], ...], placement):
    from specgauge.load.bench import resume_benchmark
    from specgauge.report.terminal import RichProgress
    from specgauge.store import Store

    with Store.open(db, create=False) as store:
        return await resume_benchmark(run_id, store, RichProgress(db=db), api_key=api_key, headers=headers,
                                      placement=placement), store.path


@click.command("runs")
@db_option
def runs_command(db: str) -> None:
    """List the stored runs, then the comparisons (ids like c3: 'specgauge show c3') and the tunes
    (ids like t2: 'specgauge report t2')."""
    from specgauge.report.terminal import comparisons_table, runs_table, tunes_table
    from specgauge.store import Store

    with Store.open(db, create=False, read_only=True) as store:
        console().print(runs_table([(run, store.get_points(run.id)) for run in store.list_runs()]))
        comparisons = [(row, store.comparison_runs(row.id)) for row in store.list_comparisons()]
        tunes = [(row, store.tune_runs(row.id)) for row in store.list_tunes()]
    if comparisons:
        console().print(comparisons_table(comparisons))
    if tunes:
        console().print(tunes_table(tunes))


@click.command("show")
@click.argument("run_id", metavar="ID")
@db_option
def show_command(run_id: str, db: str) -> None:
    """Show a run's summary table (ID like 7: one row per point), a comparison's verdict (ID like c3) or a
    tune's heat map and verification (ID like t2)."""
    from specgauge.report.commands import load_report, parse_report_id, several_arms_of
    from specgauge.report.verdict_table import verdict_renderable
    from specgauge.store import Store

    ref = parse_report_id(run_id)
    with Store.open(db, create=False, read_only=True) as store:
        several = several_arms_of(store, ref)
        if several is not None:   # a comparison of several speculative arms: a section per arm, then the choice
            from specgauge.report.arms_report import print_arms

            print_arms(several, console())
            return
        if ref.kind == "run":
            _print_run(store, ref.id, to_stderr=False)
            return
        if ref.kind == "tune":
            from specgauge.report.tune_report import load_tune_report, print_tune

            print_tune(console(), load_tune_report(store, ref.id))
            return
        data, _ = load_report(store, ref)
    console().print(verdict_renderable(data))


@click.command("export")
@click.argument("run_id", type=int)
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
@click.option("--output", default="-", show_default=True, help="file to write ('-' for stdout)")
@click.option("--requests", "per_request", is_flag=True, help="one row per request instead of per point")
@db_option
def export_command(run_id: int, fmt: str, output: str, per_request: bool, db: str) -> None:
    """Export a run's points (or, with --requests, every request) as JSON or CSV."""
    import json

    check_output_file(output, "--output")

    from specgauge.report.export import iter_request_documents, point_document, run_document, to_csv
    from specgauge.store import Store

    with Store.open(db, create=False, read_only=True) as store:
        run, points = store.get_run(run_id), store.get_points(run_id)
        if per_request:
            docs = list(iter_request_documents(store, run_id))
            text = to_csv(docs) if fmt == "csv" else json.dumps({"run_id": run_id, "requests": docs}, indent=2) + "\n"
        elif fmt == "csv":
            text = to_csv({"run_id": run_id, **point_document(p)} for p in points)
        else:
            text = json.dumps(run_document(run, points), indent=2) + "\n"
    write_text(output, text)


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    for command in (bench_command, runs_command, show_command, export_command):
        app.add_command(command)
