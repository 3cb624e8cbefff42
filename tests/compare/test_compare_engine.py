"""compare end to end against two real embedded engines serving a tiny random model."""

import pytest

pytest.importorskip("torch")

from specgauge.compare.orchestrate import run_comparison  # noqa: E402
from specgauge.compare.plan import ArmConfig, ComparePlan  # noqa: E402
from specgauge.store import Store  # noqa: E402

pytestmark = pytest.mark.slow   # runs the embedded engine


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from specgauge.engine.models.random_model import write_random_model

    return write_random_model(tmp_path_factory.mktemp("tiny") / "model", hidden_size=32, num_layers=2,
                              intermediate_size=64, max_position_embeddings=2048)


async def test_two_engines_compare_abba_with_lossless_greedy_output(tiny_model, tmp_path):
    engine_args = f"--model {tiny_model} --threads 1 --max-running-requests 8"
    plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="engine", value=engine_args),
                       speculative=ArmConfig(name="speculative", kind="engine", value=engine_args),
                       api="openai-chat", domains=("coding",), concurrency=(1, 4), num_requests_single=4,
                       num_requests_sweep=8, max_tokens=12, warmup=1, bootstrap_resamples=200,
                       label="same engine", start_timeout_s=120)
    with Store.open(tmp_path / "e.db") as store:
        result = await run_comparison(plan, store)
        runs = [store.get_run(r) for stage in result.stages for r in stage.baseline_run_ids + stage.speculative_run_ids]
    assert result.settings.schedule == "abba_by_point"
    assert {run.status for run in runs} == {"done"}
    assert all(a.url.startswith("http://127.0.0.1:") for a in result.arms)
    assert result.arms[0].url != result.arms[1].url                  # two engines, both up
    assert [p.concurrency for p in result.sweep] == [1, 4]
    for point in (*result.single_stream, *result.sweep):
        assert point.baseline.num_errors == 0 and point.speculative.num_errors == 0
        assert point.request_tok_s_ratio.ratio > 0 and point.tpot_ratio.method == "paired_requests"
    # Same model, same greedy settings: the outputs must match token for token.
    assert result.losslessness.checked and result.losslessness.mismatches == 0
    assert result.losslessness.compared == 4 + 2 * 8
