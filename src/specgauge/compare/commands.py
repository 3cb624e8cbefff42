"""CLI commands of the comparison part, one module each: ``compare`` (compare_command.py, with
against_baseline.py for ``--against-baseline``), ``baseline set|list`` (baseline_commands.py) and
``demo`` (demo_command.py); docs/compare.md."""

from __future__ import annotations

import click


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    from specgauge.compare.baseline_commands import baseline_group
    from specgauge.compare.compare_command import compare_command
    from specgauge.compare.demo_command import demo_command

    app.add_command(compare_command)
    app.add_command(baseline_group)
    app.add_command(demo_command)
