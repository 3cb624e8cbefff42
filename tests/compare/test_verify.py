"""--verify: the thresholded plan, and the refusal when the engine has no threshold flag."""

import subprocess
import sys

import pytest

from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.compare.verify import DISABLE_FLAG, thresholded_plan


def engine_plan():
    return ComparePlan(baseline=ArmConfig(name="baseline", kind="engine", value="--speculative-algorithm NONE"),
                       speculative=ArmConfig(name="speculative", kind="engine", value="--speculative-algorithm EAGLE3"),
                       domains=("coding", "encyclopedic"), concurrency=(1, 4, 16), label="EAGLE-3")


def test_thresholded_plan_is_the_sweep_with_the_flag_on_the_speculative_engine():
    plan = thresholded_plan(engine_plan(), 7)
    assert plan.speculative.value == f"--speculative-algorithm EAGLE3 {DISABLE_FLAG} 7"
    assert plan.baseline == engine_plan().baseline
    assert [s.name for s in plan.stages()] == ["sweep:c=1", "sweep:c=4", "sweep:c=16"]
    assert {s.suite for s in plan.stages()} == {"coding"}
    # the per-temperature single stream and the distribution check are not re-run
    sampled = engine_plan().model_copy(update={"temperature": 0.7, "temperatures": (0.0, 0.7),
                                               "samples_per_prompt": 50})
    assert [s.name for s in thresholded_plan(sampled, 7).stages()] == ["sweep:c=1", "sweep:c=4", "sweep:c=16"]


def test_verify_is_refused_when_serve_has_no_threshold_flag(tmp_path):
    help_text = subprocess.run([sys.executable, "-m", "specgauge", "serve", "--help"], capture_output=True,
                               text=True).stdout
    if DISABLE_FLAG in help_text:
        pytest.skip(f"this build's serve has {DISABLE_FLAG}: there is nothing to refuse")
    done = subprocess.run([sys.executable, "-m", "specgauge", "compare", "--baseline-engine", "",
                           "--speculative-engine", "--speculative-algorithm NONE", "--verify",
                           "--db", str(tmp_path / "c.db")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and f"has no {DISABLE_FLAG} option" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
