"""Continuous-batching scheduler. Pure Python: testable without a model.

Policy (mixed prefill + decode in one step):

1. every running request that is decoding gets its next token (1 new token, plus
   ``lookahead`` reserved slots that a speculative runner may fill with draft tokens);
2. what is left of the step's token budget goes to prefill chunks: first requests already
   part-way through their prompt, then waiting requests admitted in arrival order while
   ``max_running`` allows and the pool has blocks for their whole prompt (admission control);
3. when a decoding request needs a block and none is free, the most recently admitted
   running request is preempted: its blocks are freed and it goes back to the front of the
   waiting queue, to be recomputed (prompt + generated tokens) when blocks free up.

A request's KV length is ``num_computed`` (tokens whose K/V is in the cache). The runner's output
for a scheduled sequence says how many of its new tokens' K/V to keep (all, for plain decoding;
the accepted prefix, for a verify step) and which tokens it produced (0, 1 or several), so
``postprocess`` accepts a ragged number of new tokens per request per step.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.stats import SpecStats


class Status(str, Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class TextChecker(Protocol):
    """Detokenizer + stop strings of a request (see :class:`specgauge.engine.models.tokenizer.TextState`)."""

    stopped_by: str | None

    def push(self, token_id: int) -> str: ...

    def flush(self) -> str: ...


class RequestError(Exception):
    """A step failed because of particular requests (their sampling parameters, their random
    stream): the engine fails those requests alone and redoes the step for the others."""

    def __init__(self, request_ids: list[str], message: str) -> None:
        super().__init__(message)
        self.request_ids = list(request_ids)


@dataclass
class Request:
    """One generation request as the engine tracks it."""

    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    eos_token_ids: frozenset[int] = frozenset()
    text_state: TextChecker | None = None
    arrival: float = field(default_factory=time.monotonic)
    output_ids: list[int] = field(default_factory=list)
    num_computed: int = 0
    status: Status = Status.WAITING
    finish_reason: str | None = None          # "stop" | "length" | "abort"
    matched_stop: str | int | None = None
    generator: Any = None                     # the runner's per-request random stream
    user_data: Any = None                     # the front end's handle (its output queue)
    # Speculative decoding: the drafter's per-request state, owned and written by the drafter
    # alone (EAGLE-3: its own KV length and pending target features; n-gram: its index), reset
    # with the KV on preemption; and the request's acceptance figures, written by
    # speculative/stats.py (kept across preemption, like its output).
    draft_state: object | None = None   # eagle3_drafter.EagleState or ngram.NgramIndex (they import this module)
    spec_stats: SpecStats | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def num_pending(self) -> int:
        """Tokens whose K/V is not yet computed (1 while decoding)."""
        return self.num_tokens - self.num_computed

    def token_ids(self, start: int, stop: int) -> list[int]:
        """Tokens ``start .. stop-1`` of prompt + output (no copy of the whole sequence)."""
        n_prompt = len(self.prompt_ids)
        if stop <= n_prompt:
            return self.prompt_ids[start:stop]
        if start >= n_prompt:
            return self.output_ids[start - n_prompt:stop - n_prompt]
        return self.prompt_ids[start:] + self.output_ids[:stop - n_prompt]

    def prompt_rows(self, start: int, count: int) -> int:
        """How many of tokens ``start .. start+count-1`` are prompt tokens (they come first)."""
        return max(0, min(count, len(self.prompt_ids) - start))


@dataclass(frozen=True)
class SchedulerConfig:
    """Limits of the scheduler; frozen, validated by the CLI."""

    max_running: int = 64
    max_tokens_per_step: int = 512
    max_waiting: int = 256
    lookahead: int = 0          # extra KV slots per decoding request (draft tokens, later)


@dataclass
class ScheduledSeq:
    """One request's share of a step: ``num_new`` tokens from position ``start``."""

    request: Request
    start: int
    num_new: int

    @property
    def samples(self) -> bool:
        """Whether the step reaches the end of the known tokens, so a new token is sampled."""
        return self.start + self.num_new == self.request.num_tokens


@dataclass
class ScheduledBatch:
    seqs: list[ScheduledSeq]
    # Requests the scheduler ended without running them: their context can never fit the pool.
    rejected: list[Request] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(s.num_new for s in self.seqs)

    def __bool__(self) -> bool:
        return bool(self.seqs or self.rejected)


@dataclass
class SeqOutput:
    """What the runner did for one scheduled sequence."""

    new_token_ids: list[int]    # tokens produced, in order (ragged across requests)
    num_kv_kept: int            # how many of the step's input tokens' K/V stay cached


@dataclass
class RequestUpdate:
    """What the front end is told about a request after a step."""

    request: Request
    new_token_ids: list[int]
    text_delta: str
    finished: bool


