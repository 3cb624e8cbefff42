"""What a report shows, gathered once: per-arm figures read from the store, plus the comparison.

A report has one arm (``specgauge report BENCH_RUN_ID``: a plain ``bench`` run) or two (a
comparison: baseline first, speculative second). Plots, the HTML page and the terminal table all
read a :class:`ReportData`; nothing in them touches the store.

For one bench run the per-arm figures are computed here from the stored requests, with the same
functions the comparison uses (:mod:`specgauge.analysis.health`):

- **tokens per chunk**: the tokens each content chunk carried, each request's first chunk left
  out (it ends the prefill). Under speculation one chunk is one verify step, so this is the
  distribution of acceptance lengths as the client saw them. Only requests whose counts were
  measured (token count source ``server`` or ``tokenizer``) count.
- **acceptance by domain**: the server-reported per-request acceptance length, by prompt domain;
  when the server reported none, the mean tokens per decode chunk (measured counts only);
  ``accept_source`` says which.
- **acceptance vs output position**: mean tokens per decode chunk in bins of output position.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from specgauge.analysis.health import acceptance_by_position, chunk_histogram, mean_accept_length, mean_tokens_per_chunk
from specgauge.client.records import RequestRecord, TokenCountSource
from specgauge.analysis.results import HistogramBin, PositionBin
from specgauge.report.export import point_document
from specgauge.store import PointRow, RunRow, Store

if TYPE_CHECKING:
    from specgauge.analysis.results import CompareResult

MEASURED_SOURCES = frozenset({TokenCountSource.SERVER.value, TokenCountSource.TOKENIZER.value})

ArmRole = Literal["baseline", "speculative", "run"]
AcceptSource = Literal["server", "tokens_per_chunk"]


@dataclass(frozen=True)
class ArmPoint:
    """One closed-loop point of an arm's sweep (latencies in ms, throughput in output tok/s)."""

    concurrency: int
    output_tokens_per_s: float | None
    ttft_ms: dict[str, float | None]       # mean / p50 / p90 / p99
    tpot_ms: dict[str, float | None]
    accept_length: float | None
    num_ok: int
    num_errors: int
    flagged: bool
    flag_reason: str | None
    load_warnings: tuple[str, ...] = ()    # what limited the point besides its setting (analysis/saturation.py)
    turns: tuple[dict, ...] = ()            # multi-turn sessions: figures per turn index (analysis/turns.py)


@dataclass(frozen=True)
class DomainAccept:
    """Mean acceptance length of one prompt domain, with a CI where the caller computed one."""

    domain: str
    accept_length: float
    num_requests: int
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class ArmData:
    """Everything a report shows about one arm: a bench run, or one side of a comparison."""

    role: ArmRole
    label: str
    description: str
    run_ids: tuple[int, ...]
    url: str | None
    model: str | None
    points: tuple[ArmPoint, ...]                   # closed-loop points, by concurrency
    open_loop_points: int                          # rate points: in the tables of `show`, not plotted
    token_count_source: str | None                 # one source, "mixed", or None
    chunk_histogram: tuple[HistogramBin, ...]      # tokens per decode chunk -> how many chunks
    accept_by_domain: tuple[DomainAccept, ...]
    accept_source: AcceptSource | None
    accept_by_position: tuple[PositionBin, ...]

    def point_at(self, concurrency: int) -> ArmPoint | None:
        """The arm's point at ``concurrency``, if it has one."""
        return next((p for p in self.points if p.concurrency == concurrency), None)


@dataclass(frozen=True)
class ReportData:
    """The input of every report renderer: one arm (a bench run) or two (a comparison).

    ``comparison`` is the :class:`~specgauge.analysis.results.CompareResult` the arms came from,
    or ``None`` for a one-arm report of a plain bench run.
    """

    title: str
    arms: tuple[ArmData, ...]
    suites: tuple[dict[str, Any], ...]             # name, version, content_hash
    run_ids: tuple[int, ...]
    tool_version: str
    measured_at: str                               # when the (first) run started, ISO-8601 UTC
    comparison: "CompareResult | None" = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def baseline(self) -> ArmData | None:
        return next((a for a in self.arms if a.role == "baseline"), None)

    @property
    def speculative(self) -> ArmData | None:
        return next((a for a in self.arms if a.role == "speculative"), None)


def _point(point: PointRow) -> ArmPoint | None:
    if point.status != "done" or point.spec.get("mode") == "open" or point.spec.get("concurrency") is None:
        return None
    doc = point_document(point)
    return ArmPoint(concurrency=int(doc["concurrency"]), output_tokens_per_s=doc["output_tokens_per_s"],
                    ttft_ms=dict(doc["ttft_ms"]), tpot_ms=dict(doc["tpot_ms"]),
                    accept_length=doc["accept_length"], num_ok=doc["num_ok"] or 0,
                    num_errors=doc["num_errors"] or 0, flagged=bool(doc["flagged"]),
                    flag_reason=doc["flag_reason"], load_warnings=tuple(doc.get("load_warnings") or ()),
                    turns=tuple(doc.get("turns") or ()))


