"""The bench JSON contract and CSV exports, built from the store (one code path for
``bench --output-json`` and ``specgauge export``)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Iterable

from specgauge.analysis import definitions
from specgauge.analysis.aggregate import LATENCY_METRICS
from specgauge.client.records import RequestRecord
from specgauge.store import PointRow, RunRow, Store

JSON_FORMAT_VERSION = 1
STAT_KEYS = ("mean", "p50", "p90", "p99")
DEFINITIONS = {
    "ttft_ms": "request sent -> first content-bearing chunk",
    "tpot_ms": "(last content chunk - TTFT) / (output_tokens - 1), per request",
    "icl_ms": "gap between consecutive content chunks (one verify step under speculation), pooled",
    "itl_ms": "each chunk gap divided evenly over the tokens it carried, pooled",
    "e2e_ms": "request sent -> stream end",
    "output_tokens_per_s": "output tokens of successful measured requests / measured window",
    "achieved_concurrency": "time-weighted mean of measured requests in flight over the window",
    "accept_length": "tokens per verify step incl. the bonus token; mean of per-request values",
}


def _server_accept_length(server_spec: dict | None) -> float | None:
    """The server-side acceptance length, only when it is scoped to this point."""
    if not server_spec or server_spec.get("scope") != "point":
        return None
    value = server_spec.get("accept_length")
    return float(value) if isinstance(value, (int, float)) else None


def point_document(point: PointRow) -> dict[str, Any]:
    """One entry of the contract's ``points`` list (figures null until the point is done)."""
    spec, agg = point.spec, point.aggregates or {}
    doc: dict[str, Any] = {
        "index": point.point_index,
        "status": point.status,
        "mode": spec.get("mode"),
        "concurrency": spec.get("concurrency"),
        "rate": spec.get("rate"),
        "arrival": spec.get("arrival") if spec.get("mode") == "open" else None,
        "burstiness": spec.get("burstiness") if spec.get("mode") == "open" else None,
        "max_concurrency": spec.get("max_concurrency"),
        "num_requests_planned": spec.get("num_requests"),
        "duration_s": spec.get("duration_s"),
        "num_ok": agg.get("num_ok"),
        "num_errors": agg.get("num_errors"),
        "errors_by_class": agg.get("errors_by_class"),
        "error_rate": agg.get("error_rate"),
        "flagged": agg.get("flagged"),
        "flag_reason": agg.get("flag_reason"),
        "output_tokens": agg.get("output_tokens"),
        "output_tokens_per_s": agg.get("output_tokens_per_s"),
        "requests_per_s": agg.get("requests_per_s"),
        "achieved_concurrency": agg.get("achieved_concurrency"),
        "window_s": agg.get("window_s"),
        "segments": agg.get("segments"),
    }
    for name in (*LATENCY_METRICS, "decode_tok_s", "send_lag_ms", "connect_ms"):
        stats = agg.get(name) or {}
        doc[name] = {key: stats.get(key) for key in (*STAT_KEYS, "count")}
    per_request = agg.get("accept_length")
    server_value = _server_accept_length(agg.get("server_spec"))
    doc["accept_length"] = per_request if per_request is not None else server_value
    doc["accept_length_source"] = ("per_request" if per_request is not None
                                   else "server_point" if server_value is not None else None)
    doc["accept_length_requests"] = agg.get("accept_length_requests")
    doc["accept_length_token_weighted"] = agg.get("accept_length_token_weighted")
    doc["tokens_per_step"] = agg.get("tokens_per_step")
    doc["drafted_step_share"] = agg.get("drafted_step_share")
    doc["prefix_cache_hit_rate"] = agg.get("prefix_cache_hit_rate")
    doc["server_spec"] = agg.get("server_spec")
    doc["token_count_source"] = agg.get("token_count_source")
    doc["load_warnings"] = agg.get("load_warnings") or []
    if agg.get("workers"):   # a point split over workers (docs/bench.md); absent for one process
        doc["workers"] = agg["workers"]
    if agg.get("turns"):     # a suite with multi-turn sessions: figures per turn index (analysis/turns.py)
        doc["turns"] = agg["turns"]
        doc["session_notes"] = agg.get("session_notes") or []
    return doc


def run_document(run: RunRow, points: list[PointRow]) -> dict[str, Any]:
    """The bench JSON contract: ``run_id``, run metadata and the ``points`` list."""
    return {
        "format_version": JSON_FORMAT_VERSION,
        "run_id": run.id,
        "status": run.status,
        "tool_version": run.tool_version,
        "host": run.host,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "url": run.url,
        "api": run.api,
        "model": run.model,
        "suite": {"name": run.suite_name, "version": run.suite_version, "content_hash": run.suite_hash},
        "config": run.config,
        "server_fingerprint": run.server_fingerprint,
        "definitions": DEFINITIONS,
        "points": [point_document(p) for p in points],
    }


def request_document(run_id: int, point_index: int, record: RequestRecord) -> dict[str, Any]:
    """One request as flat export data, with its derived metrics and chunk offsets from send."""
    base = record.t_send_ns or 0
    return {
        "run_id": run_id,
        "point_index": point_index,
        "request_index": record.request_index,
        "prompt_index": record.prompt_index,
        "domain": record.domain,
        "ok": record.ok,
        "error_class": record.error_class.value if record.error_class else None,
        "error_message": record.error_message,
        "status_code": record.status_code,
        "finish_reason": record.finish_reason,
        "prompt_tokens": record.prompt_tokens,
        "cached_tokens": record.cached_tokens,
        "session_index": record.session_index,
        "turn_index": record.turn_index,
        "output_tokens": definitions.output_token_count(record),
        "token_count_source": record.token_count_source.value,
        "num_chunks": len(record.chunk_times_ns),
        "ttft_ms": definitions.ttft_ms(record),
        "tpot_ms": definitions.tpot_ms(record),
        "e2e_ms": definitions.e2e_ms(record),
        "decode_tok_s": definitions.decode_tok_s(record),
        "accept_length": definitions.accept_length(record),
        "spec_verify_ct": record.spec_verify_ct,
        "send_lag_ms": None if record.send_lag_ns is None else record.send_lag_ns / definitions.NS_PER_MS,
        "headers_ms": None if record.t_headers_ns is None or record.t_send_ns is None
        else (record.t_headers_ns - record.t_send_ns) / definitions.NS_PER_MS,
        "chunk_offsets_ms": [(t - base) / definitions.NS_PER_MS for t in record.chunk_times_ns],
        "chunk_tokens": list(record.chunk_tokens),
        "server_request_id": record.server_request_id,
    }


def iter_request_documents(store: Store, run_id: int) -> Iterable[dict[str, Any]]:
    """Every measured request of the run, point by point."""
    for point in store.get_points(run_id):
        for record in store.get_requests(point.id):
            yield request_document(run_id, point.point_index, record)


def _flat(doc: dict[str, Any]) -> dict[str, Any]:
    """Nested stats become ``ttft_ms_p50``-style columns; lists and maps become JSON text."""
    row: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict) and "p50" in value:
            row.update({f"{key}_{k}": v for k, v in value.items()})
        elif isinstance(value, (dict, list)):
            row[key] = json.dumps(value, sort_keys=True)
        else:
            row[key] = value
    return row


def to_csv(docs: Iterable[dict[str, Any]]) -> str:
    """CSV text of flat export rows (header from the first row)."""
    rows = [_flat(d) for d in docs]
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()
