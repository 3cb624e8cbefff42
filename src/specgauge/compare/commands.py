"""CLI commands of the comparison part: ``compare``, ``baseline set|list``, ``demo`` (docs/compare.md).

Heavy imports stay inside the command bodies.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from specgauge.client.endpoint import API_NAMES
from specgauge.errors import UserError
from specgauge.tokenizer_option import TokenizerPath
from specgauge.load.commands import _NumberList, _one_line_validation_error, _write_text
from specgauge.load.peer_flags import PeerFlagsCommand, compare_peer_options, compare_result_settings, compare_settings
from specgauge.load.workers.options import placement_from, placement_options

EXIT_REGRESSION = 1


def _run(work):
    """Run a coroutine; SIGINT or SIGTERM cancels it, so launched arms are stopped on the way out."""
    from specgauge.load.stop_signals import run_stoppable

    return run_stoppable(work)


def _names(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def _arm(name: str, url: str | None, cmd: str | None, engine: str | None, *, required: bool = True):
    """The one arm given by ``--NAME``, ``--NAME-cmd`` or ``--NAME-engine``."""
    from specgauge.compare.plan import ArmConfig

    given = [(kind, value) for kind, value in (("url", url), ("command", cmd), ("engine", engine)) if value is not None]
    if len(given) > 1:
        raise click.UsageError(f"give only one of --{name}, --{name}-cmd, --{name}-engine")
    if not given:
        if required:
            raise click.UsageError(f"missing the {name} arm: --{name} URL, --{name}-cmd \"CMD {{port}}\" "
                                   f"or --{name}-engine \"ARGS\"")
        return None
    kind, value = given[0]
    config = ArmConfig(name=name, kind=kind, value=value)
    config.spec()   # validates: URL scheme, {port} in a command, shell quoting
    return config


def _arm_options(function):
    for name in ("speculative", "baseline"):
        function = click.option(f"--{name}-engine", metavar="ARGS",
                                help=f"{name} arm: the embedded engine, 'specgauge serve ARGS'")(function)
        function = click.option(f"--{name}-cmd", metavar="CMD",
                                help=f"{name} arm: a launch command with {{port}}, started and stopped")(function)
        function = click.option(f"--{name}", metavar="URL", help=f"{name} arm: a running server")(function)
    return function


def _profile_options(function):
    """``--engine`` and its knobs: both arms' command lines built by :mod:`specgauge.compare.launch_profiles`."""
    from specgauge.compare.launch_profiles import DEFAULT_NUM_SPECULATIVE_TOKENS, ENGINES

    for option in reversed((
        click.option("--engine", type=click.Choice(ENGINES),
                     help="build both arms: ENGINE serving --model without speculation, and with --method "
                          "(the commands are printed; copy them into --baseline-cmd/--speculative-cmd to edit)"),
        click.option("--method", "--speculative-algorithm", "method", metavar="METHOD",
                     help="with --engine: eagle3, eagle, ngram, draft_model, mtp (the engine's own name is written)"),
        click.option("--draft-model", metavar="PATH", help="with --engine: the drafter (EAGLE-3 head, draft model)"),
        click.option("--num-speculative-tokens", type=click.IntRange(min=1),
                     help=f"with --engine: draft tokens per verify step (default {DEFAULT_NUM_SPECULATIVE_TOKENS}; "
                          f"SGLang's --speculative-num-steps)"),
        click.option("--eagle-topk", type=click.IntRange(min=1),
                     help="with --engine sglang|specgauge: draft-tree branching (default 1: a chain)"),
        click.option("--server-args", metavar="ARGS",
                     help="with --engine: more server arguments for both arms, e.g. \"--max-num-seqs 64\""),
    )):
        function = option(function)
    return function


PROFILE_KNOBS = ("method", "draft_model", "num_speculative_tokens", "eagle_topk", "server_args")


