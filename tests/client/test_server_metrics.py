"""Server-side speculation figures: Prometheus parsing, vLLM counter diffs, SGLang info and gauges."""

import aiohttp
import pytest

from specgauge.client.endpoint import Endpoint
from specgauge.client.probe import detect_model, fingerprint
from specgauge.client.server_metrics import (counters_between, parse_prometheus, scrape_spec_snapshot,
                                             server_info_spec, spec_metrics)
from specgauge.testing.scripted_server import ScriptedServer, VllmCounters, refused_url

VLLM_PAGE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 50.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 450.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 140.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 100.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 60.0
vllm:num_requests_running{model_name="m"} 3 1700000000000
sglang:spec_accept_length{model_name="m",tp_rank="0"} 3.5
weird line that is not a sample
"""


def test_parse_prometheus_labels_values_and_timestamps():
    samples = parse_prometheus('a_total{x="1",y="q\\"uote"} 2.5\nb 7 1700000000\n# c 1\n')
    assert samples == [("a_total", {"x": "1", "y": 'q"uote'}, 2.5), ("b", {}, 7.0)]


def test_spec_metrics_sums_label_sets_and_keeps_positions():
    found = spec_metrics(VLLM_PAGE)
    assert found["vllm"] == {"num_drafts": 150.0, "num_draft_tokens": 450.0, "num_accepted_tokens": 300.0}
    assert found["vllm_per_position"] == {"0": 140.0, "1": 100.0, "2": 60.0}
    assert found["sglang_gauges"] == {"spec_accept_length": 3.5}


def test_vllm_counters_are_diffed_around_the_point():
    before = {"vllm": {"num_drafts": 10.0, "num_draft_tokens": 30.0, "num_accepted_tokens": 12.0},
              "vllm_per_position": {"0": 6.0, "1": 4.0, "2": 2.0}}
    after = {"vllm": {"num_drafts": 30.0, "num_draft_tokens": 90.0, "num_accepted_tokens": 42.0},
             "vllm_per_position": {"0": 24.0, "1": 14.0, "2": 6.0}}
    counters = counters_between(before, after)
    assert counters.source == "vllm_metrics" and counters.scope == "point"
    assert counters.accept_length == pytest.approx(1 + 30 / 20)
    assert counters.accept_rate == pytest.approx(30 / 60)
    assert counters.per_position == pytest.approx([18 / 20, 10 / 20, 4 / 20])
    assert counters.num_drafts == 20.0


def test_no_drafts_during_the_point_falls_back_or_is_none():
    same = {"vllm": {"num_drafts": 5.0, "num_draft_tokens": 15.0, "num_accepted_tokens": 7.0}}
    assert counters_between(same, same) is None
    info = {"sglang_server_info": {"avg_spec_accept_length": 2.7}}
    counters = counters_between({}, info)
    assert (counters.accept_length, counters.source, counters.scope) == (2.7, "sglang_server_info",
                                                                         "cumulative_since_start")
    assert counters_between({}, {"sglang_gauges": {"spec_accept_length": 3.1}}).scope == "gauge_at_end"
    assert counters_between(None, None) is None


SGLANG_PAGE = """# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{{model_name="m"}} {verify}
sglang:generation_tokens_total{{model_name="m"}} {generation}
sglang:num_requests_total{{model_name="m"}} {requests}
sglang:spec_accept_length{{model_name="m"}} {gauge}
"""


def test_sglang_counters_give_the_points_acceptance_and_the_gauges_are_never_differenced():
    # 100 verify steps and 50 requests before; during the point 3 requests of 48 tokens took
    # 14 + 25 + 20 verify steps: acceptance (3 * 47) / 59, the one definition.
    before = spec_metrics(SGLANG_PAGE.format(verify=100, generation=400, requests=50, gauge=9.0))
    after = spec_metrics(SGLANG_PAGE.format(verify=159, generation=544, requests=53, gauge=2.4))
    counters = counters_between(before, after)
    assert (counters.source, counters.scope) == ("sglang_metrics", "point")
    assert counters.accept_length == pytest.approx(3 * 47 / 59)
    assert counters.num_drafts == 59 and counters.num_accepted_tokens == 3 * 47 - 59
    assert counters.gauges_at_end == {"spec_accept_length": 2.4}   # as read at the end, not a difference
    # No verify step during the point (a plain server, or nothing ran): the gauge as it stands.
    idle = counters_between(after, after)
    assert (idle.source, idle.scope, idle.accept_length) == ("sglang_metrics", "gauge_at_end", 2.4)


def test_server_info_field_locations():
    assert server_info_spec({"internal_states": [{"avg_spec_accept_length": 3.25}]}) == {
        "avg_spec_accept_length": 3.25}
    assert server_info_spec({"avg_spec_accept_length": 1.5}) == {"avg_spec_accept_length": 1.5}
    assert server_info_spec({"internal_states": [{}]}) == {}


@pytest.mark.parametrize("path", ["/get_server_info", "/server_info"])
async def test_scrape_from_a_live_sglang_server(path):
    info = {"internal_states": [{"avg_spec_accept_length": 2.5}], "version": "0.0-test"}
    with ScriptedServer(server_info=info, server_info_path=path,
                        sglang_gauges={"spec_accept_length": 2.4, "spec_accept_rate": 0.6}) as server:
        async with aiohttp.ClientSession() as session:
            snapshot = await scrape_spec_snapshot(session, server.url, {})
    assert snapshot["sglang_gauges"] == {"spec_accept_length": 2.4, "spec_accept_rate": 0.6}
    assert snapshot["sglang_server_info"] == {"avg_spec_accept_length": 2.5}


async def test_scrape_of_a_vllm_server_does_not_ask_sglang_routes():
    """vLLM answers 404 on /get_server_info and /server_info: once /metrics shows vllm: metrics,
    neither is asked for (before: both, at every scrape)."""
    vllm = VllmCounters(drafts=4, draft_tokens=12, accepted=6, per_position=[3, 2, 1])
    with ScriptedServer(vllm=vllm) as server:
        async with aiohttp.ClientSession() as session:
            snapshot = await scrape_spec_snapshot(session, server.url, {})
            await scrape_spec_snapshot(session, server.url, {})
        paths = list(server.paths_seen)
    assert snapshot["vllm"] == {"num_drafts": 4.0, "num_draft_tokens": 12.0, "num_accepted_tokens": 6.0}
    assert snapshot["vllm_per_position"] == {"0": 3.0, "1": 2.0, "2": 1.0}
    assert paths == ["/metrics", "/metrics"]


async def test_fingerprint_of_a_vllm_server_does_not_ask_sglang_routes():
    with ScriptedServer(owned_by="vllm") as server:
        found = await fingerprint(Endpoint(server.url, api="openai-chat"))
        paths = list(server.paths_seen)
    assert found["models"]["data"][0]["owned_by"] == "vllm" and found["server_info"] is None
    assert paths == ["/v1/models"]


NEWER_VLLM_PAGE = """vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 25.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 15.0
vllm:spec_decode_num_drafts_by_draft_length_total{engine="0",model_name="m",draft_length="0"} 2.0
vllm:spec_decode_num_drafts_by_draft_length_total{engine="0",model_name="m",draft_length="3"} 8.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 640.0
"""


def test_drafts_by_length_and_prefix_cache_are_diffed_around_the_point():
    before = spec_metrics(NEWER_VLLM_PAGE)
    after = spec_metrics(NEWER_VLLM_PAGE.replace(" 10.0", " 30.0").replace(" 25.0", " 75.0")
                         .replace(" 15.0", " 45.0").replace(" 2.0", " 4.0").replace(" 8.0", " 26.0")
                         .replace(" 1000.0", " 1400.0").replace(" 640.0", " 940.0"))
    assert before["server"] == "vllm" and before["vllm_drafts_by_length"] == {"0": 2.0, "3": 8.0}
    point = counters_between(before, after)
    assert point.accept_length == 1 + 30 / 20
    assert point.drafts_by_length == {"0": 2.0, "3": 18.0}
    assert point.prefix_cache_queries == 400.0 and point.prefix_cache_hits == 300.0
    assert point.prefix_cache_hit_rate == 0.75
    assert point.to_dict()["prefix_cache_hit_rate"] == 0.75


async def test_scrape_never_raises_on_a_dead_server():
    async with aiohttp.ClientSession() as session:
        assert await scrape_spec_snapshot(session, refused_url(), {}, timeout_s=1) == {}


async def test_detect_model_and_fingerprint():
    with ScriptedServer(model="llama-test", server_info={"version": "9"}) as server:
        endpoint = Endpoint(server.url, api="openai-chat")
        assert await detect_model(endpoint) == "llama-test"
        found = await fingerprint(endpoint)
    assert found["models"]["data"][0]["id"] == "llama-test"
    assert found["server_info"] == {"version": "9"} and found["headers"]["server"] == "scripted/1"
    dead = Endpoint(refused_url(), api="sglang")
    assert await detect_model(dead) is None
    assert (await fingerprint(dead))["models"] is None


SGLANG_DETAILS = {"spec_verify_ct": 4, "spec_accept_length": 3.0, "spec_num_correct_drafts": 8,
                  "spec_num_proposed_drafts": 12, "spec_correct_drafts_histogram": [0, 0, 4]}


@pytest.mark.parametrize("owned_by, asked", [("sglang", True), ("vllm", False), ("specgauge-test", False)])
async def test_spec_token_details_are_asked_of_sglang_only_and_read(tmp_path, owned_by, asked):
    """SGLang's OpenAI routes return per-request speculation (``sglext.spec_tokens_details``)
    when asked with ``return_spec_tokens_details``; a strict server refuses the unknown field, so it
    goes to a server the probe showed to be SGLang only."""
    from specgauge.load.bench import run_benchmark
    from specgauge.load.bench_config import BenchConfig
    from specgauge.store import Store
    from specgauge.testing.scripted_server import Script

    script = Script(ttft_s=0.001, chunk_delay_s=0.001, num_chunks=4, tokens_per_chunk=3,
                    openai_extra={"sglext": {"spec_tokens_details": SGLANG_DETAILS}} if asked else {})
    with ScriptedServer(script, owned_by=owned_by) as server, Store.open(tmp_path / "b.db") as store:
        summary = await run_benchmark(BenchConfig(url=server.url, api="openai-chat", suite="coding",
                                                  num_requests=2, warmup=0), store)
        records = [r for p in store.get_points(summary.run_id) for r in store.get_requests(p.id)]
        bodies = list(server.requests_seen)
    assert [("return_spec_tokens_details" in b) for b in bodies] == [asked] * len(bodies)
    assert records and all(r.ok for r in records)
    if asked:
        # SGLang's correct-draft count is not taken as the acceptance (read_spec_details says why)
        assert all((r.spec_verify_ct, r.spec_correct_drafts, r.spec_proposed_drafts) == (4, None, 12) for r in records)
        assert all(r.spec_accept_histogram == [0, 0, 4] for r in records)
