"""`specgauge train ...` misuse ends in one line on stderr and exit code 2; the corpus command works end to end."""

from __future__ import annotations

import subprocess
from cli_testkit import run_cli as specgauge


def run_cli(*args: str):
    return specgauge("train", *args)



def _one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_tokenizer_without_corpus_text(tmp_path):
    _one_line_error(run_cli("tokenizer", "--corpus", str(tmp_path), "--output", str(tmp_path / "tok")), "--corpus", "text/")


def test_target_resume_without_checkpoint(tiny_corpus, tmp_path):
    result = run_cli("target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]),
                     "--run-dir", str(tmp_path / "run"), "--resume")
    _one_line_error(result, "--resume", "checkpoint.pt")


def test_target_bad_weights_and_shape(tiny_corpus, tmp_path):
    common = ("target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]), "--run-dir", str(tmp_path))
    _one_line_error(run_cli(*common, "--weights", "novels=1"), "--weights", "novels")
    _one_line_error(run_cli(*common, "--hidden-size", "100", "--heads", "3"), "--hidden-size")
    _one_line_error(run_cli(*common, "--seq-len", "64", "--unlikelihood", "1", "--ul-prefix", "60", "--ul-tokens", "8"),
                    "--ul-prefix", "must fit seq_len 64")
    _one_line_error(run_cli(*common, "--unlikelihood", "-1"), "--unlikelihood")


def test_eval_without_model(tmp_path):
    _one_line_error(run_cli("eval", str(tmp_path), "--corpus", str(tmp_path)), "MODEL_DIR", "config.json")


def test_target_cli_trains_and_exports(tiny_corpus, tmp_path):
    result = run_cli("target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]),
                     "--run-dir", str(tmp_path / "run"), "--output", str(tmp_path / "model"), "--max-steps", "4",
                     "--batch-size", "2", "--seq-len", "16", "--hidden-size", "16", "--layers", "1", "--heads", "2",
                     "--kv-heads", "1", "--intermediate-size", "32", "--warmup-steps", "1", "--threads", "1", "--fp32")
    assert result.returncode == 0, result.stderr
    assert "eval step 4" in result.stdout and "exported best weights" in result.stdout
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_target_bad_sources_and_continuation(tiny_corpus, tmp_path):
    common = ("target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]), "--run-dir", str(tmp_path))
    _one_line_error(run_cli(*common, "--sources", "code_stdlib,novels"), "--sources", "novels")
    _one_line_error(run_cli(*common, "--seq-len", "64", "--unlikelihood", "1", "--ul-prefix", "60", "--ul-tokens", "8"),
                    "--ul-prefix/--ul-tokens: ul_prefix + ul_tokens (60 + 8) must fit seq_len 64")
    _one_line_error(run_cli(*common, "--head-dim", "64"), "--head-dim", "--init-from")
    _one_line_error(run_cli(*common, "--init-from", str(tmp_path / "nowhere")), "--init-from", "config.json")
    # the shipped target has a 4,096-token vocabulary, the tiny corpus's tokenizer 600
    from specgauge.shipped_models import DEFAULT

    _one_line_error(run_cli(*common, "--init-from", str(DEFAULT.target_dir), "--head-dim", "64"), "--init-from", "vocab_size")
