"""``sessions@1``: every request a session of 3 turns that fits the default model's 512-token context over
all its turns, each earlier answer counted at its full ``max_tokens`` (the load runner's check ends a
session that would not fit, with a note; this suite is sized so that none has to); a bad session line in a
suite file is one line naming it."""

from __future__ import annotations

import json

import pytest

from specgauge.client.prompts import prompt_text
from specgauge.client.tokens import load_tokenizer
from specgauge.compare.demo import TARGET_DIR
from specgauge.shipped_models import FIRST_MODEL, get_shipped
from specgauge.errors import UserError
from specgauge.suites.model import ChatMessage, SuiteRequest, read_suite_jsonl
from specgauge.suites.registry import load_suite


def test_every_session_fits_the_default_models_context_over_its_turns():
    context = get_shipped(FIRST_MODEL).context   # the tightest shipped context (512)
    tokenizer_path = str(TARGET_DIR / "tokenizer.json")
    tokenizer = load_tokenizer(tokenizer_path)
    suite = load_suite("sessions")
    assert suite.has_sessions and {r.domain for r in suite.requests} == {"coding", "agentic"}
    for request in suite.requests:
        assert request.num_turns == 3
        history = list(request.messages)
        for later in request.next_turns:   # an answer of one token's text now; its full max_tokens added below
            history += [ChatMessage(role="assistant", content="x"), later]
        last = SuiteRequest(messages=tuple(history), max_tokens=request.max_tokens)
        tokens = len(tokenizer.encode(prompt_text(last, tokenizer_path), add_special_tokens=False).ids)
        worst = tokens + request.num_turns * request.max_tokens
        assert worst <= context, (request.notes, worst)


@pytest.mark.parametrize("line, reason", [
    ({"prompt": "raw text", "next_turns": [{"role": "user", "content": "more"}]}, "'next_turns' needs 'messages'"),
    ({"messages": [{"role": "user", "content": "hi"}], "next_turns": []}, "'next_turns' must hold 1 to"),
    ({"messages": [{"role": "user", "content": "hi"}], "next_turns": [{"role": "assistant", "content": "canned"}]},
     "non-empty 'user' or 'tool' message"),
])
def test_a_bad_session_line_is_one_line_naming_it(tmp_path, line, reason):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "fine"}]}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(UserError, match=reason) as error:
        read_suite_jsonl(path)
    assert str(error.value).startswith(f"{path}:2: bad request")
