"""Two servers of identical speed on a machine that drifts: the verdict must claim nothing."""

import pytest

from loaded_server import identical_drifting_pair
from specgauge.compare.orchestrate import run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.store import Store

CLAIMS = ("speeds up", "slows down", "pays at every", "overtakes", "does not raise", "costs", "higher at", "lower at")


@pytest.mark.parametrize("rounds", [1, 2])
async def test_identical_servers_on_a_drifting_machine_get_no_claim(tmp_path, rounds):
    baseline, speculative = identical_drifting_pair()
    with baseline, speculative, Store.open(tmp_path / "c.db") as store:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           api="sglang", raw_chat_format=True, domains=("coding", "encyclopedic"),
                           concurrency=(1, 2, 4, 8),
                           num_requests_single=6, num_requests_sweep=16, warmup=1, rounds=rounds,
                           bootstrap_resamples=400, label="same server")
        result = await run_comparison(plan, store)
    assert result.drift.sigma is not None and result.drift.per_measurement > 0.1    # the run measured the drift
    said = " ".join(result.verdict_lines)
    assert not any(claim in said for claim in CLAIMS), result.verdict_lines
    assert all(p.ci_low <= 1.0 <= p.ci_high for p in result.sweep)
    assert all(d.ci_low <= 1.0 <= d.ci_high for d in result.single_stream)
    assert not result.recommendation.confident and result.recommendation.settings == ()
    assert result.crossover_concurrency is None


async def test_a_domain_with_acceptance_near_one_alarms_though_the_mean_is_fine(tmp_path):
    """A domain accepting 1.03 tokens per verify raised no alarm because the alarm
    averaged every domain; the alarm is per domain."""
    import dataclasses

    from specgauge.suites.registry import load_suite
    from specgauge.testing.scripted_server import Script, ScriptedServer

    encyclopedic = {m.content[:60] for r in load_suite("encyclopedic").requests for m in (r.messages or ())}

    class PerDomainServer(ScriptedServer):
        def _script_for(self, prompt):
            script = super()._script_for(prompt)
            if any(text in prompt for text in encyclopedic):
                return dataclasses.replace(script, sglang_meta={"spec_accept_length": 1.03})
            return script

    baseline = ScriptedServer(Script(ttft_s=0.001, chunk_delay_s=0.001, num_chunks=12))
    speculative = PerDomainServer(Script(ttft_s=0.001, chunk_delay_s=0.001, num_chunks=4, tokens_per_chunk=3,
                                         sglang_meta={"spec_accept_length": 3.0}))
    with baseline, speculative, Store.open(tmp_path / "c.db") as store:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           api="sglang", raw_chat_format=True, domains=("coding", "encyclopedic"), concurrency=(1,),
                           num_requests_single=6, num_requests_sweep=6, warmup=0, bootstrap_resamples=200)
        result = await run_comparison(plan, store)
    assert result.acceptance_by_domain["encyclopedic"] == pytest.approx(1.03)
    alarms = [w for w in result.health if w.code == "accept_length_one"]
    assert [w.domain for w in alarms] == ["encyclopedic"]
    assert "encyclopedic: acceptance length is 1.03" in alarms[0].message


async def test_a_round_measured_at_an_outlying_speed_flags_its_points(tmp_path):
    """A slow minute on one arm made a fake verdict; a round whose speed is far from the
    arm's other round at the same point is flagged. The baseline server turns 4x slower after its
    first round's requests (a count, not a time)."""
    import dataclasses
    import itertools

    from specgauge.testing.scripted_server import Script, ScriptedServer

    class SlowsDownServer(ScriptedServer):
        served = itertools.count()

        def _script_for(self, prompt):
            script = super()._script_for(prompt)
            if next(self.served) >= 12:   # 6 single-stream + 6 sweep requests make round 1
                return dataclasses.replace(script, chunk_delay_s=script.chunk_delay_s * 4)
            return script

    baseline = SlowsDownServer(Script(ttft_s=0.001, chunk_delay_s=0.004, num_chunks=12))
    # the steady arm's requests take ~120 ms each, so a busy machine's hiccups (tens of ms, once
    # flagged a steady round here) stay well inside the 25% an outlying round must differ by
    speculative = ScriptedServer(Script(ttft_s=0.001, chunk_delay_s=0.03, num_chunks=4, tokens_per_chunk=3))
    with baseline, speculative, Store.open(tmp_path / "c.db") as store:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           api="sglang", raw_chat_format=True, domains=("coding",), concurrency=(1,),
                           num_requests_single=6, num_requests_sweep=6, warmup=0, rounds=2, bootstrap_resamples=200)
        result = await run_comparison(plan, store)
    flagged = [w.message for w in result.health if w.code == "outlying_round"]
    assert len(flagged) == 2, flagged   # both baseline points, not the steady speculative arm
    assert all("the baseline arm" in m for m in flagged)
    assert {m.split(":")[0] for m in flagged} == {"single-stream coding", "concurrency 1"}
    from specgauge.report.report_data import report_from_compare

    baseline, speculative = report_from_compare(result).arms   # the sweep point is flagged in the report
    assert [p.flagged for p in baseline.points] == [True] and "round 1" in baseline.points[0].flag_reason
    assert [p.flagged for p in speculative.points] == [False]
