"""``specgauge compare`` with several speculative arms from the command line: one section per arm,
the choice between them, verdict.json's ``arms`` list, one report per arm, and the options that
take one speculative arm refused in one line."""

import json

import pytest

from cli_testkit import one_line_error, run_cli
from specgauge.testing.scripted_server import Script, ScriptedServer


def test_two_speculative_urls_print_a_section_each_and_the_choice(tmp_path):
    servers = (ScriptedServer(Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=12)),
               ScriptedServer(Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=4, tokens_per_chunk=3)),
               ScriptedServer(Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=6, tokens_per_chunk=2)))
    with servers[0], servers[1], servers[2]:
        done = run_cli("compare", "--api", "sglang", "--raw-chat-format", "--baseline", servers[0].url,
                       "--speculative", servers[1].url, "--speculative", servers[2].url,
                       "--arm-label", "three", "--arm-label", "two", "--domains", "coding", "--concurrency", "1",
                       "--num-requests", "8", "--warmup", "0", "--resamples", "200",
                       "--output-json", tmp_path / "v.json", "--output-dir", tmp_path / "out",
                       "--db", tmp_path / "c.db")
    assert done.returncode == 0, done.stderr
    assert "speculative arm 1 of 2: three" in done.stdout and "speculative arm 2 of 2: two" in done.stdout
    assert "between arms (paired on the same prompts" in done.stdout
    assert "three and two on coding" in done.stdout or "three pays more than two on coding" in done.stdout
    assert "which method, per domain and concurrency:" in done.stdout and "coding: three (" in done.stdout
    document = json.loads((tmp_path / "v.json").read_text())
    assert [a["label"] for a in document["arms"]] == ["three", "two"]
    assert {"single_stream", "sweep", "losslessness", "health"} <= set(document["arms"][0]["result"])
    assert [(d["first"], d["second"], d["domain"]) for d in document["differences"]] == [
        ("three", "two", "coding"), ("three", "two", None)]
    assert json.loads((tmp_path / "out" / "verdict.json").read_text()) == document
    assert all((tmp_path / "out" / label / "report.html").stat().st_size > 0 for label in ("three", "two"))
    assert "<svg" in (tmp_path / "out" / "report.html").read_text()   # the overview, a series per arm
    listed = run_cli("runs", "--db", tmp_path / "c.db")
    assert listed.returncode == 0 and "2 arms: three, two" in listed.stdout, listed.stderr
    show = run_cli("show", "c1", "--db", tmp_path / "c.db")
    assert show.returncode == 0 and "speculative arm 1 of 2: three" in show.stdout and "which method" in show.stdout
    shown = run_cli("report", "c1", "--db", tmp_path / "c.db", "--output-dir", tmp_path / "again")
    assert shown.returncode == 0, shown.stderr
    assert "speculative arm 2 of 2: two" in shown.stdout and (tmp_path / "again" / "two" / "report.html").exists()


@pytest.mark.parametrize("extra, needle", [
    (("--trace", "t.jsonl"), "--trace takes one speculative arm"),
    (("--verify",), "--verify takes one speculative arm"),
    (("--label", "mine"), "--label takes one speculative arm"),
    (("--arm-label", "only-one"), "--arm-label: 1 label(s) for 2 speculative arms"),
])
def test_options_of_one_speculative_arm_are_refused_with_several(tmp_path, extra, needle):
    done = run_cli("compare", "--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9",
                   "--speculative", "http://127.0.0.1:9", *extra, "--db", tmp_path / "c.db")
    one_line_error(done, needle)


def test_methods_refusals(tmp_path):
    one_line_error(run_cli("compare", "--engine", "specgauge", "--method", "ngram", "--methods", "eagle3,ngram",
                           "--db", tmp_path / "c.db"), "either --method or --methods")
    one_line_error(run_cli("compare", "--engine", "specgauge", "--methods", "ngram,ngram", "--db", tmp_path / "c.db"),
                   "distinct methods")
    one_line_error(run_cli("compare", "--methods", "eagle3,ngram", "--db", tmp_path / "c.db"), "give --engine too")


def test_tune_takes_one_method_and_says_so(tmp_path):
    one_line_error(run_cli("tune", "--algorithm", "EAGLE3,NGRAM", "--db", tmp_path / "c.db"), "--algorithm")
