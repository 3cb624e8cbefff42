"""Per-point aggregates on hand-made records whose answers are worked out by hand."""

import json

import pytest

from specgauge.analysis.aggregate import PointAggregate, Window, aggregate_point, window_from_records
from specgauge.client.records import ErrorClass, RequestRecord, TokenCountSource

MS = 1_000_000
S = 1_000_000_000


def record(index, send_ms, chunk_ms, tokens, end_ms=None, error=None, **extra) -> RequestRecord:
    """A request sent at ``send_ms`` whose content chunks arrived at ``chunk_ms`` (absolute, ms)."""
    rec = RequestRecord(
        request_index=index, prompt_index=index,
        t_send_ns=int(send_ms * MS),
        chunk_times_ns=[int(t * MS) for t in chunk_ms],
        chunk_tokens=list(tokens),
        t_end_ns=int((end_ms if end_ms is not None else (chunk_ms[-1] if chunk_ms else send_ms)) * MS),
        token_count_source=extra.pop("source", TokenCountSource.SERVER),
        **extra,
    )
    if error is not None:
        rec.error_class = error
        rec.error_message = "scripted failure"
    return rec


def test_percentiles_of_ttft_are_linear_interpolation():
    # TTFTs 10, 20, ..., 100 ms. Linear percentile at rank (n-1)·q: p50 → 4.5 → 55,
    # p90 → 8.1 → 90 + 0.1·10 = 91, p99 → 8.91 → 90 + 0.91·10 = 99.1.
    records = [record(i, 0, [10 * (i + 1), 10 * (i + 1) + 5], [1, 1]) for i in range(10)]
    agg = aggregate_point(records, [Window(0, 1 * S)])
    assert agg.ttft_ms.count == 10
    assert agg.ttft_ms.mean == pytest.approx(55.0)
    assert agg.ttft_ms.p50 == pytest.approx(55.0)
    assert agg.ttft_ms.p90 == pytest.approx(91.0)
    assert agg.ttft_ms.p99 == pytest.approx(99.1)


def test_icl_itl_tpot_and_e2e_follow_the_definitions():
    # Chunks at 10, 20, 40 ms carrying 1, 1, 4 tokens: ICL gaps 10 and 20 ms; ITL spreads the
    # 20 ms gap over 4 tokens → [10, 5, 5, 5, 5]; TPOT = (40 - 10) / (6 - 1) = 6 ms; E2E 50 ms.
    rec = record(0, 0, [10, 20, 40], [1, 1, 4], end_ms=50, output_tokens=6)
    agg = aggregate_point([rec], [Window(0, 50 * MS)])
    assert agg.icl_ms.count == 2 and agg.icl_ms.mean == pytest.approx(15.0)
    assert agg.itl_ms.count == 5 and agg.itl_ms.mean == pytest.approx(6.0)
    assert agg.itl_ms.p50 == pytest.approx(5.0)
    assert agg.tpot_ms.mean == pytest.approx(6.0)
    assert agg.e2e_ms.mean == pytest.approx(50.0)
    assert agg.decode_tok_s.mean == pytest.approx(1000.0 / 6.0)


def test_output_tokens_per_second_over_the_window_excludes_failures():
    ok_a = record(0, 0, [100, 200], [5, 5], output_tokens=10)
    ok_b = record(1, 500, [600, 1900], [5, 15], output_tokens=20)
    cut = record(2, 0, [100], [7], end_ms=300, output_tokens=7, error=ErrorClass.STREAM_CUT)
    agg = aggregate_point([ok_a, ok_b, cut], [Window(0, 2 * S)])
    assert agg.output_tokens == 30               # the cut stream's 7 tokens are not counted
    assert agg.window_s == pytest.approx(2.0)
    assert agg.output_tokens_per_s == pytest.approx(15.0)
    assert agg.requests_per_s == pytest.approx(1.0)  # two successes over two seconds


def test_achieved_concurrency_is_time_weighted_and_clipped_to_the_window():
    # Window 0-10 s. A: 0-12 s (clipped to 10 s), B: 0-5 s, C: 5-10 s, D failed 2-4 s (in flight
    # counts even when it fails). In flight: 10 + 5 + 5 + 2 = 22 s over 10 s → 2.2.
    records = [
        record(0, 0, [1000], [1], end_ms=12_000),
        record(1, 0, [1000], [1], end_ms=5_000),
        record(2, 5_000, [6_000], [1], end_ms=10_000),
        record(3, 2_000, [], [], end_ms=4_000, error=ErrorClass.HTTP_5XX),
    ]
    agg = aggregate_point(records, [Window(0, 10 * S)], max_error_rate=0.5)
    assert agg.achieved_concurrency == pytest.approx(2.2)


