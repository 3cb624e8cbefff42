"""Training mixes: a weight per corpus source, parsed from ``--weights source=weight,...``.

Used by ``specgauge train target`` and ``specgauge train draft``."""

from __future__ import annotations

from specgauge.errors import UserError


def parse_weights(text: str | None, sources: tuple[str, ...] | None = None) -> dict[str, float]:
    """``source=weight,...`` over ``sources`` (default: the target's sources)."""
    if not text:
        return {}
    from specgauge.train.corpus import TARGET_SOURCES

    sources = sources or TARGET_SOURCES
    weights = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in sources:
            raise UserError(f"--weights: unknown source {name!r}; expected one of {', '.join(sources)}")
        try:
            weights[name] = float(value)
        except ValueError:
            raise UserError(f"--weights: {item!r} is not source=number") from None
        if weights[name] < 0:
            raise UserError(f"--weights: weight of {name} must be ≥ 0")
    return weights