def _accept_by_domain(records: list[RequestRecord], measured: list[RequestRecord]
                      ) -> tuple[tuple[DomainAccept, ...], AcceptSource | None]:
    """Server-reported acceptance per domain; else mean tokens per decode chunk when every request
    had measured token counts."""
    def per_domain(items: list[RequestRecord], statistic) -> tuple[DomainAccept, ...]:
        domains = sorted({r.domain for r in items})
        rows = []
        for domain in domains:
            chosen = [r for r in items if r.domain == domain]
            value = statistic(chosen)
            if value is not None:
                rows.append(DomainAccept(domain=domain, accept_length=value, num_requests=len(chosen)))
        return tuple(rows)

    reported = per_domain(records, mean_accept_length)
    if reported:
        return reported, "server"
    if measured and len(measured) == len(records):
        counted = per_domain(measured, mean_tokens_per_chunk)
        if counted:
            return counted, "tokens_per_chunk"
    return (), None


def describe_run(run: RunRow, points: list[PointRow]) -> str:
    """One line naming what a run measured (its URL and model have columns of their own)."""
    return f"specgauge bench, api {run.api}, {len(points)} point(s), status {run.status}"


def arm_from_store(store: Store, run_id: int, *, role: ArmRole = "run", label: str | None = None,
                   description: str | None = None) -> ArmData:
    """Read one arm's figures from the stored run ``run_id`` (an unknown id raises ``UserError``)."""
    run = store.get_run(run_id)
    stored_points = store.get_points(run_id)
    points = sorted((p for p in map(_point, stored_points) if p is not None), key=lambda p: p.concurrency)
    records = [r for p in stored_points if p.status == "done" for r in store.get_requests(p.id) if r.ok]
    sources = Counter(r.token_count_source.value for r in records)
    token_source = (next(iter(sources)) if len(sources) == 1 else "mixed") if sources else None
    measured = [r for r in records if r.token_count_source.value in MEASURED_SOURCES]
    accept_rows, accept_source = _accept_by_domain(records, measured)
    return ArmData(
        role=role, label=label or f"run {run_id}", description=description or describe_run(run, stored_points),
        run_ids=(run_id,), url=run.url, model=run.model, points=tuple(points),
        open_loop_points=sum(p.spec.get("mode") == "open" for p in stored_points),
        token_count_source=token_source,
        chunk_histogram=chunk_histogram(measured), accept_by_domain=accept_rows, accept_source=accept_source,
        accept_by_position=acceptance_by_position(measured),
    )


def report_from_run(store: Store, run_id: int) -> ReportData:
    """A one-arm report of the bench run ``run_id``: its sweep, latencies and tokens per chunk."""
    run = store.get_run(run_id)
    arm = arm_from_store(store, run_id)
    notes = []
    if arm.open_loop_points:
        notes.append(f"{arm.open_loop_points} open-loop (rate) point(s) are not plotted against concurrency; "
                     f"see 'specgauge show {run_id}'.")
    if run.status != "done":
        notes.append(f"run {run_id} is {run.status}: only its finished points are shown.")
    return ReportData(
        title=f"specgauge · run {run_id} · {run.suite_name}@{run.suite_version}",
        arms=(arm,), suites=({"name": run.suite_name, "version": run.suite_version,
                              "content_hash": run.suite_hash},),
        run_ids=(run_id,), tool_version=run.tool_version, measured_at=run.started_at, notes=tuple(notes))


def _compare_arm(result: "CompareResult", role: Literal["baseline", "speculative"]) -> ArmData:
    description = result.arm(role)
    points = []
    outlying = {w.concurrency: w.message for w in result.health
                if w.code == "outlying_round" and w.arm == role and w.concurrency is not None}
    for sweep_point in sorted(result.sweep, key=lambda p: p.concurrency):
        figures = getattr(sweep_point, role)
        reason = outlying.get(sweep_point.concurrency)
        points.append(ArmPoint(
            concurrency=sweep_point.concurrency, output_tokens_per_s=figures.output_tok_s,
            ttft_ms=figures.ttft_ms.model_dump(), tpot_ms=figures.tpot_ms.model_dump(),
            accept_length=figures.accept_length, num_ok=figures.num_ok, num_errors=figures.num_errors,
            flagged=reason is not None, flag_reason=reason.split(": ", 1)[1] if reason else None))
    by_domain: tuple[DomainAccept, ...] = ()
    by_position: tuple[PositionBin, ...] = ()
    if role == "speculative":
        by_domain = tuple(DomainAccept(domain=d.domain, accept_length=d.accept_length,
                                       num_requests=d.speculative.num_ok)
                          for d in result.single_stream if d.accept_length is not None)
        by_position = tuple(result.acceptance_by_position)
    runs = tuple(run_id for stage in result.stages for run_id in getattr(stage, f"{role}_run_ids"))
    label = "baseline" if role == "baseline" else result.speculative_label
    return ArmData(role=role, label=label, description=description.description, run_ids=runs,
                   url=description.url, model=description.model, points=tuple(points), open_loop_points=0,
                   token_count_source=None, chunk_histogram=tuple(result.tokens_per_chunk.get(role, ())),
                   accept_by_domain=by_domain,
                   accept_source="server" if by_domain else None, accept_by_position=by_position)


def report_from_compare(result: "CompareResult") -> ReportData:
    """A two-arm report of a comparison (baseline first, speculative second)."""
    ident = f" {result.comparison_id}" if result.comparison_id is not None else ""
    runs = tuple(sorted({r for stage in result.stages
                         for r in (*stage.baseline_run_ids, *stage.speculative_run_ids)}))
    return ReportData(
        title=f"specgauge · comparison{ident} · baseline vs {result.speculative_label}",
        arms=(_compare_arm(result, "baseline"), _compare_arm(result, "speculative")),
        suites=tuple(s.model_dump() for s in result.suites), run_ids=runs,
        tool_version=result.tool_version, measured_at=result.created_at, comparison=result)
