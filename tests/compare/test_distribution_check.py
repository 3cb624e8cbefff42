"""``compare --samples-per-prompt`` on the embedded engine (the 8m model), arms launched by command: the default
sample count flags a wrong sampler (``serve --testing-fault accept-bias=1.5``) and passes a correct
one. The request seeds derive from ``--seed``, so the samples (and the verdicts) repeat; how often a
check errs over many seeds is ``benchmarks/distribution_check.py``'s to measure."""

import json
import shlex
import sys

import pytest

from cli_testkit import one_line_error, run_cli
from specgauge.compare.compare_command import DEFAULT_SAMPLES_PER_PROMPT

SERVE = f"{shlex.quote(sys.executable)} -m specgauge serve --model specgauge-8m --port {{port}}"
EAGLE3 = f"{SERVE} --speculative-algorithm EAGLE3"


def _compare_args(tmp_path, speculative_cmd: str, name: str) -> list:
    return ["compare", "--baseline-cmd", SERVE, "--speculative-cmd", speculative_cmd, "--rounds", "1",
            "--temperature", "0.7", "--samples-per-prompt", DEFAULT_SAMPLES_PER_PROMPT,
            "--domains", "coding", "--single-stream-requests", "1", "--concurrency", "1",
            "--num-requests", "1", "--warmup", "0", "--resamples", "200",
            "--output-json", tmp_path / f"{name}.json", "--db", tmp_path / f"{name}.db"]


def _distributions(tmp_path, arms: dict[str, str]) -> dict[str, tuple[dict, str]]:
    """Each named speculative command's check, the compares run at the same time (they share nothing:
    each launches its own servers on ports of its own and writes its own store)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(arms)) as pool:
        done = dict(zip(arms, pool.map(lambda item: run_cli(*_compare_args(tmp_path, item[1], item[0])),
                                       arms.items())))
    checks = {}
    for name, result in done.items():
        assert result.returncode == 0, (name, result.stderr)
        document = json.loads((tmp_path / f"{name}.json").read_text())
        checks[name] = document["losslessness"]["distribution"], result.stdout
    return checks


@pytest.mark.slow
def test_a_wrong_sampler_is_flagged_and_a_correct_one_passes(tmp_path):
    checks = _distributions(tmp_path, {"faulted": f"{EAGLE3} --testing-fault accept-bias=1.5", "correct": EAGLE3})
    (faulted, faulted_out), (correct, correct_out) = checks["faulted"], checks["correct"]
    for check in (faulted, correct):
        assert check["checked"] and check["temperature"] == 0.7 and check["positions_tested"] == 12
        assert check["samples_per_prompt"] == DEFAULT_SAMPLES_PER_PROMPT and check["prompts"] == 2
        assert check["requests"] == 2 * 2 * DEFAULT_SAMPLES_PER_PROMPT and check["seconds"] > 0
        assert 0 < check["min_detectable_shift"] < 1 and "tokenizer.json" in check["tokens"]
    assert faulted["differs"] is True and faulted["p_value"] < 0.05 and faulted["examples"]
    example = faulted["examples"][0]
    assert example["position"] >= 0 and example["token"] and example["baseline_share"] != example["speculative_share"]
    assert "speculation changes the output distribution" in faulted_out and "position" in faulted_out
    assert correct["differs"] is False and correct["p_value"] >= 0.05 and correct["examples"] == []
    assert (f"no detectable difference ({correct['samples']} samples" in correct_out
            and "would have been detected with 80% power" in correct_out)


def test_samples_per_prompt_needs_a_temperature_above_zero(tmp_path):
    one_line_error(run_cli("compare", "--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9",
                           "--samples-per-prompt", "50", "--db", tmp_path / "c.db"),
                   "--samples-per-prompt", "give a --temperature (or --temperatures) above 0")
