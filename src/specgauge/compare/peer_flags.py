"""``compare``'s side of the peer flags (vLLM ``bench serve`` / SGLang ``bench_serving`` names,
load/peer_flags.py): the dataset written once as the suite of every stage and both arms, and per
arm the vLLM-style results of every point (chosen percentiles, ``--save-result`` files) and the
result's per-stage goodput (``--goodput``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from specgauge.analysis.results import ArmGoodput, CompareResult, Goodput, GoodputStage
from specgauge.errors import UserError
from specgauge.load.bench_config import BenchConfig
from specgauge.report.peer_result import point_result, write_results
from specgauge.store import Store

ARM_NAMES = ("baseline", "speculative")


async def _tokenizer_path(plan, tokenizer: str | None) -> str | None:
    """``--tokenizer``, else the one a running arm's server reports on this machine."""
    if tokenizer:
        return tokenizer
    from specgauge.client.endpoint import Endpoint
    from specgauge.client.probe import check_reachable
    from specgauge.client.server_model import describe_server_model

    for arm in (plan.baseline, plan.speculative):
        if arm.kind == "url":
            endpoint = Endpoint(base_url=arm.value.rstrip("/"), api=plan.api, api_key=plan.api_key,
                                insecure=plan.insecure)
            await check_reachable(endpoint)   # a dead URL: its own one line, not "no tokenizer"
            server = await describe_server_model(endpoint)
            if server.tokenizer_path:
                return server.tokenizer_path
    return None


async def dataset_suite_file(plan, options: dict, work_dir: Path) -> str:
    """Write the ``--dataset-name`` prompts once as a suite file and return its path.

    It holds as many prompts as the largest stage sends (the sweep's counts and the single stream's),
    so no stage repeats a prompt; a random dataset's
    requests are all domain ``random`` (its single-stream stage is one domain).
    """
    count = max([plan.sweep_requests(c) for c in plan.concurrency] + [plan.num_requests_single])
    config = BenchConfig(url="http://127.0.0.1", api=plan.api, num_requests=count, seed=plan.seed,
                         max_tokens=plan.max_tokens, dataset_name=options["dataset_name"],
                         dataset_path=options.get("dataset_path"), random_input_len=options["random_input_len"],
                         random_output_len=options["random_output_len"],
                         random_range_ratio=options["random_range_ratio"])
    tokenizer = await _tokenizer_path(plan, plan.tokenizer) if config.dataset_name == "random" else None
    if config.dataset_name == "random" and tokenizer is None:
        raise UserError("--dataset-name random builds exact-length prompts from the model's tokenizer: no running "
                        "arm reports one on this machine; pass --tokenizer PATH (a tokenizer.json)")
    from specgauge.load.workload import write_dataset_suite

    return write_dataset_suite(config, tokenizer, work_dir)


def arm_results(store: Store, result: CompareResult, settings: dict) -> dict[str, list[dict[str, Any]]]:
    """Per arm, every finished point of its runs (stage order, rounds in order) as a ``vllm bench
    serve`` result dict, with ``settings`` (goodput, percentile_metrics, metric_percentiles) applied;
    each carries its stage under ``specgauge.stage``."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in ARM_NAMES}
    for stage in result.stages:
        for name, run_ids in zip(ARM_NAMES, (stage.baseline_run_ids, stage.speculative_run_ids)):
            for run_id in run_ids:
                run = store.get_run(run_id)
                run = dataclasses.replace(run, config={**run.config, **settings})
                for point in store.get_points(run_id):
                    if point.status != "done":
                        continue
                    records = [r for group in store.request_segments(point.id).values() for r in group]
                    entry = point_result(run, point, records)
                    entry["specgauge"]["stage"] = stage.stage
                    entry["specgauge"]["arm"] = name
                    out[name].append(entry)
    return out


def _pooled(results: list[dict[str, Any]], key: str) -> float | None:
    """A per-second figure pooled over rounds: Σ(figure × duration) / Σ duration."""
    pairs = [(r[key], r["duration"]) for r in results if r.get(key) is not None and r["duration"]]
    total = sum(d for _, d in pairs)
    return sum(v * d for v, d in pairs) / total if total else None


def goodput_rows(per_arm: dict[str, list[dict[str, Any]]]) -> tuple[GoodputStage, ...]:
    """Per stage: each arm's request throughput and goodput (req/s, rounds pooled) and the paired
    goodput ratio speculative / baseline (None when the baseline's goodput is 0)."""
    stages = list(dict.fromkeys(r["specgauge"]["stage"] for results in per_arm.values() for r in results))
    rows = []
    for stage in stages:
        arms = {}
        for name in ARM_NAMES:
            mine = [r for r in per_arm[name] if r["specgauge"]["stage"] == stage]
            arms[name] = ArmGoodput(request_throughput=_pooled(mine, "request_throughput"),
                                    request_goodput=_pooled(mine, "request_goodput"))
        base, spec = arms["baseline"].request_goodput, arms["speculative"].request_goodput
        rows.append(GoodputStage(stage=stage, **arms, goodput_ratio=spec / base if base and spec is not None else None))
    return tuple(rows)


def goodput_of(store: Store, result: CompareResult, slos: dict[str, float]) -> Goodput:
    """The result's ``goodput``: each stage's goodput per arm at the SLOs ``slos`` (``--goodput``)."""
    return Goodput(slo_ms=dict(slos), stages=goodput_rows(arm_results(store, result, {"goodput": slos})))


def result_paths(result_filename: str | None, comparison_id: int | None) -> dict[str, Path]:
    """``NAME.json`` → ``NAME-baseline.json`` and ``NAME-speculative.json`` (default NAME:
    ``compare-c<ID>``)."""
    base = Path(result_filename) if result_filename else Path(f"compare-c{comparison_id}.json")
    stem = base.name[:-len(".json")] if base.name.endswith(".json") else base.name
    return {name: base.with_name(f"{stem}-{name}.json") for name in ARM_NAMES}


def check_result_paths(result_filename: str | None) -> None:
    """Fail before measuring anything when the result files could not be written."""
    if result_filename and not Path(result_filename).resolve().parent.is_dir():
        raise UserError(f"--result-filename {result_filename}: no such directory {Path(result_filename).parent}")


def write_arm_results(per_arm: dict[str, list[dict[str, Any]]], paths: dict[str, Path]) -> None:
    """One vLLM-style result JSON per arm (one point: its object; several: a list, as bench writes)."""
    for name in ARM_NAMES:
        try:
            write_results(per_arm[name], paths[name])
        except OSError as exc:
            raise UserError(f"cannot write {paths[name]}: {exc.strerror or exc}") from None


def _saves_results(options: dict) -> bool:
    """Whether ``--save-result`` or ``--result-filename`` asks for the per-arm result files."""
    return bool(options["save_result"] or options["result_filename"])


def emit_result_files(result: CompareResult, options: dict, peer: dict) -> None:
    """After the verdict, when ``--save-result``/``--result-filename`` asks: each arm's vLLM-style
    point results, with ``peer`` (``compare_result_settings``) applied, in one file per arm."""
    import click

    if not _saves_results(options):
        return
    with Store.open(options["db"], create=False) as store:
        per_arm = arm_results(store, result, peer)
    paths = result_paths(options["result_filename"], result.comparison_id)
    write_arm_results(per_arm, paths)
    click.echo(f"wrote {paths['baseline']} and {paths['speculative']} (vLLM-style results per arm)",
               err=options["output_json"] == "-")
