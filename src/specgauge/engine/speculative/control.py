"""Dynamic speculation control: how many draft tokens each step gets (0 = plain decoding).

* Static (default): always ``max_drafts``.
* ``--speculative-disable-above N``: 0 whenever more than N requests are running.
* ``--speculative-adaptive``: an online cost model of this machine. Per batch-size bucket
  (powers of two) and per candidate k it keeps the median of the last ``WINDOW`` measured wall
  times of a pure decode step (robust to a noisy, shared machine); from the running
  per-position acceptance it predicts the tokens a request gets per step with k drafts,
  ``1 + sum_{j<=k} prod_{i<=j} a_i``, and picks the k with the most expected tokens per second,
  ``B * tokens(k) / time(B, k)``. Candidates not yet measured in a bucket are tried first; every
  ``REFRESH`` steps a neighbour of the current choice (k − 1 or k + 1, the less recently tried)
  is measured again, so the model follows the machine's load without paying for far-off k.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

REFRESH = 24
MIN_SAMPLES = 3
WINDOW = 8


def bucket_of(batch_size: int) -> int:
    """Batch-size bucket: the next power of two."""
    return 1 << max(0, (batch_size - 1).bit_length())


@dataclass
class _Cell:
    """Recent step times of one (bucket, k)."""

    samples: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    count: int = 0
    last_step: int = -1

    @property
    def time(self) -> float:
        return statistics.median(self.samples)

    def add(self, value: float, step: int) -> None:
        self.samples.append(value)
        self.count += 1
        self.last_step = step


@dataclass
class SpeculationController:
    """Chooses k per step; ``observe`` feeds it measured steps and acceptance."""

    max_drafts: int
    candidates: tuple[int, ...]
    disable_above: int | None = None
    adaptive: bool = False
    reached: list[float] = field(default_factory=list)   # per draft position: times verified
    accepted: list[float] = field(default_factory=list)  # per draft position: times accepted
    cells: dict[tuple[int, int], _Cell] = field(default_factory=dict)
    steps: int = 0
    current_k: int = 0

    @classmethod
    def build(cls, max_drafts: int, tree: bool, disable_above: int | None, adaptive: bool) -> "SpeculationController":
        """A controller whose candidates are 0..max_drafts (a chain) or 0 and max_drafts (a tree)."""
        candidates = (0, max_drafts) if tree else tuple(range(max_drafts + 1))
        return cls(max_drafts, candidates, disable_above, adaptive,
                   [0.0] * max_drafts, [0.0] * max_drafts, current_k=max_drafts)

    @property
    def mode(self) -> str:
        """``speculative`` when the last step drafted, ``plain`` otherwise."""
        return "speculative" if self.current_k > 0 else "plain"

    def choose(self, num_running: int) -> int:
        """Draft tokens per request for the next step, given the running requests."""
        self.steps += 1
        if self.disable_above is not None and num_running > self.disable_above:
            k = 0
        elif not self.adaptive or num_running == 0:
            k = self.max_drafts
        else:
            k = self._best(bucket_of(num_running))
        self.current_k = k
        return k

    def expected_tokens(self, k: int) -> float:
        """Tokens per request per step with k drafts, from the running per-position acceptance."""
        total, survive = 1.0, 1.0
        for i in range(k):
            rate = self.accepted[i] / self.reached[i] if self.reached[i] else 0.5
            survive *= rate
            total += survive
        return total

    def _best(self, bucket: int) -> int:
        cells = [self.cells.get((bucket, k)) for k in self.candidates]
        untried = [k for k, c in zip(self.candidates, cells) if c is None or c.count < MIN_SAMPLES]
        if untried:
            return untried[0]
        best = max(self.candidates, key=lambda k: bucket * self.expected_tokens(k) / self.cells[(bucket, k)].time)
        if self.steps % REFRESH == 0:
            at = self.candidates.index(best)
            neighbours = self.candidates[max(0, at - 1):at] + self.candidates[at + 1:at + 2]
            return min(neighbours, key=lambda k: self.cells[(bucket, k)].last_step)
        return best

    def observe_step(self, batch_size: int, k: int, seconds: float) -> None:
        """A pure decode step of ``batch_size`` requests with ``k`` drafts took ``seconds``."""
        cell = self.cells.setdefault((bucket_of(batch_size), k), _Cell())
        cell.add(seconds * bucket_of(batch_size) / batch_size, self.steps)  # scaled to the bucket's size

    def observe_accept(self, proposed: int, accepted: int) -> None:
        """One request's verify: ``proposed`` chain positions tried, the first ``accepted`` accepted."""
        for i in range(min(proposed, accepted + 1, self.max_drafts)):  # positions the walk reached
            self.reached[i] = self.reached[i] * 0.999 + 1.0
            self.accepted[i] = self.accepted[i] * 0.999 + (1.0 if i < accepted else 0.0)
