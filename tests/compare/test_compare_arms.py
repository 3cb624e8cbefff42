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
    """A baseline (1 token a step), 'medium' and its twin (2 a step), 'fast' (6 a step)."""
    # steps of 8 ms: long beside the event loop's own overhead on a busy machine
    baseline = NoisyServer(Script(ttft_s=0.004, chunk_delay_s=0.008, num_chunks=12), seed=1)
    medium = NoisyServer(Script(ttft_s=0.004, chunk_delay_s=0.008, num_chunks=6, tokens_per_chunk=2), seed=2)
    fast = NoisyServer(Script(ttft_s=0.004, chunk_delay_s=0.008, num_chunks=2, tokens_per_chunk=6), seed=3)
    twin = NoisyServer(Script(ttft_s=0.004, chunk_delay_s=0.008, num_chunks=6, tokens_per_chunk=2), seed=4)
    with baseline, medium, fast, twin:
        yield baseline, medium, fast, twin


async def test_several_arms_share_prompts_rotate_and_claim_only_clear_differences(tmp_path, four_servers):
    baseline, medium, fast, twin = four_servers
    plan = ComparePlan(baseline=arm(baseline.url, "baseline"), speculative=arm(medium.url),
                       more_speculative=(arm(fast.url), arm(twin.url)), arm_labels=("medium", "fast", "twin"),
                       api="sglang", raw_chat_format=True, domains=("coding", "encyclopedic"), concurrency=(1, 2),
                       num_requests_single=8, num_requests_sweep=6, warmup=0, bootstrap_resamples=400,
                       rounds=2)   # the same arm measured twice: the machine's drift is in every interval
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
    assert len(prompts) == 2 * (2 * 8 + 2 * 6)
    assert all(set(by_arm) == set(plan.arm_keys) and len(set(by_arm.values())) == 1 for by_arm in prompts.values())
    # the rotation: each point's four runs in the order of the balanced Latin square, turn after turn
    shown = {"base": "baseline", "medium": "speculative", "fast": "speculative-2", "twin": "speculative-3"}
    orders = [tuple(shown[label.split()[0]] for label in progress.labels[i:i + 4])
              for i in range(0, len(progress.labels), 4)]
    assert orders == [order_at(turn, plan.arm_keys) for turn in range(len(orders))]
    # each arm's own verdict against the baseline, as a two-arm comparison's
    for one in result.arms:
        assert [d.domain for d in one.result.single_stream] == ["coding", "encyclopedic"]
        assert all(d.ci_low > 1 for d in one.result.single_stream)
        assert one.result.losslessness.checked
    # a real difference (6 tokens a step against 2), claimed with its sign
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


async def test_a_finished_comparison_of_several_arms_resumes_onto_its_own_runs(tmp_path):
    servers = [ScriptedServer(Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=n, tokens_per_chunk=t))
               for n, t in ((6, 1), (3, 2), (2, 3))]
    with servers[0], servers[1], servers[2], Store.open(tmp_path / "c.db") as store:
        plan = ComparePlan(baseline=arm(servers[0].url, "baseline"), speculative=arm(servers[1].url),
                           more_speculative=(arm(servers[2].url),), arm_labels=("two", "three"), api="sglang",
                           raw_chat_format=True, domains=("coding",), concurrency=(1,), num_requests_single=3,
                           num_requests_sweep=3, warmup=0, bootstrap_resamples=200)
        first = await run_comparison(plan, store, NullProgress())
        links = sorted((link.arm, link.stage, link.run_id) for link in store.comparison_runs(first.comparison_id))
        again = await run_comparison(plan, store, NullProgress(), resume_id=first.comparison_id)
        links_after = sorted((link.arm, link.stage, link.run_id) for link in store.comparison_runs(first.comparison_id))
    assert links_after == links   # every arm's runs found again under its own key: none measured twice
    assert {stage for _, stage, _ in links} == {"single:coding", "sweep:c=1", "single:coding|arm2", "sweep:c=1|arm2"}
    assert [a.result.stages for a in again.arms] == [a.result.stages for a in first.arms]


def launch_command(script: dict) -> str:
    import json
    import sys

    return f"{sys.executable} -m specgauge.testing.scripted_server --port {{port}} --script '{json.dumps(script)}'"


def test_launched_arms_run_one_after_the_other_in_the_latin_square_order(tmp_path):
    import json

    from cli_testkit import run_cli

    out = tmp_path / "v.json"
    done = run_cli("compare", "--api", "sglang", "--raw-chat-format",
                   "--baseline-cmd", launch_command({"ttft_s": 0.002, "chunk_delay_s": 0.002, "num_chunks": 6}),
                   "--speculative-cmd", launch_command({"ttft_s": 0.002, "chunk_delay_s": 0.002, "num_chunks": 3,
                                                        "tokens_per_chunk": 2}),
                   "--speculative-cmd", launch_command({"ttft_s": 0.002, "chunk_delay_s": 0.002, "num_chunks": 2,
                                                        "tokens_per_chunk": 3}),
                   "--arm-label", "two", "--arm-label", "three", "--domains", "coding", "--concurrency", "1",
                   "--num-requests", "3", "--warmup", "0", "--resamples", "200", "--output-json", out,
                   "--db", tmp_path / "c.db")
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    single = {a["key"]: a["result"]["stages"][0] for a in document["arms"]}
    first_run = {"baseline": single["speculative"]["baseline_run_ids"], "speculative": single["speculative"][
        "speculative_run_ids"], "speculative-2": single["speculative-2"]["speculative_run_ids"]}
    assert all(len(ids) == 2 for ids in first_run.values())   # two rounds by default with launch commands
    keys = ("baseline", "speculative", "speculative-2")
    for round_number in (0, 1):   # each round's arms start in the square's order of that round
        started = sorted(keys, key=lambda k: first_run[k][round_number])
        assert tuple(started) == order_at(round_number, keys)
