"""compare --context-lengths: the comparison once per band of prompt lengths, each band's prompts of that
length as served, a speedup and crossover per band, and one-line refusals of what cannot be done."""

from __future__ import annotations

import json

import pytest

from specgauge.compare.demo import TARGET_DIR
from specgauge.testing.scripted_server import Script, ScriptedServer
from cli_testkit import one_line_error, run_cli

TOKENIZER = str(TARGET_DIR / "tokenizer.json")
BASELINE = Script(ttft_s=0.005, chunk_delay_s=0.01, num_chunks=6, tokens_per_chunk=1)
SPECULATIVE = Script(ttft_s=0.005, chunk_delay_s=0.01, num_chunks=2, tokens_per_chunk=3)


def test_compare_gives_a_speedup_per_context_band(tmp_path):
    with ScriptedServer(BASELINE) as baseline, ScriptedServer(SPECULATIVE) as speculative:
        result = run_cli("compare", "--baseline", baseline.url, "--speculative", speculative.url, "--suite", "coding",
                         "--context-lengths", "1-64,200-400", "--tokenizer", TOKENIZER, "--concurrency", "1,2",
                         "--num-requests", "4", "--warmup", "0", "--resamples", "200", "--max-tokens", "6",
                         "--output-json", tmp_path / "bands.json", "--db", tmp_path / "c.db")
        bodies = list(baseline.requests_seen)
    assert result.returncode == 0, result.stderr
    assert "per context band" in result.stdout
    document = json.loads((tmp_path / "bands.json").read_text())
    bands = document["context_bands"]
    assert [band["band"] for band in bands] == [[1, 64], [200, 400]]
    assert len({band["comparison_id"] for band in bands}) == 2          # one comparison per band
    for band in bands:
        sweep = band["result"]["sweep"]
        assert [p["concurrency"] for p in sweep] == [1, 2] and all(p["ratio"] > 1 for p in sweep)
        assert f"{band['band'][0]}-{band['band'][1]} tokens" in result.stdout
    # every prompt sent falls in its band: the long band's are longer than anything in the short one
    words = sorted(len(" ".join(m["content"] for m in body["messages"]).split()) for body in bodies)
    assert words[0] < 64 < words[-1]


def test_context_bands_refuse_what_cannot_be_done(tmp_path):
    with ScriptedServer(BASELINE) as baseline, ScriptedServer(SPECULATIVE) as speculative:
        arms = ("--baseline", baseline.url, "--speculative", speculative.url, "--db", tmp_path / "c.db")
        one_line_error(run_cli("compare", *arms, "--context-lengths", "1-64"), "--tokenizer")
        one_line_error(run_cli("compare", *arms, "--context-lengths", "64-1"), "LO <= HI")
        one_line_error(run_cli("compare", *arms, "--context-lengths", "1-64", "--tokenizer", TOKENIZER,
                               "--output-json", "-"), "one verdict per band")


@pytest.mark.slow
def test_compare_context_bands_on_the_embedded_engine(tmp_path):
    result = run_cli("compare", "--api", "sglang",
                     "--baseline-engine", "--model specgauge-8m --speculative-algorithm NONE",
                     "--speculative-engine", "--model specgauge-8m --speculative-algorithm EAGLE3", "--suite", "coding",
                     "--context-lengths", "1-96,256-384", "--concurrency", "1,4", "--num-requests", "4",
                     "--max-tokens", "32", "--rounds", "1", "--warmup", "0", "--resamples", "200",
                     "--output-json", tmp_path / "bands.json", "--db", tmp_path / "c.db")
    assert result.returncode == 0, result.stderr[-3000:]
    bands = json.loads((tmp_path / "bands.json").read_text())["context_bands"]
    assert [band["band"] for band in bands] == [[1, 96], [256, 384]]
    for band in bands:
        assert band["result"]["losslessness"]["mismatches"] == 0
        assert all(p["ratio"] is not None for p in band["result"]["sweep"])
        assert band["result"]["single_stream"] and band["result"]["single_stream"][0]["speedup"] is not None