def test_error_rate_at_threshold_is_not_flagged_above_it_is():
    good = [record(i, 0, [10, 20], [1, 1]) for i in range(19)]
    one_bad = good + [record(19, 0, [], [], end_ms=5000, error=ErrorClass.HTTP_5XX)]
    agg = aggregate_point(one_bad, [Window(0, S)])
    assert (agg.num_ok, agg.num_errors, agg.error_rate) == (19, 1, pytest.approx(0.05))
    assert not agg.flagged and agg.flag_reason is None
    assert agg.e2e_ms.p99 == pytest.approx(20.0)  # the 5-second failure is not averaged in

    two_bad = good[:18] + [record(18, 0, [], [], error=ErrorClass.READ_TIMEOUT),
                           record(19, 0, [], [], error=ErrorClass.HTTP_5XX)]
    agg = aggregate_point(two_bad, [Window(0, S)])
    assert agg.flagged and agg.flag_reason == "error rate 10% > 5%"
    assert agg.errors_by_class == {"http_5xx": 1, "read_timeout": 1}

    strict = aggregate_point(one_bad, [Window(0, S)], max_error_rate=0.01)
    assert strict.flagged and strict.flag_reason == "error rate 5% > 1%"


def test_a_point_with_no_requests_is_flagged():
    agg = aggregate_point([], [Window(0, S)])
    assert agg.flagged and agg.flag_reason == "no measured requests"
    assert agg.ttft_ms.mean is None and agg.output_tokens_per_s == 0.0


def test_accept_length_is_the_mean_of_per_request_values():
    # 12 tokens over 4 verify steps: (12 - 1) / 4 = 2.75 (the prefill-made token is no verify's);
    # the server's own 2.0; a request without spec data.
    a = record(0, 0, [10, 20], [6, 6], output_tokens=12, spec_verify_ct=4)
    b = record(1, 0, [10, 20], [2, 2], output_tokens=4, spec_accept_length=2.0)
    c = record(2, 0, [10, 20], [1, 1], output_tokens=2)
    agg = aggregate_point([a, b, c], [Window(0, S)])
    assert agg.accept_length == pytest.approx((2.75 + 2.0) / 2)
    assert agg.accept_length_requests == 2


def test_token_weighted_acceptance_differs_from_the_mean_over_requests():
    # A long request (40 steps, 80 accepted: 3.0) and a short one (2 steps, 0 accepted: 1.0).
    long = record(0, 0, [10, 20], [60, 61], output_tokens=121, spec_verify_ct=40, spec_correct_drafts=80)
    short = record(1, 0, [10, 20], [1, 2], output_tokens=3, spec_verify_ct=2, spec_correct_drafts=0)
    agg = aggregate_point([long, short], [Window(0, S)])
    assert agg.accept_length == pytest.approx((3.0 + 1.0) / 2)
    assert agg.accept_length_token_weighted == pytest.approx(1 + 80 / 42)


def test_tokens_per_step_and_the_share_of_steps_that_drafted():
    # 2 requests × 4 chunks: 6 decode steps carrying 9 + 6 - 2 = 13 tokens; the server drafted in 3.
    a = record(0, 0, [10, 20, 30, 40], [1, 3, 3, 3], output_tokens=10)
    b = record(1, 0, [10, 20, 30, 40], [1, 1, 1, 3], output_tokens=6)
    spec = {"scope": "point", "accept_length": 3.0, "num_drafts": 3.0, "prefix_cache_hit_rate": 0.5}
    agg = aggregate_point([a, b], [Window(0, S)], server_spec=spec)
    assert agg.tokens_per_step == pytest.approx((9 + 5) / 6)
    assert agg.drafted_step_share == pytest.approx(3 / 6)
    assert agg.prefix_cache_hit_rate == 0.5


def test_token_count_source_is_reported_and_mixed_when_it_differs():
    a = record(0, 0, [10, 20], [1, 1], source=TokenCountSource.SERVER)
    b = record(1, 0, [10, 20], [1, 1], source=TokenCountSource.SPREAD)
    assert aggregate_point([a], [Window(0, S)]).token_count_source == "server"
    mixed = aggregate_point([a, b], [Window(0, S)])
    assert mixed.token_count_source == "mixed"
    assert mixed.token_count_sources == {"server": 1, "spread": 1}


def test_send_lag_comes_from_records_and_connect_time_from_the_runner():
    a = record(0, 3, [10], [1], scheduled_ns=1 * MS)   # sent 2 ms late
    b = record(1, 4, [10], [1], scheduled_ns=0)        # sent 4 ms late
    agg = aggregate_point([a, b], [Window(0, S)], connect_ms=[1.5, 2.5])
    assert agg.send_lag_ms.mean == pytest.approx(3.0)
    assert agg.connect_ms.mean == pytest.approx(2.0) and agg.connect_ms.count == 2


def test_resumed_point_sums_its_windows():
    # Two segments of 1 s each, 10 tokens in each: 20 tokens over 2 s, not over the gap between.
    first = record(0, 0, [500, 1000], [5, 5], output_tokens=10)
    second = record(1, 60_000, [60_500, 61_000], [5, 5], output_tokens=10)
    windows = [window_from_records([first]), Window(60 * S, 61 * S)]
    agg = aggregate_point([first, second], windows)
    assert agg.segments == 2 and agg.window_s == pytest.approx(2.0)
    assert agg.output_tokens_per_s == pytest.approx(10.0)
    assert agg.achieved_concurrency == pytest.approx(1.0)


def test_aggregate_round_trips_through_json():
    rec = record(0, 0, [10, 20, 40], [1, 1, 4], end_ms=50, output_tokens=6, spec_verify_ct=3)
    agg = aggregate_point([rec], [Window(0, S)], server_spec={"scope": "point", "accept_length": 2.0})
    again = PointAggregate.from_dict(json.loads(json.dumps(agg.to_dict())))
    assert again == agg
