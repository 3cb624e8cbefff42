"""``specgauge compare --engine sglang`` on a real SGLang (CPU, upstream 2f14d6c): both arms built
by compare's launch profile (plain, and EAGLE-3 with the shipped drafter) and launched. It
finishes with no request lost, reports losslessness, and the SGLang setting it advises is
accepted by this SGLang: launched with the advised flags and file, it serves. The same for
SGLang's n-gram speculation (``NGRAM``, which this CPU path runs), for which SGLang has no
load-aware switch: the advice says so instead of emitting flags this SGLang would refuse
(``adaptive_unsupported_reason`` in python/sglang/srt/speculative/adaptive_spec_params.py).

Contract of the advice (compare's verdict JSON): the ``sglang`` ServerSetting's ``setting`` is
SGLang flags, with ``config_file`` named in them and ``config_text`` its content.
"""
from __future__ import annotations

import json
import shlex
from concurrent.futures import ThreadPoolExecutor

import pytest
from real_server_kit import launched, specgauge
from sglang_testkit import generate, needs_avx512_bf16, python_on_path, serve_argv, sglang_setup

from specgauge.sglang_setup.serve import nccl_port

pytestmark = [pytest.mark.sglang, needs_avx512_bf16]

COMPARE = ("--api", "sglang", "--domains", "coding", "--num-requests", "3", "--concurrency", "1,2",
           "--sweep-requests", "4", "--max-tokens", "32", "--warmup", "1", "--resamples", "200",
           "--start-timeout", "1200", "--rounds", "1")


def advised_flags(setting: dict, directory) -> list[str]:
    """The advised SGLang flags, its config file written into ``directory`` and named by path."""
    args = shlex.split(setting["setting"])
    if setting.get("config_file"):
        path = directory / setting["config_file"]
        path.write_text(setting["config_text"])
        args = [str(path) if a == setting["config_file"] else a for a in args]
    return args


@pytest.mark.parametrize("method", ["eagle3", "ngram"])
def test_compare_engine_sglang_runs_and_its_advice_serves(method, tmp_path):
    setup = sglang_setup()
    out = tmp_path / "verdict.json"
    drafter = ("--draft-model", str(setup.draft)) if method == "eagle3" else ()
    # compare runs launched arms one at a time, so one --nccl-port serves both (sglang_setup/serve.py says why)
    result = specgauge("compare", "--engine", "sglang", "--model", str(setup.target), "--method", method,
                       *drafter, "--num-speculative-tokens", "3", "--label", method,
                       "--server-args", shlex.join([*setup.cpu_args(), "--nccl-port", str(nccl_port(0))]), *COMPARE,
                       "--output-json", str(out),
                       "--db", str(tmp_path / "c.db"), cwd=tmp_path, env=python_on_path(setup, tmp_path / "bin"))
    assert result.returncode == 0, result.stderr[-4000:]
    verdict = json.loads(out.read_text())
    print("\n" + "\n".join(verdict["verdict_lines"]))
    losslessness = verdict["losslessness"]
    print(f"losslessness: {losslessness['mismatches']} of {losslessness['compared']} outputs differed")
    assert losslessness["checked"] and losslessness["compared"] > 0
    points = [p[arm] for p in (*verdict["single_stream"], *verdict["sweep"]) for arm in ("baseline", "speculative")]
    assert sum(p["num_errors"] for p in points) == 0 and all(p["num_ok"] > 0 for p in points)
    assert not [w for w in verdict["health"] if w["code"] in ("errors", "incomplete")], verdict["health"]

    settings = [s for s in verdict["recommendation"]["settings"] if s["server"] == "sglang"]
    print(f"advice for SGLang: {settings}")
    if verdict["recommended_disable_above"] is None:
        # It paid at every tested concurrency (or too few requests for a verdict): compare advises
        # nothing. The form it advises is still checked on this SGLang: compare's own function,
        # for the speculative arm it measured, at a threshold of 1.
        from specgauge.analysis.results import SpeculationSetup
        from specgauge.analysis.server_settings import server_settings

        arm = next(a for a in verdict["arms"] if a["name"] == "speculative")
        settings = [s.model_dump() for s in server_settings(1, SpeculationSetup(**arm["speculation"]))
                    if s.server == "sglang"]
        print(f"the form compare advises, at 1: {settings}")
    assert len(settings) == 1, verdict["recommendation"]
    if settings[0]["setting"].startswith("omit"):
        return   # it never paid: serve without speculation, as the baseline arm just did
    if method == "ngram":   # no load-aware switch for NGRAM in SGLang: said, not emitted
        assert settings[0]["setting"].startswith("(none") and "EAGLE" in settings[0]["note"], settings[0]
        return
    flags = advised_flags(settings[0], tmp_path)
    with launched(serve_argv("eagle3", *flags), tmp_path / "advice-logs") as server:
        alone = generate(server.url, "def add(a, b):", 16)
        # Three at once: a batch past the threshold, where the advice switches drafting off.
        with ThreadPoolExecutor(3) as pool:
            together = list(pool.map(lambda _: generate(server.url, "def add(a, b):", 16), range(3)))
    assert alone["text"] and alone["meta_info"]["completion_tokens"] == 16
    assert all(r["meta_info"]["completion_tokens"] == 16 for r in together)
