"""``specgauge compare``: a baseline arm against a speculative arm on the same prompts (docs/compare.md).

Heavy imports stay inside the command body.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from specgauge.cli_options import (POSITIVE_INTS, POSITIVE_NUMBERS, CommaList, db_option, one_line_validation_error,
                                   request_count_options, sampling_options, secret_options, think_time_options,
                                   verify_option, warmup_option)
from specgauge.load.length_band_option import context_lengths_option
from specgauge.compare.plan import DISTRIBUTION_PROMPTS
from specgauge.client.endpoint import API_NAMES
from specgauge.compare.arm_options import (arm_from, arm_labels, arm_options, profile_arms, profile_options,
                                           speculative_arms)
from specgauge.load.peer_flags import PeerFlagsCommand, compare_peer_options, compare_result_settings, compare_settings
from specgauge.load.trace_options import trace_config, trace_options
from specgauge.load.workers.options import placement_from, placement_options
from specgauge.tokenizer_option import TokenizerPath

DEFAULT_SINGLE_STREAM_REQUESTS = 12
# --samples-per-prompt's suggestion: the fault of benchmarks/distribution_check.py (accept-bias=1.5) is
# flagged at it on the shipped 8M model, and a correct engine passes (docs/compare.md gives the rates)
DEFAULT_SAMPLES_PER_PROMPT = 400


def run(work):
    """Run a coroutine; SIGINT or SIGTERM cancels it, so launched arms are stopped on the way out."""
    from specgauge.load.stop_signals import run_stoppable

    return run_stoppable(work)


@click.command("compare", cls=PeerFlagsCommand)
@arm_options
@profile_options
@click.option("--api", type=click.Choice(API_NAMES), default="openai-chat", show_default=True)
@click.option("--domains", type=CommaList(str, allow_empty=True), default="coding,encyclopedic", show_default=True,
              help="built-in domain suites for single stream (ignored with --suite)")
@click.option("--suite", help="a suite .jsonl (or name): single stream split by its domain tags (--single-stream-"
                               "requests per tag), and the sweep")
@click.option("--sweep-suite", help="suite of the sweep (default: --suite, else the first domain)")
@click.option("--concurrency", type=POSITIVE_INTS, default="1,4,16,64", show_default=True)
@click.option("--rates", type=POSITIVE_NUMBERS, metavar="R,...",
              help="open-loop points too, requests/s (Poisson arrivals, the same for both arms): paired TTFT, TPOT "
                   "and E2E ratios per rate")
@request_count_options(min_requests=16, requests_per_user=2, scope="point and arm (single stream and sweep)")
@click.option("--single-stream-requests", type=click.IntRange(min=1),
              help=f"single-stream requests per domain and arm (default: --num-requests, else "
                   f"{DEFAULT_SINGLE_STREAM_REQUESTS})")
@click.option("--sweep-requests", type=click.IntRange(min=1), hidden=True,
              help="old spelling: requests per sweep point and arm only")
@click.option("--max-tokens", type=click.IntRange(min=1), help="output tokens per request (else the suite's)")
@click.option("--seed", type=int, default=0, show_default=True,
              help="prompt order and (temperature > 0) each request's seed")
@sampling_options
@click.option("--temperatures", type=CommaList(float, low=0, unique_sorted=True), metavar="T,...",
              help="single stream at each of these temperatures too: speedup and acceptance per domain x temperature "
                   "(the sweep and the recommendation run at --temperature)")
@click.option("--samples-per-prompt", type=click.IntRange(min=2), metavar="N",
              help=f"with --temperature > 0: sample each of {DISTRIBUTION_PROMPTS} prompts N times per arm (distinct "
                   f"seeds) and test whether speculation changes the output distribution (losslessness.distribution); "
                   f"{DEFAULT_SAMPLES_PER_PROMPT} is a good start (docs/compare.md)")
@warmup_option
@think_time_options
@context_lengths_option("run the whole comparison once per band of prompt lengths (tokens as served), e.g. "
                        "1-128,129-384: speedup, crossover and schedule per band")
@click.option("--rounds", type=click.IntRange(min=1),
              help="repeat every stage N times, arms alternating A B | B A (default 2 with a launch command, else 1)")
@click.option("--model", help="model name (else auto-detected per arm); with --engine, the model the arms serve")
@click.option("--tokenizer", type=TokenizerPath(),
              help="tokenizer.json (or a shipped model's name): tokens per chunk when the server sends no counts; "
                   "its chat template for sglang")
@secret_options
@click.option("--label", default="speculation", show_default=True, help="what the verdict calls the speculative arm")
@click.option("--resamples", type=click.IntRange(min=100), default=2000, show_default=True, help="bootstrap resamples")
@click.option("--start-timeout", type=click.FloatRange(min=0, min_open=True), default=180.0, show_default=True,
              help="seconds a launched arm has to answer")
@verify_option("re-run the sweep on the embedded engine with the recommended threshold applied")
@click.option("--against-baseline", metavar="NAME", help="run baseline NAME's settings against the one arm given "
                                                        "and exit 1 on a significant regression")
@click.option("--allow-suite-change", is_flag=True, help="with --against-baseline: compare even if the suite changed")
@click.option("--allow-server-change", is_flag=True, help="with --against-baseline: compare across server fingerprints")
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="with --against-baseline: a regression must also be at least this far below 1")
@click.option("--output-json", metavar="FILE", help="write verdict.json here ('-' for stdout)")
@click.option("--output-dir", metavar="DIR", help="write report.html, plots and verdict.json here")
@db_option
@compare_peer_options
@click.option("--resume", metavar="CID", help="finish comparison CID (e.g. c3) that stopped, with its stored plan")
@trace_options
@click.option("--trace-bin", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              metavar="S", help="with --trace: the window of trace seconds each ratio is read over")
@placement_options
def compare_command(**options) -> None:
    """Compare a baseline arm with a speculative arm on the same prompts: single stream per domain,
    then a concurrency sweep; speedups with 95% CIs, the crossover and the threshold to disable speculation.
    With --trace, both arms replay the trace instead and the TPOT ratio is read along it, per window."""
    if options["resume"] is not None:
        _resume(options)
        return
    if options["against_baseline"]:
        if options["engine"]:
            raise click.UsageError("--against-baseline measures one arm: give it as --baseline*/--speculative*, "
                                   "not --engine")
        from specgauge.compare.against_baseline import run_against_baseline_command
        from specgauge.load.peer_flags import refuse_workload_flags

        refuse_workload_flags(click.get_current_context(), "--against-baseline takes its prompts and settings "
                                                           "from the stored baseline")
        sys.exit(run_against_baseline_command(options, run))
    if options["allow_suite_change"] or options["allow_server_change"]:
        raise click.UsageError("--allow-suite-change / --allow-server-change need --against-baseline")
    if options["context_lengths"]:   # the comparison once per context band (compare/context_bands.py)
        from specgauge.compare.context_bands import finish_bands

        finish_bands(_new_plan(options), options, _run_compare)
        return
    _finish(_new_plan(options), options)


def _new_plan(options: dict):
    """The plan of a new comparison, every input checked before any file or process is made."""
    from pydantic import ValidationError

    from specgauge.compare.plan import ComparePlan
    from specgauge.suites.registry import load_suite

    arms = profile_arms(options)
    if arms is not None:
        (baseline, speculative, *more), labels = arms
    else:
        baseline, (speculative, *more) = arm_from(options, "baseline"), speculative_arms(options)
        labels = arm_labels([speculative, *more], options["arm_labels"]) if more else ()
        if options["arm_labels"] and not more:
            raise click.UsageError("--arm-label names each of several speculative arms; with one, use --label")
    if more:
        _refuse_with_several_arms(options)
    if not more:
        labels = ()
    if options["speculative_arm_config"] is not None and speculative.kind != "url":
        raise click.UsageError("--speculative-arm-config declares what a URL arm runs: a launched arm's command "
                               "says it already (give the speculative arm as --speculative URL)")
    count = options["num_requests"]
    try:
        plan = ComparePlan(
            baseline=baseline, speculative=speculative, more_speculative=tuple(more), arm_labels=labels,
            domains=options["domains"],
            suite=options["suite"], sweep_suite=options["sweep_suite"], **compare_settings(options),
            num_requests_single=options["single_stream_requests"] or count or DEFAULT_SINGLE_STREAM_REQUESTS,
            num_requests_sweep=options["sweep_requests"] or count, sweep_requests_per_user=options["requests_per_user"],
            sweep_min_requests=options["min_requests"],
            max_tokens=options["max_tokens"], seed=options["seed"], temperature=options["temperature"],
            temperatures=options["temperatures"] or (), speculative_arm_config=options["speculative_arm_config"],
            top_p=options["top_p"], top_k=options["top_k"], samples_per_prompt=options["samples_per_prompt"],
            warmup=options["warmup"], rounds=options["rounds"],
            model=None if arms is not None else options["model"],   # served names: auto-detected
            tokenizer=options["tokenizer"], label=options["label"],
            bootstrap_resamples=options["resamples"], start_timeout_s=options["start_timeout"],
            api_key=options["api_key"], headers=options["headers"], insecure=options["insecure"],
            goodput=compare_result_settings(options)["goodput"],
            think_time_ms=options["think_time_ms"], think_time_distribution=options["think_time_distribution"],
            trace=trace_config(options), trace_bin_s=options["trace_bin"], rates=options["rates"] or ())
    except ValidationError as exc:
        raise one_line_validation_error(exc) from None
    if plan.trace is not None:   # a bad trace line or text suite: one line, before any arm starts
        from specgauge.load.traces.check import check_trace

        check_trace(plan.trace)
    if options["dataset_name"]:   # one suite file: every stage, both arms, every round
        from specgauge.compare.peer_flags import dataset_suite_file

        suite_file = run(dataset_suite_file(plan, options, Path(options["db"]).resolve().parent))
        plan = plan.model_copy(update={"suite": suite_file})
    if plan.suite is not None:   # N single-stream requests per domain tag, shortfalls named now
        plan = _per_domain_single_stream(plan, Path(options["db"]).resolve().parent)
    for stage in plan.stages():
        load_suite(stage.suite)   # unknown suites: one line, before any file or process
    if plan.samples_per_prompt is not None:
        from specgauge.compare.distribution_setup import distribution_suite_file

        plan = plan.model_copy(update={"distribution_suite": distribution_suite_file(
            plan.first_suite, Path(options["db"]).resolve().parent)})
    from specgauge.load.capacity import check_capacity
    from specgauge.load.plan import PointSpec

    check_capacity(PointSpec(mode="closed", concurrency=c, num_requests=1) for c in plan.concurrency)
    if plan.tokenizer:   # not a tokenizer file: one line before any run is created
        from specgauge.client.tokens import load_tokenizer

        load_tokenizer(plan.tokenizer)
    if Path(options["db"]).exists():
        from specgauge.store import Store

        Store.open(options["db"], create=False).close()
    return plan


def _refuse_with_several_arms(options: dict) -> None:
    """The options a comparison of several speculative arms does not take: one line, exit 2."""
    for name, flag in (("trace", "--trace"), ("verify", "--verify"), ("context_lengths", "--context-lengths"),
                       ("speculative_arm_config", "--speculative-arm-config"), ("label", "--label"),
                       ("save_result", "--save-result"), ("result_filename", "--result-filename")):
        value = options.get(name)
        if name == "label" and value == "speculation":   # the default: each arm has its own label
            continue
        if value not in (None, False, (), ""):
            why = " (each arm is labelled by --arm-label or its method)" if name == "label" else ""
            raise click.UsageError(f"{flag} takes one speculative arm; with several, leave it out{why}")


def _per_domain_single_stream(plan, work_dir: Path):
    """``plan`` with its single stream on up to ``num_requests_single`` prompts per domain of
    ``--suite`` (compare/per_domain.py); a domain with fewer is named on stderr."""
    from specgauge.compare.per_domain import per_domain_suite_file

    chosen = per_domain_suite_file(plan.suite, plan.num_requests_single, plan.seed, work_dir)
    for line in chosen.shortfalls:
        click.echo(f"note: {line}", err=True)
    return plan.model_copy(update={"single_suite": chosen.path, "single_requests": chosen.num_requests,
                                   "suite_layout": chosen.layout})


def _resume(options: dict) -> None:
    """``compare --resume CID``: finish a stopped comparison with its stored plan, then report it."""
    from specgauge.compare.resume import check_resume_options, parse_comparison_id, stored_plan

    check_resume_options(click.get_current_context())
    comparison_id = parse_comparison_id(options["resume"])
    plan = stored_plan(options["db"], comparison_id, options["api_key"], options["headers"])
    _finish(plan, options, resume_id=comparison_id)


def _finish(plan, options: dict, *, resume_id: int | None = None) -> None:
    """Run (or finish) ``plan``, ``--verify`` it, print and write the results. A resumed comparison's
    result files take their goodput SLOs from the stored plan."""
    from specgauge.compare.output import check_outputs, emit
    from specgauge.compare.peer_flags import check_result_paths, emit_result_files

    several = bool(plan.more_speculative)
    verify = False if several else _wants_verify(options["verify"], plan.speculative)
    check_outputs(options["output_json"], options["output_dir"])
    peer = {**compare_result_settings(options), "goodput": plan.goodput}
    check_result_paths(options["result_filename"])
    result = _run_compare(plan, options["db"], verify, resume_id=resume_id, placement=placement_from(options))
    if several:   # one section per arm, then the choice between them (compare/multi_output.py)
        from specgauge.compare.multi_output import emit_arms

        emit_arms(result, output_json=options["output_json"], output_dir=options["output_dir"], db=options["db"])
        return
    if options["verify"]:
        _say_if_nothing_verified(result)
    emit(result, output_json=options["output_json"], output_dir=options["output_dir"], db=options["db"])
    emit_result_files(result, options, peer)


def _wants_verify(asked: bool | None, speculative) -> bool:
    """``--verify`` re-runs the embedded engine with the threshold: refused (exit 2) for any other
    arm; left out, on when the speculative arm is the embedded engine with a threshold flag."""
    from specgauge.compare.verify import has_threshold_flag, require_threshold_flag

    if asked is None:
        return speculative.kind == "engine" and has_threshold_flag()
    if asked and speculative.kind != "engine":
        raise click.UsageError("--verify re-runs the embedded engine: "
                               "give the speculative arm as --speculative-engine")
    if asked:
        require_threshold_flag()
    return asked


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
        return run(_compare(plan, db, verify, resume_id=resume_id, placement=placement))
    except ComparisonStopped as stopped:   # an arm's server stopped answering (exit 3), a full store (4)
        raise stopped.with_resume(f"specgauge compare --resume c{stopped.comparison_id} --db {db}") from None


async def _compare(plan, db: str, verify: bool, *, resume_id: int | None = None, placement=None):
    from specgauge.client.endpoint import Endpoint
    from specgauge.client.probe import check_reachable
    from specgauge.compare.orchestrate import run_comparison
    from specgauge.compare.progress import ComparisonProgress
    from specgauge.compare.verify import verify_threshold
    from specgauge.load.workers.split import Placement
    from specgauge.store import Store

    for arm in (plan.baseline, plan.speculative):   # a dead URL: one line, before the store file is made
        if arm.kind == "url":
            await check_reachable(Endpoint(base_url=arm.value.rstrip("/"), api=plan.api, api_key=plan.api_key,
                                           headers=plan.headers, insecure=plan.insecure))
    progress = ComparisonProgress()
    try:
        with Store.open(db) as store:
            result = await run_comparison(plan, store, progress, resume_id=resume_id,
                                          placement=placement or Placement(),
                                          on_stage=lambda text: progress.console.print(f"[bold]{text}"))
            if verify:
                result = await verify_threshold(plan, store, result, progress,
                                                on_stage=lambda text: progress.console.print(f"[bold]{text}"))
    finally:
        progress.close()
    return result
