"""What one speculative step did: the runner returns it, the metrics and the controller read it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepReport:
    """The figures of one step the speculative runner ran with ``k`` draft tokens per request."""

    k: int = 0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    decoding: int = 0            # decoding requests in the step
    pure_decode: bool = True     # no prefill chunk in the step
    catch_up: int = 0            # EAGLE-3 draft pairs caught up before drafting (a backlog after an off period is many)
    verdicts: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # request id → (proposed, accepted)
    # decoding requests (EAGLE-3) whose backlog after an off period was not worth catching up: a cost
    # of switching speculation back on, not of drafting, so they do not teach the controller what k
    # gives. (A request that max_tokens leaves no room to draft does: every drafting batch has them.)
    ineligible: frozenset[str] = frozenset()

    @property
    def steady(self) -> bool:
        """A pure decode step whose cost is what every step at its k costs: no prefill chunk and
        no catch-up backlog beyond the previous step's accepted tokens (at most 1 + k pairs a
        request), so the controller's cost model is not charged the one-off catch-up of switching
        speculation back on (which would make drafting look dear and keep it off)."""
        return self.pure_decode and self.decoding > 0 and self.catch_up <= self.decoding * (1 + self.k)
