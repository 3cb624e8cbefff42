"""Random-token prompts get a warning in a comparison's health and a tune's notes: acceptance on
random tokens is not that of text."""

from specgauge.analysis.health import random_prompt_warnings, random_prompts_message
from specgauge.suites.model import Suite, SuiteRequest, write_suite_jsonl
from specgauge.tune.run import TunePlan, _random_prompts_note


def _suite(name: str, sources: list[str]) -> Suite:
    return Suite(name=name, requests=tuple(SuiteRequest(prompt=f"p{i}", max_tokens=4, source=source)
                                           for i, source in enumerate(sources)))


def test_a_comparison_on_random_prompts_is_warned_and_one_on_text_is_not():
    text, random = _suite("text", ["coding", "coding"]), _suite("rnd", ["random", "random", "random"])
    assert random_prompt_warnings([text]) == ()
    (warning,) = random_prompt_warnings([random, random, text])   # a suite of several stages counts once
    assert warning.code == "random_prompts"
    assert warning.message.startswith("3 of 5 prompts of this comparison are random tokens")
    assert "acceptance on random tokens is not that of text" in warning.message


def test_all_random_says_all():
    assert random_prompts_message(4, 4, "this tune").startswith("all prompts of this tune are random tokens")
    assert random_prompts_message(0, 4, "this tune") is None


def test_a_tune_on_a_random_suite_file_gets_the_note(tmp_path):
    path = tmp_path / "random.jsonl"
    write_suite_jsonl(_suite("rnd", ["random"] * 2), path)
    note = _random_prompts_note(TunePlan(arms=(), suite=str(path)), ())
    assert note is not None and "all prompts of this tune are random tokens" in note
    assert _random_prompts_note(TunePlan(arms=(), suite="smoke"), ()) is None
