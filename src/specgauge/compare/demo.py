"""``specgauge demo``: speculation off vs EAGLE-3 on the embedded engine and the shipped models.

Single stream on the ``coding`` and ``encyclopedic`` suites and on prompts held out from the
drafter's own training, in its training mix (:mod:`specgauge.compare.held_out`; the default model's
drafter keeps its training data in this repository), a line saying whether those representative
prompts change the answer, then a concurrency sweep reaching far enough to show where the baseline
overtakes speculation; the verdict, ``report.html`` and ``verdict.json``. Sized to finish in a few
minutes on a 2-core CPU (docs/compare.md has the measured time). Nothing is faked: when this build
has no EAGLE-3 arm (no drafter shipped, or
``serve`` has no ``--speculative-algorithm EAGLE3``), the demo says so and stops.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from specgauge.analysis.results import CompareResult
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.errors import UserError
from specgauge.shipped_models import DEFAULT, SETUP_COMMAND, ShippedModel

TARGET_DIR = DEFAULT.target_dir   # the default shipped model (shipped_models.py)
DRAFT_DIR = DEFAULT.draft_dir     # its EAGLE-3 head, serve's default --speculative-draft-model-path
SPECULATIVE_ALGORITHM = "EAGLE3"


def serve_help() -> str:
    """``specgauge serve --help`` of this build ('' when the command is missing)."""
    done = subprocess.run([sys.executable, "-m", "specgauge", "serve", "--help"], capture_output=True, text=True,
                          timeout=60)
    return done.stdout if done.returncode == 0 else ""


def speculative_arm_missing(model: ShippedModel = DEFAULT) -> str | None:
    """Why this build cannot run the EAGLE-3 arm on ``model``, or None when it can."""
    if importlib.util.find_spec("specgauge.engine.serving.launch") is None:
        return "the embedded engine is not part of this build"
    if not (model.target_dir / "config.json").exists():
        how = f"; run {SETUP_COMMAND}" if model.obtained_at_setup else ""
        return f"the shipped target model is missing ({model.target_dir}){how}"
    if model.draft_dir is None:
        return f"{model.name} ships no EAGLE-3 drafter"
    if not (model.draft_dir / "config.json").exists():
        return f"the shipped EAGLE-3 drafter is missing ({model.draft_dir})"
    text = serve_help()
    if not text:
        return "'specgauge serve' is not available (install the engine extra: pip install 'specgauge[engine]')"
    if SPECULATIVE_ALGORITHM not in text:
        return (f"'specgauge serve --help' lists no --speculative-algorithm {SPECULATIVE_ALGORITHM}: "
                f"EAGLE-3 speculation has not landed in this build yet")
    return None


DOMAINS = ("coding", "encyclopedic")   # the generic suites; the held-out one is added when its data is here


def demo_plan(*, quick: bool = False, domain_suites: dict[str, str] | None = None, rounds: int = 1,
              model: ShippedModel = DEFAULT) -> ComparePlan:
    """The demo's comparison: the same engine with speculation off and with EAGLE-3.

    ``domain_suites`` maps a domain to the suite file it runs (the built-in suite cut to the
    target's context, :func:`prepare_suites`); ``rounds`` repeats the whole plan (the verdict's
    intervals then include the drift between rounds); ``model`` is the shipped model both arms
    serve (``serve --model NAME`` unless it is serve's default).
    """
    serve_model = "" if model.name == DEFAULT.name else f"--model {model.name} "
    domains = DOMAINS + tuple(d for d in (domain_suites or {}) if d not in DOMAINS)
    return ComparePlan(
        baseline=ArmConfig(name="baseline", kind="engine", value=f"{serve_model}--speculative-algorithm NONE"),
        speculative=ArmConfig(name="speculative", kind="engine",
                              value=f"{serve_model}--speculative-algorithm {SPECULATIVE_ALGORITHM}"),
        # SGLang /generate: cumulative token counts per chunk (one chunk per verify step) and per-request
        # acceptance in meta_info; the target's tokenizer renders the chat prompts with its template.
        api="sglang", tokenizer=str(model.tokenizer_path), domains=domains, domain_suites=domain_suites or {},
        concurrency=sweep_points(quick),
        num_requests_single=requests_single(quick), sweep_min_requests=4 if quick else 8, sweep_requests_per_user=1,
        max_tokens=max_tokens(quick), warmup=1, seed=0, temperature=0.0, label="EAGLE-3",
        bootstrap_resamples=1000, rounds=rounds)


def sweep_points(quick: bool) -> tuple[int, ...]:
    """The sweep's concurrencies. On SmolLM2 and two cores EAGLE-3 pays at one stream and is even at
    about four (docs/results.md), so 16 already shows the baseline ahead; 64 would add about a
    minute and time out requests on a busy machine."""
    return (1, 4) if quick else (1, 4, 16)


def max_tokens(quick: bool) -> int:
    """Output tokens per demo request."""
    return 32 if quick else 64


def prepare_suites(output_dir: Path, *, quick: bool,
                   model: ShippedModel = DEFAULT) -> tuple[dict[str, str], list[str]]:
    """Each demo domain's built-in suite, cut to the requests that fit the target's context with the
    demo's output length, written under ``output_dir/suites``, and the drafter's held-out suite when
    its training data is here; returns the map and notes (what was cut, what the held-out suite holds)."""
    from specgauge.compare.fit import fitting_suite
    from specgauge.compare.held_out import HELD_OUT_DOMAIN, held_out_suite
    from specgauge.suites.model import write_suite_jsonl
    from specgauge.suites.registry import load_suite

    directory = output_dir / "suites"
    directory.mkdir(parents=True, exist_ok=True)
    files, notes = {}, []
    for domain in DOMAINS:
        suite = load_suite(domain)
        fitted = fitting_suite(suite, model.target_dir, max_tokens(quick))
        if fitted is suite:
            files[domain] = domain
            continue
        path = directory / f"{fitted.name}.jsonl"
        write_suite_jsonl(fitted, path)
        files[domain] = str(path)
        notes.append(f"{domain}: {len(fitted.requests)} of {len(suite.requests)} prompts fit the target's context")
    held_out, note = held_out_suite(model, output_dir, held_out_size(quick), max_tokens(quick))
    if held_out is not None:
        files[HELD_OUT_DOMAIN] = str(held_out)
    notes.append(note)
    return files, notes


def held_out_size(quick: bool) -> int:
    """Prompts in the held-out suite: the single stream's request count (each prompt asked once)."""
    return requests_single(quick)


def requests_single(quick: bool) -> int:
    """Requests per single-stream domain and arm."""
    return 3 if quick else 6


async def run_demo(output_dir: Path, *, db: Path | None = None, quick: bool = False,
                   rounds: int = 1, model: ShippedModel = DEFAULT) -> CompareResult:
    """Run the demo on shipped ``model`` into ``output_dir`` (its store: ``output_dir/specgauge.db``
    unless ``db``)."""
    from rich.console import Console

    from specgauge.compare.held_out import representative_verdict
    from specgauge.compare.orchestrate import run_comparison
    from specgauge.compare.progress import ComparisonProgress
    from specgauge.store import Store

    console = Console(stderr=True)
    missing = speculative_arm_missing(model)
    if missing:
        raise UserError(f"demo: the speculative arm is not available yet: {missing}; the demo will not fake one")
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--output-dir {output_dir}: {exc.strerror or exc}") from None
    domain_suites, notes = prepare_suites(output_dir, quick=quick, model=model)
    plan = demo_plan(quick=quick, domain_suites=domain_suites, rounds=rounds, model=model)
    console.print(f"[bold]specgauge demo[/]: speculation off vs {plan.label} on the embedded engine "
                  f"({model.name}); single stream on {', '.join(plan.domains)}, sweep "
                  f"{', '.join(map(str, plan.concurrency))}")
    for note in notes:
        console.print(f"  {note}")
    progress = ComparisonProgress(console)
    try:
        with Store.open(db or output_dir / "specgauge.db") as store:
            result = await run_comparison(plan, store, progress, on_stage=lambda text: console.print(f"[bold]{text}"))
    finally:
        progress.close()
    line = representative_verdict(result.single_stream, plan.label)
    return result if line is None else result.model_copy(update={"verdict_lines": (*result.verdict_lines, line)})
