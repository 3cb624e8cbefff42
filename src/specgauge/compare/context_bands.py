"""``compare --context-lengths LO-HI,...``: the comparison once per context-length band.

Speculation can pay again at long context where it stopped paying at high batch with short prompts
(vLLM RFC #48627), so context length is an axis of the verdict. Each band gets its own prompts, as
``tune --context-lengths`` builds them (:mod:`specgauge.load.length_bands`: the suite's requests of that
length as served, else length-exact synthetic prompts), and a whole comparison of its own on them —
single stream and the sweep, paired, with its crossover and recommendation, stored as its own ``cN``
(resumable as any comparison). The summary gives the speedup and crossover per band and, where the
bands' draft-depth schedules differ, vLLM's 5-item schedule ``[bs_lo, bs_hi, ctx_lo, ctx_hi, K]``
(``num_speculative_tokens_per_batch_size`` with a context axis, ``vllm/config/speculative.py``).

Prompt lengths are counted with the model's tokenizer (``--tokenizer``; else the server's own for a
URL arm, or the shipped model's for the embedded engine) and checked against its context.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from specgauge.analysis.results import CompareResult
from specgauge.compare.plan import ComparePlan
from specgauge.errors import UserError
from specgauge.load.length_bands import BandSuite, band_label, build_band_suites, check_fit

DEFAULT_BAND_MAX_TOKENS = 128


@dataclass(frozen=True)
class ModelFacts:
    """The tokenizer prompt lengths are counted with, and the context they must fit (None: unknown)."""

    tokenizer_path: str
    context_length: int | None
    context_source: str | None


def band_source_suite(plan: ComparePlan) -> str:
    """The suite whose prompts fill the bands: ``--suite``, the sweep's, else the first domain's."""
    if plan.suite or plan.sweep_suite:
        return plan.suite or plan.sweep_suite
    return plan.domain_suites.get(plan.domains[0], plan.domains[0]) if plan.domains else "mixed"


def _engine_model(plan: ComparePlan):
    """The shipped model an embedded-engine arm serves (its ``--model``, else ``--model`` of the
    comparison, else the default)."""
    from specgauge.shipped_models import DEFAULT_MODEL, get_shipped

    args = shlex.split(plan.speculative.value)
    name = args[args.index("--model") + 1] if "--model" in args[:-1] else plan.model or DEFAULT_MODEL
    return get_shipped(name)


async def model_facts(plan: ComparePlan) -> ModelFacts:
    """Tokenizer and context for the bands (module doc); a one-line error when no tokenizer is known."""
    context, source, tokenizer = None, None, plan.tokenizer
    arm = plan.speculative
    if arm.kind == "url":
        from specgauge.client.endpoint import Endpoint
        from specgauge.client.server_model import describe_server_model

        server = await describe_server_model(Endpoint(base_url=arm.value.rstrip("/"), api=plan.api,
                                                      api_key=plan.api_key, headers=plan.headers,
                                                      insecure=plan.insecure))
        context, source = server.context_length, server.context_source
        tokenizer = tokenizer or server.tokenizer_path
    elif arm.kind == "engine":
        model = _engine_model(plan)
        context, source = model.context, f"the shipped model {model.name}"
        tokenizer = tokenizer or str(model.tokenizer_path)
    if not tokenizer:
        raise UserError("--context-lengths counts prompt tokens with the model's tokenizer, and none is known for "
                        "this arm; pass --tokenizer PATH/tokenizer.json")
    return ModelFacts(tokenizer, context, source)


def band_plans(plan: ComparePlan, bands: tuple[tuple[int, int], ...], facts: ModelFacts,
               work_dir: Path) -> list[tuple[BandSuite, ComparePlan]]:
    """Each band's prompts (a derived suite file under ``work_dir``) and the comparison plan that runs
    on them: the whole suite split by its domains at one stream, then the sweep, on the band's prompts."""
    max_tokens = plan.max_tokens or DEFAULT_BAND_MAX_TOKENS
    check_fit(bands, facts.context_length, facts.context_source, max_tokens)
    suites = build_band_suites(band_source_suite(plan), bands, tokenizer_path=facts.tokenizer_path, api=plan.api,
                               min_prompts=plan.num_requests_single, synthetic_count=plan.num_requests_single,
                               seed=plan.seed, max_tokens=max_tokens, work_dir=work_dir)
    return [(band, plan.model_copy(update={"suite": band.suite_ref, "sweep_suite": None,
                                           "single_suite": None, "single_requests": None, "domains": (),
                                           "domain_suites": {}, "max_tokens": max_tokens,
                                           "tokenizer": plan.tokenizer or facts.tokenizer_path}))
            for band in suites]


