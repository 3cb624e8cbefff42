"""compare with several speculative arms against one baseline, on scripted loopback servers of known
speeds: every arm gets the same prompts, the order rotates by a balanced Latin square, a real
difference between arms is claimed with its sign and one inside the noise never is."""

import dataclasses
import random

import pytest

from specgauge.analysis.arm_results import MultiArmResult
from specgauge.compare.orchestrate import run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan, from_store_link
from specgauge.compare.rotation import order_at
from specgauge.report.progress import NullProgress
from specgauge.store import Store
from specgauge.testing.scripted_server import Script, ScriptedServer


class NoisyServer(ScriptedServer):
    """A scripted server whose chunk delay varies per request by a seeded random factor (0.6-1.4):
    two of them with the same script and different seeds are the same speed, measured with noise."""

    def __init__(self, script: Script, *, seed: int) -> None:
        super().__init__(script)
        self._rng = random.Random(seed)

    def _script_for(self, prompt: str) -> Script:
        script = super()._script_for(prompt)
        return dataclasses.replace(script, chunk_delay_s=script.chunk_delay_s * self._rng.uniform(0.6, 1.4))


class Recording(NullProgress):
    def __init__(self):
        self.labels = []

    def point_started(self, point_index, label, total, already_done):
        self.labels.append(label)


def arm(value, name="speculative"):
    return ArmConfig(name=name, kind="url", value=value)


@pytest.fixture()
def four_servers():
    """A baseline (1 token a step), 'medium' and its twin (2 a step), 'fast' (3 a step)."""
    baseline = NoisyServer(Script(ttft_s=0.003, chunk_delay_s=0.003, num_chunks=24), seed=1)
    medium = NoisyServer(Script(ttft_s=0.003, chunk_delay_s=0.003, num_chunks=12, tokens_per_chunk=2), seed=2)
    fast = NoisyServer(Script(ttft_s=0.003, chunk_delay_s=0.003, num_chunks=8, tokens_per_chunk=3), seed=3)
    twin = NoisyServer(Script(ttft_s=0.003, chunk_delay_s=0.003, num_chunks=12, tokens_per_chunk=2), seed=4)
    with baseline, medium, fast, twin:
        yield baseline, medium, fast, twin


async def test_several_arms_share_prompts_rotate_and_claim_only_clear_differences(tmp_path, four_servers):
    baseline, medium, fast, twin = four_servers
    plan = ComparePlan(baseline=arm(baseline.url, "baseline"), speculative=arm(medium.url),
                       more_speculative=(arm(fast.url), arm(twin.url)), arm_labels=("medium", "fast", "twin"),
                       api="sglang", raw_chat_format=True, domains=("coding", "encyclopedic"), concurrency=(1, 2),
                       num_requests_single=8, num_requests_sweep=8, warmup=0, bootstrap_resamples=400)
    progress = Recording()
    with Store.open(tmp_path / "c.db") as store:
        result = await run_comparison(plan, store, progress)
        links = store.comparison_runs(result.comparison_id)
        prompts = {}
        for link in links:   # every arm's prompt per (stage, round, request index)
            key, stage = from_store_link(link.arm, link.stage)
            for point in store.get_points(link.run_id):
                for record in store.get_requests(point.id):
                    prompts.setdefault((stage, link.round, record.request_index), {})[key] = record.prompt_index
        stored = MultiArmResult.model_validate(store.get_comparison(result.comparison_id).result)

    assert isinstance(result, MultiArmResult) and stored == result
    assert [a.label for a in result.arms] == ["medium", "fast", "twin"]
    # the pairing: every arm sent the same prompt at every request of every stage and round
    assert len(prompts) == 2 * 8 + 2 * 8
    assert all(set(by_arm) == set(plan.arm_keys) and len(set(by_arm.values())) == 1 for by_arm in prompts.values())
    # the rotation: each point's four runs in the order of the balanced Latin square, turn after turn
    shown = {"base": "baseline", "medium": "speculative", "fast": "speculative-2", "twin": "speculative-3"}
    orders = [tuple(shown[label.split()[0]] for label in progress.labels[i:i + 4])
              for i in range(0, len(progress.labels), 4)]
    assert orders == [order_at(turn, plan.arm_keys) for turn in range(len(orders))]
    # each arm's own verdict against the baseline, as a two-arm comparison's
    for one in result.arms:
        assert [d.domain for d in one.result.single_stream] == ["coding", "encyclopedic"]
        assert all(d.ci_low > 1.3 for d in one.result.single_stream)
        assert one.result.losslessness.checked
    # a real difference (3 tokens a step against 2), claimed with its sign
    faster = [d for d in result.differences if (d.first, d.second) == ("medium", "fast") and d.domain is not None]
    assert len(faster) == 2 and all(d.clear and d.ratio.ci_high < 1 for d in faster)
    assert all(d.sentence.startswith("medium pays less than fast on ") for d in faster)
    # a difference inside the noise (the same script twice) is never claimed
    same = [d for d in result.differences if (d.first, d.second) == ("medium", "twin")]
    assert len(same) == 4 and not any(d.clear for d in same)
    assert all(d.sentence.startswith("no clear difference between medium and twin") for d in same)
    # the choice: fast on every domain, its schedule from its own recommendation
    by_domain = {c.domain: c for c in result.choice if c.domain is not None}
    assert {d: c.chosen for d, c in by_domain.items()} == {"coding": "fast", "encyclopedic": "fast"}
    assert any(line.startswith("Choice, coding: fast (") for line in result.verdict_lines)


def test_a_two_arm_plan_is_stored_without_the_keys_of_several():
    plan = ComparePlan(baseline=arm("http://127.0.0.1:1", "baseline"), speculative=arm("http://127.0.0.1:2"))
    document = plan.model_dump(mode="json")
    assert "more_speculative" not in document and "arm_labels" not in document
    assert ComparePlan.model_validate(document) == plan
    several = plan.model_copy(update={"more_speculative": (arm("http://127.0.0.1:3"),), "arm_labels": ("a", "b")})
    assert ComparePlan.model_validate(several.model_dump(mode="json")).arm_keys == (
        "baseline", "speculative", "speculative-2")
