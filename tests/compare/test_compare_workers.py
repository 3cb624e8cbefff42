"""``compare --workers 2``: both arms' points run split over two worker processes, same plan."""

import pytest
from loaded_server import crossing_pair
from specgauge.compare.orchestrate import run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.load.plan import PointSpec, plan_requests
from specgauge.load.workers.split import Placement
from specgauge.store import Store
from specgauge.suites.registry import load_suite

pytestmark = pytest.mark.slow   # worker processes per arm


async def test_a_comparison_on_two_workers_stores_every_arms_plan(tmp_path):
    baseline, speculative = crossing_pair()
    with baseline, speculative, Store.open(tmp_path / "c.db") as store:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           api="sglang", raw_chat_format=True, domains=("coding",), concurrency=(1, 4),
                           num_requests_single=4, num_requests_sweep=8, warmup=1, bootstrap_resamples=200)
        result = await run_comparison(plan, store, placement=Placement(workers=2))
        links = store.comparison_runs(result.comparison_id)
        assert len(links) == 6 and [p.concurrency for p in result.sweep] == [1, 4]
        for link in links:
            run = store.get_run(link.run_id)
            prompts = len(load_suite(run.config["suite"]).requests)
            for point in store.get_points(link.run_id):
                spec = PointSpec(**point.spec)
                stored = sorted((r.request_index, r.prompt_index) for r in store.get_requests(point.id))
                assert stored == [(i.request_index, i.prompt_index) for i in plan_requests(spec, prompts)]
                assert len(point.aggregates["workers"]) == min(2, spec.concurrency)


async def test_against_baseline_runs_its_new_run_on_the_workers_asked_for(tmp_path):
    """``compare --against-baseline NAME --workers 2`` ran its new run in one process before."""
    from specgauge.compare.arms import ArmSpec
    from specgauge.compare.regression import run_against_baseline
    from specgauge.load.bench import run_benchmark
    from specgauge.load.bench_config import BenchConfig

    baseline, _ = crossing_pair()
    with baseline, Store.open(tmp_path / "b.db") as store:
        config = BenchConfig(url=baseline.url, api="sglang", suite="coding", concurrency=(4,), num_requests=8,
                             raw_chat_format=True)
        store.set_baseline("nightly", (await run_benchmark(config, store)).run_id)
        report = await run_against_baseline(store, "nightly", ArmSpec("speculative", "url", baseline.url),
                                            resamples=200, placement=Placement(workers=2))
        (point,) = store.get_points(report.new_run_id)
        assert len(point.aggregates["workers"]) == 2
