"""compare and --verify against the embedded engine with EAGLE-3 (a random head on a tiny random
target: the plumbing, not the speedup). Skipped until this build's engine has EAGLE-3."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from specgauge.compare.demo import serve_help  # noqa: E402
from specgauge.compare.orchestrate import run_comparison  # noqa: E402
from specgauge.compare.plan import ArmConfig, ComparePlan  # noqa: E402
from specgauge.compare.verify import DISABLE_FLAG, verify_threshold  # noqa: E402
from specgauge.store import Store  # noqa: E402

pytestmark = pytest.mark.slow   # runs the embedded engine

SERVE_HELP = serve_help()
if "EAGLE3" not in SERVE_HELP or DISABLE_FLAG not in SERVE_HELP:
    pytest.skip("this build's engine has no EAGLE-3 speculation yet", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
spec_testkit = pytest.importorskip("spec_testkit")   # the engine tests' random EAGLE-3 head


@pytest.fixture(scope="module")
def target_and_head(tmp_path_factory):
    from specgauge.engine.models.random_model import write_random_model

    root = tmp_path_factory.mktemp("eagle")
    target = write_random_model(root / "target", hidden_size=32, num_layers=2, intermediate_size=64,
                                max_position_embeddings=2048)
    return target, spec_testkit.write_random_head(root / "head", target)


async def test_none_vs_eagle3_then_verify_the_threshold(target_and_head, tmp_path):
    target, head = target_and_head
    common = f"--model {target} --threads 1"
    plan = ComparePlan(
        baseline=ArmConfig(name="baseline", kind="engine", value=f"{common} --speculative-algorithm NONE"),
        speculative=ArmConfig(name="speculative", kind="engine",
                              value=f"{common} --speculative-algorithm EAGLE3 --speculative-draft-model-path {head}"),
        api="sglang", tokenizer=str(target / "tokenizer.json"), domains=("coding",), concurrency=(1, 4),
        num_requests_single=4, num_requests_sweep=8, max_tokens=16, warmup=1, bootstrap_resamples=200,
        label="EAGLE-3")
    with Store.open(tmp_path / "e.db") as store:
        result = await run_comparison(plan, store)
        forced = result.model_copy(update={"recommended_disable_above": 1})
        verified = await verify_threshold(plan, store, forced)
    domain = result.single_stream[0]
    assert domain.accept_length is not None and domain.accept_length >= 1.0
    assert result.tokens_per_chunk["speculative"]                    # counted chunks from /generate
    assert all(p.baseline.num_errors == 0 and p.speculative.num_errors == 0 for p in result.sweep)
    assert verified.verification.disable_above == 1
    assert [p.concurrency for p in verified.verification.points] == [1, 4]
    assert verified.verdict_lines[-1].startswith(("Verified:", "Not verified:"))
