"""``specgauge tune`` end to end on scripted servers (one per depth, known speeds) and on the
embedded engine (tiny random model, n-gram drafts), plus its one-line refusals."""

import json
import subprocess
import sys

import pytest

from specgauge.speculation_schedule import normalize_schedule
from specgauge.testing.scripted_server import Script, ScriptedServer


def run_cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "specgauge", *args], capture_output=True, text=True, timeout=timeout)


def test_tune_on_url_arms_chooses_the_fastest_depth_and_emits_the_settings(tmp_path):
    # the same 12 tokens per request: depth 2 sends them in 4 chunks (3x fewer waits), depth 4 in 4 slow
    # chunks; waits long enough that a busy machine's scheduling jitter is small beside them
    with ScriptedServer(Script(chunk_delay_s=0.02, num_chunks=12)) as plain, \
            ScriptedServer(Script(chunk_delay_s=0.02, num_chunks=4, tokens_per_chunk=3)) as fast, \
            ScriptedServer(Script(chunk_delay_s=0.1, num_chunks=4, tokens_per_chunk=3)) as slow:
        done = run_cli("tune", "--url", f"0={plain.url}", "--url", f"2={fast.url}", "--url", f"4={slow.url}",
                       "--concurrency", "1,2", "--suite", "smoke", "--min-requests", "4", "--max-rounds", "4",
                       "--db", str(tmp_path / "t.db"), "--output-json", str(tmp_path / "tune.json"))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "tune.json").read_text())
    assert [c["chosen"] for c in document["choices"]] == [2, 2]
    assert document["schedule"]["entries"] == [[1, 256, 2]]
    normalize_schedule(document["schedule"]["entries"])
    settings = {s["server"]: s for s in document["settings"]}
    assert "--speculative-schedule" in settings["specgauge"]["setting"]
    assert '"num_speculative_tokens": 2' in settings["vllm"]["setting"]
    assert json.loads(settings["sglang"]["config_text"])["1"] == {"candidate_steps": [2]}
    assert document["measure_seconds"] <= document["full_grid_seconds"] + 1e-9
    assert document["verify"] == []  # URL arms: --verify is off by default (it launches the engine)
    assert "schedule: [[1, 256, 2]]" in done.stdout and "every point is a bench run" in done.stdout
    # stored as one result: `report tN` gives back the same document, its runs are the points' runs
    assert f"stored as tune t{document['tune_id']}" in done.stdout
    shown = run_cli("report", f"t{document['tune_id']}", "--db", str(tmp_path / "t.db"), "--output-json", "-",
                    "--html", str(tmp_path / "tune.html"), timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == document
    assert [[c["depth"] for c in row["cells"] if c["chosen"]] for row in document["heat_map"]["rows"]] == [[2], [2]]
    assert "Schedule [bs_lo, bs_hi, K]: [[1, 256, 2]]" in (tmp_path / "tune.html").read_text()


@pytest.mark.parametrize("args, message", [
    (("--depths", "1,2", "--url", "1=http://127.0.0.1:9", "--url", "2=http://127.0.0.1:9"), "must include 0"),
    (("--url", "x=http://a"), "K=URL"),
    (("--url", "0=ftp://a", "--url", "1=http://a"), "http://"),
    (("--depths", "0,-1"), ">= 0"),
    (("--concurrency", "0,4"), ">= 1"),
    (("--launch-template", "serve --port {port}"), "{k}"),
    (("--launch-template", "serve {k}", "--depths", "0,1"), "{port}"),
    (("--url", "0=http://a", "--url", "1=http://b", "--verify"), "--verify"),
    (("--min-rounds", "3", "--max-rounds", "2"), "exceeds"),
])
def test_bad_tune_arguments_are_refused_with_one_line(args, message, tmp_path):
    done = run_cli("tune", *args, "--db", str(tmp_path / "t.db"), timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.strip()]) <= 3  # click's usage line + the error


def test_tune_on_the_embedded_engine_emits_a_schedule_and_verifies_it(tiny_model_dir, tmp_path):
    done = run_cli("tune", "--engine-args", f"--model {tiny_model_dir} --threads 1", "--algorithm", "NGRAM",
                   "--depths", "0,2", "--concurrency", "1,2", "--suite", "smoke", "--min-requests", "2",
                   "--max-tokens", "8", "--warmup", "0", "--min-rounds", "2", "--max-rounds", "2",
                   "--verify-rounds", "1", "--db", str(tmp_path / "t.db"), "--output-json", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "t.json").read_text())
    entries = document["schedule"]["entries"]
    normalize_schedule(entries)
    assert {c["concurrency"] for c in (x["cell"] for x in document["choices"])} == {1, 2}
    if document["schedule"]["max_depth"]:
        assert [v["concurrency"] for v in document["verify"]] == [1, 2]
        assert document["worst_verify_ratio"]["ratio"] > 0
        assert "worst ratio of the schedule to the per-level best" in done.stdout
    else:
        assert "nothing to verify" in done.stdout


def test_the_verify_arm_serves_the_emitted_schedule(tiny_model_dir):
    # the schedule arm --verify starts: the embedded engine with the emitted --speculative-schedule
    import urllib.request

    from specgauge.tune.arms import arms_up, engine_schedule_arm
    from specgauge.tune.choice import TunedSchedule

    schedule = TunedSchedule(((1, 4, 3), (5, 256, 0)), context_axis=False)
    arm = engine_schedule_arm(schedule, f"--model {tiny_model_dir} --threads 1", "NGRAM")
    with arms_up([arm], start_timeout_s=300) as urls:
        with urllib.request.urlopen(urls["schedule"] + "/server_info", timeout=30) as response:
            info = json.loads(response.read())
    assert info["speculative_schedule"] == [[1, 4, 3], [5, 256, 0]]
    assert info["speculative_num_steps"] == 3 and info["speculative_algorithm"] == "NGRAM"
