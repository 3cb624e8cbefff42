"""``compare --resume CID``: finish a comparison that stopped (server down, full store, Ctrl-C).

The plan comes from the store (with its goodput SLOs); only where to write the results (and each arm's
vLLM-style result file), the secrets, where the load runs and ``--verify`` (re-run the finished sweep
with the threshold applied) may be given again.
"""

from __future__ import annotations

import re

import click

from specgauge.errors import UserError

# Options a resumed comparison may take; every other one is part of the stored plan.
RESUME_OPTIONS = frozenset({"resume", "db", "api_key", "headers", "output_json", "output_dir", "verify",
                            "save_result", "result_filename", "percentile_metrics", "metric_percentiles",  # files
                            "workers", "ray_address", "workers_per_node"})  # where the load runs: any
_COMPARISON_ID = re.compile(r"^c?(\d+)$")


def parse_comparison_id(text: str) -> int:
    """``c3`` or ``3`` → 3; anything else is a one-line :class:`UserError`."""
    match = _COMPARISON_ID.match(text.strip())
    if match is None:
        raise UserError(f"--resume {text!r}: give a comparison id such as c3")
    return int(match[1])


def check_resume_options(ctx: click.Context) -> None:
    """Refuse plan-defining options next to ``--resume`` (one line, exit 2)."""
    for param in ctx.command.params:
        if param.name in RESUME_OPTIONS:
            continue
        if ctx.get_parameter_source(param.name) not in (None, click.core.ParameterSource.DEFAULT):
            raise click.UsageError(f"--resume takes every setting from the stored comparison; "
                                   f"drop {param.opts[0]}")


def stored_plan(db: str, comparison_id: int, api_key: str | None, headers: tuple[tuple[str, str], ...] = ()):
    """The :class:`~specgauge.compare.plan.ComparePlan` of a stopped comparison (one-line errors for
    an unknown id or one that is done)."""
    from specgauge.compare.plan import ComparePlan
    from specgauge.store import Store

    with Store.open(db, create=False) as store:
        row = store.get_comparison(comparison_id)
    if row.status == "done":
        raise UserError(f"comparison c{comparison_id} is done; nothing to resume "
                        f"(specgauge report c{comparison_id} --db {db} shows it)")
    return ComparePlan.model_validate({**row.plan, "api_key": api_key, "headers": headers})
