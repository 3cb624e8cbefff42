"""Report inputs for the report tests: a stored bench run with measured token counts (real SQLite,
records built by hand so every figure is known) and a comparison result with a crossover."""

from __future__ import annotations

from pathlib import Path

from specgauge.analysis.aggregate import Window, aggregate_point
from specgauge.client.records import ErrorClass, RequestRecord, TokenCountSource
from specgauge.analysis.results import CompareResult
from specgauge.store import Store

MS = 1_000_000
CONCURRENCIES = (1, 4, 16, 64)
DOMAINS = ("coding", "encyclopedic")


def _record(index: int, concurrency: int, domain: str, token_source: TokenCountSource) -> RequestRecord:
    """A speculative-looking stream: chunks of 1-4 tokens, slower steps at higher concurrency."""
    send = index * 200 * MS
    step_ms = 10 + concurrency + index % 3                           # request-to-request spread
    tokens = [1] + [1 + (index + i) % 4 for i in range(24)]           # first chunk: prefill
    first_ms = 20 + concurrency + 2 * (index % 4)
    times = [send + first_ms * MS + i * step_ms * MS for i in range(len(tokens))]
    return RequestRecord(request_index=index, prompt_index=index % 5, domain=domain, api="sglang",
                         t_send_ns=send, t_headers_ns=send + 2 * MS, t_end_ns=times[-1] + MS,
                         chunk_times_ns=times, chunk_tokens=tokens, output_tokens=sum(tokens),
                         token_count_source=token_source, finish_reason="length", status_code=200,
                         spec_verify_ct=len(tokens) if token_source == TokenCountSource.SERVER else None)


def _failed(record: RequestRecord) -> RequestRecord:
    record.chunk_times_ns, record.chunk_tokens, record.output_tokens, record.spec_verify_ct = [], [], None, None
    record.error_class, record.error_message, record.status_code = ErrorClass.HTTP_5XX, "overloaded", 503
    return record


