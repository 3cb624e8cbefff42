"""Dynamic speculation control: how many draft tokens each step gets (0 = plain decoding).

* Static (default): always ``max_drafts``.
* ``--speculative-disable-above N``: 0 whenever the step serves more than N requests (running, or
  waiting and about to be admitted: ``Scheduler.num_active``).
* ``--speculative-schedule``: vLLM's schedule form, ``[bs_lo, bs_hi, K]`` or
  ``[bs_lo, bs_hi, ctx_lo, ctx_hi, K]`` entries (``specgauge.speculation_schedule``): K for the
  step's batch size (``num_active``, as for ``--speculative-disable-above``) and the longest
  context among its running requests, clamped to ``max_drafts``.
* ``--speculative-adaptive``: an online cost model of this machine. Per batch-size bucket
  (powers of two) and per candidate k it keeps the batch size and wall time of the last ``KEEP``
  *steady* decode steps (no prefill chunk, no catch-up backlog: ``runner.is_steady``), and
  estimates a step of B requests by the median of the ``WINDOW`` nearest B (robust to a noisy,
  shared machine and to a batch that drains). It predicts the tokens a request gets per step
  with k drafts from what steps with k drafts gave, per request that could draft (not one whose
  backlog after an off period was not worth catching up), pooled over every batch size
  (acceptance is the drafter's and the text's, not the batch's), or, until ``MIN_YIELDS`` such
  request-steps are seen, from the running per-position acceptance,
  ``1 + sum_{j<=k} prod_{i<=j} a_i`` (which overestimates chains cut short by
  ``--speculative-min-draft-prob``). It picks the k with the most expected tokens per second,
  ``B * tokens(k) / time(B, k)``, with ``time(B, k)`` the plain step's estimate times k's ratio
  to it — drafting only when it beats plain by ``MARGIN`` (5%): the model sees steady steps, not
  the draft head's catch-up over each new prompt or drafting beside prefill chunks.

  With two candidates (off or the full draft: a tree, or a chain that cuts itself short) that
  ratio is the median over *pairs of neighbouring steady steps*, one of each, at most
  ``PAIR_GAP`` steps apart, a step paired at most with one step before it and one after, and
  only steps that continue their mode (measuring alternates two of each). Neighbours share the
  machine's speed of the moment, so the pairs compare the choice, not the machine's drift.
  Ratios are fitted non-decreasing over the buckets (``monotone_ratios``). With more candidates
  the ratio is that of the two cells' estimates.

  A bucket first measures plain steps. A k never measured in it is predicted from the *smaller*
  buckets where it was (``ratio_from_below``): speculation only loses ground as the batch grows
  (verify costs grow with B·(1+k), and busier batches draft less), so a prediction from below
  is optimistic and a k it calls a loser is not worth measuring, while with nothing below, k is
  measured. Only a predicted best is measured here — a new batch size costs a few steps, not a
  sweep of every k.

  With two candidates a bucket's choice waits for its pairs to settle it: while the measured gain
  of the draft (tokens over time ratio) lies within ``Z`` standard errors of the ``MARGIN`` line
  (the median's error, from the pairs' spread), and fewer than ``PAIRS_KEEP`` pairs are in, it
  goes on alternating plain and draft steps. Near the line either choice costs little, so
  measuring there is cheap, while a choice made there on a few pairs would be a coin toss. Far
  from the line a few pairs settle it.

  A bucket probes a neighbour of its choice (k − 1 or k + 1, the less recently tried) for
  ``PROBE_STEPS`` steps when its probe falls due, if the neighbour was measured in this bucket
  (early estimates can be far off), or the bucket's interval has reached ``MAX_REFRESH``. A
  neighbour only predicted from a smaller bucket, where it lost, is not run before that: the
  prediction is optimistic, so it loses here too — where a smaller batch says speculation
  loses, a speculative step (and its catch-up) is paid once in ``MAX_REFRESH`` steps. The first
  probe falls due ``REFRESH`` steps into the bucket; a probe that leaves the choice unchanged,
  or is skipped, doubles the bucket's interval (up to ``MAX_REFRESH``), one that changes it
  resets it: the model follows a load that moves, and costs ever less where it does not.

The measurements behind these rules are in docs/results.md ("What shaped the adaptive controller").
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field

from specgauge.speculation_schedule import Entry, draft_tokens_at

REFRESH = 48  # steps before a bucket's first probe
MAX_REFRESH = 16 * REFRESH  # a probe that confirms the choice doubles its bucket's interval, up to this
PROBE_STEPS = 3  # a re-measured k is held this many steps: the first one back on after plain steps
# carries the catch-up of every token decoded meanwhile and is not learned from (not steady)
MARGIN = 0.05  # drafting must beat plain by this much on the steady-step model: the model does not see
# what drafting costs outside steady steps (the draft head's catch-up over each new prompt, drafting
# beside prefill chunks)
MIN_SAMPLES = 3  # a median of three survives one outlier (the first step of a new shape builds its kernels)
WINDOW = 8   # samples a time estimate takes the median of: those nearest the batch size in question
KEEP = 32    # samples a cell keeps
PAIR_GAP = 8  # a steady step is paired with the other candidate's last steady step this many steps back at most
PAIRS_KEEP = 64  # pairs a bucket keeps; with this many its choice is the median's, however near the line
Z = 2.0  # standard errors between the measured gain and the MARGIN line that settle a bucket's choice before that
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
class _Cell:
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
class SpeculationController:
    """Chooses k per step; ``observe`` feeds it measured steps and acceptance."""

    max_drafts: int
    candidates: tuple[int, ...]
    disable_above: int | None = None
    adaptive: bool = False
    schedule: tuple[Entry, ...] | None = None
    reached: list[float] = field(default_factory=list)   # per draft position: times verified
    accepted: list[float] = field(default_factory=list)  # per draft position: times accepted
    cells: dict[tuple[int, int], _Cell] = field(default_factory=dict)
    yields: dict[int, list[float]] = field(default_factory=dict)  # k → [decayed drafts accepted, decayed request-steps that could draft]
    steps: int = 0
    current_k: int = 0
    previous_k: int = 0  # the step before's: a step that switched speculation on or off is not paired
    probe: tuple[int, int, int, int] | None = None  # (bucket, k, steps left, choice before) of a probe in progress
    intervals: dict[int, int] = field(default_factory=dict)   # bucket → steps between its probes
    next_probe: dict[int, int] = field(default_factory=dict)  # bucket → step its next probe falls due
    last_steady: dict[tuple[int, int], tuple[int, int, float]] = field(default_factory=dict)  # (bucket, k) → (step, batch, seconds) of its last steady step not yet paired
    pairs: dict[int, deque] = field(default_factory=dict)  # bucket → time(max)/time(0) of neighbouring steady steps
    fitted: dict[int, float] | None = None  # bucket → its ratio from ``monotone_ratios`` (None: a pair came since)
    errors: dict[int, float] = field(default_factory=dict)  # bucket → standard error of its pairs' log median (with ``fitted``)

    @property
    def paired(self) -> bool:
        """Two candidates (off or the full draft): their cost ratio is measured from neighbouring
        steps, which this machine's drift (tens of percent within minutes) does not reach."""
        return len(self.candidates) == 2

    @classmethod
    def build(cls, max_drafts: int, tree: bool, disable_above: int | None, adaptive: bool,
              self_cutting: bool = False, schedule: tuple[Entry, ...] | None = None) -> "SpeculationController":
        """A controller whose candidates are 0..max_drafts (a chain), or only 0 and max_drafts for
        a tree and for a chain that cuts itself short (``self_cutting``: EAGLE-3 with
        ``--speculative-min-draft-prob``, whose chains already end where the head is unsure — the
        choice left is whether to speculate at all, and measuring one k keeps its yield and cost
        well sampled where seven would each get a few noisy steps)."""
        candidates = (0, max_drafts) if tree or self_cutting else tuple(range(max_drafts + 1))
        return cls(max_drafts, candidates, disable_above, adaptive, schedule,
                   [0.0] * max_drafts, [0.0] * max_drafts, current_k=max_drafts)

    @property
    def mode(self) -> str:
        """``speculative`` when the last step drafted, ``plain`` otherwise."""
        return "speculative" if self.current_k > 0 else "plain"

    def choose(self, num_active: int, context_length: int = 1) -> int:
        """Draft tokens per request for the next step, which serves ``num_active`` requests, the
        longest ``context_length`` tokens long."""
        self.steps += 1
        if self.schedule is not None:
            k = draft_tokens_at(list(self.schedule), self.max_drafts, num_active, context_length) if num_active else 0
        elif self.disable_above is not None and num_active > self.disable_above:
            k = 0
        elif not self.adaptive or num_active == 0:
            k = self.max_drafts
        else:
            k = self._best(num_active)
        self.previous_k, self.current_k = self.current_k, k
        return k

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

    def _measured(self, bucket: int, k: int) -> bool:
        cell = self.cells.get((bucket, k))
        return cell is not None and cell.count >= MIN_SAMPLES

    def _ratio(self, bucket: int, k: int) -> float | None:
        """time(k) / time(0) in ``bucket`` (None until measured there): with two candidates the
        median over pairs of neighbouring steady steps, made non-decreasing over the buckets
        (``monotone_ratios``), else the ratio of the cells' estimates."""
        if self.paired:
            if self.fitted is None:  # a pair came since: fit again (not on every step)
                measured = {b: pairs for b, pairs in self.pairs.items() if len(pairs) >= WINDOW}
                self.fitted = monotone_ratios(measured)
                self.errors = {b: median_error(pairs) for b, pairs in measured.items()}
            return self.fitted.get(bucket)
        if self._measured(bucket, k) and self._measured(bucket, 0):
            return self.cells[(bucket, k)].time(bucket) / self.cells[(bucket, 0)].time(bucket)
        return None

    def _known(self, bucket: int, k: int) -> bool:
        return self._measured(bucket, 0) if k == 0 else self._ratio(bucket, k) is not None

    def predicted_time(self, batch: int, k: int) -> float | None:
        """Step time of k drafts at ``batch``: this bucket's plain step times k's ratio to it,
        measured here or else extrapolated from below (``ratio_from_below``; None when nothing
        is known)."""
        bucket = bucket_of(batch)
        if not self._measured(bucket, 0):
            return None
        plain = self.cells[(bucket, 0)].time(batch)
        if k == 0:
            return plain
        if not self.paired and self._measured(bucket, k):
            return self.cells[(bucket, k)].time(batch)
        ratio = self._ratio(bucket, k)
        if ratio is None:
            ratio = self.ratio_from_below(bucket, k)
        return None if ratio is None else plain * ratio

    def ratio_from_below(self, bucket: int, k: int) -> float | None:
        """k's time ratio to a plain step in ``bucket``, from the smaller buckets where it was
        measured: the nearest one's, grown by the growth per doubling of the batch between the
        two nearest (at least 1). The ratio grows ever faster with the batch (the verify's
        B·(1+k) tokens take over from fixed costs), so this stays optimistic, where the nearest
        bucket's ratio alone would be too optimistic and send buckets measuring a loser."""
        below = sorted(b for b in {b for (b, _) in self.cells} if b < bucket and self._ratio(b, k) is not None)
        if not below:
            return None
        ratio = self._ratio(below[-1], k)
        if len(below) > 1:
            growth = (ratio / self._ratio(below[-2], k)) ** (1 / math.log2(below[-1] / below[-2]))
            ratio *= max(1.0, growth) ** math.log2(bucket / below[-1])
        return ratio

    def _best(self, batch: int) -> int:
        bucket = bucket_of(batch)
        if not self._measured(bucket, 0):
            return 0  # plain steps first: the baseline every other estimate scales from
        times = {k: self.predicted_time(batch, k) for k in self.candidates}
        unknown = [k for k, t in times.items() if t is None]
        if unknown:
            return self._partnered(bucket, unknown[0])  # nothing known at or below this batch size: try it
        rate = {k: batch * self.expected_tokens(k) / times[k] for k in self.candidates}
        best = self._pick(rate)
        if not self._known(bucket, best):
            return self._partnered(bucket, best)  # predicted from a smaller bucket: measure it here
        if self.paired and self._ratio(bucket, self.max_drafts) is not None and not self.settled(bucket):
            self.probe = None
            return self._partnered(bucket, self.max_drafts)  # near the line: go on alternating
        if self.probe is not None and self.probe[0] != bucket:
            self.probe = None  # the batch size moved on mid-probe
        if self.probe is not None:
            _, k, left, before = self.probe
            if left > 0:
                self.probe = (bucket, k, left - 1, before)
                return k
            self.probe = None  # over: a confirmed choice is probed ever less often
            interval = self.intervals.get(bucket, REFRESH)
            self.intervals[bucket] = min(2 * interval, MAX_REFRESH) if best == before else REFRESH
            self.next_probe[bucket] = self.steps + self.intervals[bucket]
        due = self.next_probe.setdefault(bucket, self.steps + REFRESH)
        if self.steps < due:
            return best
        at = self.candidates.index(best)
        neighbours = self.candidates[max(0, at - 1):at] + self.candidates[at + 1:at + 2]
        probe = min(neighbours, key=lambda k: self.cells[(bucket, k)].last_step if (bucket, k) in self.cells else -1)
        cell = self.cells.get((bucket, probe))
        seen = len(self.pairs.get(bucket, ())) if self.paired else cell.count if cell else 0
        interval = self.intervals.get(bucket, REFRESH)
        if seen or interval >= MAX_REFRESH:  # measured here, or predicted a loser from below long ago
            self.probe = (bucket, probe, PROBE_STEPS - 1, best)
            return probe
        self.intervals[bucket] = min(2 * interval, MAX_REFRESH)  # predicted a loser from below: not run
        self.next_probe[bucket] = self.steps + self.intervals[bucket]
        return best

    def settled(self, bucket: int) -> bool:
        """With two candidates: whether ``bucket``'s pairs settle its choice — ``PAIRS_KEEP`` of
        them, or a measured gain (tokens with the draft over its time ratio, fitted across the
        buckets) at least ``Z`` standard errors of the bucket's own median (``median_error``)
        from the ``MARGIN`` line."""
        pairs = self.pairs.get(bucket, ())
        if len(pairs) >= PAIRS_KEEP:
            return True
        ratio = self._ratio(bucket, self.max_drafts)
        if ratio is None or bucket not in self.errors:
            return False
        gain = math.log(self.expected_tokens(self.max_drafts) / ratio)
        return abs(gain - math.log(1 + MARGIN)) >= Z * self.errors[bucket]

    def _pick(self, rate: dict[int, float]) -> int:
        """The candidate with the most expected tokens per second; a near-tie goes to plain (``MARGIN``)."""
        best = max(self.candidates, key=rate.get)
        return 0 if best and rate[best] < (1 + MARGIN) * rate[0] else best

    def paired_view(self) -> list[tuple[int, float, float, int, int]]:
        """With two candidates, per bucket whose ratio is measured: (bucket, time(full draft) /
        time(plain), tokens a request gets per step with the draft, pairs, the choice there)."""
        view = []
        for bucket in sorted(self.pairs):
            ratio = self._ratio(bucket, self.max_drafts)
            if ratio is not None:
                tokens = self.expected_tokens(self.max_drafts)
                view.append((bucket, ratio, tokens, len(self.pairs[bucket]),
                             self._pick({0: 1.0, self.max_drafts: tokens / ratio})))
        return view

    def _partnered(self, bucket: int, k: int) -> int:
        """``k``, to be measured — or first plain steps, when two candidates are paired and no
        unpaired steady plain step is left here to pair k's next step with (measuring k then
        alternates two plain and two k steps, the second of each paired, until the bucket's pairs
        settle its choice, ``settled``: the first few steps of a new bucket can be far off, and a
        ratio from a few pairs can lock the wrong choice for a long time)."""
        if self.paired and k and (bucket, 0) not in self.last_steady:
            return 0
        return k

    def observe_step(self, batch_size: int, k: int, seconds: float) -> None:
        """A steady decode step of ``batch_size`` requests with ``k`` drafts took ``seconds``."""
        bucket = bucket_of(batch_size)
        self.cells.setdefault((bucket, k), _Cell()).add(batch_size, seconds, self.steps)
        if self.paired and (k > 0) == (self.previous_k > 0):
            # pair with the other candidate's last steady step not yet paired with a later one; only
            # steps that continue their mode: the draft step after a plain one caught up one token a
            # request where steady drafting catches up every accepted one, so such pairs read the
            # draft cheaper than it is
            partner = (bucket, 0 if k else self.candidates[1])
            other = self.last_steady.pop(partner, None)
            if other is not None and self.steps - other[0] <= PAIR_GAP:
                mine, theirs = seconds / batch_size, other[2] / other[1]  # per request: neighbours' batches are alike
                self.pairs.setdefault(bucket, deque(maxlen=PAIRS_KEEP)).append(mine / theirs if k else theirs / mine)
                self.fitted = None
            self.last_steady[(bucket, k)] = (self.steps, batch_size, seconds)

    def observe_accept(self, proposed: int, accepted: int) -> None:
        """One decoding request's share of the last step (chosen k): ``proposed`` chain positions
        tried (0: it did not draft), the first ``accepted`` accepted."""
        if self.current_k:
            seen = self.yields.setdefault(self.current_k, [0.0, 0.0])
            seen[0], seen[1] = seen[0] * DECAY + accepted, seen[1] * DECAY + 1.0
        for i in range(min(proposed, accepted + 1, self.max_drafts)):  # positions the walk reached
            self.reached[i] = self.reached[i] * DECAY + 1.0
            self.accepted[i] = self.accepted[i] * DECAY + (1.0 if i < accepted else 0.0)
