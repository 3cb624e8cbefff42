"""The shipped-model registry (shipped_models.py) and ``--model NAME|DIR`` on serve, demo, models."""

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from specgauge.shipped_models import (DEFAULT, DEFAULT_MODEL, DIRECTORY_DRAFT_DIR, FIRST, FIRST_MODEL, SHIPPED, ShippedModel,
                                             describe, get_shipped, parameter_count, present_models, resolve_model,
                                             resolve_tokenizer, shipped_names)
from specgauge.engine.serving.commands import draft_model_path
from cli_testkit import run_cli

ASSETS = Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets"
DEFAULT_PRESENT = (DEFAULT.target_dir / "config.json").is_file()


@pytest.fixture
def model_without_drafter(tiny_model_dir, monkeypatch):
    """A shipped entry standing in for the 4k target: a tiny model, no drafter."""
    entry = ShippedModel("tiny-4k", Path(tiny_model_dir), None, 1024, "stand-in, no drafter")
    monkeypatch.setitem(SHIPPED, entry.name, entry)
    return entry


def test_the_first_target_keeps_its_name_files_and_drafter():
    first = get_shipped("specgauge-8m")
    assert first.target_dir == ASSETS / "target" and first.draft_dir == ASSETS / "draft" and first.context == 512
    assert first.tokenizer_path == ASSETS / "target" / "tokenizer.json"
    assert DIRECTORY_DRAFT_DIR == first.draft_dir     # what a plain --model DIR has always drafted with
    assert get_shipped(FIRST_MODEL) is FIRST and FIRST is first


def test_the_default_is_smollm2_with_its_own_drafter_and_kept_training_data():
    assert DEFAULT_MODEL == "smollm2-135m" and DEFAULT.name == DEFAULT_MODEL and DEFAULT.obtained_at_setup
    assert DEFAULT.draft_dir == ASSETS / "draft-smollm2"
    assert DEFAULT.training_data == ASSETS.parents[2] / "training-data" / "smollm2-135m" / "regenerated"
    assert FIRST.training_data is None


def test_serve_without_model_when_the_default_is_not_set_up_says_how_in_one_line(monkeypatch):
    from specgauge.engine.serving.commands import _model

    monkeypatch.delitem(SHIPPED, DEFAULT_MODEL, raising=False)
    with pytest.raises(click.BadParameter) as info:
        _model(None, None, None)
    assert "not set up" in info.value.message and "make model" in info.value.message
    assert "\n" not in info.value.message


@pytest.mark.skipif(not DEFAULT_PRESENT, reason="the shipped target is not built")
def test_listed_models_have_their_files_and_state_their_config_context():
    assert shipped_names()[0] == DEFAULT_MODEL
    for name in shipped_names():
        model = SHIPPED[name]
        config = json.loads((model.target_dir / "config.json").read_text())
        assert config["max_position_embeddings"] == model.context
        assert model.draft_dir is None or (model.draft_dir / "config.json").is_file()


def test_a_declared_model_without_files_is_not_listed(tmp_path, tiny_model_dir):
    here = ShippedModel("here", Path(tiny_model_dir), None, 1024, "present")
    absent = ShippedModel("absent", tmp_path / "nowhere", None, 4096, "weights not in this checkout")
    assert list(present_models((here, absent))) == ["here"]


def test_an_existing_directory_wins_over_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / DEFAULT_MODEL).mkdir()
    assert resolve_model(DEFAULT_MODEL) == (Path(DEFAULT_MODEL), None)
    assert resolve_model(str(tmp_path / "missing")) == (tmp_path / "missing", None)   # a path: reported missing later


def test_a_name_resolves_to_its_target_and_an_unknown_one_lists_the_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_model(DEFAULT_MODEL) == (DEFAULT.target_dir, DEFAULT)
    with pytest.raises(KeyError) as info:
        resolve_model("no-such-model")
    message = info.value.args[0]
    assert "no-such-model" in message and all(name in message for name in shipped_names())


def test_a_tokenizer_option_takes_a_shipped_name_or_a_path(tmp_path):
    assert resolve_tokenizer(FIRST_MODEL) == str(FIRST.tokenizer_path)
    assert resolve_tokenizer(str(tmp_path / "tokenizer.json")) == str(tmp_path / "tokenizer.json")


def test_parameters_are_counted_from_the_safetensors_header(tiny_model_dir):
    from safetensors.torch import load_file

    weights = Path(tiny_model_dir) / "model.safetensors"
    assert parameter_count(weights) == sum(t.numel() for t in load_file(str(weights)).values())


def test_describe_reads_context_parameters_and_drafter(model_without_drafter):
    summary = describe(model_without_drafter)
    assert summary.context == 1024 and summary.drafter == "none"
    assert summary.parameters == parameter_count(model_without_drafter.target_dir / "model.safetensors")


def test_the_drafter_serve_runs_with(model_without_drafter, tmp_path):
    own = ShippedModel("own-drafter", tmp_path / "t", tmp_path / "d", 4096, "with its own drafter")
    assert draft_model_path(own, "eagle3", None) == tmp_path / "d"
    assert draft_model_path(own, "EAGLE3", tmp_path / "flag") == tmp_path / "flag"    # the flag wins
    assert draft_model_path(own, "NGRAM", None) is None
    assert draft_model_path(None, "EAGLE3", None) is None           # a directory: the engine's default drafter
    assert draft_model_path(FIRST, "EAGLE3", None) is None          # the first target: the engine's default
    assert draft_model_path(DEFAULT, "EAGLE3", None) == DEFAULT.draft_dir   # smollm2: its own drafter
    with pytest.raises(click.UsageError, match="--speculative-draft-model-path"):
        draft_model_path(model_without_drafter, "EAGLE3", None)
    assert draft_model_path(model_without_drafter, "NONE", None) is None


