"""The long sources a 4,096-token target trains on: whole files, multi-task agent sessions and
whole reference chapters, split by the same groups as the short sources."""

from __future__ import annotations

import json
import statistics

from specgauge.train.corpus import SPLITS, split_of
from specgauge.train.long_sources import LONG_SOURCES


def _chars(sample) -> int:
    return sum(len(m["content"]) for m in sample.messages)


def test_long_sources_are_longer_than_their_short_counterparts(tiny_corpus):
    samples = tiny_corpus["samples"]
    pairs = {"code_files": "code_stdlib", "agentic_sessions": "agentic_tools", "prose_long": "prose_docs"}
    for long_source, short_source in pairs.items():
        long_median = statistics.median(_chars(s) for s in samples[long_source]["train"])
        short_median = statistics.median(_chars(s) for s in samples[short_source]["train"])
        assert long_median > 1.5 * short_median, (long_source, long_median, short_median)


def test_a_file_held_out_of_one_source_is_held_out_of_all(tiny_corpus, tiny_config):
    samples = tiny_corpus["samples"]
    for split in SPLITS:
        files_short = {s.group for s in samples["code_stdlib"][split]}
        files_long = {s.group for s in samples["code_files"][split]}
        for group in files_short & files_long:
            assert split_of(f"code_stdlib:{group}", tiny_config) == split_of(f"code_files:{group}", tiny_config) == split
    other = {"train": "validation", "validation": "train"}
    for split in SPLITS:
        assert not {s.group for s in samples["code_files"][split]} & {s.group for s in samples["code_files"][other[split]]}


def test_sessions_hold_several_tasks_and_call_only_listed_tools(tiny_corpus):
    for sample in tiny_corpus["samples"]["agentic_sessions"]["train"]:
        messages = sample.messages
        assert messages[0]["role"] == "system"
        assert sum(m["role"] == "user" for m in messages) >= 3
        listed = {tool["name"] for tool in json.loads(messages[0]["content"].split("Tools:\n", 1)[1])}
        for turn, following in zip(messages, messages[1:]):
            if following["role"] == "tool":
                assert turn["role"] == "assistant"
                call = json.loads(turn["content"].split("\n", 1)[1])
                assert call["name"] in listed
                json.loads(following["content"])  # every observation is JSON


def test_long_sources_are_tokenized_beside_the_others(tiny_corpus):
    for source in LONG_SOURCES:
        for split in SPLITS:
            meta = json.loads((tiny_corpus["dir"] / split / source / "meta.json").read_text())
            assert meta["num_samples"] == len(tiny_corpus["samples"][source][split]) and meta["num_tokens"] > 0
