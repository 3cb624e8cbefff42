"""Terminal output (rich): a live progress bar per point and a summary table per run.

Progress always goes to stderr, so stdout stays clean for ``--output-json -``.
"""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from specgauge.analysis import definitions
from specgauge.analysis.aggregate import PointAggregate
from specgauge.client.records import RequestRecord
from specgauge.report.export import point_document
from specgauge.report.formatting import describe_point
from specgauge.store import PointRow, RunRow


# A redraw holds the interpreter ~1 ms (measured on a terminal), stalling the event loop that
# timestamps the streams: rich's default 10 redraws a second would touch 1 % of the time.
REFRESH_PER_SECOND = 2
CONNECTION_BAR_FROM = 256   # pools this large get a "connecting" bar (opening them can take seconds)


def shows_colour(console: Console) -> bool:
    """Whether ``console`` is a terminal that shows colour: not a pipe or a file (``FORCE_COLOR``
    counts as a terminal), ``TERM`` not ``dumb``, ``NO_COLOR`` unset (https://no-color.org; rich
    reads all three)."""
    return console.is_terminal and console.color_system is not None and not console.no_color


class RichProgress:
    """One progress bar per point: requests done/total, live output tok/s and errors."""

    def __init__(self, console: Console | None = None, *, db: str | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.db = db   # the store, named in the resume hint when it is not the default
        self._progress = Progress(
            TextColumn("[bold]{task.description:<16}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[tok_s]:>9} tok/s"), TextColumn("{task.fields[errors]}"),
            TimeElapsedColumn(), console=self.console, transient=False,
            refresh_per_second=REFRESH_PER_SECOND,
        )
        self._task: TaskID | None = None
        self._connect_task: TaskID | None = None
        self._started = 0.0
        self._tokens = 0
        self._errors = 0

    def run_started(self, run_id: int, num_points: int, *, resumed: bool) -> None:
        verb = "resuming" if resumed else "run"
        self.console.print(f"specgauge: {verb} {run_id}: {num_points} point(s)")
        self._progress.start()

    def point_started(self, point_index: int, label: str, total: int | None, already_done: int) -> None:
        self._started, self._tokens, self._errors = time.perf_counter(), 0, 0
        self._task = self._progress.add_task(label, total=total, completed=already_done, tok_s="-", errors="")

    def connections_opened(self, opened: int, total: int) -> None:
        """A bar while a large pool (CONNECTION_BAR_FROM connections or more) is being opened."""
        if total < CONNECTION_BAR_FROM:
            return
        if self._connect_task is None:
            self._connect_task = self._progress.add_task("connecting", total=total, tok_s="-", errors="")
        self._progress.update(self._connect_task, completed=opened)
        if opened >= total:
            self._progress.remove_task(self._connect_task)
            self._connect_task = None

    def request_finished(self, record: RequestRecord) -> None:
        if self._task is None:
            return
        if record.ok:
            self._tokens += definitions.output_token_count(record)
        else:
            self._errors += 1
        elapsed = time.perf_counter() - self._started
        tok_s = f"{self._tokens / elapsed:,.0f}" if elapsed > 0 else "-"
        errors = f"[red]{self._errors} err" if self._errors else ""
        self._progress.update(self._task, advance=1, tok_s=tok_s, errors=errors)

    def point_finished(self, point_index: int, aggregate: PointAggregate) -> None:
        if self._task is not None:
            tok_s = aggregate.output_tokens_per_s
            errors = f"[red]{aggregate.flag_reason}" if aggregate.flagged else (
                f"{aggregate.num_errors} err" if aggregate.num_errors else "")
            self._progress.update(self._task, tok_s="-" if tok_s is None else f"{tok_s:,.0f}", errors=errors)
            self._progress.stop_task(self._task)   # its elapsed clock stops with the point
            self._task = None

    def run_finished(self, run_id: int, status: str) -> None:
        self._progress.stop()
        if status != "done":
            self.console.print(f"specgauge: run {run_id} {status}; finish it with: {resume_command(run_id, self.db)}")


DEFAULT_DB = "specgauge.db"


def resume_command(run_id: int, db: str | None) -> str:
    """The command that finishes run ``run_id`` (with ``--db`` when the store is not the default)."""
    import shlex

    where = f" --db {shlex.quote(str(db))}" if db and str(db) != DEFAULT_DB else ""
    return f"specgauge bench --resume {run_id}{where}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _num(value: float | None, spec: str = ",.1f") -> str:
    return "-" if value is None else format(value, spec)


# A point whose prompts the server's prefix cache mostly served is said so (its TTFT is the cache's).
PREFIX_CACHE_NOTE_RATE = 0.25


def run_table(run: RunRow, points: list[PointRow]) -> Table:
    """The run's summary: one row per point; flagged points in red with the reason."""
    model = f" · {run.model}" if run.model else ""
    table = Table(title=f"run {run.id} · {run.api} {run.url}{model} · suite {run.suite_name}@{run.suite_version}"
                        f" · {run.status}", title_justify="left", caption_justify="left")
    for header in ("point", "ok/err", "tok/s", "req/s", "conc", "TTFT p50", "TTFT p99", "TPOT p50",
                   "ICL p50", "ITL p50", "E2E p50", "accept", "note"):
        table.add_column(header, justify="left" if header in ("point", "note") else "right")
    for point in points:
        doc = point_document(point)
        if point.status != "done":
            table.add_row(describe_point(point.spec), "-", *["-"] * 10, Text(point.status, style="yellow"))
            continue
        note = point_note(doc)
        table.add_row(
            Text(describe_point(point.spec), style="red" if doc["flagged"] else ""),
            f"{doc['num_ok']}/{doc['num_errors']}",
            _num(doc["output_tokens_per_s"]), _num(doc["requests_per_s"], ",.2f"),
            _num(doc["achieved_concurrency"]),
            _ms(doc["ttft_ms"]["p50"]), _ms(doc["ttft_ms"]["p99"]), _ms(doc["tpot_ms"]["p50"]),
            _ms(doc["icl_ms"]["p50"]), _ms(doc["itl_ms"]["p50"]), _ms(doc["e2e_ms"]["p50"]),
            _num(doc["accept_length"], ".2f") + ("*" if doc["accept_length_source"] == "server_point" else ""), note,
        )
    sources = sorted({doc["token_count_source"] for doc in map(point_document, points) if doc["token_count_source"]})
    counted = f" · token counts: {', '.join(sources)}" if sources else ""
    docs = [point_document(p) for p in points if p.status == "done"]
    starred = any(doc["accept_length_source"] == "server_point" for doc in docs)
    accept = (" · accept: mean of per-request figures; * from the server's counters over the point"
              if starred else "")
    table.caption = f"latencies in ms · ICL per chunk, ITL per token · conc = achieved concurrency{counted}{accept}"
    return table


def run_notes(run: RunRow, points: list[PointRow]) -> list[str]:
    """The lines printed under a run's table: what was done to the workload for this server
    (prompts left out for its context, the chat template, token counting) and every point's
    load warnings (:mod:`specgauge.analysis.saturation`)."""
    prepared = (run.config or {}).get("prepared") or {}
    lines = [f"note: {line}" for line in prepared.get("notes") or ()]
    if run.config and run.config.get("ignore_eos"):
        lines.append("note: ignore_eos on: every request was asked to generate all its max_tokens")
    lines += [f"warning: {describe_point(point.spec)}: {warning}" for point in points
              for warning in (point.aggregates or {}).get("load_warnings") or ()]
    lines += [f"note: {describe_point(point.spec)}: {workers_line(workers)}" for point in points
              if (workers := (point.aggregates or {}).get("workers"))]
    lines += [f"note: {describe_point(point.spec)}: {note}" for point in points
              for note in (point.aggregates or {}).get("session_notes") or ()]
    lines += [f"note: {describe_point(point.spec)}: {trace_lag_line(point)}" for point in points
              if point.spec.get("trace_speed") is not None and point.aggregates]
    return lines


def trace_lag_line(point: PointRow) -> str:
    """A trace replay's client lag (send time − scaled trace time), stored per request as send lag."""
    lag = (point.aggregates or {}).get("send_lag_ms") or {}
    if not lag.get("count"):
        return "no send lag recorded"
    return (f"replayed {lag['count']} requests at their trace times / {point.spec['trace_speed']:g}; client lag "
            f"(send - trace time) p50 {lag['p50']:.2f} ms, p90 {lag['p90']:.2f} ms, p99 {lag['p99']:.2f} ms")


def workers_line(workers: list[dict]) -> str:
    """A split point's workers in one line: how many, on how many hosts, their start spread and
    their worst send and event-loop lag."""
    def worst(name: str) -> str:
        values = [w[name] for w in workers if w.get(name) is not None]
        return f"{max(values):.1f} ms" if values else "n/a"

    hosts = len({w.get("host") for w in workers})
    return (f"{len(workers)} workers on {hosts} host{'s' if hosts > 1 else ''}, started within "
            f"{worst('start_offset_ms')} of the go; worst send lag p99 {worst('send_lag_p99_ms')}, "
            f"event-loop lag p99 {worst('loop_lag_p99_ms')}")


def point_note(doc: dict) -> Text:
    """The note cell of a point: why it is flagged, and its errors by class (``http_4xx 3, ...``)."""
    note = Text()
    if doc["flagged"]:
        note.append(doc["flag_reason"] or "flagged", style="bold red")
    if doc.get("load_warnings"):
        note.append(("; " if note else "") + "limited: see below", style="yellow")
    errors = doc.get("errors_by_class") or {}
    if errors:
        note.append(("; " if note else "") + "errors: " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())),
                    style="red")
    share = doc.get("drafted_step_share")
    if share is not None and share < 1:
        per_step = doc.get("tokens_per_step")
        note.append(("; " if note else "") + f"{share:.0%} of steps drafted"
                    + (f", {per_step:.2f} tok/step" if per_step is not None else ""))
    if (doc.get("prefix_cache_hit_rate") or 0) >= PREFIX_CACHE_NOTE_RATE:
        note.append(("; " if note else "") + f"prefix cache served {doc['prefix_cache_hit_rate']:.0%} of prompt tokens",
                    style="yellow")
    return note


