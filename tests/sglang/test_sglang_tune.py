"""One small ``specgauge tune`` over SGLang arms (CPU, upstream 2f14d6c) launched per depth: the
adaptive config it emits for SGLang (``--speculative-adaptive --speculative-adaptive-config FILE``,
python/sglang/srt/speculative/adaptive_spec_params.py) loads in this SGLang, which then serves, one
request alone and three at once (the tiers on both sides of the schedule's step)."""
from __future__ import annotations

import json
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from real_server_kit import REPO, launched, specgauge
from sglang_testkit import generate, needs_avx512_bf16, serve_argv, sglang_setup
from test_sglang_compare import advised_flags

pytestmark = [pytest.mark.sglang, needs_avx512_bf16]

SERVE = f"{shlex.quote(sys.executable)} -m specgauge.sglang_setup serve"
TUNE = ("--api", "sglang", "--suite", "coding", "--depths", "0,3", "--concurrency", "1,4",
        "--requests-per-user", "1", "--min-requests", "4", "--max-tokens", "32", "--warmup", "1",
        "--min-rounds", "1", "--max-rounds", "1", "--no-verify", "--start-timeout", "1200")


def test_tuned_adaptive_config_loads_in_sglang(tmp_path):
    sglang_setup()
    out = tmp_path / "tune.json"
    result = specgauge("tune", "--launch-template", f"{SERVE} eagle3 --depth {{k}} --port {{port}}",
                       "--launch-template-off", f"{SERVE} plain --port {{port}}", *TUNE,
                       "--output-json", str(out), "--db", str(tmp_path / "t.db"), cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    tuned = json.loads(out.read_text())
    (setting,) = [s for s in tuned["settings"] if s["server"] == "sglang"]
    print(f"\ntuned schedule {tuned['schedule']}; SGLang: {setting['setting']} {setting.get('config_text')}")
    if setting["setting"].startswith("omit"):
        # No depth paid on this (shared, noisy) machine, so tune emits no config. The form it emits
        # is still checked on this SGLang: tune's own function, for a schedule that drafts at 1
        # and switches drafting off above it (a 0-step tier, as tune writes one).
        from specgauge.analysis.results import SpeculationSetup
        from specgauge.tune.choice import TunedSchedule
        from specgauge.tune.settings import sglang_schedule_setting

        schedule = TunedSchedule(entries=((1, 1, 3), (2, 256, 0)), context_axis=False)
        setting = sglang_schedule_setting(schedule, SpeculationSetup()).model_dump()
        print(f"the form tune emits for {schedule.as_json_list()}: {setting['setting']} {setting['config_text']}")
    flags = advised_flags(setting, tmp_path)
    with launched(serve_argv("eagle3", *flags), tmp_path / "advice-logs") as server:
        alone = generate(server.url, "def add(a, b):", 16)
        with ThreadPoolExecutor(3) as pool:   # a batch in the next tier
            together = list(pool.map(lambda _: generate(server.url, "def add(a, b):", 16), range(3)))
    assert alone["text"] and alone["meta_info"]["completion_tokens"] == 16
    assert all(r["meta_info"]["completion_tokens"] == 16 for r in together)