def stored_bench_run(db: Path, *, concurrencies=CONCURRENCIES, requests_per_point: int = 12,
                     token_source: str = "server", failed_at: int | None = None) -> int:
    """A finished closed-loop sweep in a real store at ``db``; returns its run id. With
    ``token_source="chunks"`` the records look like a server that reports no counts per chunk;
    ``failed_at=C`` makes a quarter of the requests at concurrency C fail with a 503."""
    source = TokenCountSource(token_source)
    with Store.open(db) as store:
        run_id = store.create_run(tool_version="0.1.0", host="test-host", url="http://127.0.0.1:30000",
                                  api="sglang", model="tiny-llama", config={"concurrency": list(concurrencies)},
                                  suite_name="smoke", suite_version=1, suite_hash="ab" * 32)
        specs = [{"mode": "closed", "concurrency": c, "num_requests": requests_per_point} for c in concurrencies]
        for point_id, concurrency in zip(store.add_points(run_id, specs), concurrencies):
            records = [_record(i, concurrency, DOMAINS[i % 2], source) for i in range(requests_per_point)]
            if concurrency == failed_at:
                records = [_failed(r) if r.request_index % 4 == 3 else r for r in records]
            for record in records:
                store.add_request(point_id, record)
            window = [0, requests_per_point * 200 * MS // concurrency + 400 * MS]
            aggregate = aggregate_point(records, [Window(*window)])
            store.finish_point(point_id, windows=[window], aggregates=aggregate.to_dict())
        store.set_run_status(run_id, "done")
    return run_id


def _percentiles(p50: float) -> dict:
    return {"mean": p50 * 1.1, "p50": p50, "p90": p50 * 1.5, "p99": p50 * 2.2, "count": 32}


def _arm_point(tok_s: float, ttft: float, tpot: float, accept: float | None) -> dict:
    return {"output_tok_s": tok_s, "ttft_ms": _percentiles(ttft), "tpot_ms": _percentiles(tpot),
            "accept_length": accept, "num_ok": 32, "num_errors": 0, "achieved_concurrency": None}


def comparison_result(*, crossover: bool = True) -> CompareResult:
    """A comparison where speculation pays at low concurrency and the baseline overtakes it near 14."""
    ratios = {1: 1.8, 4: 1.4, 16: 0.95, 64: 0.48} if crossover else {1: 1.8, 4: 1.6, 16: 1.3, 64: 1.1}
    sweep = []
    for concurrency, ratio in ratios.items():
        base = 40.0 * concurrency ** 0.8
        sweep.append({"concurrency": concurrency, "baseline_tok_s": base, "speculative_tok_s": base * ratio,
                      "ratio": ratio, "ci_low": ratio * 0.94, "ci_high": ratio * 1.06,
                      "ci_method": "paired_requests",
                      "tpot_ratio": {"ratio": 1 / ratio, "ci_low": 0.95 / ratio, "ci_high": 1.05 / ratio,
                                     "method": "paired_requests", "pairs": 32},
                      "ttft_ratio": {"ratio": 1.1, "ci_low": 1.0, "ci_high": 1.2, "method": "paired_requests",
                                     "pairs": 32},
                      "baseline": _arm_point(base, 30 + concurrency * 2, 25 + concurrency * 0.5, None),
                      "speculative": _arm_point(base * ratio, 35 + concurrency * 2.5, 25 / ratio + concurrency * 0.6,
                                                2.6)})
    single = [
        {"domain": "coding", "baseline_tok_s": 40.0, "speculative_tok_s": 72.0, "speedup": 1.8, "ci_low": 1.7,
         "ci_high": 1.9, "accept_length": 3.1, "baseline": _arm_point(40, 30, 25, None),
         "speculative": _arm_point(72, 33, 14, 3.1)},
        {"domain": "encyclopedic", "baseline_tok_s": 40.0, "speculative_tok_s": 48.0, "speedup": 1.2,
         "ci_low": 1.1, "ci_high": 1.3, "accept_length": 1.9, "baseline": _arm_point(40, 30, 25, None),
         "speculative": _arm_point(48, 33, 21, 1.9)},
    ]
    disable_above = 14 if crossover else None
    document = {
        "comparison_id": 1, "created_at": "2026-12-02T12:00:00+00:00", "tool_version": "0.1.0",
        "arms": [{"name": "baseline", "kind": "url", "description": "http://127.0.0.1:30000",
                  "url": "http://127.0.0.1:30000", "model": "tiny-llama"},
                 {"name": "speculative", "kind": "engine", "description": "specgauge serve --speculative eagle3",
                  "url": "http://127.0.0.1:30001", "model": "tiny-llama"}],
        "speculative_label": "EAGLE-3",
        "settings": {"api": "sglang", "domains": list(DOMAINS), "concurrency": list(ratios), "num_requests_single": 16,
                     "num_requests_sweep": 32, "max_tokens": 64, "seed": 0, "temperature": 0.0, "warmup": 2,
                     "rounds": 1, "schedule": "abba_by_point", "bootstrap_resamples": 1000},
        "suites": [{"name": "coding", "version": 1, "content_hash": "cd" * 32},
                   {"name": "encyclopedic", "version": 1, "content_hash": "ef" * 32}],
        "stages": [{"stage": "single:coding", "suite": {"name": "coding", "version": 1, "content_hash": "cd" * 32},
                    "baseline_run_ids": [1], "speculative_run_ids": [2]},
                   {"stage": "sweep", "suite": {"name": "coding", "version": 1, "content_hash": "cd" * 32},
                    "baseline_run_ids": [3], "speculative_run_ids": [4]}],
        "single_stream": single, "sweep": sweep,
        "crossover_concurrency": 13.6 if crossover else None,
        "crossover": ({"kind": "crosses", "concurrency": 13.6, "ci_low": 11.8, "ci_high": 16.9, "between": [4, 16]}
                      if crossover else {"kind": "never"}),
        "recommended_disable_above": disable_above,
        "recommendation": {"disable_above": disable_above,
                           "rule": "speculate while at most 14 requests run" if crossover else "keep speculation on",
                           "settings": [{"server": "sglang", "setting": "--speculative-disable-above 14",
                                         "note": "hypothetical flag"},
                                        {"server": "vllm", "setting": '{"num_speculative_tokens_per_batch_size": '
                                                                      '[[14, 3], [1024, 0]]}', "note": "newer vLLM"},
                                        {"server": "specgauge",
                                         "setting": "specgauge serve --speculative-disable-above 14",
                                         "note": "the embedded engine"}]},
        "verdict_lines": ["EAGLE-3 speeds up single-stream coding 1.8x [1.7, 1.9] and encyclopedic 1.2x [1.1, 1.3].",
                          "The baseline overtakes it at ≈ 14 concurrent requests [12, 17]; at 64 speculation "
                          "costs 2.1x throughput."],
        "losslessness": {"checked": True, "compared": 32, "mismatches": 1, "mismatch_rate": 1 / 32,
                         "examples": [{"stage": "single:coding", "prompt_index": 3, "request_index": 3,
                                       "first_difference": 17, "baseline_excerpt": "return x + 1",
                                       "speculative_excerpt": "return x+1"}]},
        "health": [{"code": "degenerate_output", "message": "12% of outputs repeat 4-grams heavily"}],
        "tokens_per_chunk": {"baseline": [{"tokens": 1, "count": 900}],
                             "speculative": [{"tokens": t, "count": c}
                                             for t, c in ((1, 200), (2, 260), (3, 240), (4, 180))]},
        "acceptance_by_position": [{"start": s, "end": s + 16, "tokens_per_chunk": 3.0 - s / 64, "chunks": 40}
                                   for s in range(0, 64, 16)],
        "acceptance_by_domain": {"coding": 3.1, "encyclopedic": 1.9},
    }
    return CompareResult.model_validate(document)
