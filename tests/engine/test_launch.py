"""`specgauge serve` as a subprocess: EngineProcess start/stop, crash-at-start error, CLI errors."""

import os
import socket
import subprocess
import sys

import httpx
import pytest

from specgauge.engine.serving.launch import EngineProcess, EngineStartError
from cli_testkit import one_line_error, run_cli


def test_engine_process_serves_and_stops_cleanly(tiny_model_dir):
    with EngineProcess(["--model", str(tiny_model_dir), "--served-model-name", "tiny", "--threads", "1"]) as proc:
        assert proc.url.startswith("http://127.0.0.1:")
        models = httpx.get(proc.url + "/v1/models").json()
        assert models["data"][0]["id"] == "tiny"
        out = httpx.post(proc.url + "/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 3},
                         timeout=30).json()
        assert out["usage"]["completion_tokens"] >= 1
        # the start lines say what the model computes in, as /server_info does
        info = httpx.get(proc.url + "/server_info").json()
        compute = next(line for line in proc.log_tail.splitlines() if line.startswith("computing in "))
        assert compute.startswith(f"computing in {info['dtype']} (weights {info['weight_packing']}), attention in ")
        assert f"batch-invariant {'yes' if info['batch_invariant'] else 'no'}, 1 thread(s)" in compute
        assert compute.endswith(f"KV pool read {info['paged_attention']}")
        process = proc.process
    assert process.poll() is not None
    assert process.returncode in (0, -15)


def test_engine_process_reports_a_crash_at_start_with_the_log_tail(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(EngineStartError) as info:
        EngineProcess(["--model", str(tmp_path)], start_timeout=60).start()
    message = str(info.value)
    assert "exited with code" in message and "last log lines" in message


def test_serve_without_a_model_is_one_line_exit_2(tmp_path):
    result = run_cli("serve", "--model", str(tmp_path / "missing"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no model at" in result.stderr and "--model" in result.stderr


def test_serve_rejects_bad_flags_in_one_line():
    result = run_cli("serve", "--max-running-requests", "0")
    assert result.returncode == 2 and "must be positive" in result.stderr and "Traceback" not in result.stderr


def test_serve_rejects_fp16_packing_outside_fp32_cpu_in_one_line():
    result = run_cli("serve", "--weight-packing", "fp16", "--dtype", "bfloat16")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "--weight-packing fp16 applies to float32 on CPU" in result.stderr


def test_serve_rejects_onednn_packing_outside_bf16_cpu_in_one_line():
    result = run_cli("serve", "--weight-packing", "onednn", "--dtype", "float32")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "--weight-packing onednn applies to bfloat16 on CPU" in result.stderr


@pytest.mark.parametrize("cores, threads", [({0}, 1), ({0, 1}, 1), ({0, 1, 2, 3}, 3), (set(range(64)), 63)])
def test_serve_leaves_one_core_to_the_server_by_default(monkeypatch, cores, threads):
    from specgauge.engine.serving import commands

    monkeypatch.setattr(commands.os, "sched_getaffinity", lambda pid: cores)
    assert commands.serving_threads() == threads


def test_cli_import_does_not_import_torch():
    code = "import sys, specgauge.cli, specgauge.engine.serving.commands, specgauge.engine.serving.launch; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"


def test_serve_without_the_engine_extra_names_it():
    code = (
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'torch' else real(name, *a)\n"
        "from specgauge.cli import main\n"
        "main(['serve'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "pip install 'specgauge[engine]'" in result.stderr and "torch" in result.stderr


def test_serve_on_a_busy_port_is_one_line_exit_2_before_loading(tiny_model_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("serve", "--model", str(tiny_model_dir), "--port", str(port))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and f"127.0.0.1:{port}" in result.stderr and "in use" in result.stderr
    assert "loading" not in result.stderr + result.stdout


def test_serve_on_a_host_that_is_no_address_is_one_line_exit_2(tiny_model_dir):
    result = run_cli("serve", "--model", str(tiny_model_dir), "--host", "999.1.1.1", "--port", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "--host 999.1.1.1" in result.stderr
    assert "loading" not in result.stderr + result.stdout


def test_api_key_from_the_environment(tiny_model_dir):
    env = dict(os.environ, SPECGAUGE_API_KEY="from-env")
    with EngineProcess(["--model", str(tiny_model_dir), "--threads", "1"], env=env) as proc:
        assert "from-env" not in " ".join(proc.process.args)
        assert httpx.get(proc.url + "/v1/models").status_code == 401
        assert httpx.get(proc.url + "/v1/models", headers={"Authorization": "bearer from-env"}).status_code == 200


@pytest.mark.parametrize("args, needle", [
    (("--testing-fault", "accept-bias=x"), "'x' is not a number"),
    (("--testing-fault", "reject-all"), "must be accept-bias=F"),
    (("--testing-fault", "accept-bias=0"), "F must be a finite number > 0"),
    (("--testing-fault", "accept-bias=1.5"), "needs --speculative-algorithm EAGLE3 or NGRAM"),
])
def test_serve_refuses_a_bad_testing_fault_in_one_line(args, needle):
    one_line_error(run_cli("serve", *args), needle)
