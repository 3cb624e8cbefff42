"""``specgauge bench`` against a real SGLang (CPU, upstream 2f14d6c) serving the shipped target with
the shipped EAGLE-3 drafter: the point's acceptance is SGLang's own per-request figures summed over
the point, in the one definition ``Σ(completion_tokens − 1) / Σ spec_verify_ct``, on SGLang's
``/generate`` (``meta_info``) and on its OpenAI chat route alike.

SGLang's own sums are its Prometheus counters, which grow by each finished request's
``spec_verify_ct`` and completion tokens (``observe_one_finished_request`` in
python/sglang/srt/observability/metrics_collector.py): scraped by the test around the point.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from real_server_kit import launched, metrics, specgauge, total
from sglang_testkit import needs_avx512_bf16, serve_argv, sglang_setup, warmed_up

from specgauge.store import Store

pytestmark = [pytest.mark.sglang, needs_avx512_bf16]

BENCH = ("--suite", "smoke", "--max-tokens", "48", "--num-requests", "6", "--concurrency", "2", "--warmup", "0")


@pytest.fixture(scope="module")
def eagle_server(tmp_path_factory):
    sglang_setup()   # a missing piece fails here, in one line
    with launched(serve_argv("eagle3"), tmp_path_factory.mktemp("sglang-logs")) as server:
        warmed_up(server.url)
        yield server


def bench_point(url: str, tmp_path: Path, api: str) -> tuple[dict, list, dict]:
    """One bench point on ``api``: its JSON, its stored records, and SGLang's counters' growth."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    out, db = tmp_path / "bench.json", tmp_path / "b.db"
    before = metrics(url)
    result = specgauge("bench", url, "--api", api, *BENCH, "--output-json", str(out), "--db", str(db))
    after = metrics(url)
    assert result.returncode == 0, result.stderr[-4000:]
    document = json.loads(out.read_text())
    (point,) = document["points"]
    assert point["num_errors"] == 0
    with Store.open(db, create=False) as store:
        (stored,) = store.get_points(document["run_id"])
        records = store.get_requests(stored.id)
    grown = {name: total(after, f"sglang:{name}") - total(before, f"sglang:{name}")
             for name in ("spec_verify_calls_total", "generation_tokens_total", "num_requests_total")}
    return point, records, grown


def test_native_api_acceptance_is_sglangs_per_request_figures_summed(eagle_server, tmp_path):
    point, records, grown = bench_point(eagle_server.url, tmp_path, "sglang")
    verify = [r.spec_verify_ct for r in records]
    tokens = [r.output_tokens for r in records]
    print(f"\nsglang /generate: verify steps {verify}, completion tokens {tokens}, SGLang's own "
          f"spec_accept_length {[round(r.spec_accept_length, 3) for r in records]}")
    assert all(v and v > 0 for v in verify) and len(records) == 6
    # The stored per-request figures are SGLang's: they add up to its own counters.
    assert sum(verify) == grown["spec_verify_calls_total"]
    assert sum(tokens) == grown["generation_tokens_total"] and grown["num_requests_total"] == len(records)
    one_definition = (sum(tokens) - len(records)) / sum(verify)
    assert point["accept_length_token_weighted"] == pytest.approx(one_definition)
    assert point["accept_length"] == pytest.approx(sum((t - 1) / v for t, v in zip(tokens, verify)) / len(records))
    assert point["accept_length_source"] == "per_request"
    spec = point["server_spec"]   # the counters, differenced by bench itself: the same figure
    assert (spec["source"], spec["scope"]) == ("sglang_metrics", "point")
    assert spec["accept_length"] == pytest.approx(one_definition)
    print(f"acceptance: {one_definition:.3f} token-weighted, {point['accept_length']:.3f} mean over requests; "
          f"SGLang's gauge at the end {spec['gauges_at_end']}")


def test_openai_chat_acceptance_has_the_same_definition(eagle_server, tmp_path):
    point, records, grown = bench_point(eagle_server.url, tmp_path, "openai-chat")
    # This SGLang answers return_spec_tokens_details without any details: nothing per request.
    assert all(r.spec_verify_ct is None for r in records)
    assert point["accept_length_source"] == "server_point"
    spec = point["server_spec"]
    assert (spec["source"], spec["scope"]) == ("sglang_metrics", "point")
    tokens = sum(r.output_tokens for r in records)
    assert tokens == grown["generation_tokens_total"] and grown["num_requests_total"] == len(records)
    one_definition = (tokens - len(records)) / grown["spec_verify_calls_total"]
    assert point["accept_length"] == pytest.approx(one_definition) and one_definition > 1
    print(f"\nsglang chat: acceptance {one_definition:.3f} from SGLang's counters over the point "
          f"({grown['spec_verify_calls_total']:.0f} verify steps, {tokens} tokens, {len(records)} requests)")
