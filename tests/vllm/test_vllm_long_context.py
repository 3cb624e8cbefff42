"""The second-generation pair (specgauge-9m-4k) in a real vLLM at its 4,096-token context: the
agentic suite's long transcripts are served with EAGLE-3 drafting on them, and specgauge's
acceptance is vLLM's own counters."""
from __future__ import annotations

import json
import sqlite3
import statistics

import pytest
from vllm_testkit import counter, launched, metrics, specgauge, vllm_setup

from specgauge.shipped_models import get_shipped

pytestmark = pytest.mark.vllm

MODEL = get_shipped("specgauge-9m-4k")


def test_vllm_serves_the_4k_pair_on_agentic_transcripts_with_eagle3(tmp_path):
    setup = vllm_setup(MODEL)
    argv = setup.argv("eagle3", "{port}")
    assert argv[argv.index("--max-model-len") + 1] == "4096"
    with launched(argv, tmp_path / "logs") as server:
        before = metrics(server.url)
        result = specgauge("bench", server.url, "--api", "openai-chat", "--suite", "agentic", "--max-tokens", "32",
                           "--num-requests", "4", "--concurrency", "1", "--warmup", "0",
                           "--output-json", str(tmp_path / "bench.json"),
                           "--db", str(tmp_path / "b.db"))
        after = metrics(server.url)
    assert result.returncode == 0, result.stderr[-4000:]
    point = json.loads((tmp_path / "bench.json").read_text())["points"][0]
    assert point["num_errors"] == 0 and point["num_ok"] == 4
    with sqlite3.connect(tmp_path / "b.db") as db:
        prompts = [row[0] for row in db.execute("SELECT prompt_tokens FROM requests")]
    print(f"prompt tokens (vLLM's count): {sorted(prompts)}; "
          f"acceptance length {point['server_spec']['accept_length']:.2f}")
    assert len(prompts) == 4 and statistics.median(prompts) >= 1000   # past the first target's 512
    drafts = counter(after, "vllm:spec_decode_num_drafts_total") - counter(before, "vllm:spec_decode_num_drafts_total")
    accepted = (counter(after, "vllm:spec_decode_num_accepted_tokens_total")
                - counter(before, "vllm:spec_decode_num_accepted_tokens_total"))
    assert drafts > 0 and accepted > 0   # the drafter drafts on these contexts and vLLM keeps some of it
    assert point["server_spec"]["accept_length"] == pytest.approx(1 + accepted / drafts)
