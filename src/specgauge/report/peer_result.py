"""vLLM-style results of a stored run: SLO goodput, chosen percentiles, the ``--save-result`` JSON.

Same meanings as ``vllm bench serve`` (``vllm/benchmarks/serve.py``, ``calculate_metrics``):

- goodput: successful requests that meet *every* SLO given (``ttft``, ``tpot``, ``e2el``, in ms;
  a request with at most one output token has TPOT 0) per second of the measured window;
- ``itl`` in this file is vLLM's ITL: the gap between consecutive streamed chunks (specgauge's
  ICL; under speculation a chunk carries several tokens), ``tpot`` and ``ttft`` as in
  :mod:`specgauge.analysis.definitions`,
  ``e2el`` request sent → stream end;
- ``request_rate`` is ``"inf"`` for a closed-loop point (peers send those requests at once),
  ``max_concurrency`` its concurrency.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from specgauge.analysis import definitions
from specgauge.analysis.definitions import GOODPUT_METRICS
from specgauge.client.records import RequestRecord
from specgauge.store import PointRow, RunRow, Store

SECONDS_PER_MS = 1e-3


def _metric_values(records: list[RequestRecord], metric: str) -> list[float]:
    """Per-request (or, for ``itl``, per-gap) values in ms of the successful ``records``."""
    if metric == "ttft":
        return [v for v in map(definitions.ttft_ms, records) if v is not None]
    if metric == "tpot":
        return [v for v in map(definitions.tpot_ms, records) if v is not None]
    if metric == "e2el":
        return [v for v in map(definitions.e2e_ms, records) if v is not None]
    return [gap for r in records for gap in definitions.icl_ms(r)]


def meets_slos(record: RequestRecord, slos: dict[str, float]) -> bool:
    """Whether a successful request meets every SLO (vLLM: TPOT 0 when it has <= 1 output token)."""
    values = {"ttft": definitions.ttft_ms(record), "tpot": definitions.tpot_ms(record) or 0.0,
              "e2el": definitions.e2e_ms(record)}
    return all(values[name] is not None and values[name] <= limit for name, limit in slos.items())


def goodput_req_s(records: list[RequestRecord], slos: dict[str, float], window_s: float) -> float | None:
    """Requests per second that met every SLO (None without SLOs or a window)."""
    if not slos or window_s <= 0:
        return None
    return sum(1 for r in records if r.ok and meets_slos(r, slos)) / window_s


def _percentile_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def point_result(run: RunRow, point: PointRow, records: list[RequestRecord]) -> dict[str, Any]:
    """One point as a ``vllm bench serve`` result dict (its keys), plus a ``specgauge`` entry."""
    config, spec, agg = run.config, point.spec, point.aggregates or {}
    ok = [r for r in records if r.ok]
    window_s = float(agg.get("window_s") or 0.0)
    inputs = [r.prompt_tokens or 0 for r in records]
    outputs = [definitions.output_token_count(r) if r.ok else 0 for r in records]
    slos = config.get("goodput") or {}
    per_s = (lambda n: n / window_s) if window_s > 0 else (lambda n: None)
    closed = spec.get("mode") == "closed"
    result: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"),
        "backend": run.api, "label": run.api, "model_id": run.model,
        "tokenizer_id": config.get("tokenizer_path"), "num_prompts": len(records),
        "request_rate": "inf" if closed else spec.get("rate"),
        "burstiness": spec.get("burstiness"),
        "max_concurrency": spec.get("concurrency") if closed else spec.get("max_concurrency"),
        "duration": window_s, "completed": len(ok), "failed": len(records) - len(ok),
        "total_input_tokens": sum(r.prompt_tokens or 0 for r in ok), "total_output_tokens": sum(outputs),
        "request_throughput": per_s(len(ok)), "request_goodput": goodput_req_s(records, slos, window_s),
        "output_throughput": per_s(sum(outputs)),
        "total_token_throughput": per_s(sum(outputs) + sum(r.prompt_tokens or 0 for r in ok)),
        "input_lens": inputs, "output_lens": outputs,
        "ttfts": [(definitions.ttft_ms(r) or 0.0) * SECONDS_PER_MS for r in records],
        "itls": [[g * SECONDS_PER_MS for g in definitions.icl_ms(r)] for r in records],
        "errors": [r.error_message or "" for r in records],
    }
    for metric in config.get("percentile_metrics") or ("ttft", "tpot", "itl"):
        values = _metric_values(ok, metric)
        result[f"mean_{metric}_ms"] = float(np.mean(values)) if values else None
        result[f"median_{metric}_ms"] = float(np.median(values)) if values else None
        result[f"std_{metric}_ms"] = float(np.std(values)) if values else None
        for p in config.get("metric_percentiles") or (99.0,):
            result[f"p{_percentile_word(p)}_{metric}_ms"] = float(np.percentile(values, p)) if values else None
    result["specgauge"] = {"run_id": run.id, "point_index": point.point_index, "spec": spec,
                           "goodput_slo_ms": slos, "itl_definition": "gap between consecutive chunks (vLLM's ITL)"}
    return result


def run_results(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every finished point of run ``run_id`` as a vLLM-style result dict."""
    run = store.get_run(run_id)
    results = []
    for point in store.get_points(run_id):
        if point.status != "done":
            continue
        records = [r for group in store.request_segments(point.id).values() for r in group]
        results.append(point_result(run, point, records))
    return results


def summary_lines(results: list[dict[str, Any]]) -> list[str]:
    """The terminal block: vLLM's labels, one section per point."""
    lines = []
    for result in results:
        rate = result["request_rate"]
        head = f"c={result['max_concurrency']}" if rate == "inf" else f"rate={rate:g}/s"
        lines.append(f"{'=' * 12} vLLM-style result · point {result['specgauge']['point_index']} ({head}) {'=' * 12}")
        rows = [("Successful requests:", result["completed"]), ("Failed requests:", result["failed"]),
                ("Benchmark duration (s):", result["duration"]),
                ("Request throughput (req/s):", result["request_throughput"])]
        if result["request_goodput"] is not None:
            given = result["specgauge"]["goodput_slo_ms"]
            slos = " ".join(f"{k}:{given[k]:g}" for k in GOODPUT_METRICS if k in given)
            rows.append((f"Request goodput (req/s) [{slos}]:", result["request_goodput"]))
        rows.append(("Output token throughput (tok/s):", result["output_throughput"]))
        for key, value in result.items():
            if key.endswith("_ms") and not key.startswith("std_"):
                word, _, metric = key.removesuffix("_ms").partition("_")
                label = word.upper() if word.startswith("p") else word.capitalize()
                rows.append((f"{label} {metric.upper()} (ms):", value))
        for label, value in rows:
            shown = "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
            lines.append(f"{label:<48} {shown}")
    return lines


def default_result_filename(results: list[dict[str, Any]]) -> str:
    """vLLM's default name: ``{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json``."""
    first = results[0] if results else {"label": "specgauge", "request_rate": "inf", "max_concurrency": None,
                                        "model_id": None, "date": "now"}
    model = str(first.get("model_id") or "model").split("/")[-1]
    concurrency = f"-concurrency{first['max_concurrency']}" if first.get("max_concurrency") else ""
    return f"{first['label']}-{first['request_rate']}qps{concurrency}-{model}-{first['date']}.json"


def write_results(results: list[dict[str, Any]], path: str | Path) -> None:
    """One point: vLLM's single result object; several: a list of them (JSON, NaN-free)."""
    import json

    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    document = clean(results[0] if len(results) == 1 else results)
    Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
