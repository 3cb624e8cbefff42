"""CLI of the tune part: ``specgauge tune`` (docs/tune.md). Heavy imports stay inside the command body."""

from __future__ import annotations

import click

from specgauge.cli_options import (CommaList, db_option, request_count_options, sampling_options, secret_options,
                                   think_time_options,
                                   verify_option, warmup_option)
from specgauge.client.endpoint import API_NAMES
from specgauge.tokenizer_option import TokenizerPath
from specgauge.load.length_band_option import context_lengths_option

DEFAULT_DEPTHS = "0,1,2,3,5"


def _url_arms(ctx, param, values):
    """``K=URL`` (repeatable) → {K: URL}; ``schedule=URL`` (a server running the schedule, for
    --verify) under the key ``"schedule"``."""
    arms: dict = {}
    for value in values:
        depth, sep, url = value.partition("=")
        key = depth.strip()
        if not sep or not (key.isdigit() or key == "schedule"):
            raise click.BadParameter(f"{value!r}: must be K=URL or schedule=URL, e.g. 3=http://127.0.0.1:8003",
                                     ctx=ctx, param=param)
        key = int(key) if key.isdigit() else key
        if key in arms:
            raise click.BadParameter(f"{'depth ' if isinstance(key, int) else ''}{key} is given twice",
                                     ctx=ctx, param=param)
        arms[key] = url.strip()
    return arms


@click.command("tune")
@click.option("--depths", type=CommaList(int, low=0, unique_sorted=True), default=DEFAULT_DEPTHS, show_default=True,
              help="candidate draft depths (0 = no speculation)")
@click.option("--concurrency", type=CommaList(int, low=1, unique_sorted=True), default="1,4,16,64",
              show_default=True, help="concurrency levels measured")
@click.option("--speculative-engine", "engine_args", default="", metavar="ARGS",
              help="arms on the embedded engine: 'specgauge serve ARGS' plus each depth's flags (the default arms)")
@click.option("--engine-args", "engine_args_old", metavar="ARGS", hidden=True,
              help="the old name of --speculative-engine (compare's name for the embedded engine's arguments)")
@click.option("--algorithm", type=click.Choice(["EAGLE3", "NGRAM"], case_sensitive=False), default="EAGLE3",
              show_default=True, help="the embedded engine's drafter")
@click.option("--launch-template", metavar="CMD", help="arms launched by a command with {k} and {port} "
                                                       "(vLLM, SGLang), one at a time")
@click.option("--launch-template-off", metavar="CMD", help="the command for depth 0 (default: the template with k=0)")
@click.option("--launch-template-schedule", metavar="CMD",
              help="--verify of template arms: the command running the schedule, with {port}, {schedule} (its JSON "
                   "list) and {k} (its largest K); default for a vLLM template: the template with "
                   "\"num_speculative_tokens_per_batch_size\": {schedule} added to its --speculative-config")
@click.option("--url", "urls", multiple=True, callback=_url_arms, metavar="K=URL",
              help="an already running server of depth K (repeat for every depth); schedule=URL: one running the "
                   "schedule, for --verify")
@context_lengths_option("also measure at each prompt-length band (inclusive prompt tokens as served, e.g. "
                        "1-128,129-384): the suite's prompts of that length, else length-exact synthetic ones; the "
                        "schedule gets vLLM's 5-item context form", name="bands")
@click.option("--tokenizer", metavar="PATH", type=TokenizerPath(),
              help="tokenizer.json (or a shipped model's name) counting prompt tokens for --context-lengths "
                   "(default: the server's own)")
