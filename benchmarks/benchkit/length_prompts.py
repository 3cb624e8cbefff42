"""Prompts of an exact token length, cut from a suite's rendered prompts."""

from __future__ import annotations

from specgauge.compare.fit import render_prompt


def prompt_of_length(tokenizer, requests, length: int, offset: int) -> list[int]:
    """``length`` tokens of the suite's rendered prompts, joined from the ``offset``-th on."""
    ids: list[int] = []
    index = offset
    while len(ids) < length:
        ids += tokenizer.encode(render_prompt(tokenizer, requests[index % len(requests)]))
        index += 1
    return ids[-length:]  # the end of a prompt: the template's assistant turn comes last
