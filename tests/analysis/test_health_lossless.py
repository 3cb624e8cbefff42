"""Drafter/benchmark health warnings and the losslessness check, on hand-made records."""

from specgauge.analysis.health import (acceptance_by_position, chunk_histogram, health_warnings,
                                       repeated_ngram_share)
from specgauge.analysis.lossless import check_losslessness, first_difference
from specgauge.client.records import RequestRecord, TokenCountSource

PROSE = ("Speculative decoding drafts several tokens with a small model and verifies them in one pass of the "
         "large model, so the output is exactly what the large model alone would write.")


def record(chunk_tokens, *, text=PROSE, accept=None, finish="stop", index=0):
    return RequestRecord(request_index=index, prompt_index=index, chunk_tokens=list(chunk_tokens),
                         chunk_times_ns=list(range(len(chunk_tokens))), t_send_ns=0, t_end_ns=len(chunk_tokens),
                         token_count_source=TokenCountSource.SERVER, output_tokens=sum(chunk_tokens),
                         output_text=text, finish_reason=finish, spec_accept_length=accept)


def codes(warnings):
    return {w.code for w in warnings}


def test_healthy_speculation_gives_no_warning():
    spec = [record([1] + [3, 2, 3] * 10, accept=2.67, index=i) for i in range(10)]
    base = [record([1] * 30, index=i) for i in range(10)]
    assert health_warnings(spec, base, max_tokens=256) == ()


def test_acceptance_length_of_one_means_a_wrong_drafter():
    spec = [record([1] * 30, accept=1.02, index=i) for i in range(5)]
    assert "accept_length_one" in codes(health_warnings(spec, [], max_tokens=None))


def test_chunks_disagreeing_with_the_server_figure():
    spec = [record([1] + [6] * 10, accept=3.0, index=i) for i in range(5)]    # 6 tokens per chunk vs 3.0
    assert "chunks_disagree_with_server" in codes(health_warnings(spec, [], max_tokens=None))


def test_acceptance_falling_with_position():
    spec = [record([1] + [4] * 8 + [2] * 8 + [1] * 16, accept=2.0, index=i) for i in range(5)]
    warnings = health_warnings(spec, [], max_tokens=None)
    assert "acceptance_falls_with_position" in codes(warnings)
    bins = acceptance_by_position(spec, bin_tokens=16)
    assert bins[0].tokens_per_chunk == 4.0 and bins[-1].tokens_per_chunk == 1.0


def test_looping_output_is_degenerate():
    loop = "the cat sat on the mat " * 20
    spec = [record([1] + [3] * 40, text=loop, accept=3.0, finish="length", index=i) for i in range(5)]
    warnings = health_warnings(spec, [], max_tokens=121)
    assert "degenerate_output" in codes(warnings)
    assert "5 ran into max_tokens" in next(w.message for w in warnings if w.code == "degenerate_output")
    assert repeated_ngram_share(loop) > 0.9 and repeated_ngram_share(PROSE) == 0.0


def test_chunk_histogram_skips_the_first_chunk():
    bins = chunk_histogram([record([1, 3, 3, 2]), record([1, 1])])
    assert [(b.tokens, b.count) for b in bins] == [(1, 1), (2, 1), (3, 2)]


def test_losslessness_reports_mismatches_with_the_first_difference():
    pairs = [("sweep", 0, 0, "same text", "same text"),
             ("sweep", 1, 1, "the answer is 42.", "the answer is 43."),
             ("sweep", 2, 2, "short", "short and longer")]
    result = check_losslessness(pairs, temperature=0.0)
    assert (result.compared, result.mismatches) == (3, 2)
    assert result.mismatch_rate == 2 / 3
    assert [e.first_difference for e in result.examples] == [15, 5]
    assert first_difference("abc", "abc") is None
    skipped = check_losslessness(pairs, temperature=0.7)
    assert not skipped.checked and "temperature" in skipped.reason


def test_the_same_measurement_taken_twice_far_apart_is_machine_drift():
    from specgauge.analysis.health import drift_warnings

    warnings = drift_warnings([("baseline", 83.0, 58.0, "single stream on coding and the sweep at concurrency 1"),
                               ("speculative", 100.0, 97.0, "same")])
    assert [w.code for w in warnings] == ["machine_drift"]
    assert "83.0 and 58.0 tok/s (35% apart)" in warnings[0].message
    assert drift_warnings([("baseline", None, 50.0, "x")]) == ()


def test_the_servers_point_figure_stands_in_when_requests_carry_no_acceptance():
    spec = [record([1] + [6] * 10, index=i) for i in range(5)]       # 6 tokens per chunk, no per-request value
    assert "chunks_disagree_with_server" in codes(health_warnings(spec, [], max_tokens=None, server_accept=3.0))
    assert "accept_length_one" in codes(health_warnings([record([1] * 9, index=0)], [], None, server_accept=1.01))


def test_one_round_of_a_point_far_from_the_other_is_an_outlying_speed():
    from specgauge.analysis.health import OUTLYING_ROUND, outlying_round_warnings

    slow = 100.0 * (1 - OUTLYING_ROUND) / (1 + OUTLYING_ROUND) - 1.0   # just past the threshold, relative to the mean
    warnings = outlying_round_warnings([("concurrency 4", "baseline", 0, 100.0, slow, 4),
                                        ("concurrency 4", "speculative", 0, 100.0, 95.0, 4),
                                        ("concurrency 16", "baseline", 0, None, 40.0, 16)])
    assert [(w.code, w.arm, w.concurrency) for w in warnings] == [("outlying_round", "baseline", 4)]
    assert warnings[0].message.startswith("concurrency 4: the baseline arm ran at 100.0 tok/s in round 1")