def _profile_arms(options: dict):
    """Both arms built from ``--engine`` (None without it); printed so the user can copy and edit them."""
    from specgauge.compare.launch_profiles import DEFAULT_NUM_SPECULATIVE_TOKENS, LaunchProfile, build_arm_commands
    from specgauge.compare.plan import ArmConfig

    if options["engine"] is None:
        given = [name for name in PROFILE_KNOBS if options[name] is not None]
        if given:
            raise click.UsageError(f"--{given[0].replace('_', '-')} builds an arm with --engine; give --engine too")
        return None
    raw = [f"--{name}{suffix}" for name in ("baseline", "speculative") for suffix in ("", "-cmd", "-engine")
           if options[name + suffix.replace("-", "_")] is not None]
    if raw:
        raise click.UsageError(f"give either --engine or the arms themselves, not both ({raw[0]})")
    if not options["method"]:
        raise click.UsageError("--engine needs --method (eagle3, eagle, ngram, draft_model, mtp)")
    commands = build_arm_commands(LaunchProfile(
        engine=options["engine"], model=options["model"], method=options["method"],
        draft_model=options["draft_model"],
        num_speculative_tokens=options["num_speculative_tokens"] or DEFAULT_NUM_SPECULATIVE_TOKENS,
        eagle_topk=options["eagle_topk"] or 1, server_args=options["server_args"] or ""))
    click.echo(f"baseline arm:    {commands.baseline}\nspeculative arm: {commands.speculative}\n"
               f"(to edit them: specgauge compare {commands.as_options()} ...)", err=True)
    return (ArmConfig(name="baseline", kind=commands.kind, value=commands.baseline),
            ArmConfig(name="speculative", kind=commands.kind, value=commands.speculative))


