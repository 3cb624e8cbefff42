"""Multi-turn sessions against a real vLLM started with ``--enable-prompt-tokens-details``: every turn
after the first carries vLLM's own earlier answers, and vLLM's prefix cache serves that history in whole
blocks — ``usage.prompt_tokens_details.cached_tokens`` read per request, per turn."""
from __future__ import annotations

import sqlite3

import pytest
from vllm_testkit import launched, specgauge, vllm_setup

pytestmark = pytest.mark.vllm


def test_vllm_serves_the_history_of_each_session_from_its_prefix_cache(tmp_path):
    setup = vllm_setup()
    argv = setup.argv("plain", "{port}", extra=("--enable-prompt-tokens-details",))
    with launched(argv, tmp_path / "logs") as server:
        result = specgauge("bench", server.url, "--api", "openai-chat", "--suite", "sessions", "--num-requests", "3",
                           "--concurrency", "1", "--warmup", "0", "--db", str(tmp_path / "b.db"))
    assert result.returncode == 0, result.stderr[-4000:]
    assert "per turn" in result.stdout
    with sqlite3.connect(tmp_path / "b.db") as db:
        rows = db.execute("SELECT session_index, turn_index, prompt_tokens, cached_tokens, output_text, error_class"
                          " FROM requests ORDER BY session_index, turn_index").fetchall()
    print("session turn prompt cached:", [row[:4] for row in rows])
    assert [(s, t) for s, t, *_ in rows] == [(s, t) for s in range(3) for t in range(3)]
    assert all(row[5] is None for row in rows)
    by_key = {(s, t): (prompt, cached) for s, t, prompt, cached, _, _ in rows}
    assert by_key[(0, 0)][1] == 0   # the first prompt this server saw: nothing cached
    for session in range(3):
        for turn in (1, 2):
            prompt, cached = by_key[(session, turn)]
            earlier_prompt, _ = by_key[(session, turn - 1)]
            assert prompt > earlier_prompt      # the history grew by the earlier answer and this turn
            assert 0 <= cached < prompt          # read per request; the new turn itself is never cached
    # vLLM caches whole KV blocks, 128 tokens a block on CPU unless set (vllm/platforms/cpu.py): a history past a
    # block is served from the cache
    assert any(by_key[(s, t)][1] > 0 for s in range(3) for t in (1, 2))
