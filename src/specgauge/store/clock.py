"""The timestamps the results store writes: ISO-8601 UTC, seconds precision."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """The current time as ISO-8601 UTC, seconds precision."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