def _check_outputs(output_json: str | None, output_dir: str | None) -> None:
    """Fail before measuring anything when the results could not be written."""
    if output_json and output_json != "-" and not Path(output_json).resolve().parent.is_dir():
        raise UserError(f"--output-json {output_json}: no such directory {Path(output_json).parent}")
    if output_dir:
        try:
            Path(output_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--output-dir {output_dir}: {exc.strerror or exc}") from None


def _emit(result, *, output_json: str | None, output_dir: str | None, to_stderr: bool, db: str) -> None:
    """Print the verdict table, warnings, losslessness and goodput (``--goodput``); write
    verdict.json and the report."""
    import json

    from rich.console import Console

    from specgauge.report.html import write_report
    from specgauge.report.report_data import report_from_compare
    from specgauge.report.verdict_table import verdict_renderable

    console = Console(stderr=to_stderr, width=None if sys.stderr.isatty() else 160)
    report = report_from_compare(result)
    console.print(verdict_renderable(report))
    for warning in result.health:
        console.print(f"warning: {warning.message}", style="yellow")
    from specgauge.report.report_text import goodput_lines
    from specgauge.report.terminal import comparison_notes
    from specgauge.store import Store

    with Store.open(db, create=False) as store:   # prompts left out for a context, templates, errors by class
        for line in comparison_notes(store, result.stages):
            console.print(line, style="red" if line.startswith("errors") else None, soft_wrap=True, markup=False,
                          highlight=False)
    for arm in report.arms:   # what limited a point besides its setting (analysis/saturation.py)
        for point in arm.points:
            for load_warning in point.load_warnings:
                console.print(f"warning: {arm.label} c={point.concurrency}: {load_warning}", style="yellow")
    lossless = result.losslessness
    if lossless.checked:
        console.print(f"losslessness (temperature 0, text-exact): {lossless.mismatches} of {lossless.compared} "
                      f"outputs differ" + (f"; first at character {lossless.examples[0].first_difference} of "
                                           f"prompt {lossless.examples[0].prompt_index}" if lossless.examples else ""))
    for line in goodput_lines(result.goodput):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    document = json.dumps(result.model_dump(mode="json"), indent=2) + "\n"
    console.print(f"stored as comparison c{result.comparison_id} in {db} "
                  f"(specgauge report c{result.comparison_id} --db {db} regenerates the report)")
    if output_dir:
        files = write_report(result, Path(output_dir))
        console.print(f"wrote {files.html} and {files.json}")
    if output_json:
        _write_text(output_json, document)


@click.command("compare", cls=PeerFlagsCommand)
@_arm_options
@_profile_options
@click.option("--api", type=click.Choice(API_NAMES), default="openai-chat", show_default=True)
@click.option("--domains", default="coding,encyclopedic", show_default=True,
              help="built-in domain suites for single stream (ignored with --suite)")
@click.option("--suite", help="a suite .jsonl (or name): single stream split by its domain tags, and the sweep")
@click.option("--sweep-suite", help="suite of the sweep (default: --suite, else the first domain)")
@click.option("--concurrency", type=_NumberList(int), default="1,4,16,64", show_default=True)
@click.option("--num-requests", type=click.IntRange(min=1), default=12, show_default=True,
              help="single-stream requests per domain and arm")
@click.option("--sweep-requests", type=click.IntRange(min=1),
              help="requests per sweep point and arm (default max(16, 2 x concurrency))")
@click.option("--max-tokens", type=click.IntRange(min=1), help="output tokens per request (else the suite's)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True,
              help="warm-up requests per point and arm")
@click.option("--rounds", type=click.IntRange(min=1),
              help="repeat every stage N times, arms alternating A B | B A (default 2 with a launch command, else 1)")
@click.option("--model", help="model name (else auto-detected per arm); with --engine, the model the arms serve")
@click.option("--tokenizer", type=TokenizerPath(),
              help="tokenizer.json (or a shipped model's name): tokens per chunk when the server sends no counts; "
                   "its chat template for sglang")
@click.option("--api-key", help="bearer token (else $OPENAI_API_KEY); never stored")
@click.option("--label", default="speculation", show_default=True, help="what the verdict calls the speculative arm")
@click.option("--resamples", type=click.IntRange(min=100), default=2000, show_default=True, help="bootstrap resamples")
@click.option("--start-timeout", type=click.FloatRange(min=0, min_open=True), default=180.0, show_default=True,
              help="seconds a launched arm has to answer")
@click.option("--verify", is_flag=True, help="re-run the sweep on the engine with the threshold applied")
@click.option("--against-baseline", metavar="NAME", help="run baseline NAME's settings against the one arm given "
                                                        "and exit 1 on a significant regression")
@click.option("--allow-suite-change", is_flag=True, help="with --against-baseline: compare even if the suite changed")
@click.option("--allow-server-change", is_flag=True, help="with --against-baseline: compare across server fingerprints")
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="with --against-baseline: a regression must also be at least this far below 1")
@click.option("--output-json", metavar="FILE", help="write verdict.json here ('-' for stdout)")
@click.option("--output-dir", metavar="DIR", help="write report.html, plots and verdict.json here")
@click.option("--db", default="specgauge.db", show_default=True, help="results store (an SQLite file)")
@compare_peer_options
@click.option("--resume", metavar="CID", help="finish comparison CID (e.g. c3) that stopped, with its stored plan")
@placement_options
def compare_command(**options) -> None:
    """Compare a baseline arm with a speculative arm on the same prompts: single stream per domain,
    then a concurrency sweep; speedups with 95% CIs, the crossover and the threshold to disable speculation."""
    import os

    from pydantic import ValidationError

    from specgauge.store import Store

    api_key = options["api_key"] or os.environ.get("OPENAI_API_KEY")
    if options["resume"] is not None:
        _resume(options, api_key)
        return
    if options["against_baseline"]:
        if options["engine"]:
            raise click.UsageError("--against-baseline measures one arm: give it as --baseline*/--speculative*, "
                                   "not --engine")
        from specgauge.load.peer_flags import refuse_workload_flags

        refuse_workload_flags(click.get_current_context(), "--against-baseline takes its prompts and settings "
                                                           "from the stored baseline")
        sys.exit(_against_baseline(options, api_key))
    if options["allow_suite_change"] or options["allow_server_change"]:
        raise click.UsageError("--allow-suite-change / --allow-server-change need --against-baseline")
    profile_arms = _profile_arms(options)
    if profile_arms is not None:
        baseline, speculative = profile_arms
    else:
        baseline = _arm("baseline", options["baseline"], options["baseline_cmd"], options["baseline_engine"])
        speculative = _arm("speculative", options["speculative"], options["speculative_cmd"],
                           options["speculative_engine"])
    if options["verify"]:
        _check_verify(speculative)
    from specgauge.compare.plan import ComparePlan
    from specgauge.suites.registry import load_suite

    peer = compare_result_settings(options)
    try:
        plan = ComparePlan(
            baseline=baseline, speculative=speculative, domains=_names(options["domains"]),
            suite=options["suite"], sweep_suite=options["sweep_suite"], **compare_settings(options),
            num_requests_single=options["num_requests"],
            max_tokens=options["max_tokens"], seed=options["seed"], temperature=options["temperature"],
            warmup=options["warmup"], rounds=options["rounds"],
            model=None if profile_arms is not None else options["model"],   # served names: auto-detected
            tokenizer=options["tokenizer"], label=options["label"],
            bootstrap_resamples=options["resamples"], start_timeout_s=options["start_timeout"], api_key=api_key,
            goodput=peer["goodput"])
    except ValidationError as exc:
        raise _one_line_validation_error(exc) from None
    if options["dataset_name"]:   # one suite file: every stage, both arms, every round
        from specgauge.compare.peer_flags import dataset_suite_file

        suite_file = _run(dataset_suite_file(plan, options, Path(options["db"]).resolve().parent))
        plan = plan.model_copy(update={"suite": suite_file})
    for stage in plan.stages():
        load_suite(stage.suite)   # unknown suites: one line, before any file or process
    from specgauge.load.capacity import check_capacity
    from specgauge.load.plan import PointSpec

    check_capacity(PointSpec(mode="closed", concurrency=c, num_requests=1) for c in plan.concurrency)
    if plan.tokenizer:   # not a tokenizer file: one line before any run is created
        from specgauge.client.tokens import load_tokenizer

        load_tokenizer(plan.tokenizer)
    _check_outputs(options["output_json"], options["output_dir"])
    from specgauge.compare.peer_flags import check_result_paths

    check_result_paths(options["result_filename"])
    if Path(options["db"]).exists():
        Store.open(options["db"], create=False).close()
    result = _run_compare(plan, options["db"], options["verify"], placement=placement_from(options))
    if options["verify"]:
        _say_if_nothing_verified(result)
    from specgauge.compare.peer_flags import emit_result_files

    _emit(result, output_json=options["output_json"], output_dir=options["output_dir"],
          to_stderr=options["output_json"] == "-", db=options["db"])
    emit_result_files(result, options, peer)


