"""``specgauge demo``: speculation off against EAGLE-3 on the embedded engine (:mod:`specgauge.compare.demo`)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from specgauge.cli_options import db_option


@click.command("demo")
@click.option("--output-dir", default="specgauge-demo", show_default=True, help="where report.html and verdict.json go")
@db_option(default=None, help="results store (default: DIR/specgauge.db)")
@click.option("--quick", is_flag=True, help="fewer requests and a shorter sweep (a smoke test, not a verdict)")
@click.option("--rounds", type=click.IntRange(min=1), default=1, show_default=True,
              help="repeat the whole comparison (more pairs; the intervals include the drift between rounds)")
@click.option("--model", "model_name", default=None, metavar="NAME",
              help="shipped model both arms serve (see 'specgauge models'; default: serve's default, smollm2-135m)")
def demo_command(output_dir: str, db: str | None, quick: bool, rounds: int, model_name: str | None) -> None:
    """Speculation off vs EAGLE-3 on the embedded engine: single stream on coding, encyclopedic and
    the drafter's held-out training mix, a concurrency sweep, the verdict, report.html and
    verdict.json in DIR; then its own elapsed time."""
    from specgauge.compare.compare_command import run
    from specgauge.compare.demo import run_demo
    from specgauge.compare.output import emit
    from specgauge.shipped_models import DEFAULT, get_shipped

    started = time.monotonic()
    try:
        model = get_shipped(model_name) if model_name else DEFAULT
    except KeyError as exc:
        raise click.BadParameter(exc.args[0], param_hint="'--model'") from None
    store_path = Path(db) if db else Path(output_dir) / "specgauge.db"
    result = run(run_demo(Path(output_dir), db=store_path, quick=quick, rounds=rounds, model=model))
    emit(result, output_json=None, output_dir=output_dir, db=str(store_path))
    elapsed = time.monotonic() - started
    click.echo(f"demo: {elapsed:.0f} s elapsed ({elapsed / 60:.1f} min), servers' start-up included", err=True)
