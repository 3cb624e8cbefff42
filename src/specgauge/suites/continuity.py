"""Baseline continuity: never compare runs on different prompts without saying so.

A run records its suite's header (``name``, ``version``, ``content_hash``; optionally
``request_hashes``). :func:`require_same_suite` refuses a comparison when the hash changed unless the
caller allows it, and :func:`diff_suites` says what changed, by position and by content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specgauge.errors import UserError
from specgauge.suites.model import Suite


@dataclass(frozen=True)
class SuiteDiff:
    """What differs between an old suite (or its recorded header) and a new one.

    By position: ``changed_positions`` differ at the same index, ``added_positions`` exist only in the
    new suite (it is longer), ``removed_positions`` only in the old. By content: requests whose
    content hash is only in the new (``added_content``) or only in the old (``removed_content``)
    suite, order ignored. Content sets are None when the old side is a header without request hashes.
    """

    old_ref: str
    new_ref: str
    old_hash: str
    new_hash: str
    old_count: int | None          # None: the old side is a header that recorded no request count
    new_count: int
    changed_positions: tuple[int, ...] = ()
    added_positions: tuple[int, ...] = ()
    removed_positions: tuple[int, ...] = ()
    added_content: tuple[str, ...] | None = None
    removed_content: tuple[str, ...] | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def same(self) -> bool:
        """True when the two suites hold exactly the same requests."""
        return self.old_hash == self.new_hash

    def summary(self) -> str:
        """One line for terminals: refs, hashes, and counts of what changed."""
        head = f"{self.old_ref} (hash {self.old_hash[:6]}…) → {self.new_ref} (hash {self.new_hash[:6]}…)"
        if self.same:
            return f"{head}: same requests"
        parts = [f"{self.old_count} → {self.new_count} requests" if self.old_count is not None else
                 f"now {self.new_count} requests (the old side recorded no request count)"]
        if self.added_content is not None:
            parts.append(f"{len(self.added_content)} added, {len(self.removed_content or ())} removed by content")
            parts.append(f"{len(self.changed_positions)} positions differ")
        else:
            parts.append("request-level diff unavailable (the old run recorded only the suite hash)")
        return f"{head}: " + ", ".join(parts)


def suite_record(suite: Suite) -> dict[str, Any]:
    """What a run should store about its suite: name, version, content hash, size and the per-request
    hashes (so a later :func:`diff_suites` can say which requests changed, not only that some did)."""
    return {"name": suite.name, "version": suite.version, "content_hash": suite.content_hash,
            "num_requests": len(suite.requests), "request_hashes": suite.request_hashes()}


def _old_side(old: Suite | dict[str, Any]) -> tuple[str, str, int | None, list[str] | None]:
    if isinstance(old, Suite):
        return old.ref, old.content_hash, len(old.requests), old.request_hashes()
    if not isinstance(old, dict) or "content_hash" not in old:
        raise UserError("the recorded suite header has no content_hash: cannot check the suite did not change")
    ref = f"{old.get('name', '?')}@{old.get('version', '?')}"
    hashes = old.get("request_hashes")
    recorded = old.get("num_requests")
    count = len(hashes) if isinstance(hashes, list) else (int(recorded) if recorded is not None else None)
    return ref, str(old["content_hash"]), count, list(hashes) if isinstance(hashes, list) else None


def diff_suites(old: Suite | dict[str, Any], new: Suite) -> SuiteDiff:
    """Compare ``old`` (a suite, or the header a run recorded) with ``new``."""
    old_ref, old_hash, old_count, old_hashes = _old_side(old)
    new_hashes = new.request_hashes()
    if old_hashes is None:
        return SuiteDiff(old_ref, new.ref, old_hash, new.content_hash, old_count, len(new_hashes),
                         notes=("the old side has no per-request hashes",))
    shared = min(len(old_hashes), len(new_hashes))
    old_set, new_set = set(old_hashes), set(new_hashes)
    return SuiteDiff(
        old_ref, new.ref, old_hash, new.content_hash, len(old_hashes), len(new_hashes),
        changed_positions=tuple(i for i in range(shared) if old_hashes[i] != new_hashes[i]),
        added_positions=tuple(range(shared, len(new_hashes))),
        removed_positions=tuple(range(shared, len(old_hashes))),
        added_content=tuple(h for h in new_hashes if h not in old_set),
        removed_content=tuple(h for h in old_hashes if h not in new_set),
    )


def require_same_suite(old_header: Suite | dict[str, Any], new_suite: Suite, allow_change: bool) -> SuiteDiff:
    """Refuse (:class:`UserError`) when the suite changed, unless ``allow_change``; return the diff either way."""
    diff = diff_suites(old_header, new_suite)
    if not diff.same and not allow_change:
        raise UserError(f"suite changed: {diff.old_ref} (hash {diff.old_hash[:6]}…) → {diff.new_ref} "
                        f"(hash {diff.new_hash[:6]}…); pass --allow-suite-change to compare anyway")
    return diff
