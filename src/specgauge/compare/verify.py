"""``compare --verify``: re-run the sweep with the recommended threshold applied on the embedded
engine (``--speculative-disable-above N``) against the baseline, ABBA by point, and check that it
is never worse than the baseline beyond noise (no point whose 95% interval lies wholly below 1).
"""

from __future__ import annotations

from specgauge.analysis.results import CompareResult, Verification, VerifyPoint
from specgauge.compare.orchestrate import run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.errors import UserError
from specgauge.store import Store

DISABLE_FLAG = "--speculative-disable-above"


def has_threshold_flag() -> bool:
    """Whether this build's ``specgauge serve`` takes the threshold flag."""
    from specgauge.compare.demo import serve_help

    return DISABLE_FLAG in serve_help()


def require_threshold_flag() -> None:
    """Refuse ``--verify`` up front when this build's ``specgauge serve`` has no threshold flag."""
    if not has_threshold_flag():
        raise UserError(f"--verify: this build's 'specgauge serve' has no {DISABLE_FLAG} option, so the "
                        f"threshold cannot be applied")


def thresholded_plan(plan: ComparePlan, threshold: int) -> ComparePlan:
    """The sweep only, with the speculative engine given ``--speculative-disable-above threshold``."""
    if plan.speculative.kind != "engine":
        raise UserError("--verify needs the speculative arm as --speculative-engine (it sets the engine's threshold)")
    args = f"{plan.speculative.value} {DISABLE_FLAG} {threshold}"
    return plan.model_copy(update={
        "speculative": ArmConfig(name="speculative", kind="engine", value=args),
        "domains": (), "suite": None, "sweep_suite": plan.stages()[-1].suite, "temperatures": (),
        "samples_per_prompt": None, "label": f"{plan.label} with {DISABLE_FLAG} {threshold}"})


async def verify_threshold(plan: ComparePlan, store: Store, result: CompareResult, progress=None,
                           on_stage=None) -> CompareResult:
    """``result`` with its :class:`Verification` filled in (unchanged when there is no threshold to verify).
    The phase is labelled ``verify`` in the progress and the stage headings."""
    threshold = result.recommended_disable_above
    if threshold is None or threshold == 0:
        return result
    if on_stage:
        on_stage(f"verification: the sweep again, the speculative engine with {DISABLE_FLAG} {threshold}")
    checked = await run_comparison(thresholded_plan(plan, threshold), store, progress, on_stage=on_stage,
                                   phase="verify")
    points = tuple(VerifyPoint(concurrency=p.concurrency, baseline_tok_s=p.baseline_tok_s,
                               thresholded_tok_s=p.speculative_tok_s, ratio=p.ratio, ci_low=p.ci_low, ci_high=p.ci_high,
                               worse_beyond_noise=p.ci_high is not None and p.ci_high < 1.0)
                   for p in checked.sweep)
    verification = Verification(disable_above=threshold, points=points,
                                never_worse=not any(p.worse_beyond_noise for p in points))
    line = (f"Verified: with {DISABLE_FLAG} {threshold} speculation is never worse than the baseline beyond noise."
            if verification.never_worse else
            f"Not verified: with {DISABLE_FLAG} {threshold} the baseline is still faster beyond noise at "
            + ", ".join(str(p.concurrency) for p in points if p.worse_beyond_noise) + " concurrent requests.")
    updated = result.model_copy(update={"verification": verification, "verdict_lines": (*result.verdict_lines, line)})
    if result.comparison_id is not None:
        store.finish_comparison(result.comparison_id, status="done", result=updated.model_dump(mode="json"))
    return updated
