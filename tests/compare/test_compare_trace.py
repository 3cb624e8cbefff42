"""``compare --trace``: both arms replay one trace (ABBA by repeat), every trace request pairs up,
and the TPOT ratio is read per window of trace time, with the in-flight level where speculation
cost. The arms are scripted servers whose speculative step costs far more under load."""

import json

from cli_testkit import run_cli
from loaded_server import crossing_pair
from specgauge.compare.orchestrate import run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.load.bench_config import TraceConfig
from specgauge.report.progress import NullProgress
from specgauge.store import Store

QUIET, BURST = 16, 96   # 2 requests/s of trace time for 8 s, then one every 8 ms


def _trace(path):
    lines = [{"timestamp": i * 500, "input_length": 20, "output_length": 20, "hash_ids": []} for i in range(QUIET)]
    lines += [{"timestamp": 8000 + i * 8, "input_length": 20, "output_length": 20, "hash_ids": []}
              for i in range(BURST)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


class Labels(NullProgress):
    def __init__(self):
        self.labels = []

    def point_started(self, point_index, label, total, already_done):
        self.labels.append(label)


async def test_both_arms_replay_the_trace_paired_and_the_ratio_is_read_per_window(tmp_path):
    baseline, speculative = crossing_pair()
    progress = Labels()
    with baseline, speculative, Store.open(tmp_path / "c.db") as store:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           api="sglang", raw_chat_format=True, rounds=2, warmup=0, bootstrap_resamples=400,
                           trace=TraceConfig(path=str(_trace(tmp_path / "t.jsonl")), speed=2.0, text_from="coding"),
                           trace_bin_s=4.0)
        result = await run_comparison(plan, store, progress)
    assert [label.split()[0] for label in progress.labels] == ["base", "spec", "spec", "base"]   # ABBA by repeat
    trace = result.trace
    assert trace.pairs == 2 * (QUIET + BURST)                      # every request of both rounds paired
    assert [w.start_s for w in trace.windows] == [0.0, 4.0, 8.0]
    assert [w.requests for w in trace.windows] == [16, 16, 2 * BURST]
    quiet, burst = trace.windows[1], trace.windows[2]
    assert quiet.tpot_ratio.ci_high < 1 < burst.tpot_ratio.ci_low  # wins alone, costs in the burst
    assert burst.baseline_in_flight > 2 * quiet.baseline_in_flight
    assert trace.cost_in_flight == burst.baseline_in_flight and trace.share_above == 1 / 3
    assert set(trace.lag_ms) == {"baseline", "speculative"} and all(lag["p50"] >= 0 for lag in trace.lag_ms.values())


def test_compare_trace_cli_prints_the_windows_and_where_speculation_cost(tmp_path):
    baseline, speculative = crossing_pair()
    with baseline, speculative:
        done = run_cli("compare", "--baseline", baseline.url, "--speculative", speculative.url, "--api", "sglang",
                       "--raw-chat-format", "--trace", _trace(tmp_path / "t.jsonl"), "--trace-speed", "2",
                       "--trace-text-from", "coding", "--trace-bin", "4", "--warmup", "0", "--resamples", "200",
                       "--output-json", tmp_path / "v.json", "--output-dir", tmp_path / "out",
                       "--db", tmp_path / "c.db")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "plots" / "trace_timeline.png").stat().st_size > 0   # the timeline, in the report
    assert "trace_timeline" in (tmp_path / "out" / "report.html").read_text()
    windows = [line for line in done.stdout.splitlines() if " req  in flight " in line]
    assert len(windows) == 3 and "ratio" in windows[0]
    assert "cost from" in done.stdout and "requests in flight" in done.stdout
    assert "baseline arm's client lag (send - trace time): p50" in done.stdout
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["trace"]["pairs"] == QUIET + BURST and verdict["settings"]["trace_bin_s"] == 4.0


async def test_open_loop_points_pair_both_arms_at_the_same_arrivals(tmp_path):
    baseline, speculative = crossing_pair()
    with baseline, speculative, Store.open(tmp_path / "r.db") as store:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           api="sglang", raw_chat_format=True, domains=(), concurrency=(1,), rates=(400.0, 5.0),
                           num_requests_sweep=40, warmup=0, bootstrap_resamples=400)
        result = await run_comparison(plan, store)
        sends = {}
        for stage in result.stages:
            if stage.stage.startswith("rate:"):
                for arm, run_ids in (("b", stage.baseline_run_ids), ("s", stage.speculative_run_ids)):
                    (point,) = store.get_points(run_ids[0])
                    records = sorted(store.get_requests(point.id), key=lambda r: r.request_index)
                    sends[(stage.stage, arm)] = [(r.prompt_index, r.scheduled_ns - records[0].scheduled_ns)
                                                 for r in records]
    assert [p.rate for p in result.rate_points] == [5.0, 400.0]
    assert all(p.pairs == 40 for p in result.rate_points)
    assert sends[("rate:5", "b")] == sends[("rate:5", "s")]        # the same prompts at the same send times
    slow, fast = result.rate_points
    assert slow.tpot_ratio.ci_high < 1 < fast.tpot_ratio.ci_low    # pays at 5 req/s, costs at 400
