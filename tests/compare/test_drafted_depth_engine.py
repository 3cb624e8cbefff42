"""The depth that ran, on the embedded engine: it counts drafts by length (vLLM's
``spec_decode_num_drafts_by_draft_length``), a comparison reads them per point, and a speculative
URL arm that declares another depth than it runs (``--speculative-arm-config``) gets
``drafted_depth_mismatch``; declared as it runs (a schedule whose K changes with the batch size),
it gets none, and the arm is described as declared."""

import json

import pytest

from cli_testkit import run_cli
from specgauge.engine.serving.launch import EngineProcess

SCHEDULE = "[[1,1,3],[2,64,1]]"


def _compare(tmp_path, baseline: str, speculative: str, declared: dict, name: str) -> dict:
    done = run_cli("compare", "--baseline", baseline, "--speculative", speculative,
                   "--speculative-arm-config", json.dumps(declared), "--domains", "coding",
                   "--single-stream-requests", "4", "--concurrency", "1,4", "--num-requests", "8",
                   "--max-tokens", "32", "--warmup", "0", "--resamples", "200",
                   "--output-json", tmp_path / f"{name}.json", "--db", tmp_path / f"{name}.db")
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / f"{name}.json").read_text())


@pytest.mark.slow
def test_a_declared_depth_that_did_not_run_is_named(tmp_path):
    ngram_args = ["--model", "specgauge-8m", "--speculative-algorithm", "NGRAM", "--speculative-num-steps", "3",
                  "--speculative-schedule", SCHEDULE]
    with EngineProcess(["--model", "specgauge-8m"]) as plain, EngineProcess(ngram_args) as ngram:
        declared = {"method": "ngram", "num_speculative_tokens": 3,
                    "num_speculative_tokens_per_batch_size": json.loads(SCHEDULE)}
        honest = _compare(tmp_path, plain.url, ngram.url, declared, "honest")
        wrong = _compare(tmp_path, plain.url, ngram.url, {"method": "ngram", "num_speculative_tokens": 1}, "wrong")
    assert not [w for w in honest["health"] if w["code"] == "drafted_depth_mismatch"]
    assert honest["arms"][1]["speculation"]["source"] == "--speculative-arm-config"
    assert (honest["arms"][1]["speculation"]["engine"], honest["arms"][1]["speculation"]["method"]) == ("vllm",
                                                                                                       "ngram")
    mismatches = [w for w in wrong["health"] if w["code"] == "drafted_depth_mismatch"]
    assert mismatches, wrong["health"]
    assert any("drafts deeper than the depth set: set K=1" in w["message"] and "of length 3" in w["message"]
               for w in mismatches)
