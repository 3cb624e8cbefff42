"""Deterministic prompt order and the open-loop arrival processes (loose statistical bounds)."""

import statistics

import pytest

from specgauge.errors import UserError
from specgauge.load.plan import PointSpec, arrival_offsets, plan_requests, prompt_order


def test_prompt_order_is_deterministic_and_covers_the_suite_per_pass():
    order = prompt_order(7, 5, 12)
    assert order == prompt_order(7, 5, 12)
    assert order != prompt_order(8, 5, 12)
    assert sorted(order[:5]) == list(range(5)) and sorted(order[5:10]) == list(range(5))
    assert prompt_order(7, 5, 3) == order[:3]  # a shorter run is a prefix of a longer one


@pytest.mark.parametrize("rate", [5.0, 200.0])
def test_poisson_arrivals_have_the_rate(rate):
    offsets = arrival_offsets(rate, 4000, seed=3)
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert offsets[0] == 0.0
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=0.1)
    cv2 = statistics.pvariance(gaps) / statistics.fmean(gaps) ** 2
    assert 0.8 < cv2 < 1.2  # exponential gaps: squared coefficient of variation 1


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness(burstiness):
    offsets = arrival_offsets(10.0, 4000, arrival="gamma", burstiness=burstiness, seed=1)
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.1)
    cv2 = statistics.pvariance(gaps) / statistics.fmean(gaps) ** 2
    assert cv2 == pytest.approx(1 / burstiness, rel=0.25)


def test_plan_open_and_closed():
    closed = list(plan_requests(PointSpec(mode="closed", concurrency=2, num_requests=6, seed=4), 3))
    assert [p.request_index for p in closed] == list(range(6))
    assert [p.prompt_index for p in closed] == prompt_order(4, 3, 6)
    opened = list(plan_requests(PointSpec(mode="open", rate=10, duration_s=2.0), 3))
    assert len(opened) > 20 * 2 and opened[-1].offset_s > 2.0  # enough slots to fill the duration
    endless = plan_requests(PointSpec(mode="closed", concurrency=2, duration_s=1.0, seed=4), 3)
    first = [next(endless) for _ in range(1000)]  # a duration-bound closed loop has no fixed length
    assert [p.prompt_index for p in first] == prompt_order(4, 3, 1000)


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "closed", "num_requests": 1}, "concurrency"),
    ({"mode": "open", "rate": 0, "num_requests": 1}, "rate"),
    ({"mode": "closed", "concurrency": 1}, "number of requests or a duration"),
    ({"mode": "open", "rate": 1, "burstiness": 0, "num_requests": 1}, "burstiness"),
    ({"mode": "sideways", "num_requests": 1}, "load mode"),
])
def test_bad_specs_are_user_errors(kwargs, message):
    with pytest.raises(UserError, match=message):
        PointSpec(**kwargs)