def runs_table(runs: list[tuple[RunRow, list[PointRow]]]) -> Table:
    """The table of ``specgauge runs``: one row per run, with its points done and flagged."""
    table = Table(title="runs", title_justify="left")
    for header in ("id", "started (UTC)", "status", "api", "url", "model", "suite", "points", "done", "flagged"):
        table.add_column(header)
    for run, points in runs:
        labels = ",".join(describe_point(p.spec) for p in points) or "-"
        done = sum(p.status == "done" for p in points)
        flagged = sum(bool((p.aggregates or {}).get("flagged")) for p in points)
        status_style = {"done": "green", "failed": "red", "interrupted": "yellow"}.get(run.status, "")
        table.add_row(str(run.id), run.started_at.replace("+00:00", ""), Text(run.status, style=status_style),
                      run.api, run.url, run.model or "-", f"{run.suite_name}@{run.suite_version}", labels,
                      f"{done}/{len(points)}", Text(str(flagged), style="red") if flagged else "0")
    return table


def comparisons_table(comparisons: list) -> Table:
    """The comparisons of ``specgauge runs``: id (cN), status, when, the arms, the bench runs behind it,
    the recommendation (its threshold, and its draft-depth schedule when it has one).

    ``comparisons``: ``(ComparisonRow, [ComparisonRunRow])`` pairs."""
    table = Table(title="comparisons ('specgauge show cN', 'specgauge report cN')", title_justify="left")
    for header in ("id", "started (UTC)", "status", "baseline", "speculative", "runs", "recommendation"):
        table.add_column(header)
    for row, links in comparisons:
        plan = row.plan or {}
        arms = [f"{(plan.get(name) or {}).get('kind', '?')}: {(plan.get(name) or {}).get('value', '?')}"
                for name in ("baseline", "speculative")]
        result = row.result or {}
        recommendation = result.get("recommendation") or {}
        if plan.get("arm_labels"):   # several speculative arms: their labels, and the method chosen per point
            arms[1] = f"{len(plan['arm_labels'])} arms: {', '.join(plan['arm_labels'])}"
            recommendation = {"disable_above": None, "confident": True}
        if plan.get("arm_labels") and result:
            advice = "choice: " + "; ".join(
                f"{c.get('domain') or 'c=' + str(c.get('concurrency'))} {c.get('chosen') or 'none pays'}"
                for c in result.get("choice") or ())
        elif not result:
            advice = row.error or "-"
        elif recommendation.get("disable_above") is None:
            advice = "no threshold" + ("" if recommendation.get("confident", True) else " (uncertain)")
        else:
            advice = f"disable above {recommendation['disable_above']}" + (
                "" if recommendation.get("confident", True) else " (uncertain)")
        if result and recommendation.get("schedule"):
            advice += f" · schedule {schedule_text(recommendation['schedule'])}"
        status_style = {"done": "green", "failed": "red", "interrupted": "yellow"}.get(row.status, "")
        run_ids = sorted({link.run_id for link in links})
        shown = f"{run_ids[0]}–{run_ids[-1]} ({len(run_ids)})" if run_ids else "-"
        table.add_row(f"c{row.id}", row.started_at.replace("+00:00", ""), Text(row.status, style=status_style),
                      arms[0], arms[1], shown, advice)
    return table


