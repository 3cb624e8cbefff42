"""``specgauge tune`` end to end on scripted servers (one per depth, known speeds) and on the
embedded engine (tiny random model, n-gram drafts), plus its one-line refusals."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specgauge.speculation_schedule import normalize_schedule
from specgauge.store import Store
from specgauge.testing.scripted_server import Script, ScriptedServer
from cli_testkit import run_cli, spawn_cli, wait_until


def test_tune_on_url_arms_chooses_the_fastest_depth_and_emits_the_settings(tmp_path):
    # the same 12 tokens per request: depth 2 sends them in 4 chunks (3x fewer waits), depth 4 in 4 slow
    # chunks; waits long enough that a busy machine's scheduling jitter is small beside them
    with ScriptedServer(Script(chunk_delay_s=0.02, num_chunks=12)) as plain, \
            ScriptedServer(Script(chunk_delay_s=0.02, num_chunks=4, tokens_per_chunk=3)) as fast, \
            ScriptedServer(Script(chunk_delay_s=0.1, num_chunks=4, tokens_per_chunk=3)) as slow:
        done = run_cli("tune", "--url", f"0={plain.url}", "--url", f"2={fast.url}", "--url", f"4={slow.url}",
                       "--concurrency", "1,2", "--suite", "smoke", "--min-requests", "4", "--max-rounds", "4",
                       "--api-key", "sk-tune", "--header", "X-Tenant: t1",
                       "--db", str(tmp_path / "t.db"), "--output-json", str(tmp_path / "tune.json"))
        headers = [h for server in (plain, fast, slow) for h in server.headers_seen]
    assert done.returncode == 0, done.stderr
    assert headers and all(h.get("X-Tenant") == "t1" and h.get("Authorization") == "Bearer sk-tune" for h in headers)
    with Store.open(tmp_path / "t.db", create=False) as store:   # the secrets are sent, never stored
        plan = store.get_tune(1).plan
    assert "api_key" not in plan and plan["headers"] == [["X-Tenant", "<redacted>"]]
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
    (("--url", "0=http://a", "--url", "1=http://b", "--verify"), "--url schedule=URL"),
    (("--launch-template", "serve {port} {k}", "--verify"), "--launch-template-schedule"),
    (("--launch-template", "serve {port} {k}", "--launch-template-schedule", "serve {port}"), "{schedule}"),
    (("--launch-template-schedule", "serve {port} {schedule}"), "needs --launch-template"),
    (("--url", "schedule=http://a"), "give the depths' servers too"),
    (("--context-lengths", "0-128"), "1 <= LO <= HI"),
    (("--context-lengths", "1-128,64-256"), "overlaps"),
    (("--tokenizer", "/nonexistent/tokenizer.json"), "does not exist"),
    (("--min-rounds", "3", "--max-rounds", "2"), "exceeds"),
    (("--speculative-engine", "--threads 1", "--engine-args", "--threads 2"), "--engine-args is its old name"),
    (("--engine-args", "--threads 1", "--url", "0=http://a"), "--url, --speculative-engine"),
])
def test_bad_tune_arguments_are_refused_with_one_line(args, message, tmp_path):
    done = run_cli("tune", *args, "--db", str(tmp_path / "t.db"), timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.strip()]) <= 3  # click's usage line + the error


def test_tunes_old_engine_args_name_is_hidden_from_help(cli_here):
    shown = cli_here("tune", "--help")
    assert shown.returncode == 0 and "--speculative-engine" in shown.stdout and "--engine-args" not in shown.stdout


@pytest.mark.slow   # runs the embedded engine
def test_tune_on_the_embedded_engine_emits_a_schedule_and_verifies_it(tiny_model_dir, tmp_path):
    done = run_cli("tune", "--speculative-engine", f"--model {tiny_model_dir} --threads 1", "--algorithm", "NGRAM",
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


@pytest.mark.slow   # starts the embedded engine
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


TARGET_TOKENIZER = str(Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets" / "target"
                       / "tokenizer.json")


def _context_server(script, context=512):
    # a server that reports its context and a tokenizer on this machine, like vLLM / SGLang / specgauge serve do
    return ScriptedServer(script, server_info={"max_model_len": context, "tokenizer_path": TARGET_TOKENIZER})


def test_tune_with_two_context_bands_emits_a_5_item_schedule_and_verifies_it_on_a_url(tmp_path):
    plain = Script(chunk_delay_s=0.02, num_chunks=12)
    fast = Script(chunk_delay_s=0.02, num_chunks=4, tokens_per_chunk=3)
    with _context_server(plain) as k0, _context_server(fast) as k2, _context_server(fast) as scheduled:
        done = run_cli("tune", "--url", f"0={k0.url}", "--url", f"2={k2.url}", "--url", f"schedule={scheduled.url}",
                       "--concurrency", "1,2", "--context-lengths", "1-40,41-120", "--suite", "smoke",
                       "--min-requests", "4", "--max-tokens", "12", "--max-rounds", "3", "--verify-rounds", "2",
                       "--db", str(tmp_path / "t.db"), "--output-json", str(tmp_path / "tune.json"))
        sent = [r for r in k0.requests_seen]
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "tune.json").read_text())
    cells = {(c["cell"]["concurrency"], tuple(c["cell"]["band"])) for c in document["choices"]}
    assert cells == {(1, (1, 40)), (1, (41, 120)), (2, (1, 40)), (2, (41, 120))}
    entries = document["schedule"]["entries"]
    assert document["schedule"]["context_axis"] and all(len(e) == 5 for e in entries)
    normalize_schedule(entries)   # vLLM's rules: rectangular, contiguous context ranges from 1
    assert [s["band"] for s in document["band_suites"]] == [[1, 40], [41, 120]]
    vllm_setting = next(s for s in document["settings"] if s["server"] == "vllm")["setting"]
    assert "num_speculative_tokens_per_batch_size" in vllm_setting
    # both bands' prompts reached the server; verify ran the schedule's URL at every cell
    assert len({json.dumps(body["messages"]) for body in sent}) >= 2
    assert {(v["concurrency"], tuple(v["band"])) for v in document["verify"]} == cells
    assert "c=1@1-40" in done.stdout and "reports no schedule to check" in done.stdout


def test_a_band_longer_than_the_servers_context_is_refused_by_name(tmp_path):
    with _context_server(Script(num_chunks=2)) as k0, _context_server(Script(num_chunks=2)) as k1:
        done = run_cli("tune", "--url", f"0={k0.url}", "--url", f"1={k1.url}", "--context-lengths", "1-100,101-480",
                       "--max-tokens", "64", "--suite", "smoke", "--db", str(tmp_path / "t.db"), timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--context-lengths 101-480" in done.stderr and "512-token context" in done.stderr
    assert not k0.requests_seen   # refused before any point ran


def test_url_arms_without_a_schedule_server_say_verification_was_not_run(tmp_path):
    with ScriptedServer(Script(chunk_delay_s=0.01, num_chunks=4)) as k0, \
            ScriptedServer(Script(chunk_delay_s=0.01, num_chunks=4)) as k1:
        done = run_cli("tune", "--url", f"0={k0.url}", "--url", f"1={k1.url}", "--concurrency", "1",
                       "--suite", "smoke", "--min-requests", "2", "--max-rounds", "2", "--db", str(tmp_path / "t.db"))
    assert done.returncode == 0, done.stderr
    if "nothing to verify" not in done.stdout:   # the schedule drafts: the URL arms cannot run it
        assert "verification not run: the arms are URLs" in done.stdout and "--url schedule=URL" in done.stdout


@pytest.mark.parametrize("colour", ["FORCE_COLOR", "FORCE_COLOR and NO_COLOR"])
def test_on_a_colour_terminal_the_tune_prints_its_heat_map_and_else_plain_text(colour, tmp_path):
    env = {"FORCE_COLOR": "1", "COLORTERM": "truecolor", **({"NO_COLOR": "1"} if "NO_COLOR" in colour else {})}
    with ScriptedServer(Script(chunk_delay_s=0.01, num_chunks=4)) as k0, \
            ScriptedServer(Script(chunk_delay_s=0.01, num_chunks=2, tokens_per_chunk=2)) as k1:
        done = run_cli("tune", "--url", f"0={k0.url}", "--url", f"1={k1.url}", "--concurrency", "1",
                       "--suite", "smoke", "--min-requests", "2", "--max-rounds", "2", "--db", str(tmp_path / "t.db"),
                       "--output-json", "-", env=env)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)   # stdout holds only the JSON; the table goes to stderr
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stderr)
    assert f"stored as tune t{document['tune_id']}" in text
    if colour == "FORCE_COLOR":   # the heat map `report tN` prints, in colour, the chosen depth bracketed
        assert "\x1b[" in done.stderr and "throughput relative to the cell's best" in text
        row = next(line for line in text.splitlines() if re.match(r"\W*1 ", line))
        assert re.search(r"\[\d\.\d\d\*?\]", row) and "→ k=" in row
        assert "per depth: tok/s" not in text
    else:   # NO_COLOR: the plain text, as in a pipe
        assert "\x1b[" not in done.stderr and "per depth: tok/s" in text
        assert f"schedule: {document['schedule']['entries']}" in text


def test_tune_on_launch_template_arms_verifies_the_schedule_command(tmp_path):
    record = tmp_path / "launched.jsonl"
    server = f"{sys.executable} {Path(__file__).with_name('depth_server.py')} --port {{port}} --record {record}"
    done = run_cli("tune", "--launch-template", f"{server} --k {{k}}",
                   "--launch-template-schedule", f"{server} --k {{k}} --schedule {{schedule}}",
                   "--depths", "0,2", "--concurrency", "1", "--suite", "smoke", "--min-requests", "4",
                   "--min-rounds", "2", "--max-rounds", "2", "--verify-rounds", "1", "--start-timeout", "120",
                   "--db", str(tmp_path / "t.db"), "--output-json", str(tmp_path / "tune.json"))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "tune.json").read_text())
    assert document["schedule"]["entries"] == [[1, 256, 2]]
    launched = [{k: v for k, v in json.loads(line).items() if k != "pid"} for line in record.read_text().splitlines()]
    # 2 rounds x 2 depths, then verify: the schedule command with the emitted schedule beside k=0 and k=2
    assert launched[-3:].count({"k": 2, "schedule": [[1, 256, 2]]}) == 1
    assert [v["concurrency"] for v in document["verify"]] == [1]
    assert set(document["verify"][0]["throughput"]) == {"schedule", "k=0", "k=2"}


def test_a_vllm_template_gives_the_schedule_command_with_its_per_batch_size_field():
    from specgauge.analysis.server_settings import validate_vllm_config
    from specgauge.tune.arms import template_schedule_arm, vllm_schedule_template
    from specgauge.tune.choice import TunedSchedule

    template = ("vllm serve M --port {port} --speculative-config "
                "'{\"method\": \"eagle3\", \"model\": \"D\", \"num_speculative_tokens\": {k}}'")
    derived = vllm_schedule_template(template)
    assert derived is not None and vllm_schedule_template("sglang serve --port {port} --steps {k}") is None
    arm = template_schedule_arm(TunedSchedule(((1, 4, 1, 256, 3), (1, 4, 257, 2**31 - 1, 5), (5, 256, 1, 256, 0),
                                               (5, 256, 257, 2**31 - 1, 2)), True), derived)
    import shlex
    config = json.loads(shlex.split(arm.value)[-1])
    assert config["num_speculative_tokens"] == 5
    assert config["num_speculative_tokens_per_batch_size"][0] == [1, 4, 1, 256, 3]
    validate_vllm_config(config)


@pytest.mark.slow   # runs the embedded engine
def test_the_schedule_template_fills_a_real_specgauge_serve_command(tiny_model_dir):
    import urllib.request

    from specgauge.tune.arms import arms_up, template_schedule_arm
    from specgauge.tune.choice import TunedSchedule

    template = (f"{sys.executable} -m specgauge serve --model {tiny_model_dir} --threads 1 --port {{port}} "
                f"--speculative-algorithm NGRAM --speculative-num-steps {{k}} --speculative-schedule {{schedule}}")
    arm = template_schedule_arm(TunedSchedule(((1, 2, 1, 64, 3), (1, 2, 65, 2**31 - 1, 4), (3, 256, 1, 64, 0),
                                               (3, 256, 65, 2**31 - 1, 1)), True), template)
    with arms_up([arm], start_timeout_s=300) as urls:
        with urllib.request.urlopen(urls["schedule"] + "/server_info", timeout=30) as response:
            info = json.loads(response.read())
    assert info["speculative_num_steps"] == 4
    assert info["speculative_schedule"][:2] == [[1, 2, 1, 64, 3], [1, 2, 65, 2**31 - 1, 4]]


def test_verify_warms_the_fresh_schedule_server_before_its_counted_rounds(tmp_path):
    # the depth arms are warm from the measuring rounds; the schedule's server is new: one point at the
    # highest concurrency runs on it first and is not counted
    plain = Script(chunk_delay_s=0.04, num_chunks=12)
    fast = Script(chunk_delay_s=0.04, num_chunks=4, tokens_per_chunk=3)
    with ScriptedServer(plain) as k0, ScriptedServer(fast) as k2, ScriptedServer(fast) as scheduled:
        done = run_cli("tune", "--url", f"0={k0.url}", "--url", f"2={k2.url}", "--url", f"schedule={scheduled.url}",
                       "--concurrency", "1,3", "--suite", "smoke", "--min-requests", "2", "--requests-per-user", "2",
                       "--warmup", "1", "--max-rounds", "4", "--verify-rounds", "2",
                       "--db", str(tmp_path / "t.db"), "--output-json", str(tmp_path / "tune.json"))
        seen = len(scheduled.requests_seen)
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "tune.json").read_text())
    assert document["schedule"]["max_depth"] == 2
    per_round = (1 + 2) + (1 + 6)            # warm-up request + max(--min-requests, 2 x concurrency) at 1 and 3
    assert seen == 2 * per_round + (1 + 6)   # the two counted rounds and the warm-up point at concurrency 3
    assert len([p for p in document["verify_points"] if p["arm"] == "schedule"]) == 4
    assert "warmed the schedule's server at 3" in done.stderr


def test_sigterm_stops_the_tune_and_every_server_it_started(tmp_path):
    import signal

    record = tmp_path / "launched.jsonl"
    server = f"{sys.executable} {Path(__file__).with_name('depth_server.py')} --port {{port}} --record {record}"
    slow = f"{server} --k {{k}}"
    process = spawn_cli("tune", "--launch-template", slow, "--depths", "0,2", "--concurrency", "1", "--suite", "smoke",
                        "--min-requests", "400", "--no-verify", "--db", tmp_path / "t.db",
                        stderr=subprocess.DEVNULL)
    try:   # the first launched server is up once it has recorded its pid
        wait_until(lambda: record.exists() and record.read_text().endswith("\n") or process.poll() is not None,
                   timeout_s=180, what="the first launched server")
        assert process.poll() is None, "the tune ended before it was stopped"
        pid = json.loads(record.read_text().splitlines()[0])["pid"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with Store.open(tmp_path / "t.db", create=False) as store:   # stored as stopped by the user, not failed
        assert [row.status for row in store.list_tunes()] == ["interrupted"]
    try:                                  # the tune stopped (and reaped) its launched server on the way out
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    os.kill(pid, signal.SIGKILL)
    raise AssertionError("the launched server outlived the tune")


def test_tune_samples_as_asked_and_says_at_which_temperature(tmp_path):
    with ScriptedServer(Script(chunk_delay_s=0.005, num_chunks=4)) as k0, \
            ScriptedServer(Script(chunk_delay_s=0.005, num_chunks=2, tokens_per_chunk=2)) as k2:
        done = run_cli("tune", "--url", f"0={k0.url}", "--url", f"2={k2.url}", "--concurrency", "1",
                       "--min-requests", "3", "--min-rounds", "1", "--max-rounds", "1", "--no-verify",
                       "--temperature", "0.8", "--top-k", "20", "--max-tokens", "8", "--db", str(tmp_path / "t.db"))
        bodies = k0.requests_seen + k2.requests_seen
    assert done.returncode == 0, done.stderr
    assert bodies and all(b["temperature"] == 0.8 and b["top_k"] == 20 and isinstance(b["seed"], int) for b in bodies)
    assert "measured at temperature 0.8, top-k 20" in done.stdout