def _resume(options: dict, api_key: str | None) -> None:
    """``compare --resume CID``: finish a stopped comparison with its stored plan, then report it."""
    from specgauge.compare.resume import check_resume_options, parse_comparison_id, stored_plan

    check_resume_options(click.get_current_context())
    comparison_id = parse_comparison_id(options["resume"])
    plan = stored_plan(options["db"], comparison_id, api_key)
    if options["verify"]:
        _check_verify(plan.speculative)
    _check_outputs(options["output_json"], options["output_dir"])
    from specgauge.compare.peer_flags import check_result_paths, emit_result_files

    peer = {**compare_result_settings(options), "goodput": plan.goodput}   # the result files' percentiles
    check_result_paths(options["result_filename"])
    result = _run_compare(plan, options["db"], options["verify"], resume_id=comparison_id,
                          placement=placement_from(options))
    if options["verify"]:
        _say_if_nothing_verified(result)
    _emit(result, output_json=options["output_json"], output_dir=options["output_dir"],
          to_stderr=options["output_json"] == "-", db=options["db"])
    emit_result_files(result, options, peer)


def _check_verify(speculative) -> None:
    """``--verify`` re-runs the embedded engine with the threshold: refuse (exit 2) any other arm."""
    from specgauge.compare.verify import require_threshold_flag

    if speculative.kind != "engine":
        raise click.UsageError("--verify re-runs the embedded engine: "
                               "give the speculative arm as --speculative-engine")
    require_threshold_flag()


def _say_if_nothing_verified(result) -> None:
    """One line on stderr when ``--verify`` found no threshold to apply, and why."""
    if result.verification is not None:
        return
    recommendation = result.recommendation
    why = ("speculation never pays (switch it off)" if recommendation.disable_above == 0 else
           "speculation pays at every tested concurrency" if recommendation.confident else
           "no tested concurrency shows a clear loss, so there is no threshold to apply")
    click.echo(f"--verify: nothing to verify: {why}", err=True)


def _run_compare(plan, db: str, verify: bool, *, resume_id: int | None = None, placement=None):
    """Run (or finish) a comparison; a stopped one ends in one line naming the resume command."""
    from specgauge.compare.orchestrate import ComparisonStopped

    try:
        return _run(_compare(plan, db, verify, resume_id=resume_id, placement=placement))
    except ComparisonStopped as stopped:   # an arm's server stopped answering (exit 3), a full store (4)
        raise stopped.with_resume(f"specgauge compare --resume c{stopped.comparison_id} --db {db}") from None


