"""CLI commands of this part. Heavy imports stay inside the command bodies."""

from __future__ import annotations

import click


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