def schedule_text(entries) -> str:
    """A draft-depth schedule as vLLM's JSON list, compact: ``[[1,4,3],[5,256,0]]``."""
    return json.dumps([list(entry) for entry in entries], separators=(",", ":"))


def tunes_table(tunes: list) -> Table:
    """The tunes of ``specgauge runs``: id (tN), status, when, the depths and levels, the bench runs,
    the schedule. ``tunes``: ``(TuneRow, [TuneRunRow])`` pairs."""
    table = Table(title="tunes ('specgauge report tN')", title_justify="left")
    for header in ("id", "started (UTC)", "status", "depths", "concurrency", "runs", "schedule"):
        table.add_column(header)
    for row, links in tunes:
        plan, result = row.plan or {}, row.result or {}
        depths = ",".join(str(arm.get("depth")) for arm in plan.get("arms") or () if arm.get("depth") is not None)
        schedule = (result.get("schedule") or {}).get("entries")
        status_style = {"done": "green", "failed": "red", "interrupted": "yellow"}.get(row.status, "")
        run_ids = sorted({link.run_id for link in links})
        shown = f"{run_ids[0]}–{run_ids[-1]} ({len(run_ids)})" if run_ids else "-"
        table.add_row(f"t{row.id}", row.started_at.replace("+00:00", ""), Text(row.status, style=status_style),
                      depths or "-", ",".join(map(str, plan.get("concurrency") or ())) or "-", shown,
                      schedule_text(schedule) if schedule else (row.error or "-"))
    return table


def comparison_notes(store, stages) -> list[str]:
    """The lines under a comparison's verdict: each distinct workload note of its runs (prompts left
    out for a server's context, the chat template) and every point with errors, by class and count.
    ``stages``: the comparison's ``StageRuns``."""
    notes: dict[str, None] = {}
    errors = []
    for stage in stages:
        for arm, run_ids in (("baseline", stage.baseline_run_ids), ("speculative", stage.speculative_run_ids)):
            for run_id in run_ids:
                run = store.get_run(run_id)
                for line in ((run.config or {}).get("prepared") or {}).get("notes") or ():
                    notes.setdefault(f"note: {arm}: {line}")
                for point in store.get_points(run_id):
                    by_class = (point.aggregates or {}).get("errors_by_class") or {}
                    if by_class:
                        shown = ", ".join(f"{k} {v}" for k, v in sorted(by_class.items()))
                        errors.append(f"errors: {arm} {stage.stage} (run {run_id}): {shown}")
    return [*notes, *errors]
