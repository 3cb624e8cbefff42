"""``python -m specgauge.sglang_setup`` lays out every shipped model with a drafter for SGLang (the
re-laid copies, the drafter's layer ids in SGLang's meaning), each served at its own context with
the flags ``compare --engine sglang`` writes (an unknown ``serve --model``: tests/vllm_setup, for both)."""
from __future__ import annotations

import json

from specgauge.compare.launch_profiles import LaunchProfile, build_arm_commands
from specgauge.sglang_setup.__main__ import main
from specgauge.sglang_setup.serve import default_setup
from specgauge.shipped_models import FIRST, SHIPPED


def test_each_shipped_model_is_served_at_its_own_context_with_compares_flags(tmp_path):
    for model in SHIPPED.values():
        setup = default_setup(tmp_path, model)
        args = setup.argv("eagle3", 8000)
        assert args[args.index("--context-length") + 1] == str(model.context)
        assert setup.target == tmp_path.resolve() / ".cache" / "sglang-models" / model.name / "target"
        assert "SGLANG_USE_CPU_ENGINE=1" in args and args[args.index("--dtype") + 1] == "bfloat16"
        profile = build_arm_commands(LaunchProfile(engine="sglang", model="M", method="eagle3",
                                                   draft_model=str(setup.draft)))
        flags = args[args.index("--speculative-algorithm"):]
        assert profile.speculative.endswith(" ".join(flags))
        assert flags == ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(setup.draft),
                         "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                         "--speculative-num-draft-tokens", "4"]
    ngram = default_setup(tmp_path).argv("ngram", 8000, depth=5)
    assert ngram[ngram.index("--speculative-algorithm"):] == ["--speculative-algorithm", "NGRAM",
                                                               "--speculative-num-draft-tokens", "6"]
    assert "--speculative-algorithm" not in default_setup(tmp_path).argv("plain", 8000)
    # Extra arguments (an advised setting) come last, so they win over the method's own flags.
    advised = default_setup(tmp_path).argv("eagle3", 8000, extra=("--speculative-num-steps", "5"))
    assert advised[-2:] == ["--speculative-num-steps", "5"]


def test_prepare_lays_out_every_pair_with_sglangs_layer_ids(tmp_path, capsys):
    assert main(["--root", str(tmp_path)]) == 1   # laid out, then: no SGLang virtualenv under tmp_path
    pairs = [(model, default_setup(tmp_path, model)) for model in SHIPPED.values() if model.draft_dir is not None]
    assert pairs
    for model, setup in pairs:   # vllm_setup's re-laid copies (tests/vllm_setup), with SGLang's layer ids:
        ids = [json.loads((d / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
               for d in (model.draft_dir, setup.draft)]
        # SGLang captures the input of layer id + 1 (python/sglang/srt/models/llama.py)
        assert ids[1] == [i - 1 for i in ids[0]], model.name
        assert json.loads((setup.target / "config.json").read_text())["head_dim"] == 64
    printed = capsys.readouterr()
    assert f"laid out {FIRST.name}" in printed.out
    assert printed.err.startswith("sglang_setup: ") and ".venv-sglang" in printed.err and printed.err.count("\n") == 1

