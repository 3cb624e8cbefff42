"""Split one point's planned slots over workers so that their union is exactly the one-process plan.

Closed loop: the ``concurrency`` users are dealt out in contiguous blocks (worker ``w`` owns
``users_w`` of them) and slot ``i`` belongs to the worker that owns user ``i mod concurrency`` — so
each worker gets slots in proportion to its users, interleaved over the index range. Open loop:
slot ``i`` of the one arrival schedule (same seed, same offsets) belongs to worker ``i mod N``;
``max_concurrency`` is dealt out like users. A point with fewer users (or a smaller cap) than
workers runs on as many workers as it has users. Every slot keeps its request index and prompt.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Iterator, Sequence

from specgauge.errors import UserError
from specgauge.load.plan import PlannedRequest, PointSpec, plan_requests, prompt_order

WARMUP_SEED_OFFSET = 1_000_003  # the runner's: warm-up prompts have an order of their own


@dataclass(frozen=True)
class Placement:
    """Where a point's load runs: ``workers`` processes here, or Ray actors at ``ray_address``
    (``workers_per_node`` on every alive node, or ``workers`` spread over the nodes)."""

    workers: int = 1
    ray_address: str | None = None
    workers_per_node: int | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise UserError(f"--workers must be >= 1 (got {self.workers})")
        if self.workers_per_node is not None and self.workers_per_node < 1:
            raise UserError(f"--workers-per-node must be >= 1 (got {self.workers_per_node})")
        if self.workers_per_node is not None and self.ray_address is None:
            raise UserError("--workers-per-node places Ray actors; give --ray-address too")

    @property
    def single_process(self) -> bool:
        """Today's path: the point runs in this process, no worker at all."""
        return self.workers == 1 and self.ray_address is None


def deal(total: int, parts: int) -> list[int]:
    """``total`` items dealt over ``parts`` as evenly as possible, larger shares first."""
    return [total // parts + (1 if w < total % parts else 0) for w in range(parts)]


@dataclass(frozen=True)
class WorkerShare:
    """Worker ``worker`` of ``workers``: the point it runs (``spec``, with its users or its cap)
    and which of the point's slots and warm-up requests are its own."""

    worker: int
    workers: int
    point: PointSpec          # the whole point, as planned
    spec: PointSpec           # this worker's part: its users (closed) or its cap (open)
    first_user: int = 0       # closed loop: users [first_user, first_user + spec.concurrency)

    @property
    def pool_size(self) -> int:
        """Connections this worker opens before the window: its users, its cap, or its part of the
        point's pool."""
        if self.point.mode == "closed" or self.spec.max_concurrency is not None:
            return self.spec.pool_size
        return max(1, -(-self.point.pool_size // self.workers))

    def owns(self, request_index: int) -> bool:
        """Whether slot ``request_index`` of the point is this worker's."""
        if self.point.mode == "closed":
            user = request_index % int(self.point.concurrency or 1)
            return self.first_user <= user < self.first_user + int(self.spec.concurrency or 1)
        return request_index % self.workers == self.worker

    def slots(self, num_prompts: int, skip: frozenset[int] = frozenset(),
              trace_times: Sequence[float] | None = None) -> Iterator[PlannedRequest]:
        """This worker's slots of the point's plan, in send order (lazily: a duration-bounded
        closed loop has no end). A trace replay: every worker keeps each of its slots' trace time."""
        return (item for item in plan_requests(self.point, num_prompts, trace_times)
                if self.owns(item.request_index) and item.request_index not in skip)

    def warmup(self, num_prompts: int) -> list[PlannedRequest]:
        """This worker's share of the point's warm-up requests (negative indices, never stored)."""
        count = self.point.warmup_requests
        if not count:
            return []
        order = prompt_order(self.point.seed + WARMUP_SEED_OFFSET, num_prompts, count)
        return [PlannedRequest(-1 - i, p) for i, p in enumerate(order) if i % self.workers == self.worker]


def split_point(spec: PointSpec, workers: int) -> list[WorkerShare]:
    """The shares of ``spec`` over at most ``workers`` workers (fewer when the point has fewer
    users, or a smaller in-flight cap, than workers)."""
    if workers < 1:
        raise UserError(f"workers must be >= 1 (got {workers})")
    if spec.mode == "closed":
        users = deal(int(spec.concurrency or 1), min(workers, int(spec.concurrency or 1)))
        starts = [0, *itertools.accumulate(users)][:-1]
        return [WorkerShare(w, len(users), spec, dataclasses.replace(spec, concurrency=u), first_user=start)
                for w, (u, start) in enumerate(zip(users, starts))]
    count = workers if spec.max_concurrency is None else min(workers, spec.max_concurrency)
    caps = deal(spec.max_concurrency, count) if spec.max_concurrency is not None else [None] * count
    return [WorkerShare(w, count, spec, dataclasses.replace(spec, max_concurrency=cap)) for w, cap in enumerate(caps)]
