"""CLI commands of this part. Heavy imports stay inside the command bodies."""

from __future__ import annotations

import click

from specgauge.train.draft_command import draft_command


@click.group(name="train")
def train_group() -> None:
    """Build the corpus, tokenizer, target model and draft head of the embedded engine."""


train_group.add_command(draft_command)


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    app.add_command(train_group)