@click.option("--api", type=click.Choice(API_NAMES), default="openai-chat", show_default=True)
@click.option("--suite", default="mixed", show_default=True, help="prompt suite (name or .jsonl)")
@request_count_options(min_requests=8, requests_per_user=2, scope="point (each depth, each round)")
@click.option("--max-tokens", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@sampling_options
@warmup_option
@think_time_options
@click.option("--min-rounds", type=click.IntRange(min=1), default=2, show_default=True,
              help="rounds of every cell before measuring only where the choice is uncertain")
@click.option("--max-rounds", type=click.IntRange(min=1), default=4, show_default=True)
@verify_option("run the schedule beside the best fixed depth and no speculation")
@click.option("--verify-rounds", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--max-batch-size", type=click.IntRange(min=1), default=256, show_default=True,
              help="the last schedule range's end (vLLM --max-num-seqs)")
@click.option("--model", help="model name (else auto-detected)")
@secret_options
@click.option("--start-timeout", type=click.FloatRange(min=0, min_open=True), default=180.0, show_default=True)
@click.option("--output-json", metavar="FILE", help="write the result as JSON here ('-' for stdout)")
@db_option
def tune_command(**options) -> None:
    """Measure aggregate throughput per draft depth at each concurrency, choose the depth per level
    (the smallest within the noise of the best), and print the schedule for vLLM, SGLang and the
    embedded engine, verified."""
    from specgauge.tune.arms import check_schedule_template, engine_arm, template_arm, url_arm, vllm_schedule_template

    old_name = options.pop("engine_args_old")
    if old_name is not None:
        if options["engine_args"]:
            raise click.UsageError("give --speculative-engine once (--engine-args is its old name)")
        options["engine_args"] = old_name
    depths, urls = options["depths"], dict(options["urls"])
    schedule_url = urls.pop("schedule", None)
    if schedule_url is not None and not urls:
        raise click.UsageError("--url schedule=URL verifies URL arms: give the depths' servers too (--url K=URL)")
    sources = [name for name, given in (("--url", bool(urls)), ("--launch-template", options["launch_template"]),
                                        ("--speculative-engine", options["engine_args"])) if given]
    if len(sources) > 1:
        raise click.UsageError(f"give only one kind of arm: {', '.join(sources)}")
    for option in ("launch_template_off", "launch_template_schedule"):
        if options[option] and not options["launch_template"]:
            raise click.UsageError(f"--{option.replace('_', '-')} needs --launch-template")
    if options["min_rounds"] > options["max_rounds"]:
        raise click.UsageError(f"--min-rounds {options['min_rounds']} exceeds --max-rounds {options['max_rounds']}")
    algorithm = options["algorithm"].upper()
    schedule_template = None
    if urls:
        arms = tuple(url_arm(d, u) for d, u in sorted(urls.items()))
        if schedule_url is not None:
            url_arm(0, schedule_url)   # the same URL check, one line
    elif options["launch_template"]:
        if "{k}" not in options["launch_template"]:
            raise click.UsageError("--launch-template must contain {k} (the draft depth)")
        arms = tuple(template_arm(d, options["launch_template"], options["launch_template_off"]) for d in depths)
        schedule_template = options["launch_template_schedule"] or vllm_schedule_template(options["launch_template"])
        if schedule_template is not None:
            check_schedule_template(schedule_template)
    else:
        arms = tuple(engine_arm(d, options["engine_args"], algorithm) for d in depths)
    if len(arms) < 2:
        raise click.UsageError("need at least two depths to choose between")
    if 0 not in {arm.depth for arm in arms}:
        raise click.UsageError("the depths must include 0 (no speculation): the schedule must never lose to it")
    verify = options["verify"]
    can_verify = arms[0].kind == "engine" or schedule_template is not None or schedule_url is not None
    if verify is None:
        verify = True   # where nothing can run the schedule, the tune says so in one line
    elif verify and not can_verify:
        raise click.UsageError("--verify needs an arm running the schedule: " + (
            "--url schedule=URL (a server running it)" if urls else
            "--launch-template-schedule CMD (with {port}, {schedule} and {k})"))
    output_json = options["output_json"]
    from specgauge.output_paths import check_output_file

    check_output_file(output_json, "--output-json")

    from specgauge.load.stop_signals import run_stoppable
    from specgauge.store import Store
    from specgauge.suites.registry import load_suite
    from specgauge.tune.run import TunePlan, run_tune

    load_suite(options["suite"])  # an unknown suite: one line, before any process starts
    plan = TunePlan(arms=arms, concurrency=options["concurrency"], suite=options["suite"], api=options["api"],
                    num_requests=options["num_requests"], requests_per_user=options["requests_per_user"],
                    min_requests=options["min_requests"], api_key=options["api_key"], headers=options["headers"],
                    insecure=options["insecure"],
                    max_tokens=options["max_tokens"], seed=options["seed"], warmup=options["warmup"],
                    temperature=options["temperature"], top_p=options["top_p"], top_k=options["top_k"],
                    min_rounds=options["min_rounds"], max_rounds=options["max_rounds"], verify=verify,
                    verify_rounds=options["verify_rounds"], engine_args=options["engine_args"], algorithm=algorithm,
                    max_batch_size=options["max_batch_size"], start_timeout_s=options["start_timeout"],
                    model=options["model"], bands=options["bands"] or (), tokenizer=options["tokenizer"],
                    schedule_template=schedule_template, schedule_url=schedule_url,
                    think_time_ms=options["think_time_ms"], think_time_distribution=options["think_time_distribution"])
    say = lambda text: click.echo(f"tune: {text}", err=True)  # noqa: E731
    from specgauge.report.tune_report import load_tune_report
    from specgauge.tune.stored import plan_document, store_tune, tune_stopped_marked

    with Store.open(options["db"]) as store:
        tune_id = store.create_tune(plan_document(plan))
        with tune_stopped_marked(store, tune_id):
            # SIGINT/SIGTERM cancel the tune: every server it started is stopped on the way out (exit 130/143)
            result = run_stoppable(run_tune(plan, store, say))
        settings = _settings(result, arms, algorithm)
        document = store_tune(store, tune_id, result, settings)
        stored = load_tune_report(store, tune_id)   # what `specgauge report tN` reads
    _emit(result, settings, document, stored, output_json, options["db"])


def _settings(result, arms, algorithm: str):
    from specgauge.analysis.results import SpeculationSetup
    from specgauge.tune.settings import schedule_settings

    kind = arms[0].kind
    setup = SpeculationSetup(engine="specgauge", method=algorithm) if kind == "engine" else _template_setup(arms)
    return schedule_settings(result.schedule, setup)


def _template_setup(arms):
    """What launched arms' own commands state (SGLang's --speculative-algorithm, --device ...): the
    first arm that states a method; unknown otherwise."""
    import shlex

    from specgauge.analysis.results import SpeculationSetup
    from specgauge.compare.speculation_setup import from_arguments

    for arm in arms:
        try:
            stated, _config = from_arguments(shlex.split(str(arm.value)))
        except ValueError:
            continue
        if stated.method:
            return stated
    return SpeculationSetup()


def _emit(result, settings, document: dict, stored, output_json: str | None, db: str) -> None:
    """The result on stdout (on stderr when the JSON document goes to stdout), then the JSON."""
    import json

    from specgauge.cli_options import console, write_text
    from specgauge.tune.render import print_result

    tail = []
    run_ids = sorted(p.run_id for p in (*result.points, *result.verify_points))
    if run_ids:
        tail.append(f"every point is a bench run in {db}: runs {run_ids[0]}-{run_ids[-1]} "
                    f"(specgauge show RUN_ID --db {db})")
    tail.append(f"stored as tune t{document['tune_id']}: specgauge report t{document['tune_id']} --db {db}")
    print_result(console(stderr=output_json == "-"), result, settings, stored, tail)
    if output_json:
        write_text(output_json, json.dumps(document, indent=2) + "\n")


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    app.add_command(tune_command)