async def _compare(plan, db: str, verify: bool, *, resume_id: int | None = None, placement=None):
    from specgauge.compare.orchestrate import run_comparison
    from specgauge.load.workers.split import Placement
    from specgauge.compare.progress import ComparisonProgress
    from specgauge.compare.verify import verify_threshold
    from specgauge.store import Store

    from specgauge.client.endpoint import Endpoint
    from specgauge.client.probe import check_reachable

    for arm in (plan.baseline, plan.speculative):   # a dead URL: one line, before the store file is made
        if arm.kind == "url":
            await check_reachable(Endpoint(base_url=arm.value.rstrip("/"), api=plan.api, api_key=plan.api_key))
    progress = ComparisonProgress()
    try:
        with Store.open(db) as store:
            result = await run_comparison(plan, store, progress, resume_id=resume_id, placement=placement or Placement(),
                                          on_stage=lambda text: progress.console.print(f"[bold]{text}"))
            if verify:
                result = await verify_threshold(plan, store, result, progress,
                                                on_stage=lambda text: progress.console.print(f"[bold]{text}"))
    finally:
        progress.close()
    return result


def _against_baseline(options: dict, api_key: str | None) -> int:
    from specgauge.compare.regression import run_against_baseline
    from specgauge.report.terminal import RichProgress   # one run: the bench display
    from specgauge.store import Store

    arms = [a for a in (_arm("baseline", options["baseline"], options["baseline_cmd"], options["baseline_engine"],
                             required=False),
                        _arm("speculative", options["speculative"], options["speculative_cmd"],
                             options["speculative_engine"], required=False)) if a is not None]
    if len(arms) != 1:
        raise click.UsageError("--against-baseline measures one arm now: "
                               "give exactly one of --baseline*/--speculative*")
    with Store.open(options["db"], create=False) as store:
        store.get_baseline(options["against_baseline"])   # unknown name: one line, before anything starts

        async def work():
            return await run_against_baseline(
                store, options["against_baseline"], arms[0].spec(), allow_suite_change=options["allow_suite_change"],
                allow_server_change=options["allow_server_change"], api_key=api_key,
                progress=RichProgress(db=options["db"]),
                start_timeout_s=options["start_timeout"], seed=options["seed"], resamples=options["resamples"],
                min_effect=options["min_effect"], placement=placement_from(options))

        report = _run(work())
    _print_regressions(report, to_stderr=options["output_json"] == "-")
    if options["output_json"]:
        import dataclasses
        import json

        document = {"baseline": report.baseline_name, "baseline_run_id": report.baseline_run_id,
                    "new_run_id": report.new_run_id, "regressed": report.regressed,
                    "suite_diff": report.suite_diff.summary(), "server_changes": list(report.server_changes),
                    "drift": report.drift.model_dump() if report.drift else None,
                    "points": [dict(dataclasses.asdict(p), verdict=p.verdict) for p in report.points]}
        _write_text(options["output_json"], json.dumps(document, indent=2, default=str) + "\n")
    return EXIT_REGRESSION if report.regressed else 0


def _print_regressions(report, *, to_stderr: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=to_stderr, width=None if sys.stdout.isatty() else 160)
    if not report.suite_diff.same:
        console.print(f"suite changed: {report.suite_diff.summary()}", style="yellow")
    for change in report.server_changes:
        console.print(f"server changed (--allow-server-change): {change}", style="yellow")
    table = Table(title=f"run {report.new_run_id} against baseline {report.baseline_name!r} (run "
                        f"{report.baseline_run_id}); ratios new/baseline, 95% CI", title_justify="left")
    for header in ("point", "baseline tok/s", "new tok/s", "throughput ratio", "per-request tok/s ratio", "verdict"):
        table.add_column(header, justify="left" if header in ("point", "verdict") else "right")

    def ratio(ci) -> str:
        if ci.ratio is None:
            return "-"
        interval = f" [{ci.ci_low:.3f}, {ci.ci_high:.3f}]" if ci.ci_low is not None else ""
        return f"{ci.ratio:.3f}{interval}"

    for p in report.points:
        style = "bold red" if p.change < 0 else ("green" if p.change > 0 else "")
        table.add_row(p.label, "-" if p.baseline_tok_s is None else f"{p.baseline_tok_s:,.1f}",
                      "-" if p.new_tok_s is None else f"{p.new_tok_s:,.1f}", ratio(p.throughput),
                      ratio(p.request_tok_s), f"[{style}]{p.verdict}" if style else p.verdict)
    console.print(table)
    drift = report.drift
    if drift is not None and drift.sigma is not None:
        console.print(f"intervals include the machine drift this run measured: ±{drift.per_measurement:.1%} between "
                      f"the earlier and later halves of its points ({drift.repeats} point(s))")
    within = [p.label for p in report.points if p.within_drift]
    if within:
        console.print(f"the machine drift this run measured is larger than the change at {', '.join(within)}: "
                      f"not called a regression (a quieter machine or more requests would settle it)", style="yellow")
    regressions = [p.label for p in report.points if p.change < 0]
    console.print(f"significant regression at {', '.join(regressions)}" if regressions
                  else "no significant regression", style="bold red" if regressions else "bold green")


