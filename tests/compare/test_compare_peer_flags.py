"""``compare`` with vLLM's dataset, goodput and result-file flags: one random suite for both arms
and every stage, each arm's goodput per stage, one vLLM-style result file per arm; misuse is one
line, exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specgauge.testing.scripted_server import Script, ScriptedServer

TARGET = Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets" / "target"
FAST = Script(ttft_s=0.003, chunk_delay_s=0.002, num_chunks=4, tokens_per_chunk=2)


def _prompt(body: dict) -> str:
    return body["prompt"] if "prompt" in body else body["messages"][-1]["content"]


def test_compare_random_dataset_goodput_and_result_files(tmp_path):
    info = {"model_path": str(TARGET)}
    with ScriptedServer(FAST, server_info=info) as baseline, ScriptedServer(FAST, server_info=info) as speculative:
        done = subprocess.run([sys.executable, "-m", "specgauge", "compare", "--baseline", baseline.url,
                               "--speculative", speculative.url, "--dataset-name", "random",
                               "--random-input-len", "32", "--random-output-len", "16", "--num-prompts", "8",
                               "--single-stream-requests", "4", "--concurrency", "1,2",
                               "--goodput", "ttft:500", "tpot:400",
                               "--metric-percentiles", "50,99", "--save-result",
                               "--result-filename", str(tmp_path / "run.json"), "--warmup", "0",
                               "--resamples", "200", "--output-json", str(tmp_path / "v.json"),
                               "--header", "X-Tenant: t1", "--db", str(tmp_path / "c.db")],
                              capture_output=True, text=True, timeout=240)
        seen = {"baseline": baseline.requests_seen, "speculative": speculative.requests_seen}
        headers = baseline.headers_seen + speculative.headers_seen
    assert done.returncode == 0, done.stderr
    assert headers and all(h.get("X-Tenant") == "t1" for h in headers)   # --header: every request, both arms
    prompts = {name: sorted(_prompt(b) for b in bodies) for name, bodies in seen.items()}
    assert prompts["baseline"] == prompts["speculative"] and prompts["baseline"]
    assert all(b.get("ignore_eos") is True for bodies in seen.values() for b in bodies)   # random: as vLLM
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert [s["stage"] for s in verdict["stages"]] == ["single", "sweep:c=1", "sweep:c=2"]
    assert {s["suite"]["name"] for s in verdict["stages"]} == {"random-in32-out16-n8-s0"}
    assert [d["domain"] for d in verdict["single_stream"]] == ["random"]
    random_warning = [w for w in verdict["health"] if w["code"] == "random_prompts"]   # not a text workload
    assert len(random_warning) == 1 and random_warning[0]["message"].startswith("all prompts of this comparison are "
                                                                                "random tokens")
    assert "acceptance on random tokens is not that of text" in done.stdout
    assert "goodput [ttft:500 tpot:400]" in done.stdout and "goodput ratio" in done.stdout
    goodput = verdict["goodput"]   # the terminal's goodput lines, in verdict.json too
    assert goodput["slo_ms"] == {"ttft": 500.0, "tpot": 400.0}
    assert [row["stage"] for row in goodput["stages"]] == ["single", "sweep:c=1", "sweep:c=2"]
    for row in goodput["stages"]:
        for name in ("baseline", "speculative"):
            assert 0 <= row[name]["request_goodput"] <= row[name]["request_throughput"]
        base, spec = row["baseline"]["request_goodput"], row["speculative"]["request_goodput"]
        assert row["goodput_ratio"] == (pytest.approx(spec / base) if base else None)
        assert f"{row['stage']}: baseline {row['baseline']['request_goodput']:.2f} of" in done.stdout
    for name in ("baseline", "speculative"):
        points = json.loads((tmp_path / f"run-{name}.json").read_text())
        assert [p["specgauge"]["stage"] for p in points] == ["single", "sweep:c=1", "sweep:c=2"]
        for point in points:
            assert point["request_goodput"] is not None and point["request_goodput"] <= point["request_throughput"]
            assert point["specgauge"]["arm"] == name and point["specgauge"]["goodput_slo_ms"] == {"ttft": 500.0,
                                                                                                   "tpot": 400.0}
            assert "p50_ttft_ms" in point and "p99_itl_ms" in point
        assert sum(p["completed"] for p in points) == 4 + 8 + 8
    # the goodput is part of the stored result: `report c1` writes and prints the same figures
    again = subprocess.run([sys.executable, "-m", "specgauge", "report", "c1", "--db", str(tmp_path / "c.db"),
                            "--output-dir", str(tmp_path / "again")], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again" / "verdict.json").read_text())["goodput"] == goodput
    assert "goodput [ttft:500 tpot:400]" in again.stdout
    assert all(f"{row['stage']}: baseline {row['baseline']['request_goodput']:.2f} of" in again.stdout
               for row in goodput["stages"])
    html = (tmp_path / "again" / "report.html").read_text()
    assert "Goodput [ttft:500 tpot:400]" in html and html.count("goodput ratio") == 1


@pytest.mark.parametrize("extra, message", [
    (["--request-rate", "4"], "has no open-loop points"),
    (["--dataset-name", "random", "--suite", "smoke"], "drop --suite"),
    (["--dataset-name", "sharegpt"], "needs --dataset-path"),
    (["--goodput", "speed:3"], "unknown metric"),
    (["--percentile-metrics", "ttft,latency"], "--percentile-metrics"),
    (["--against-baseline", "main", "--dataset-name", "random"], "drop --dataset-name"),
])
def test_compare_peer_flag_misuse_is_one_line(tmp_path, extra, message):
    done = subprocess.run([sys.executable, "-m", "specgauge", "compare", "--baseline", "http://127.0.0.1:9",
                           "--speculative", "http://127.0.0.1:9", *extra, "--db", str(tmp_path / "c.db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "c.db").exists()


def test_compare_custom_dataset_is_the_prompts_of_every_stage(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Question {i}: name a prime.", "max_tokens": 8}) + "\n"
                            for i in range(6)))
    with ScriptedServer(FAST) as baseline, ScriptedServer(FAST) as speculative:
        done = subprocess.run([sys.executable, "-m", "specgauge", "compare", "--baseline", baseline.url,
                               "--speculative", speculative.url, "--dataset-name", "custom", "--dataset-path",
                               str(path), "--request-rate", "inf", "--num-prompts", "6",
                               "--single-stream-requests", "3",
                               "--concurrency", "2", "--warmup", "0", "--resamples", "200",
                               "--output-json", str(tmp_path / "v.json"), "--db", str(tmp_path / "c.db")],
                              capture_output=True, text=True, timeout=240)
        seen = [sorted(_prompt(b) for b in server.requests_seen) for server in (baseline, speculative)]
    assert done.returncode == 0, done.stderr
    assert seen[0] == seen[1] and set(seen[0]) <= {f"Question {i}: name a prime." for i in range(6)}
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert {s["suite"]["name"] for s in verdict["stages"]} == {"custom-mine"}


def test_compare_resume_finishes_with_the_stored_slos_and_writes_the_result_files(tmp_path):
    from specgauge.compare.plan import ArmConfig, ComparePlan
    from specgauge.store import Store

    with ScriptedServer(FAST) as baseline, ScriptedServer(FAST) as speculative:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           domains=("coding",), concurrency=(2,), num_requests_single=3, num_requests_sweep=4,
                           warmup=0, bootstrap_resamples=200, goodput={"e2el": 60000.0})
        with Store.open(tmp_path / "c.db") as store:   # a comparison that stopped before measuring anything
            comparison_id = store.create_comparison(plan.model_dump(mode="json"))
        done = subprocess.run([sys.executable, "-m", "specgauge", "compare", "--resume", f"c{comparison_id}",
                               "--result-filename", str(tmp_path / "run.json"), "--metric-percentiles", "50",
                               "--output-json", str(tmp_path / "v.json"), "--db", str(tmp_path / "c.db")],
                              capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["goodput"]["slo_ms"] == {"e2el": 60000.0} and "goodput [e2el:60000]" in done.stdout
    for name in ("baseline", "speculative"):
        points = json.loads((tmp_path / f"run-{name}.json").read_text())
        assert [p["specgauge"]["stage"] for p in points] == ["single:coding", "sweep:c=2"]
        assert all(p["specgauge"]["goodput_slo_ms"] == {"e2el": 60000.0} and "p50_ttft_ms" in p for p in points)
        assert all(p["request_goodput"] == p["request_throughput"] for p in points)   # 60 s: every request