def _ratio(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def band_schedule(results: list[tuple[BandSuite, CompareResult]]) -> list[list[int]] | None:
    """vLLM's 5-item entries ``[bs_lo, bs_hi, ctx_lo, ctx_hi, K]``: each band's draft-depth schedule
    with the band as its context range; None when a band's recommendation is uncertain (no schedule)."""
    if any(result.recommendation.schedule is None for _, result in results):
        return None
    return [[lo, hi, band.band[0], band.band[1], depth] for band, result in results
            for lo, hi, depth in result.recommendation.schedule]


def band_summary_lines(results: list[tuple[BandSuite, CompareResult]]) -> list[str]:
    """Speedup and crossover per band, then the schedule in vLLM's 5-item form where bands differ."""
    lines = ["per context band (speculative / baseline; each band a comparison of its own):"]
    for band, result in results:
        single = "; ".join(f"single-stream {d.domain} {_ratio(d.speedup, d.ci_low, d.ci_high)}"
                           for d in result.single_stream)
        sweep = ", ".join(f"{p.concurrency}: {_ratio(p.ratio, p.ci_low, p.ci_high)}" for p in result.sweep)
        crossover = (f"crossover ≈ {result.crossover_concurrency:.1f}" if result.crossover_concurrency is not None
                     else "no crossover claimed")
        lines.append(f"  {band_label(band.band)} tokens ({band.source}, {band.count} prompts): {single}; sweep "
                     f"{sweep or '-'}; {crossover}; comparison c{result.comparison_id}")
    schedules = {tuple(map(tuple, result.recommendation.schedule or ())) for _, result in results}
    entries = band_schedule(results)
    if entries is None:
        lines.append("  no schedule by band: a band's verdict is uncertain (see its comparison)")
    elif len(schedules) == 1:
        lines.append(f"  the same draft-depth schedule in every band: {list(map(list, next(iter(schedules))))}")
    else:
        lines.append(f"  vLLM num_speculative_tokens_per_batch_size by context band: {entries}")
    return lines


def finish_bands(plan: ComparePlan, options: dict, run_compare) -> None:
    """Run ``plan`` once per ``--context-lengths`` band (``run_compare(plan, db, verify, placement=)``
    runs one comparison), print each band's verdict and the per-band summary, write ``--output-json``
    (every band's result and the 5-item schedule) and ``--output-dir`` (one report per band)."""
    import json

    import click

    from specgauge.cli_options import write_text
    from specgauge.compare.output import check_outputs, emit
    from specgauge.load.runner import run_async
    from specgauge.load.workers.options import placement_from

    if options["output_json"] == "-":
        raise UserError("--context-lengths writes one verdict per band: give --output-json a FILE, not '-'")
    if options["verify"]:
        raise UserError("--verify re-runs one comparison's sweep: verify a band's comparison on its own "
                        "(compare --suite BAND_SUITE --verify), not with --context-lengths")
    check_outputs(options["output_json"], options["output_dir"])
    db = options["db"]
    facts = run_async(model_facts(plan))
    results = []
    for band, band_plan in band_plans(plan, options["context_lengths"], facts, Path(db).resolve().parent):
        click.echo(f"context band {band_label(band.band)} tokens: {band.count} prompts ({band.source}, "
                   f"{band.suite_ref})")
        result = run_compare(band_plan, db, False, placement=placement_from(options))
        out_dir = str(Path(options["output_dir"]) / f"ctx-{band_label(band.band)}") if options["output_dir"] else None
        emit(result, output_json=None, output_dir=out_dir, db=db)
        results.append((band, result))
    for line in band_summary_lines(results):
        click.echo(line)
    if options["output_json"]:
        document = {"context_bands": [{"band": list(band.band), "prompts": band.count, "source": band.source,
                                       "suite": band.suite_ref, "comparison_id": result.comparison_id,
                                       "result": result.model_dump(mode="json")} for band, result in results],
                    "num_speculative_tokens_per_batch_size": band_schedule(results)}
        write_text(options["output_json"], json.dumps(document, indent=2) + "\n")
