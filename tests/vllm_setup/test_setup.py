"""``python -m specgauge.vllm_setup`` lays out every shipped model with a drafter, each served at
its own context; ``serve --model`` names one, an unknown name is a one-line error (exit 2)."""
from __future__ import annotations

import json

import pytest

from specgauge.shipped_models import FIRST, SHIPPED
from specgauge.vllm_setup.__main__ import main
from specgauge.vllm_setup.serve import default_setup


def test_each_shipped_model_is_served_at_its_own_context(tmp_path):
    for model in SHIPPED.values():
        setup = default_setup(tmp_path, model)
        args = setup.argv("eagle3", 8000)
        assert args[args.index("--max-model-len") + 1] == str(model.context)
        assert setup.target == tmp_path.resolve() / ".cache" / "vllm-models" / model.name / "target"
        config = json.loads(args[args.index("--speculative-config") + 1])
        assert config == {"method": "eagle3", "model": str(setup.draft), "num_speculative_tokens": 3}


def test_prepare_lays_out_every_shipped_drafter_pair(tmp_path, capsys):
    assert main(["--root", str(tmp_path)]) == 1   # laid out, then: no vLLM virtualenv under tmp_path
    for model in SHIPPED.values():
        if model.draft_dir is None:
            continue
        setup = default_setup(tmp_path, model)
        for directory in (setup.target, setup.draft):
            config = json.loads((directory / "config.json").read_text())
            assert config["head_dim"] == 64 and config["torch_dtype"] == "float32", (model.name, directory)
        assert (setup.target / "tokenizer.json").is_file()
    printed = capsys.readouterr()
    assert f"laid out {FIRST.name}" in printed.out
    assert printed.err.startswith("vllm_setup: ") and ".venv-vllm" in printed.err and printed.err.count("\n") == 1


@pytest.mark.parametrize("engine", ["vllm_setup", "sglang_setup"])
def test_serve_names_an_unknown_model_in_one_line(engine, tmp_path, capsys):
    """Both set-ups' command line (specgauge.server_setup.serve_main)."""
    import importlib

    entry = importlib.import_module(f"specgauge.{engine}.__main__").main
    assert entry(["--root", str(tmp_path), "serve", "eagle3", "--port", "8000", "--model", "nope"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"{engine}: unknown model 'nope'") and "\n" not in error
