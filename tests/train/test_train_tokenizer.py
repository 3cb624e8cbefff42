"""The tokenizer round-trips text with special tokens, and the chat template renders the fixed format."""

from __future__ import annotations

import json

import pytest

from specgauge.train.chat import CHAT_TEMPLATE, SPECIAL_TOKENS, render, tokenize_conversation
from specgauge.train.tokenizer import special_token_ids, tokenizer_config

MESSAGES = [
    {"role": "system", "content": "Tools: []"},
    {"role": "user", "content": "Continue:\ndef add(a, b):"},
    {"role": "assistant", "content": "    return a + b  # ünïcode ✓"},
]


def test_special_tokens_are_single_ids_in_order(tiny_tokenizer):
    for index, token in enumerate(SPECIAL_TOKENS):
        assert tiny_tokenizer.token_to_id(token) == index
        assert tiny_tokenizer.encode(token, add_special_tokens=False).ids == [index]


def test_round_trip_with_special_tokens(tiny_tokenizer):
    text = render(MESSAGES) + "<|tool|>\n{\"ok\": true}<|end|>\n<|end_of_text|><|pad|>"
    ids = tiny_tokenizer.encode(text, add_special_tokens=False).ids
    assert tiny_tokenizer.decode(ids, skip_special_tokens=False) == text


def test_segment_tokenization_decodes_to_the_rendered_conversation(tiny_tokenizer):
    ids, mask = tokenize_conversation(tiny_tokenizer, MESSAGES)
    assert tiny_tokenizer.decode(ids, skip_special_tokens=False) == render(MESSAGES)
    assert sum(mask) == len(tiny_tokenizer.encode(MESSAGES[-1]["content"], add_special_tokens=False).ids) + 1


def test_chat_template_renders_the_fixed_format():
    jinja2 = pytest.importorskip("jinja2")
    template = jinja2.Environment().from_string(CHAT_TEMPLATE)
    rendered = template.render(messages=MESSAGES, bos_token="<|begin_of_text|>", add_generation_prompt=True)
    assert rendered == (
        "<|begin_of_text|><|system|>\nTools: []<|end|>\n<|user|>\nContinue:\ndef add(a, b):<|end|>\n"
        "<|assistant|>\n    return a + b  # ünïcode ✓<|end|>\n<|assistant|>\n"
    )
    assert rendered == render(MESSAGES, add_generation_prompt=True)


def test_tokenizer_config_names_the_tokens(tiny_corpus, tiny_tokenizer):
    config = json.loads((tiny_corpus["tokenizer_dir"] / "tokenizer_config.json").read_text())
    assert config == tokenizer_config()
    assert (config["bos_token"], config["eos_token"], config["pad_token"]) == ("<|begin_of_text|>", "<|end|>", "<|pad|>")
    ids = special_token_ids(tiny_tokenizer)
    assert ids["eos_token_id"] == [tiny_tokenizer.token_to_id("<|end|>"), tiny_tokenizer.token_to_id("<|end_of_text|>")]


def test_transformers_reads_the_tokenizer_and_template(tiny_corpus, tiny_tokenizer):
    transformers = pytest.importorskip("transformers")
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(tiny_corpus["tokenizer_dir"]))
    assert hf.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True) == render(MESSAGES, add_generation_prompt=True)
    assert hf.eos_token == "<|end|>" and hf.pad_token == "<|pad|>"
