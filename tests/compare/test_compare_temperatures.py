"""``compare --temperatures``: single stream per domain x temperature with intervals, the sweep and
the recommendation at ``--temperature`` (and saying so), seeded sampled requests, text-exact
losslessness only where the outputs are greedy."""

import json

from cli_testkit import run_cli
from specgauge.testing.scripted_server import Script, ScriptedServer

FAST = Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=4, tokens_per_chunk=2)


def test_a_table_per_domain_and_temperature(tmp_path):
    with ScriptedServer(FAST) as baseline, ScriptedServer(FAST) as speculative:
        done = run_cli("compare", "--baseline", baseline.url, "--speculative", speculative.url,
                       "--temperatures", "0,0.7", "--temperature", "0.7", "--top-p", "0.9",
                       "--domains", "coding,encyclopedic", "--single-stream-requests", "4", "--concurrency", "1",
                       "--num-requests", "4", "--warmup", "0", "--resamples", "200",
                       "--output-json", tmp_path / "v.json", "--output-dir", tmp_path / "out",
                       "--db", tmp_path / "c.db")
        bodies = baseline.requests_seen + speculative.requests_seen
    assert done.returncode == 0, done.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert [s["stage"] for s in verdict["stages"]] == ["single:coding@t=0", "single:encyclopedic@t=0",
                                                      "single:coding", "single:encyclopedic", "sweep:c=1"]
    assert [s["temperature"] for s in verdict["stages"]] == [0.0, 0.0, 0.7, 0.7, None]
    table = {(row["domain"], row["temperature"]) for row in verdict["by_temperature"]}
    assert table == {("coding", 0.0), ("coding", 0.7), ("encyclopedic", 0.0), ("encyclopedic", 0.7)}
    for row in verdict["by_temperature"]:
        assert row["speedup"] is not None and row["ci_low"] is not None and row["ci_high"] is not None
    # the verdict's own rows are the comparison's temperature (the sweep's, the recommendation's)
    assert [(d["domain"], d["temperature"]) for d in verdict["single_stream"]] == [("coding", 0.7),
                                                                                   ("encyclopedic", 0.7)]
    assert verdict["recommendation"]["measured_at"] == "temperature 0.7, top-p 0.9"
    assert "Measured at temperature 0.7, top-p 0.9" in done.stdout
    assert "single stream per domain and temperature" in done.stdout and "t=0.7" in done.stdout
    assert "single stream per domain and temperature" in (tmp_path / "out" / "report.html").read_text()
    for plot in ("speedup_by_temperature", "accept_by_temperature"):
        assert (tmp_path / "out" / "plots" / f"{plot}.png").stat().st_size > 0
    # greedy stages are compared text for text; sampled ones are not
    assert verdict["losslessness"]["checked"] and verdict["losslessness"]["compared"] == 2 * 4 * 2 // 2
    sampled = [b for b in bodies if b["temperature"] > 0]
    greedy = [b for b in bodies if b["temperature"] == 0]
    assert sampled and greedy and all("seed" not in b for b in greedy)
    assert all(b["top_p"] == 0.9 and isinstance(b["seed"], int) for b in sampled)
    assert not [w for w in verdict["health"] if w["code"] == "temperature_not_measured"]


def test_a_serving_temperature_outside_the_table_is_warned(tmp_path):
    with ScriptedServer(FAST) as baseline, ScriptedServer(FAST) as speculative:
        done = run_cli("compare", "--baseline", baseline.url, "--speculative", speculative.url,
                       "--temperatures", "0.7,1", "--domains", "coding", "--single-stream-requests", "3",
                       "--concurrency", "1", "--num-requests", "3", "--warmup", "0", "--resamples", "200",
                       "--output-json", tmp_path / "v.json", "--db", tmp_path / "c.db")
    assert done.returncode == 0, done.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    (warning,) = [w for w in verdict["health"] if w["code"] == "temperature_not_measured"]
    assert "ran at temperature 0 (--temperature)" in warning["message"] and "(0.7, 1)" in warning["message"]
    assert verdict["single_stream"] == [] and len(verdict["by_temperature"]) == 2
    assert verdict["recommendation"]["measured_at"] == "temperature 0 (greedy)"
