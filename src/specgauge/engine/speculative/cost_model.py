"""The adaptive controller's cost model: what a step of k drafts costs on this machine and what
it yields, from measured steps (pure Python; the policy in ``control.py`` decides with it).

* **Step time.** Per batch-size bucket (powers of two, ``bucket_of``) and per k it keeps the
  batch size and wall time of the last ``KEEP`` *steady* decode steps (no prefill chunk, no
  catch-up backlog: ``StepReport.steady``) and estimates a step of B requests by the median of
  the ``WINDOW`` samples nearest B, each scaled to B in proportion (robust to a noisy, shared
  machine and to a batch that drains). A step of k drafts is predicted as the plain step's
  estimate times k's time ratio to it.
* **Time ratio.** With two candidates (off or the full draft: a tree, or a chain that cuts
  itself short) the ratio is the median over *pairs of neighbouring steady steps*, one of each,
  at most ``PAIR_GAP`` steps apart, a step paired at most with one step before it and one after,
  and only steps that continue their mode. Neighbours share the machine's speed of the moment,
  so a pair compares the choice, not the machine's drift. The ratios are fitted non-decreasing
  over the buckets (``monotone_ratios``). With more candidates the ratio is that of the two
  cells' estimates. A k never measured in a bucket is predicted from the *smaller* buckets where
  it was (``ratio_from_below``): the verify's cost grows with B·(1+k), so a prediction from
  below is optimistic.
* **Yield.** The tokens a request gets per step with k drafts: what steps with k drafts gave
  each request that could draft, pooled over every batch size (acceptance is the drafter's and
  the text's, not the batch's), or, until ``MIN_YIELDS`` such request-steps are seen, from the
  running per-position acceptance, ``1 + sum_{j<=k} prod_{i<=j} a_i`` (which overestimates
  chains cut short by ``--speculative-min-draft-prob``). Counts decay by ``DECAY`` a sample.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field

MIN_SAMPLES = 3  # a median of three survives one outlier (the first step of a new shape builds its kernels)
WINDOW = 8   # samples a time estimate takes the median of: those nearest the batch size in question
KEEP = 32    # samples a cell keeps
PAIR_GAP = 8  # a steady step is paired with the other candidate's last steady step this many steps back at most
PAIRS_KEEP = 64  # pairs a bucket keeps
MIN_YIELDS = 16  # request-steps with k drafts before their measured yield replaces the position model
DECAY = 0.999


def bucket_of(batch_size: int) -> int:
    """Batch-size bucket: the next power of two."""
    return 1 << max(0, (batch_size - 1).bit_length())


def monotone_ratios(pairs: dict[int, deque]) -> dict[int, float]:
    """Per bucket, the median of its pairs' time ratios (in logs), fitted non-decreasing in the
    batch size, each bucket weighted by its pairs (pool-adjacent-violators): a draft costs a
    plain step's fixed overhead plus a verify that grows with B·(1+k), so its ratio to a plain
    step does not fall as the batch grows. A bucket measured on a few noisy pairs out of line
    with its neighbours is pooled with them."""
    blocks = []  # [log ratio, weight, buckets], merged while out of order
    for bucket in sorted(pairs):
        blocks.append([statistics.median(math.log(p) for p in pairs[bucket]), len(pairs[bucket]), [bucket]])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (left, w1, b1), (right, w2, b2) = blocks[-2], blocks.pop()
            blocks[-1] = [(left * w1 + right * w2) / (w1 + w2), w1 + w2, b1 + b2]
    return {bucket: math.exp(value) for value, _, buckets in blocks for bucket in buckets}


def median_error(ratios) -> float:
    """Standard error of the median of the ratios' logs, from their spread: 1.2533 · σ / √n, with
    σ estimated robustly as 1.4826 · MAD (one pair of a stalled step does not inflate it)."""
    logs = [math.log(r) for r in ratios]
    centre = statistics.median(logs)
    return 1.2533 * 1.4826 * statistics.median(abs(x - centre) for x in logs) / math.sqrt(len(logs))


@dataclass
class StepTimes:
    """Recent steady steps of one (bucket, k): (batch size, seconds)."""

    samples: deque = field(default_factory=lambda: deque(maxlen=KEEP))
    count: int = 0
    last_step: int = -1

    def time(self, batch: int) -> float:
        """Step time at ``batch``: the median of the ``WINDOW`` samples nearest it in batch size
        (the most recent first among equals), each scaled to it in proportion. Only near ones:
        a step's fixed cost makes the proportion wrong far away (a draining batch's small plain
        steps, scaled up, would read slower than full ones and flatter speculation)."""
        near = sorted(reversed(self.samples), key=lambda sample: abs(sample[0] - batch))[:WINDOW]
        return statistics.median(seconds * batch / size for size, seconds in near)

    def add(self, batch: int, seconds: float, step: int) -> None:
        self.samples.append((batch, seconds))
        self.count += 1
        self.last_step = step


@dataclass
class CostModel:
    """Measured step times and yields of draft depths 0..``max_drafts``; ``paired``: only 0 and
    ``max_drafts`` are candidates, and their time ratio is measured from neighbouring steps."""

    max_drafts: int
    paired: bool
    reached: list[float] = field(default_factory=list)   # per draft position: times verified
    accepted: list[float] = field(default_factory=list)  # per draft position: times accepted
    cells: dict[tuple[int, int], StepTimes] = field(default_factory=dict)
    yields: dict[int, list[float]] = field(default_factory=dict)  # k → [decayed drafts accepted, decayed request-steps that could draft]
    last_steady: dict[tuple[int, int], tuple[int, int, float]] = field(default_factory=dict)  # (bucket, k) → (step, batch, seconds) of its last steady step not yet paired
    pairs: dict[int, deque] = field(default_factory=dict)  # bucket → time(max)/time(0) of neighbouring steady steps
    fitted: dict[int, float] | None = None  # bucket → its ratio from ``monotone_ratios`` (None: a pair came since)
    errors: dict[int, float] = field(default_factory=dict)  # bucket → standard error of its pairs' log median (with ``fitted``)

    def __post_init__(self) -> None:
        self.reached = self.reached or [0.0] * self.max_drafts
        self.accepted = self.accepted or [0.0] * self.max_drafts

    # -- what a depth yields -------------------------------------------------------------------
    def expected_tokens(self, k: int) -> float:
        """Tokens per request per step with k drafts: what steps with k drafts gave a request that
        could draft, pooled over batch sizes, once ``MIN_YIELDS`` such request-steps are seen; else
        from the running per-position acceptance."""
        seen = self.yields.get(k)
        if k and seen and seen[1] >= MIN_YIELDS:
            return 1.0 + seen[0] / seen[1]
        total, survive = 1.0, 1.0
        for i in range(k):
            rate = self.accepted[i] / self.reached[i] if self.reached[i] else 0.5
            survive *= rate
            total += survive
        return total

    def add_yield(self, k: int, proposed: int, accepted: int) -> None:
        """One decoding request's share of a step with ``k`` drafts: ``proposed`` chain positions
        tried (0: it did not draft), the first ``accepted`` accepted."""
        seen = self.yields.setdefault(k, [0.0, 0.0])
        seen[0], seen[1] = seen[0] * DECAY + accepted, seen[1] * DECAY + 1.0
        for i in range(min(proposed, accepted + 1, self.max_drafts)):  # positions the walk reached
            self.reached[i] = self.reached[i] * DECAY + 1.0
            self.accepted[i] = self.accepted[i] * DECAY + (1.0 if i < accepted else 0.0)

    # -- what a step costs ---------------------------------------------------------------------
    def measured(self, bucket: int, k: int) -> bool:
        """Whether ``bucket`` has ``MIN_SAMPLES`` steady steps of ``k`` drafts."""
        cell = self.cells.get((bucket, k))
        return cell is not None and cell.count >= MIN_SAMPLES

    def ratio(self, bucket: int, k: int) -> float | None:
        """time(k) / time(0) in ``bucket`` (None until measured there): when paired the median
        over pairs of neighbouring steady steps, made non-decreasing over the buckets
        (``monotone_ratios``), else the ratio of the cells' estimates."""
        if self.paired:
            if self.fitted is None:  # a pair came since: fit again (not on every step)
                measured = {b: pairs for b, pairs in self.pairs.items() if len(pairs) >= WINDOW}
                self.fitted = monotone_ratios(measured)
                self.errors = {b: median_error(pairs) for b, pairs in measured.items()}
            return self.fitted.get(bucket)
        if self.measured(bucket, k) and self.measured(bucket, 0):
            return self.cells[(bucket, k)].time(bucket) / self.cells[(bucket, 0)].time(bucket)
        return None

    def known(self, bucket: int, k: int) -> bool:
        """Whether k's step time in ``bucket`` is measured there (not only predicted from below)."""
        return self.measured(bucket, 0) if k == 0 else self.ratio(bucket, k) is not None

    def predicted_time(self, batch: int, k: int) -> float | None:
        """Step time of k drafts at ``batch``: this bucket's plain step times k's ratio to it,
        measured here or else extrapolated from below (``ratio_from_below``; None when nothing
        is known)."""
        bucket = bucket_of(batch)
        if not self.measured(bucket, 0):
            return None
        plain = self.cells[(bucket, 0)].time(batch)
        if k == 0:
            return plain
        if not self.paired and self.measured(bucket, k):
            return self.cells[(bucket, k)].time(batch)
        ratio = self.ratio(bucket, k)
        if ratio is None:
            ratio = self.ratio_from_below(bucket, k)
        return None if ratio is None else plain * ratio

    def ratio_from_below(self, bucket: int, k: int) -> float | None:
        """k's time ratio to a plain step in ``bucket``, from the smaller buckets where it was
        measured: the nearest one's, grown by the growth per doubling of the batch between the
        two nearest (at least 1). The ratio grows ever faster with the batch (the verify's
        B·(1+k) tokens take over from fixed costs), so this stays optimistic, where the nearest
        bucket's ratio alone would be too optimistic and send buckets measuring a loser."""
        below = sorted(b for b in {b for (b, _) in self.cells} if b < bucket and self.ratio(b, k) is not None)
        if not below:
            return None
        ratio = self.ratio(below[-1], k)
        if len(below) > 1:
            growth = (ratio / self.ratio(below[-2], k)) ** (1 / math.log2(below[-1] / below[-2]))
            ratio *= max(1.0, growth) ** math.log2(bucket / below[-1])
        return ratio

    def samples_of(self, bucket: int, k: int) -> int:
        """How often k was measured in ``bucket``: its pairs when paired, else its steady steps."""
        if self.paired:
            return len(self.pairs.get(bucket, ()))
        cell = self.cells.get((bucket, k))
        return cell.count if cell else 0

    def last_measured(self, bucket: int, k: int) -> int:
        """The step number of k's last steady step in ``bucket`` (-1: never)."""
        cell = self.cells.get((bucket, k))
        return cell.last_step if cell else -1

    def add_step(self, batch_size: int, k: int, seconds: float, step: int, continues_mode: bool) -> None:
        """A steady decode step (number ``step``) of ``batch_size`` requests with ``k`` drafts took
        ``seconds``; ``continues_mode``: the step before it drafted too, or was plain too."""
        bucket = bucket_of(batch_size)
        self.cells.setdefault((bucket, k), StepTimes()).add(batch_size, seconds, step)
        if self.paired and continues_mode:
            # pair with the other candidate's last steady step not yet paired with a later one; only
            # steps that continue their mode: the draft step after a plain one caught up one token a
            # request where steady drafting catches up every accepted one, so such pairs read the
            # draft cheaper than it is
            partner = (bucket, 0 if k else self.max_drafts)
            other = self.last_steady.pop(partner, None)
            if other is not None and step - other[0] <= PAIR_GAP:
                mine, theirs = seconds / batch_size, other[2] / other[1]  # per request: neighbours' batches are alike
                self.pairs.setdefault(bucket, deque(maxlen=PAIRS_KEEP)).append(mine / theirs if k else theirs / mine)
                self.fitted = None
            self.last_steady[(bucket, k)] = (step, batch_size, seconds)
