"""``specgauge compare`` with both arms launched by command on a real vLLM (plain against EAGLE-3,
plain against n-gram): it finishes, reports losslessness, and the vLLM ``--speculative-config``
it recommends is accepted by this vLLM (launched, it serves).

Contract of the recommendation (compare's verdict JSON): the ``vllm`` ServerSetting's ``setting``
is exactly ``--speculative-config '<json>'``, for the speculative arm's own method.
"""
from __future__ import annotations

import json
import shlex

import pytest
from vllm_testkit import chat, command, launched, specgauge, vllm_setup

pytestmark = pytest.mark.vllm

COMPARE = ("--domains", "coding", "--num-requests", "3", "--concurrency", "1,2", "--sweep-requests", "4",
           "--max-tokens", "32", "--warmup", "1", "--resamples", "200", "--start-timeout", "1200",
           "--rounds", "1")   # launched arms default to 2 rounds; one keeps this test's vLLM starts to two per method


@pytest.mark.parametrize("method", ["eagle3", "ngram"])
def test_compare_of_launched_vllm_arms_and_its_advice_serves(method, tmp_path):
    setup = vllm_setup()
    out = tmp_path / "verdict.json"
    result = specgauge("compare", "--baseline-cmd", command(setup.argv("plain", "{port}")),
                       "--speculative-cmd", command(setup.argv(method, "{port}")), *COMPARE,
                       "--label", method, "--output-json", str(out), "--db", str(tmp_path / "c.db"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    verdict = json.loads(out.read_text())
    print("\n".join(verdict["verdict_lines"]))
    losslessness = verdict["losslessness"]
    print(f"losslessness: {losslessness['mismatches']} of {losslessness['compared']} outputs differed")
    assert losslessness["checked"] and losslessness["compared"] > 0

    settings = [s for s in verdict["recommendation"]["settings"] if s["server"] == "vllm"]
    if verdict["recommended_disable_above"] is None:   # it paid at every tested concurrency: nothing to change
        assert settings == []
        return
    assert len(settings) == 1, verdict["recommendation"]
    if verdict["recommended_disable_above"] == 0 and settings[0]["setting"].startswith("omit"):
        return   # it never paid: serve without speculation, as the baseline arm just did
    args = shlex.split(settings[0]["setting"])
    assert args[0] == "--speculative-config" and len(args) == 2, settings[0]["setting"]
    config = json.loads(args[1])
    assert config["method"] == method
    with launched(setup.argv("plain", "{port}", extra=tuple(args)), tmp_path / "advice-logs") as server:
        reply = chat(server.url, "Write a Python function that adds two numbers.")
    assert reply["choices"][0]["message"]["content"]