class Scheduler:
    """Waiting/running queues over a :class:`BlockManager`."""

    def __init__(self, config: SchedulerConfig, blocks: BlockManager) -> None:
        self.config = config
        self.blocks = blocks
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.num_preemptions = 0

    # -- intake ------------------------------------------------------------------------
    def add(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"duplicate request id {request.request_id}")
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def abort(self, request_id: str) -> Request | None:
        """Drop a request wherever it is; its blocks are freed at once."""
        request = self.requests.get(request_id)
        if request is None:
            return None
        if request.status == Status.RUNNING:
            self.running.remove(request)
        elif request in self.waiting:
            self.waiting.remove(request)
        self._finish(request, "abort")
        return request

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def num_active(self) -> int:
        """Requests the next step serves: the running ones and the waiting ones it may admit
        (``max_running`` at most). A closed loop's replacements wait for one step before they
        run; counted here, a wave of finishes does not look like a lull."""
        return min(len(self.running) + len(self.waiting), self.config.max_running)

    @property
    def longest_context(self) -> int:
        """Tokens of the longest running request (1 when none runs): the context-length axis of
        ``--speculative-schedule``."""
        return max((r.num_tokens for r in self.running), default=1)

    # -- one step ----------------------------------------------------------------------
    def schedule(self, lookahead: int | None = None) -> ScheduledBatch:
        """Choose this step's sequences (see the module docstring for the policy).

        ``lookahead``: KV slots reserved this step per decoding request beyond its next token (the
        draft tokens the step's k needs); at most, and by default, the configured ``lookahead``,
        which admission reserves for every request."""
        lookahead = self.config.lookahead if lookahead is None else lookahead
        budget = self.config.max_tokens_per_step
        seqs: list[ScheduledSeq] = []
        rejected: list[Request] = []
        decoding = [r for r in self.running if r.num_pending == 1]
        for request in decoding:
            if request.status != Status.RUNNING or budget <= 0:
                continue
            if self._reserve(request, request.num_tokens + lookahead):
                seqs.append(ScheduledSeq(request, request.num_computed, 1))
                budget -= 1
        for request in [r for r in self.running if r.num_pending > 1]:
            if budget <= 0:
                break
            if request.status != Status.RUNNING:
                continue
            chunk = min(request.num_pending, budget)
            if self._reserve(request, request.num_computed + chunk):
                seqs.append(ScheduledSeq(request, request.num_computed, chunk))
                budget -= chunk
        while self.waiting and budget > 0 and len(self.running) < self.config.max_running:
            request = self.waiting[0]
            whole = self.blocks.blocks_for(request.num_tokens + 1 + self.config.lookahead)
            if whole > self.blocks.num_blocks:  # could never fit: end it rather than wait forever
                self.waiting.popleft()
                self._finish(request, "length")
                rejected.append(request)
                continue
            if whole > self.blocks.num_free_blocks:
                break  # admission control: wait for blocks to free up
            self.waiting.popleft()
            request.status = Status.RUNNING
            self.running.append(request)
            chunk = min(request.num_pending, budget)
            self.blocks.grow(request.request_id, chunk)
            seqs.append(ScheduledSeq(request, 0, chunk))
            budget -= chunk
        return ScheduledBatch(seqs, rejected)

    def postprocess(self, batch: ScheduledBatch, outputs: list[SeqOutput]) -> list[RequestUpdate]:
        """Apply the runner's outputs: KV lengths, new tokens, stop conditions, finished requests."""
        updates = [RequestUpdate(r, [], r.text_state.flush() if r.text_state else "", True) for r in batch.rejected]
        for seq, out in zip(batch.seqs, outputs, strict=True):
            request = seq.request
            if request.status != Status.RUNNING:
                continue  # aborted while the step ran
            request.num_computed = seq.start + out.num_kv_kept
            # Keep exactly the computed positions: rejected drafts and unused lookahead go back.
            self.blocks.truncate(request.request_id, request.num_computed)
            delta: list[str] = []
            accepted: list[int] = []
            for token in out.new_token_ids:
                accepted.append(token)
                request.output_ids.append(token)
                reason = self._check_finish(request, token)
                if request.text_state is not None and reason != "stop":  # a stop token shows no text
                    delta.append(request.text_state.push(token))
                    if request.text_state.stopped_by is not None:
                        reason, request.matched_stop = "stop", request.text_state.stopped_by
                if reason is not None:
                    request.finish_reason = reason
                    break
            if request.finish_reason is not None and request.text_state is not None:
                delta.append(request.text_state.flush())
            finished = request.finish_reason is not None
            if finished:
                self.running.remove(request)
                self._finish(request, request.finish_reason)
            if accepted or finished:
                updates.append(RequestUpdate(request, accepted, "".join(delta), finished))
        return updates

    # -- helpers -----------------------------------------------------------------------
    def _reserve(self, request: Request, num_tokens: int) -> bool:
        """Grow ``request`` to ``num_tokens`` positions, preempting the most recently admitted
        running requests while the pool is short; False when ``request`` itself was preempted."""
        while not self.blocks.can_grow(request.request_id, num_tokens):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is request:
                return False
        self.blocks.grow(request.request_id, num_tokens)
        return True

    def retry(self, requests: list[Request]) -> None:
        """Put running ``requests`` back at the front of the waiting queue (in their order), their
        KV freed and their output kept, as a preemption does: a failed step is redone for them
        from a state that nothing the failed step wrote can have touched."""
        for request in reversed(requests):
            if request.status == Status.RUNNING:
                self._preempt(request, counted=False)

    def _check_finish(self, request: Request, token: int) -> str | None:
        params = request.params
        if not params.ignore_eos and token in request.eos_token_ids:
            request.matched_stop = token
            return "stop"
        if token in params.stop_token_ids:
            request.matched_stop = token
            return "stop"
        if len(request.output_ids) >= params.max_tokens:
            return "length"
        return None

    def _preempt(self, request: Request, counted: bool = True) -> None:
        self.running.remove(request)
        self.blocks.free(request.request_id)
        request.num_computed = 0
        request.draft_state = None  # the draft KV went with the blocks
        request.status = Status.WAITING
        self.waiting.appendleft(request)
        self.num_preemptions += counted

    def _finish(self, request: Request, reason: str) -> None:
        self.blocks.free(request.request_id)
        request.status = Status.FINISHED
        request.finish_reason = reason
        self.requests.pop(request.request_id, None)
