"""The speculation policy: how many draft tokens each step gets (0 = plain decoding).

* Static (default): always ``max_drafts``.
* ``--speculative-disable-above N``: 0 whenever the step serves more than N requests (running, or
  waiting and about to be admitted: ``Scheduler.num_active``).
* ``--speculative-schedule``: vLLM's schedule form, ``[bs_lo, bs_hi, K]`` or
  ``[bs_lo, bs_hi, ctx_lo, ctx_hi, K]`` entries (``specgauge.speculation_schedule``): K for the
  step's batch size (``num_active``, as for ``--speculative-disable-above``) and the longest
  context among its running requests, clamped to ``max_drafts``.
* ``--speculative-adaptive``: the k with the most expected tokens per second on this machine's
  cost model (``cost_model.py``: step times and yields from measured steps),
  ``B * tokens(k) / time(B, k)``, drafting only when it beats plain by ``MARGIN`` (5%): the model
  sees steady steps, not the draft head's catch-up over each new prompt or drafting beside
  prefill chunks. Candidates are 0..max_drafts for a chain, or only 0 and max_drafts (*paired*)
  for a tree and for a chain that cuts itself short.

  A bucket first measures plain steps. A k never measured in it is predicted from the smaller
  buckets where it was; a k it predicts a loser is not measured, while with nothing below, k is
  measured. Only a predicted best is measured in a bucket — a new batch size costs a few steps,
  not a sweep of every k. Paired candidates are measured alternating two plain and two draft
  steps (the second of each forms a pair).

  With paired candidates a bucket's choice waits for its pairs to settle it: while the measured
  gain of the draft (tokens over time ratio) lies within ``Z`` standard errors of the ``MARGIN``
  line (the median's error, from the pairs' spread), and fewer than ``PAIRS_KEEP`` pairs are in,
  it goes on alternating plain and draft steps. Near the line either choice costs little, so
  measuring there is cheap, while a choice made there on a few pairs would be a coin toss. Far
  from the line a few pairs settle it.

  A bucket probes a neighbour of its choice (k − 1 or k + 1, the less recently tried) for
  ``PROBE_STEPS`` steps when its probe falls due, if the neighbour was measured in this bucket,
  or the bucket's interval has reached ``MAX_REFRESH``. A neighbour only predicted from a smaller
  bucket, where it lost, is not run before that: the prediction is optimistic, so it loses here
  too. The first probe falls due ``REFRESH`` steps into the bucket; a probe that leaves the choice
  unchanged, or is skipped, doubles the bucket's interval (up to ``MAX_REFRESH``), one that
  changes it resets it: the model follows a load that moves, and costs ever less where it does
  not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specgauge.engine.speculative.cost_model import PAIRS_KEEP, CostModel, bucket_of
from specgauge.engine.speculative.step_report import StepReport
from specgauge.speculation_schedule import Entry, draft_tokens_at

REFRESH = 48  # steps before a bucket's first probe
MAX_REFRESH = 16 * REFRESH  # a probe that confirms the choice doubles its bucket's interval, up to this
PROBE_STEPS = 3  # a re-measured k is held this many steps: the first one back on after plain steps
# carries the catch-up of every token decoded meanwhile and is not learned from (not steady)
MARGIN = 0.05  # drafting must beat plain by this much on the steady-step model: the model does not see
# what drafting costs outside steady steps (the draft head's catch-up over each new prompt, drafting
# beside prefill chunks)
Z = 2.0  # standard errors between the measured gain and the MARGIN line that settle a bucket's choice before PAIRS_KEEP


@dataclass
class SpeculationController:
    """Chooses k per step (``choose``); ``observe`` feeds it each step's report."""

    max_drafts: int
    candidates: tuple[int, ...]
    costs: CostModel
    disable_above: int | None = None
    adaptive: bool = False
    schedule: tuple[Entry, ...] | None = None
    steps: int = 0
    current_k: int = 0
    previous_k: int = 0  # the step before's: a step that switched speculation on or off is not paired
    probe: tuple[int, int, int, int] | None = None  # (bucket, k, steps left, choice before) of a probe in progress
    intervals: dict[int, int] = field(default_factory=dict)   # bucket → steps between its probes
    next_probe: dict[int, int] = field(default_factory=dict)  # bucket → step its next probe falls due

    @classmethod
    def build(cls, max_drafts: int, tree: bool, disable_above: int | None, adaptive: bool,
              self_cutting: bool = False, schedule: tuple[Entry, ...] | None = None) -> "SpeculationController":
        """A controller whose candidates are 0..max_drafts (a chain), or only 0 and max_drafts for
        a tree and for a chain that cuts itself short (``self_cutting``: EAGLE-3 with
        ``--speculative-min-draft-prob``, whose chains already end where the head is unsure — the
        choice left is whether to speculate at all, and measuring one k keeps its yield and cost
        well sampled where seven would each get a few noisy steps)."""
        candidates = (0, max_drafts) if tree or self_cutting else tuple(range(max_drafts + 1))
        costs = CostModel(max_drafts, paired=len(candidates) == 2)
        return cls(max_drafts, candidates, costs, disable_above, adaptive, schedule, current_k=max_drafts)

    @property
    def paired(self) -> bool:
        """Two candidates (off or the full draft): their cost ratio is measured from neighbouring
        steps, which a shared machine's drift in speed does not reach."""
        return self.costs.paired

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

    def observe(self, report: StepReport, seconds: float) -> None:
        """Learn from the step just run with the chosen k, which took ``seconds``: what k gave
        each decoding request the drafter could draft for, and, if the step was steady, its time."""
        if report.k:
            for request_id, (proposed, accepted) in report.verdicts.items():
                if request_id not in report.ineligible:
                    self.costs.add_yield(report.k, proposed, accepted)
        if report.steady:
            self.costs.add_step(report.decoding, report.k, seconds, self.steps,
                                continues_mode=(report.k > 0) == (self.previous_k > 0))

    def _best(self, batch: int) -> int:
        """The adaptive choice at ``batch``: the predicted best once the cost model knows it here,
        else the k to measure next; then the bucket's probes (``_probed``)."""
        bucket, costs = bucket_of(batch), self.costs
        if not costs.measured(bucket, 0):
            return 0  # plain steps first: the baseline every other estimate scales from
        times = {k: costs.predicted_time(batch, k) for k in self.candidates}
        unknown = [k for k, t in times.items() if t is None]
        if unknown:
            return self._partnered(bucket, unknown[0])  # nothing known at or below this batch size: try it
        best = self._pick({k: batch * costs.expected_tokens(k) / times[k] for k in self.candidates})
        if not costs.known(bucket, best):
            return self._partnered(bucket, best)  # predicted from a smaller bucket: measure it here
        if self.paired and costs.ratio(bucket, self.max_drafts) is not None and not self.settled(bucket):
            self.probe = None
            return self._partnered(bucket, self.max_drafts)  # near the line: go on alternating
        return self._probed(bucket, best)

    def _probed(self, bucket: int, best: int) -> int:
        """``best``, or a neighbour of it while a probe of ``bucket`` is due or in progress."""
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
        probe = min(neighbours, key=lambda k: self.costs.last_measured(bucket, k))
        interval = self.intervals.get(bucket, REFRESH)
        if self.costs.samples_of(bucket, probe) or interval >= MAX_REFRESH:  # measured here, or predicted a loser from below long ago
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
        costs = self.costs
        if len(costs.pairs.get(bucket, ())) >= PAIRS_KEEP:
            return True
        ratio = costs.ratio(bucket, self.max_drafts)  # (re)fits the ratios and their errors
        if ratio is None or bucket not in costs.errors:
            return False
        gain = math.log(costs.expected_tokens(self.max_drafts) / ratio)
        return abs(gain - math.log(1 + MARGIN)) >= Z * costs.errors[bucket]

    def _pick(self, rate: dict[int, float]) -> int:
        """The candidate with the most expected tokens per second; a near-tie goes to plain (``MARGIN``)."""
        best = max(self.candidates, key=rate.get)
        return 0 if best and rate[best] < (1 + MARGIN) * rate[0] else best

    def paired_view(self) -> list[tuple[int, float, float, int, int]]:
        """With two candidates, per bucket whose ratio is measured: (bucket, time(full draft) /
        time(plain), tokens a request gets per step with the draft, pairs, the choice there)."""
        view = []
        for bucket in sorted(self.costs.pairs):
            ratio = self.costs.ratio(bucket, self.max_drafts)
            if ratio is not None:
                tokens = self.costs.expected_tokens(self.max_drafts)
                view.append((bucket, ratio, tokens, len(self.costs.pairs[bucket]),
                             self._pick({0: 1.0, self.max_drafts: tokens / ratio})))
        return view

    def _partnered(self, bucket: int, k: int) -> int:
        """``k``, to be measured — or first plain steps, when two candidates are paired and no
        unpaired steady plain step is left here to pair k's next step with (measuring k then
        alternates two plain and two k steps, the second of each paired, until the bucket's pairs
        settle its choice, ``settled``: the first few steps of a new bucket can be far off, and a
        ratio from a few pairs can lock the wrong choice for a long time)."""
        if self.paired and k and (bucket, 0) not in self.costs.last_steady:
            return 0
        return k
