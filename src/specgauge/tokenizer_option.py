"""``--tokenizer`` on the command line: a ``tokenizer.json`` path or a shipped model's name (its
target's tokenizer), so ``--tokenizer specgauge-8m`` works wherever a tokenizer file does."""

from __future__ import annotations

import click


class TokenizerPath(click.ParamType):
    """A tokenizer file, or a shipped model's name (an existing file of that name wins); then click's
    own path checks (must exist, a file)."""

    name = "tokenizer"

    def __init__(self, dir_okay: bool = False) -> None:
        self._path = click.Path(exists=True, dir_okay=dir_okay)

    def convert(self, value, param, ctx):
        """The tokenizer file ``value`` names; a one-line usage error when there is none."""
        from specgauge.shipped_models import resolve_tokenizer

        return self._path.convert(resolve_tokenizer(str(value)), param, ctx)
