"""The corpus is deterministic for a seed, its splits are disjoint, and its stored layout and
loss masks are what drafter training data looks like."""

from __future__ import annotations

import json

from specgauge.train.chat import END, render
from specgauge.train.corpus import SOURCES, SPLIT_AS, SPLITS, CorpusConfig, build_samples, read_text, split_of
from specgauge.train.dataset import iter_samples, read_meta


def _as_json(samples):
    return {src: {split: [s.to_json() for s in items] for split, items in splits.items()} for src, splits in samples.items()}


def test_same_seed_same_corpus_other_seed_differs(stdlib_files, tiny_config, tiny_corpus):
    again = build_samples(tiny_config, files=stdlib_files)
    assert _as_json(again) == _as_json(tiny_corpus["samples"])
    other = build_samples(CorpusConfig(seed=4, validation_fraction=0.2, agentic_samples=60, max_code_files=40, chunk_chars=1200,
                                       long_chunk_chars=5000, session_samples=24),
                          files=stdlib_files)
    assert _as_json(other) != _as_json(tiny_corpus["samples"])


def test_every_source_has_both_splits_and_they_are_disjoint(tiny_corpus, tiny_config):
    for source in SOURCES:
        train, validation = (tiny_corpus["samples"][source][split] for split in SPLITS)
        assert train and validation, source
        assert not {s.id for s in train} & {s.id for s in validation}
        # Split by group: chunks of one file (or docstrings of one module) never straddle the split.
        assert not {s.group for s in train} & {s.group for s in validation}
        assert all(split_of(f"{SPLIT_AS.get(source, source)}:{s.group}", tiny_config) == "validation" for s in validation)


def test_conversations_have_the_chat_shape(tiny_corpus):
    for source in SOURCES:
        for sample in tiny_corpus["samples"][source]["train"]:
            roles = [m["role"] for m in sample.messages]
            assert roles[-1] == "assistant" and "user" in roles
            assert all(m["content"].strip() for m in sample.messages)


def test_agentic_transcripts_call_listed_tools_with_json(tiny_corpus):
    from specgauge.train.agentic import TOOL_SPECS

    for sample in tiny_corpus["samples"]["agentic_tools"]["train"]:
        messages = sample.messages
        assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
        listed = {tool["name"] for tool in json.loads(messages[0]["content"].split("Tools:\n", 1)[1])}
        for turn, following in zip(messages[2:], messages[3:]):
            if turn["role"] == "assistant" and following["role"] == "tool":
                call = json.loads(turn["content"].split("\n", 1)[1])  # a reason line, then the JSON call
                assert set(call) == {"name", "arguments"} and call["name"] in listed & set(TOOL_SPECS)
                assert isinstance(json.loads(following["content"]), dict)  # the tool result is JSON
        assert messages[-1]["role"] == "assistant" and not messages[-1]["content"].lstrip().startswith("{")


def test_code_questions_ask_for_a_function_by_its_docstring_and_stay_out_of_the_target_data(tiny_corpus):
    from specgauge.train.corpus import TARGET_SOURCES
    from specgauge.train.tokenizer import corpus_texts

    questions = tiny_corpus["samples"]["code_questions"]["train"]
    assert len(questions) >= 20
    for sample in questions:
        user, answer = sample.messages
        assert user["role"] == "user" and answer["role"] == "assistant"
        assert answer["content"].lstrip().startswith(("def ", "async def ", "@"))
        name = answer["content"].split("def ", 1)[1].split("(", 1)[0]
        assert name in user["content"] or "helper" in user["content"]  # one template names no function
    assert "code_questions" not in TARGET_SOURCES
    rendered = set(corpus_texts(tiny_corpus["dir"]))  # what the tokenizer (and so the target) learns from
    assert not any(render(sample.messages) in rendered for sample in questions)


def test_code_requests_ask_in_many_languages_and_kinds_hold_out_the_questions_files_and_stay_out_of_the_target_data(
        tiny_corpus):
    from specgauge.train.code_requests import LANGUAGES, with_bug
    from specgauge.train.corpus import TARGET_SOURCES
    from specgauge.train.tokenizer import corpus_texts

    requests = tiny_corpus["samples"]["code_requests"]
    everything = requests["train"] + requests["validation"]
    kinds = {sample.id.split("-")[1] for sample in everything}
    assert kinds == {"write", "port", "explain", "refactor", "test", "annotate", "fix", "review"}
    asked_in = {lang for lang in LANGUAGES for s in everything if f" {lang} " in s.messages[0]["content"]}
    assert len(asked_in) >= 6
    for sample in everything:
        user, reference = sample.messages
        kind = sample.id.split("-")[1]
        if kind == "write":
            assert "```" not in user["content"]  # asked by what it does, no code given
        else:
            assert "```python\n" in user["content"]
        if kind == "fix":  # the pasted code is the reference with exactly one change
            pasted = user["content"].split("```python\n", 1)[1].rsplit("\n```", 1)[0]
            assert pasted != reference["content"] and pasted == with_bug(reference["content"])
    # the same files are held out as for code_questions: no held-out request is about a function
    # whose question trained a drafter
    question_files = {split: {s.group for s in tiny_corpus["samples"]["code_questions"][split]} for split in SPLITS}
    assert not {s.group for s in requests["validation"]} & question_files["train"]
    assert not {s.group for s in requests["train"]} & question_files["validation"]
    assert "code_requests" not in TARGET_SOURCES
    rendered = set(corpus_texts(tiny_corpus["dir"]))
    assert not any(render(sample.messages) in rendered for sample in requests["train"])


def test_stored_layout_and_meta(tiny_corpus):
    from specgauge.train.corpus import file_sha256

    root = tiny_corpus["dir"]
    tokenizer_sha = file_sha256(tiny_corpus["tokenizer_dir"] / "tokenizer.json")
    for split in SPLITS:
        for source in SOURCES:
            folder = root / split / source
            assert (folder / "shard-00000.jsonl").is_file()
            meta = read_meta(folder)
            stored = list(iter_samples(folder))
            assert meta["source"] == source and meta["split"] == split and meta["seed"] == 3
            assert meta["num_samples"] == len(stored) == len(tiny_corpus["samples"][source][split])
            assert meta["num_tokens"] == sum(len(ids) for ids, _ in stored)
            assert meta["tokenizer_sha256"] == tokenizer_sha


def test_loss_mask_covers_exactly_the_assistant_turns(tiny_corpus, tiny_tokenizer):
    root = tiny_corpus["dir"]
    for source in SOURCES:
        records = list(read_text(root, source, "validation"))
        for (ids, mask), record in zip(iter_samples(root / "validation" / source), records):
            assert len(ids) == len(mask)
            assert tiny_tokenizer.decode(ids, skip_special_tokens=False) == render(record["messages"])
            masked = tiny_tokenizer.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=False)
            expected = "".join(m["content"] + END for m in record["messages"] if m["role"] == "assistant")
            assert masked == expected