def test_serve_an_unknown_model_is_one_line_exit_2_listing_the_names(tmp_path):
    result = run_cli("serve", "--model", "no-such-model", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "no-such-model" in result.stderr and FIRST_MODEL in result.stderr


def test_serve_a_named_model_without_drafter_with_eagle3_is_one_line_exit_2(model_without_drafter, capsys):
    from specgauge.cli import main

    with pytest.raises(SystemExit) as info:
        main(["serve", "--model", model_without_drafter.name, "--speculative-algorithm", "EAGLE3", "--port", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tiny-4k ships no EAGLE-3 drafter" in err
    assert "--speculative-draft-model-path" in err


def test_serve_help_lists_the_shipped_names():
    result = run_cli("serve", "--help")
    assert result.returncode == 0 and "NAME|DIR" in result.stdout
    assert all(name in result.stdout for name in shipped_names())


@pytest.mark.skipif(not DEFAULT_PRESENT, reason="the shipped target is not built")
def test_models_lists_every_shipped_model_with_its_context():
    result = run_cli("models")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for name in shipped_names():
        line = next(line for line in lines if line.startswith(name + " "))
        assert str(SHIPPED[name].context) in line.split()
    assert "(default)" in next(line for line in lines if line.startswith(DEFAULT_MODEL + " "))


def test_demo_an_unknown_model_is_one_line_exit_2(tmp_path):
    result = run_cli("demo", "--model", "no-such-model", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and FIRST_MODEL in result.stderr
    assert not (tmp_path / "out").exists()


def test_demo_plan_names_a_non_default_model_in_both_arms(model_without_drafter):
    from specgauge.compare.demo import demo_plan, speculative_arm_missing

    default = demo_plan(quick=True)
    assert default.baseline.value == "--speculative-algorithm NONE"
    assert default.speculative.value == "--speculative-algorithm EAGLE3"
    assert default.tokenizer == str(DEFAULT.tokenizer_path)
    named = demo_plan(quick=True, model=model_without_drafter)
    assert named.baseline.value.startswith("--model tiny-4k ") and named.speculative.value.startswith("--model tiny-4k ")
    assert named.tokenizer == str(model_without_drafter.tokenizer_path)
    assert "ships no EAGLE-3 drafter" in speculative_arm_missing(model_without_drafter)


def test_the_registry_module_imports_no_torch():
    code = "import sys, specgauge.shipped_models; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"


def test_a_tokenizer_option_accepts_a_shipped_name_and_checks_paths(tmp_path):
    from specgauge.tokenizer_option import TokenizerPath

    assert TokenizerPath().convert(FIRST_MODEL, None, None) == str(FIRST.tokenizer_path)
    with pytest.raises(click.BadParameter, match="does not exist"):
        TokenizerPath().convert(str(tmp_path / "missing.json"), None, None)


@pytest.mark.skipif(not DEFAULT_PRESENT, reason="the shipped target is not built")
def test_suite_check_counts_with_a_named_models_tokenizer_as_with_its_file():
    by_name = run_cli("suite", "check", "coding", "--against", "encyclopedic", "--tokenizer", FIRST_MODEL, "--json")
    by_file = run_cli("suite", "check", "coding", "--against", "encyclopedic", "--tokenizer",
                      str(FIRST.tokenizer_path), "--json")
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout)["unit"] == "token" and by_name.stdout == by_file.stdout


@pytest.mark.skipif(not (DEFAULT_PRESENT and (DIRECTORY_DRAFT_DIR / "config.json").is_file()),
                    reason="the shipped target and drafter are not both built")
def test_serve_by_name_runs_the_named_target_with_its_drafter():
    import httpx

    from specgauge.engine.serving.launch import EngineProcess

    named = get_shipped("specgauge-8m")
    with EngineProcess(["--model", named.name, "--speculative-algorithm", "EAGLE3", "--threads", "1"]) as proc:
        info = httpx.get(proc.url + "/server_info").json()
        card = httpx.get(proc.url + "/v1/models").json()["data"][0]
    assert info["speculative_draft_model_path"] == str(named.draft_dir)
    assert card["id"] == "specgauge-target" and card["max_model_len"] == named.context


def test_a_model_obtained_at_setup_but_absent_says_how_to_get_it(tmp_path, monkeypatch):
    import specgauge.shipped_models as shipped

    absent = ShippedModel("setup-only", tmp_path / "nowhere", None, 8192, "converted at set-up",
                          obtained_at_setup=True)
    monkeypatch.setattr(shipped, "DECLARED", (*shipped.DECLARED, absent))
    with pytest.raises(KeyError) as info:
        get_shipped("setup-only")
    assert "not set up" in info.value.args[0] and "make model" in info.value.args[0]
    assert absent in shipped.absent_setup_models()
    row = describe(absent)
    assert row.parameters == 0 and "make model" in row.description


def test_the_cache_directory_follows_the_environment(tmp_path, monkeypatch):
    from specgauge.shipped_models import cache_dir

    monkeypatch.setenv("SPECGAUGE_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv("SPECGAUGE_CACHE_DIR")
    assert cache_dir() == ASSETS.parents[2] / ".cache"   # this checkout's