@click.group("baseline")
def baseline_group() -> None:
    """Named baselines: stored runs that later runs are checked against (compare --against-baseline)."""


@baseline_group.command("set")
@click.argument("run_id", type=int)
@click.option("--name", required=True, help="the baseline's name (an existing name is moved to RUN_ID)")
@click.option("--db", default="specgauge.db", show_default=True)
def baseline_set(run_id: int, name: str, db: str) -> None:
    """Name stored run RUN_ID (see 'specgauge runs') as baseline NAME."""
    from specgauge.store import Store

    if not name.strip():
        raise click.UsageError("--name must not be empty")
    with Store.open(db, create=False) as store:
        run = store.get_run(run_id)
        if run.status != "done":
            raise UserError(f"run {run_id} is {run.status}; only a finished run can be a baseline")
        store.set_baseline(name, run_id)
    click.echo(f"baseline {name!r} = run {run_id} ({run.url}, suite {run.suite_name}@{run.suite_version} "
               f"hash {run.suite_hash[:12]})")


@baseline_group.command("list")
@click.option("--db", default="specgauge.db", show_default=True)
def baseline_list(db: str) -> None:
    """The named baselines with their runs."""
    from rich.console import Console
    from rich.table import Table

    from specgauge.store import Store

    with Store.open(db, create=False) as store:
        rows = [(b, store.get_run(b.run_id)) for b in store.list_baselines()]
    table = Table(title="baselines", title_justify="left")
    for header in ("name", "run", "set at (UTC)", "url", "model", "suite", "suite hash"):
        table.add_column(header)
    for baseline, run in rows:
        table.add_row(baseline.name, str(run.id), baseline.created_at.replace("+00:00", ""), run.url, run.model or "-",
                      f"{run.suite_name}@{run.suite_version}", run.suite_hash[:12])
    Console(width=None if sys.stdout.isatty() else 160).print(table)


@click.command("demo")
@click.option("--output-dir", default="specgauge-demo", show_default=True, help="where report.html and verdict.json go")
@click.option("--db", help="results store (default: DIR/specgauge.db)")
@click.option("--quick", is_flag=True, help="fewer requests and a shorter sweep (a smoke test, not a verdict)")
@click.option("--rounds", type=click.IntRange(min=1), default=1, show_default=True,
              help="repeat the whole comparison (more pairs; the intervals include the drift between rounds)")
@click.option("--model", "model_name", default=None, metavar="NAME",
              help="shipped model both arms serve (see 'specgauge models'; default: serve's default)")
def demo_command(output_dir: str, db: str | None, quick: bool, rounds: int, model_name: str | None) -> None:
    """Speculation off vs EAGLE-3 on the embedded engine: single stream on coding and encyclopedic,
    a concurrency sweep, the verdict, report.html and verdict.json in DIR."""
    from specgauge.compare.demo import run_demo
    from specgauge.shipped_models import DEFAULT, get_shipped

    try:
        model = get_shipped(model_name) if model_name else DEFAULT
    except KeyError as exc:
        raise click.BadParameter(exc.args[0], param_hint="'--model'") from None
    store_path = Path(db) if db else Path(output_dir) / "specgauge.db"
    result = _run(run_demo(Path(output_dir), db=store_path, quick=quick, rounds=rounds, model=model))
    _emit(result, output_json=None, output_dir=output_dir, to_stderr=False, db=str(store_path))


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    app.add_command(compare_command)
    app.add_command(baseline_group)
    app.add_command(demo_command)
