"""Raw-prompt rendering of chat requests, and the token-count fallbacks."""

import json

from specgauge.client.prompts import prompt_text, render_plain
from specgauge.client.records import RequestRecord, TokenCountSource
from specgauge.client.tokens import assign_chunk_tokens, server_chunk_tokens, spread_tokens
from specgauge.suites.model import ChatMessage, SuiteRequest

CHAT = SuiteRequest(messages=(ChatMessage(role="system", content="S"), ChatMessage(role="user", content="U")))


def test_plain_rendering():
    assert render_plain(CHAT.messages) == "System: S\n\nUser: U\n\nAssistant:"
    assert prompt_text(SuiteRequest(prompt="raw text")) == "raw text"


def test_chat_template_next_to_the_tokenizer(tmp_path):
    template = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "bos_token": "<s>"}))
    path = str(tmp_path / "tokenizer.json")
    assert prompt_text(CHAT, path) == "<s><|system|>S<|user|>U<|assistant|>"


def test_no_template_falls_back_to_plain(tmp_path):
    assert prompt_text(CHAT, str(tmp_path / "tokenizer.json")) == render_plain(CHAT.messages)


def record_with(chunks: int, output_tokens: int | None) -> RequestRecord:
    return RequestRecord(request_index=0, prompt_index=0, chunk_times_ns=list(range(chunks)),
                         output_tokens=output_tokens)


def test_server_counts_win_and_a_trailing_eos_goes_to_the_last_chunk():
    record = record_with(3, 7)
    assign_chunk_tokens(record, ["a", "b", "c"], [2, 4, 6], None)
    assert record.chunk_tokens == [2, 2, 3] and record.token_count_source is TokenCountSource.SERVER


def test_spread_and_chunk_fallbacks():
    record = record_with(3, 8)
    assign_chunk_tokens(record, ["a", "b", "c"], [None, None, None], None)
    assert record.chunk_tokens == [3, 3, 2] and record.token_count_source is TokenCountSource.SPREAD
    record = record_with(2, None)
    assign_chunk_tokens(record, ["a", "b"], [None, None], None)
    assert record.chunk_tokens == [1, 1] and record.token_count_source is TokenCountSource.CHUNKS


def test_server_counts_that_go_backwards_are_not_trusted():
    assert server_chunk_tokens([3, 2]) is None
    assert server_chunk_tokens([1, None]) is None
    assert spread_tokens(5, 5) == [1] * 5
