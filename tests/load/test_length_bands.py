"""``tune --context-lengths``: the band syntax, the fit to the server's context, and each band's
prompts (the suite's of that length as served, else length-exact synthetic ones)."""

from pathlib import Path

import pytest

from specgauge.errors import UserError
from specgauge.suites.model import Suite, SuiteRequest
from specgauge.load.length_bands import build_band_suites, check_fit, parse_bands, suite_band_requests

TOKENIZER = str(Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets" / "target" / "tokenizer.json")


def test_bands_parse_as_inclusive_ascending_ranges():
    assert parse_bands("1-128,129-384") == ((1, 128), (129, 384))
    assert parse_bands(" 10-10 , 20-30") == ((10, 10), (20, 30))
    assert parse_bands("1-64,200-300") == ((1, 64), (200, 300))   # a gap is allowed


@pytest.mark.parametrize("text, reason", [
    ("0-128", "1 <= LO <= HI"),
    ("128-1", "1 <= LO <= HI"),
    ("1-128,100-200", "overlaps"),
    ("129-384,1-128", "overlaps or precedes"),
    ("a-b", "not a band"),
    ("128", "not a band"),
    ("1-128,", "not a band"),
])
def test_bad_bands_are_refused_with_the_reason(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_bands(text)


def test_a_band_that_does_not_fit_the_context_is_refused_by_name():
    check_fit(((1, 128), (129, 448)), 512, "/v1/models max_model_len", 64)   # 448 + 64 = 512 fits
    with pytest.raises(UserError, match=r"--context-lengths 129-449: .*449 tokens plus --max-tokens 64 exceed "
                                        r"the server's 512-token context.*ends at 448"):
        check_fit(((1, 128), (129, 449)), 512, "/v1/models max_model_len", 64)
    check_fit(((1, 100000),), None, None, 64)   # no context reported: nothing to check


def test_a_band_takes_the_suites_prompts_of_its_length():
    requests = tuple(SuiteRequest(prompt=f"p{i}", max_tokens=8) for i in range(4))
    suite = Suite(name="s", requests=requests)
    assert suite_band_requests(suite, [5, 50, 51, 200], (50, 100)) == requests[1:3]


def _served_lengths(suite_ref: str, api: str = "openai-chat") -> list[int]:
    from specgauge.client.prompts import chat_template
    from specgauge.client.tokens import load_tokenizer
    from specgauge.load.workload import prompt_tokens_as_served
    from specgauge.suites.registry import load_suite

    tokenizer, templated = load_tokenizer(TOKENIZER), chat_template(TOKENIZER) is not None
    return [prompt_tokens_as_served(tokenizer, TOKENIZER, r, api, templated) for r in load_suite(suite_ref).requests]


def test_band_suites_come_from_the_suite_or_are_built_length_exact(tmp_path):
    from specgauge.suites.registry import load_suite

    lengths = sorted(_served_lengths("mixed"))
    assert len(lengths) >= 8
    common = (lengths[0], lengths[7])                # at least 8 of the suite's prompts
    empty = (lengths[-1] + 20, lengths[-1] + 60)     # none of them
    made = build_band_suites("mixed", (common, empty), tokenizer_path=TOKENIZER, api="openai-chat",
                             min_prompts=8, synthetic_count=12, seed=3, max_tokens=16, work_dir=tmp_path)
    assert [m.band for m in made] == [common, empty]
    assert made[0].source == "suite mixed" and made[0].count >= 8
    assert made[1].source == "synthetic" and made[1].count == 12
    for found in made:
        served = _served_lengths(found.suite_ref)
        assert served and all(found.band[0] <= n <= found.band[1] for n in served), (found.band, served)
        assert {r.max_tokens for r in load_suite(found.suite_ref).requests} == {16}
    again = build_band_suites("mixed", (common, empty), tokenizer_path=TOKENIZER, api="openai-chat",
                              min_prompts=8, synthetic_count=12, seed=3, max_tokens=16, work_dir=tmp_path)
    assert [m.suite_ref for m in again] == [m.suite_ref for m in made]   # deterministic: every depth the same


def test_a_band_shorter_than_the_chat_template_is_refused(tmp_path):
    with pytest.raises(UserError, match="--context-lengths 1-2: the server adds"):
        build_band_suites("smoke", ((1, 2),), tokenizer_path=TOKENIZER, api="openai-chat", min_prompts=8,
                          synthetic_count=4, seed=0, max_tokens=8, work_dir=tmp_path)


@pytest.mark.parametrize("band", [(1, 512), (1, 130), (2, 2049)])
def test_a_band_from_one_token_is_built_without_asking_for_an_empty_prompt(tmp_path, band):
    """Bands that start at the shortest prompt (``1-512``, as the issue writes them) drew prompt
    lengths down to 0 through a rounding error and were refused."""
    made = build_band_suites("smoke", (band,), tokenizer_path=TOKENIZER, api="openai-chat", min_prompts=1000,
                             synthetic_count=6, seed=0, max_tokens=8, work_dir=tmp_path)
    assert made[0].source == "synthetic" and made[0].count == 6
    assert all(band[0] <= n <= band[1] for n in _served_lengths(made[0].suite_ref))
