"""The result of a comparison of several speculative arms against one baseline (``compare`` with
more than one ``--speculative`` arm, or ``--methods a,b``): each arm's own two-arm
:class:`~specgauge.analysis.results.CompareResult`, the paired differences between the arms and the
method chosen per domain and concurrency. ``model_dump(mode="json")`` is its ``verdict.json``
(docs/compare.md, "Several speculative arms"); a two-arm comparison keeps its own shape.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from specgauge.analysis.results import FORMAT_VERSION, ArmDescription, CompareResult, RatioCI, ServerSetting


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ArmResult(_Frozen):
    """One speculative arm against the baseline, measured on the same prompts as every other arm."""

    key: str      # its key in the store and plan: speculative, speculative-2, ...
    label: str    # eagle3, ngram, or --arm-label
    result: CompareResult


class ArmDifference(_Frozen):
    """``first``'s throughput over ``second``'s on the same prompts at one point (single-stream
    domain or sweep concurrency), with its paired 95% bootstrap interval; ``clear``: the interval
    excludes 1."""

    first: str
    second: str
    domain: str | None        # a single-stream domain, else None (a sweep point)
    concurrency: int
    ratio: RatioCI
    clear: bool
    sentence: str


class ArmChoice(_Frozen):
    """The method to run at one single-stream domain or sweep concurrency: the arm with the highest
    speedup among those whose interval lies above 1 (``chosen`` None: no method pays), the other
    paying arms not clearly different from it, and the chosen arm's schedule per batch size."""

    domain: str | None
    concurrency: int
    chosen: str | None
    speedup: RatioCI = RatioCI()
    also_pays: tuple[str, ...] = ()   # paying arms whose difference from the chosen one is not clear
    disable_above: int | None = None
    settings: tuple[ServerSetting, ...] = ()   # the chosen arm's recommendation, in each engine's form
    sentence: str


class MultiArmResult(_Frozen):
    """A whole comparison of several speculative arms."""

    format_version: int = FORMAT_VERSION
    comparison_id: int | None = None
    created_at: str
    tool_version: str
    baseline: ArmDescription
    arms: tuple[ArmResult, ...]
    differences: tuple[ArmDifference, ...]
    choice: tuple[ArmChoice, ...]
    verdict_lines: tuple[str, ...]

    def arm(self, label: str) -> ArmResult:
        """The arm labelled ``label``."""
        return next(a for a in self.arms if a.label == label)


def is_multi_arm(document: dict) -> bool:
    """Whether a stored or written result document is a :class:`MultiArmResult`."""
    return isinstance(document, dict) and "differences" in document and "choice" in document
