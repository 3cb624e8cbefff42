"""``specgauge baseline set|list``: named baselines that later runs are checked against
(``compare --against-baseline``)."""

from __future__ import annotations

import click

from specgauge.cli_options import console, db_option
from specgauge.errors import UserError


@click.group("baseline")
def baseline_group() -> None:
    """Named baselines: stored runs that later runs are checked against (compare --against-baseline)."""


@baseline_group.command("set")
@click.argument("run_id", type=int)
@click.option("--name", required=True, help="the baseline's name (an existing name is moved to RUN_ID)")
@db_option
def baseline_set(run_id: int, name: str, db: str) -> None:
    """Name stored run RUN_ID (see 'specgauge runs') as baseline NAME."""
    from specgauge.store import Store

    if not name.strip():
        raise click.UsageError("--name must not be empty")
    with Store.open(db, create=False) as store:
        run = store.get_run(run_id)
        if run.status != "done":
            raise UserError(f"run {run_id} is {run.status}; only a finished run can be a baseline")
        store.set_baseline(name, run_id)
    click.echo(f"baseline {name!r} = run {run_id} ({run.url}, suite {run.suite_name}@{run.suite_version} "
               f"hash {run.suite_hash[:12]})")


@baseline_group.command("list")
@db_option
def baseline_list(db: str) -> None:
    """The named baselines with their runs."""
    from rich.table import Table

    from specgauge.store import Store

    with Store.open(db, create=False) as store:
        rows = [(b, store.get_run(b.run_id)) for b in store.list_baselines()]
    table = Table(title="baselines", title_justify="left")
    for header in ("name", "run", "set at (UTC)", "url", "model", "suite", "suite hash"):
        table.add_column(header)
    for baseline, run in rows:
        table.add_row(baseline.name, str(run.id), baseline.created_at.replace("+00:00", ""), run.url, run.model or "-",
                      f"{run.suite_name}@{run.suite_version}", run.suite_hash[:12])
    console().print(table)
