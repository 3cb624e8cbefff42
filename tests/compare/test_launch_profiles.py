"""compare --engine: both arms' command lines built from one engine, model and method."""

import json
import shlex

import pytest

from specgauge.compare.arms import ArmSpec
from specgauge.compare.launch_profiles import LaunchProfile, build_arm_commands
from specgauge.compare.speculation_setup import from_arguments
from specgauge.errors import UserError
from cli_testkit import run_cli


def test_vllm_arms_differ_only_by_a_speculative_config_that_survives_the_split():
    arms = build_arm_commands(LaunchProfile(engine="vllm", model="org/target", method="EAGLE3",
                                            draft_model="org/drafter", num_speculative_tokens=4,
                                            server_args="--max-num-seqs 64"))
    assert arms.kind == "command"
    assert shlex.split(arms.baseline) == ["vllm", "serve", "org/target", "--host", "127.0.0.1", "--port", "{port}",
                                          "--max-num-seqs", "64"]
    speculative = shlex.split(arms.speculative)
    assert speculative[:-2] == shlex.split(arms.baseline) and speculative[-2] == "--speculative-config"
    assert json.loads(speculative[-1]) == {"method": "eagle3", "model": "org/drafter", "num_speculative_tokens": 4}
    for name, value in (("baseline", arms.baseline), ("speculative", arms.speculative)):
        ArmSpec(name, "command", value)   # {port} present, JSON intact: accepted as a launch command
    setup, config = from_arguments(speculative)
    assert (setup.engine, setup.method, setup.num_speculative_tokens) == ("vllm", "eagle3", 4) and config


def test_vllm_ngram_needs_no_drafter():
    arms = build_arm_commands(LaunchProfile(engine="vllm", model="m", method="ngram", num_speculative_tokens=5))
    assert json.loads(shlex.split(arms.speculative)[-1]) == {"method": "ngram", "num_speculative_tokens": 5}


def test_sglang_eagle3_chain_writes_steps_topk_and_draft_tokens():
    arms = build_arm_commands(LaunchProfile(engine="sglang", model="org/target", method="eagle3",
                                            draft_model="org/drafter", num_speculative_tokens=3))
    assert shlex.split(arms.baseline) == ["python", "-m", "sglang.launch_server", "--model-path", "org/target",
                                          "--host", "127.0.0.1", "--port", "{port}"]
    assert shlex.split(arms.speculative)[len(shlex.split(arms.baseline)):] == [
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "org/drafter",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    setup, _ = from_arguments(shlex.split(arms.speculative))
    assert (setup.engine, setup.method, setup.num_speculative_tokens, setup.eagle_topk) == ("sglang", "EAGLE3", 3, 1)


def test_sglang_tree_leaves_the_draft_tokens_to_the_user():
    arms = build_arm_commands(LaunchProfile(engine="sglang", model="m", method="eagle3", draft_model="d",
                                            num_speculative_tokens=5, eagle_topk=4))
    assert "--speculative-num-draft-tokens" not in arms.speculative and "--speculative-eagle-topk 4" in arms.speculative


def test_specgauge_arms_are_serve_arguments():
    arms = build_arm_commands(LaunchProfile(engine="specgauge", model=None, method="eagle3", num_speculative_tokens=2,
                                            server_args="--threads 1"))
    assert arms.kind == "engine"
    assert arms.baseline == "--threads 1 --speculative-algorithm NONE"
    assert arms.speculative == ("--threads 1 --speculative-algorithm EAGLE3 --speculative-num-steps 2 "
                                "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3")
    assert "--baseline-engine '--threads 1 --speculative-algorithm NONE'" in arms.as_options()


@pytest.mark.parametrize("profile, message", [
    (LaunchProfile(engine="vllm", model="m", method="eagle3"), "needs --draft-model"),
    (LaunchProfile(engine="sglang", model=None, method="ngram"), "needs --model"),
    (LaunchProfile(engine="vllm", model="m", method="medusa2"), "vllm takes one of"),
    (LaunchProfile(engine="specgauge", model=None, method="eagle"), "specgauge takes one of"),
    (LaunchProfile(engine="vllm", model="m", method="ngram", server_args="--x 'open"), "--server-args"),
])
def test_what_is_missing_is_one_line(profile, message):
    with pytest.raises(UserError, match=message):
        build_arm_commands(profile)


@pytest.mark.parametrize("args, message", [
    (["--engine", "vllm", "--model", "m"], "--engine needs --method"),
    (["--engine", "vllm", "--model", "m", "--method", "ngram", "--baseline", "http://127.0.0.1:9"],
     "either --engine or the arms"),
    (["--method", "ngram", "--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9"],
     "give --engine too"),
    (["--engine", "vllm", "--model", "m", "--method", "eagle3"], "needs --draft-model"),
])
def test_engine_misuse_is_one_line_and_exit_2(tmp_path, args, message):
    done = run_cli("compare", *args, "--db", str(tmp_path / "c.db"), timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and message in done.stderr, done.stderr
    assert not (tmp_path / "c.db").exists()


@pytest.mark.slow   # runs the embedded engine
def test_engine_specgauge_compares_the_embedded_engine_with_and_without_ngram(tmp_path):
    pytest.importorskip("torch")
    from specgauge.engine.models.random_model import write_random_model

    model = write_random_model(tmp_path / "model", hidden_size=32, num_layers=2, intermediate_size=64,
                               max_position_embeddings=2048)
    out = tmp_path / "verdict.json"
    done = run_cli("compare", "--engine", "specgauge", "--model", str(model), "--method", "ngram",
                   "--num-speculative-tokens", "2", "--server-args", "--threads 1 --max-running-requests 4",
                   "--api", "openai-chat", "--domains", "coding", "--concurrency", "1", "--num-requests", "2",
                   "--sweep-requests", "2", "--max-tokens", "8", "--warmup", "0", "--resamples", "200",
                   "--start-timeout", "240", "--output-json", str(out), "--db", str(tmp_path / "c.db"))
    assert done.returncode == 0, done.stderr
    assert f"baseline arm:    --model {model} --threads 1 --max-running-requests 4 --speculative-algorithm NONE" \
        in done.stderr
    assert "--speculative-algorithm NGRAM --speculative-num-steps 2" in done.stderr
    document = json.loads(out.read_text())
    assert [arm["kind"] for arm in document["arms"]] == ["engine", "engine"]
    assert document["settings"]["schedule"] == "abba_by_point" and document["settings"]["rounds"] == 1
    assert document["losslessness"]["checked"] and document["losslessness"]["mismatches"] == 0
