"""One arm's closed loop on an in-process engine, and arms advanced in turn (interleaved) so the
machine's drift falls on all alike: shared by ``spec_aggregate.py`` and ``spec_adaptive_trace.py``."""

from __future__ import annotations

import time

from specgauge.engine.core.engine import Engine, EngineConfig
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.core.scheduler import SchedulerConfig
from specgauge.engine.serving.commands import SERVE_MIN_DRAFT_PROB, SERVE_NUM_STEPS
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.shipped_models import DEFAULT

TARGET = DEFAULT.target_dir   # the default shipped model (shipped_models.py)
# `serve`'s defaults
SERVE_EAGLE = dict(algorithm="EAGLE3", num_steps=SERVE_NUM_STEPS, min_draft_prob=SERVE_MIN_DRAFT_PROB)


def build(spec: SpeculativeConfig, max_running: int, draft: str | None) -> Engine:
    if spec.algorithm != "NONE" and draft:
        spec = SpeculativeConfig(**{**spec.__dict__, "draft_model_path": draft})
    scheduler = SchedulerConfig(max_running=max_running, max_tokens_per_step=2048, max_waiting=4 * max_running)
    return Engine(EngineConfig(model_dir=str(TARGET), threads=1, scheduler=scheduler, speculative=spec))


class ClosedLoop:
    """One arm's closed loop at one concurrency, advanced a time slice at a time (``advance``).

    ``concurrency`` greedy requests in flight, a new one submitted as soon as one finishes,
    ``requests`` in all. ``tokens`` / ``seconds`` cover the steady window — the steps after the
    first request finishes up to the one after which the last is submitted (``concurrency`` always
    in flight: no ramp-up, no drain) — and ``seconds`` counts only this arm's own steps, so arms
    advanced in turn are timed as if each ran alone."""

    def __init__(self, engine: Engine, prompts: list[list[int]], concurrency: int, tokens: int,
                 requests: int) -> None:
        self.engine, self.prompts, self.concurrency, self.max_tokens = engine, prompts, concurrency, tokens
        self.total = requests
        self.submitted = self.finished = 0
        self.tokens, self.seconds = 0, 0.0
        self.steps = self.drafting_steps = 0  # steps in the window, and those that drafted
        self.window = "before"  # before → open → closed
        for _ in range(min(concurrency, requests)):
            self._submit()

    @property
    def done(self) -> bool:
        return self.finished >= self.total

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def _submit(self) -> None:
        self.engine.submit(f"c{self.concurrency}-{self.submitted}", self.prompts[self.submitted % len(self.prompts)],
                           SamplingParams(max_tokens=self.max_tokens, temperature=0.0), lambda event: None)
        self.submitted += 1

    def advance(self, seconds: float) -> None:
        """Step the engine for about ``seconds`` of wall time (or until done)."""
        until = time.perf_counter() + seconds
        while not self.done and time.perf_counter() < until:
            begin = time.perf_counter()
            counting = self.window == "open"
            self.engine.drain_inbox(block=False)
            updates = self.engine.step()
            for update in updates:
                if not update.finished:
                    continue
                self.finished += 1
                if self.submitted < self.total:
                    self._submit()
                    if self.submitted == self.total and counting:
                        self.window = "closed"
            if counting:
                self.tokens += sum(len(u.new_token_ids) for u in updates)
                self.steps += 1
                self.drafting_steps += self.engine.controller.current_k > 0
                self.seconds += time.perf_counter() - begin
            if self.window == "before" and self.finished:
                self.window = "open"


def interleaved(engines: dict[str, Engine], prompts: list[list[int]], concurrency: int, tokens: int,
                requests: int, slice_seconds: float) -> dict[str, ClosedLoop]:
    """Every arm's closed loop at ``concurrency``, advanced in turn ``slice_seconds`` at a time
    (the order reversed every turn): the machine's drift, tens of percent within minutes here,
    then falls on every arm alike, and a slice of dozens of steps keeps each arm's caches warm."""
    loops = {arm: ClosedLoop(engine, prompts, concurrency, tokens, requests) for arm, engine in engines.items()}
    order = list(loops)
    while not all(loop.done for loop in loops.values()):
        for arm in order:
            loops[arm].advance(slice_seconds)
        order.reverse()
    return loops


def closed_loop(engine: Engine, prompts: list[list[int]], concurrency: int, tokens: int) -> tuple[int, float]:
    """(tokens, seconds) of one arm's steady window, run alone (warm-ups, scratch scripts)."""
    loop = ClosedLoop(engine, prompts, concurrency, tokens, max(3 * concurrency, 24))
    while not loop.done:
        loop.advance(60.0)
    return loop.tokens, loop.seconds


def describe_model(controller) -> str:
    """Per bucket the adaptive controller's own view (``paired_view``): the full draft's step time
    over a plain step's, the tokens a request gets per step with it, the pairs behind the ratio,
    and the choice there."""
    return "; ".join(f"{bucket}: {ratio:.2f}x time, {tokens:.2f} tok ({pairs} pairs) {'on' if k else 'off'}"
                     for bucket, ratio, tokens, pairs, k in controller.paired_view()) or "(nothing paired yet)"
