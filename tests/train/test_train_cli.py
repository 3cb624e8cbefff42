"""`specgauge train ...` misuse ends in one line on stderr and exit code 2; the corpus command works end to end."""

from __future__ import annotations

from cli_testkit import one_line_error, run_cli


def test_tokenizer_without_corpus_text(tmp_path):
    one_line_error(run_cli("train", "tokenizer", "--corpus", str(tmp_path), "--output", str(tmp_path / "tok")), "--corpus", "text/")


def test_target_resume_without_checkpoint(tiny_corpus, tmp_path):
    result = run_cli("train", "target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]),
                     "--run-dir", str(tmp_path / "run"), "--resume")
    one_line_error(result, "--resume", "checkpoint.pt")


def test_target_bad_weights_and_shape(tiny_corpus, tmp_path):
    common = ("target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]), "--run-dir", str(tmp_path))
    one_line_error(run_cli("train", *common, "--weights", "novels=1"), "--weights", "novels")
    one_line_error(run_cli("train", *common, "--hidden-size", "100", "--heads", "3"), "--hidden-size")
    one_line_error(run_cli("train", *common, "--seq-len", "64", "--unlikelihood", "1", "--ul-prefix", "60", "--ul-tokens", "8"),
                    "--ul-prefix", "must fit seq_len 64")
    one_line_error(run_cli("train", *common, "--unlikelihood", "-1"), "--unlikelihood")


def test_eval_without_model(tmp_path):
    one_line_error(run_cli("train", "eval", str(tmp_path), "--corpus", str(tmp_path)), "MODEL_DIR", "config.json")


def test_target_cli_trains_and_exports(tiny_corpus, tmp_path):
    result = run_cli("train", "target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]),
                     "--run-dir", str(tmp_path / "run"), "--output", str(tmp_path / "model"), "--max-steps", "4",
                     "--batch-size", "2", "--seq-len", "16", "--hidden-size", "16", "--layers", "1", "--heads", "2",
                     "--kv-heads", "1", "--intermediate-size", "32", "--warmup-steps", "1", "--threads", "1", "--fp32")
    assert result.returncode == 0, result.stderr
    assert "eval step 4" in result.stdout and "exported best weights" in result.stdout
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_target_bad_sources_and_continuation(tiny_corpus, tmp_path):
    common = ("target", "--corpus", str(tiny_corpus["dir"]), "--tokenizer", str(tiny_corpus["tokenizer_dir"]), "--run-dir", str(tmp_path))
    one_line_error(run_cli("train", *common, "--sources", "code_stdlib,novels"), "--sources", "novels")
    one_line_error(run_cli("train", *common, "--seq-len", "64", "--unlikelihood", "1", "--ul-prefix", "60", "--ul-tokens", "8"),
                    "--ul-prefix/--ul-tokens: ul_prefix + ul_tokens (60 + 8) must fit seq_len 64")
    one_line_error(run_cli("train", *common, "--head-dim", "64"), "--head-dim", "--init-from")
    one_line_error(run_cli("train", *common, "--init-from", str(tmp_path / "nowhere")), "--init-from", "config.json")
    # the shipped target has a 4,096-token vocabulary, the tiny corpus's tokenizer 600
    from specgauge.shipped_models import DEFAULT

    one_line_error(run_cli("train", *common, "--init-from", str(DEFAULT.target_dir), "--head-dim", "64"), "--init-from", "vocab_size")
