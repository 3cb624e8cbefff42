"""What one load point sends, and when: frozen specs and deterministic schedules.

A point's load is a plan — a list of ``(request_index, prompt_index, offset_s)`` items — so it can
be split over worker processes or Ray actors (:mod:`specgauge.load.workers.split`).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Iterator, Literal, Sequence

from specgauge.client.endpoint import Endpoint, Timeouts  # re-exported: the runner's contract
from specgauge.client.sampling import Sampling, request_seed
from specgauge.errors import UserError

__all__ = ["Endpoint", "Timeouts", "PointSpec", "PlannedRequest", "prompt_order", "iter_prompt_order",
           "arrival_offsets", "plan_requests"]


@dataclass(frozen=True)
class PointSpec:
    """One load point.

    - ``mode="closed"``: ``concurrency`` users, each sends its next request when its last one ends
      (``concurrency=1`` is the single-stream benchmark).
    - ``mode="open"``: arrivals at ``rate`` requests/s, Poisson or gamma (``burstiness`` < 1 is
      burstier, > 1 more regular; 1 is Poisson), at most ``max_concurrency`` in flight when set.

    Stop after ``num_requests`` measured requests or after ``duration_s`` seconds (whichever comes
    first when both are set). ``warmup_requests`` run before the measured window and are excluded.

    A suite with multi-turn sessions: each slot is a whole session sent on one user (so
    ``num_requests`` and ``concurrency`` count sessions), with a think time before each later turn:
    ``think_time_ms`` fixed, or the mean of an exponential or uniform(0, 2 x mean) draw seeded by
    ``seed`` and the session's slot (:mod:`specgauge.load.sessions`).
    """

    mode: Literal["closed", "open"]
    concurrency: int | None = None
    rate: float | None = None
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int = 0
    seed: int = 0
    max_tokens: int | None = None
    temperature: float = 0.0
    ignore_eos: bool = False   # ask the server to generate every max_tokens token
    think_time_ms: float = 0.0
    think_time_distribution: Literal["fixed", "exponential", "uniform"] = "fixed"
    top_p: float | None = None   # None: not sent (the server's default)
    top_k: int | None = None
    sampling_seed: int | None = None   # at temperature > 0, request i sends seed request_seed(this, i)
    # a trace replay (load/traces): request i is the suite's request i, sent at its trace time / this
    # (X times faster than recorded); ``rate`` is then the replay's mean rate, for the pool and reports
    trace_speed: float | None = None

    def __post_init__(self) -> None:
        if self.mode == "closed":
            if self.concurrency is None or self.concurrency < 1:
                raise UserError(f"closed-loop point needs concurrency >= 1 (got {self.concurrency})")
        elif self.mode == "open":
            if self.rate is None or not self.rate > 0 or not math.isfinite(self.rate):
                raise UserError(f"open-loop point needs a rate > 0 requests/s (got {self.rate})")
            if self.arrival not in ("poisson", "gamma"):
                raise UserError(f"unknown arrival process {self.arrival!r} (poisson or gamma)")
            if not self.burstiness > 0:
                raise UserError(f"burstiness must be > 0 (got {self.burstiness})")
            if self.max_concurrency is not None and self.max_concurrency < 1:
                raise UserError(f"max concurrency must be >= 1 (got {self.max_concurrency})")
        else:
            raise UserError(f"unknown load mode {self.mode!r} (closed or open)")
        if self.num_requests is None and self.duration_s is None:
            raise UserError("a point needs a number of requests or a duration")
        if self.num_requests is not None and self.num_requests < 1:
            raise UserError(f"number of requests must be >= 1 (got {self.num_requests})")
        if self.duration_s is not None and not self.duration_s > 0:
            raise UserError(f"duration must be > 0 s (got {self.duration_s})")
        if self.warmup_requests < 0:
            raise UserError(f"warm-up requests must be >= 0 (got {self.warmup_requests})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UserError(f"max tokens must be >= 1 (got {self.max_tokens})")
        if not (self.think_time_ms >= 0 and math.isfinite(self.think_time_ms)):
            raise UserError(f"think time must be >= 0 ms (got {self.think_time_ms})")
        if self.think_time_distribution not in ("fixed", "exponential", "uniform"):
            raise UserError(f"unknown think-time distribution {self.think_time_distribution!r} "
                            f"(fixed, exponential or uniform)")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise UserError(f"top-p must be in (0, 1] (got {self.top_p})")
        if self.trace_speed is not None and (self.mode != "open" or not (self.trace_speed > 0
                                                                           and math.isfinite(self.trace_speed))):
            raise UserError(f"a trace replay is an open-loop point with a speed > 0 (got {self.trace_speed})")
        if self.top_k is not None and self.top_k < -1:
            raise UserError(f"top-k must be >= 1, or 0 or -1 for no cut (got {self.top_k})")

    def sampling(self, request_index: int) -> Sampling:
        """What request ``request_index`` asks of the sampler: its own seed only when it samples."""
        seeded = self.sampling_seed is not None and self.temperature > 0
        return Sampling(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                        seed=request_seed(self.sampling_seed, request_index) if seeded else None)

    @property
    def pool_size(self) -> int:
        """Connections to open before the measured window (at least the peak in-flight count)."""
        if self.mode == "closed":
            return int(self.concurrency or 1)
        if self.max_concurrency is not None:
            return self.max_concurrency
        return max(1, min(256, math.ceil(2 * float(self.rate or 1))))

    @property
    def planned_count(self) -> int:
        """Open loop: how many arrival slots to plan — the count, or enough for the duration."""
        if self.num_requests is not None:
            return self.num_requests
        expected = float(self.rate or 1) * float(self.duration_s or 1)  # headroom for the random process
        return int(expected + 10 * math.sqrt(expected) + 100)


@dataclass(frozen=True)
class PlannedRequest:
    """One slot of a point: which request, which prompt, and (open loop) when, from the window start."""

    request_index: int
    prompt_index: int
    offset_s: float = 0.0


def iter_prompt_order(seed: int, num_prompts: int) -> Iterator[int]:
    """Endless deterministic prompt indices: shuffled passes over the suite from ``Random(seed)``."""
    if num_prompts < 1:
        raise UserError("the suite has no prompts")
    rng = random.Random(seed)
    while True:
        one_pass = list(range(num_prompts))
        rng.shuffle(one_pass)
        yield from one_pass


def prompt_order(seed: int, num_prompts: int, num_requests: int) -> list[int]:
    """Deterministic ``request_index -> prompt_index`` map: shuffled passes over the suite.

    Every prompt is used once per pass (so small counts cover the suite evenly); each pass is a
    fresh permutation drawn from ``random.Random(seed)``, identical on every machine and run.
    """
    return list(itertools.islice(iter_prompt_order(seed, num_prompts), num_requests))


def arrival_offsets(rate: float, count: int, *, arrival: str = "poisson", burstiness: float = 1.0,
                    seed: int = 0) -> list[float]:
    """Send times (s from the window start) of ``count`` open-loop arrivals at mean ``rate``/s.

    Gaps are exponential (Poisson) or gamma with shape ``burstiness`` and mean ``1/rate``
    (the same convention as vLLM's ``--burstiness``). The first request goes at 0.
    """
    rng = random.Random(seed ^ 0x5EED)
    offsets, now = [], 0.0
    for i in range(count):
        offsets.append(now)
        if arrival == "poisson" or burstiness == 1.0:
            now += rng.expovariate(rate)
        else:
            now += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
    return offsets


def plan_requests(spec: PointSpec, num_prompts: int,
                  trace_times: Sequence[float] | None = None) -> Iterator[PlannedRequest]:
    """All measured slots of ``spec`` (warm-up excluded), in send order, generated lazily (a
    closed-loop point bounded only by its duration has no fixed length). A trace replay
    (``spec.trace_speed``): slot i is prompt i at ``trace_times[i] / trace_speed``, in trace order."""
    if spec.trace_speed is not None:
        if trace_times is None or len(trace_times) != num_prompts:
            raise UserError("a trace replay needs the trace suite's times (build_info.trace.times_s), "
                            "one per request")
        count = min(num_prompts, spec.num_requests or num_prompts)
        return (PlannedRequest(i, i, trace_times[i] / spec.trace_speed) for i in range(count))
    order = iter_prompt_order(spec.seed, num_prompts)
    if spec.mode == "open":
        count = spec.planned_count
        offsets = arrival_offsets(float(spec.rate), count, arrival=spec.arrival, burstiness=spec.burstiness,
                                  seed=spec.seed)
        return (PlannedRequest(i, prompt, offsets[i]) for i, prompt in zip(range(count), order))
    indices = range(spec.num_requests) if spec.num_requests is not None else itertools.count()
    return (PlannedRequest(i, prompt) for i, prompt in zip(indices, order))
