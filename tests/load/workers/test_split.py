"""Splitting a point over workers: the union of the shares is exactly the one-process plan."""

import itertools

import pytest

from specgauge.errors import UserError
from specgauge.load.plan import PointSpec, plan_requests, prompt_order
from specgauge.load.workers.split import Placement, deal, split_point

NUM_PROMPTS = 7


def union_of_shares(spec: PointSpec, workers: int, skip=frozenset()):
    shares = split_point(spec, workers)
    slots = [item for share in shares for item in share.slots(NUM_PROMPTS, skip)]
    return shares, sorted(slots, key=lambda item: item.request_index)


@pytest.mark.parametrize("concurrency,workers", [(8, 2), (7, 3), (5, 4), (3, 8), (1, 2)])
def test_closed_loop_shares_are_the_one_process_plan(concurrency, workers):
    spec = PointSpec(mode="closed", concurrency=concurrency, num_requests=41, seed=5)
    shares, union = union_of_shares(spec, workers)
    assert union == list(plan_requests(spec, NUM_PROMPTS))        # same slots, same prompts, none twice
    assert len(shares) == min(concurrency, workers)                # no worker without a user
    assert sum(share.spec.concurrency for share in shares) == concurrency
    for share in shares:                                           # slots in proportion to the users
        owned = sum(1 for i in range(concurrency * 10) if share.owns(i))
        assert owned == share.spec.concurrency * 10


def test_open_loop_shares_keep_the_one_arrival_schedule():
    spec = PointSpec(mode="open", rate=40.0, num_requests=50, seed=3, arrival="gamma", burstiness=0.5)
    shares, union = union_of_shares(spec, 3)
    assert union == list(plan_requests(spec, NUM_PROMPTS))         # offsets from the same seed included
    assert [s.spec.max_concurrency for s in shares] == [None, None, None]
    capped = split_point(PointSpec(mode="open", rate=5.0, num_requests=9, max_concurrency=5), 4)
    assert [s.spec.max_concurrency for s in capped] == [2, 1, 1, 1]
    assert len(split_point(PointSpec(mode="open", rate=5.0, num_requests=9, max_concurrency=2), 4)) == 2


def test_resume_skips_and_duration_bounded_points():
    spec = PointSpec(mode="closed", concurrency=4, num_requests=20)
    _, union = union_of_shares(spec, 2, skip=frozenset({0, 5, 19}))
    assert [item.request_index for item in union] == [i for i in range(20) if i not in {0, 5, 19}]
    endless = PointSpec(mode="closed", concurrency=4, duration_s=1.0)
    shares = split_point(endless, 2)
    heads = sorted(item.request_index for share in shares for item in itertools.islice(share.slots(NUM_PROMPTS), 10))
    assert heads == list(range(20))


def test_warmup_is_dealt_without_overlap():
    spec = PointSpec(mode="closed", concurrency=4, num_requests=8, warmup_requests=5, seed=2)
    warm = [item for share in split_point(spec, 3) for item in share.warmup(NUM_PROMPTS)]
    order = prompt_order(2 + 1_000_003, NUM_PROMPTS, 5)
    assert sorted((item.request_index, item.prompt_index) for item in warm) == \
        sorted((-1 - i, p) for i, p in enumerate(order))


def test_deal_and_placement_rules():
    assert deal(10, 4) == [3, 3, 2, 2] and deal(2, 2) == [1, 1]
    assert Placement().single_process and not Placement(workers=2).single_process
    assert not Placement(ray_address="auto").single_process
    with pytest.raises(UserError, match="--ray-address"):
        Placement(workers_per_node=2)


def test_ray_address_without_ray_is_one_line_exit_2(cli_here, monkeypatch, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)   # as if Ray were not installed
    result = cli_here("bench", "http://127.0.0.1:1", "--ray-address", "auto", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "pip install 'specgauge[ray]'" in result.stderr and not (tmp_path / "r.db").exists()
    result = cli_here("bench", "http://127.0.0.1:1", "--workers-per-node", "2", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2 and "give --ray-address too" in result.stderr
