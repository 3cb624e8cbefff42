"""The engine: model + KV pool + scheduler, stepped in its own thread.

One step passes values, not state (``step``)::

    k = controller.choose(num_active, longest_context)       # plain engine: NoSpeculation, k = 0
    batch = scheduler.schedule(lookahead=runner.slots_needed(k))
    outputs, report = runner.run(batch, k)                    # plain runner: report None
    updates = scheduler.postprocess(batch, outputs)
    controller.observe(report, elapsed)                       # with the metrics, when there is a report

Other threads talk to the engine only through ``submit``/``abort``/``call``, which put commands
on a thread-safe inbox drained between steps; results go back through each request's ``sink``
callback (the server's sink hands them to asyncio with ``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
import traceback
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.kv_cache import KVCache
from specgauge.engine.models.cpu_features import has_native_bf16
from specgauge.engine.models.linear import PACKINGS, fp16_packing_supported, onednn_packing_supported
from specgauge.engine.core.malloc import keep_freed_memory
from specgauge.engine.core.metrics import EngineMetrics
from specgauge.engine.models.llama import load_model
from specgauge.engine.core.model_runner import ModelRunner, NoSpeculation
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.core.scheduler import (Request, RequestError, RequestUpdate, ScheduledBatch, Scheduler,
                                        SchedulerConfig)
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.engine.speculative.stats import SpecStats, record_verifies
from specgauge.engine.models.tokenizer import EngineTokenizer, TextState
from specgauge.errors import UserError

log = logging.getLogger("specgauge.engine")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class EngineConfig:
    """How to build the engine; validated once (``validate``) before anything is loaded."""

    model_dir: str
    device: str = "cpu"
    dtype: str = "auto"            # auto: bfloat16 on CUDA and on CPUs with native bf16, else float32
    max_model_len: int | None = None   # default: the model's max_position_embeddings (≤ 4096)
    block_size: int = 16
    num_blocks: int | None = None  # default: enough for max_running requests of 1/4 context, ≥ 2 full contexts
    scheduler: SchedulerConfig = SchedulerConfig()
    threads: int | None = None     # torch intra-op threads on CPU
    speculative: SpeculativeConfig = SpeculativeConfig()
    weight_packing: str = "auto"   # auto: onednn for bf16 on CPU, fp16 (FBGEMM) for fp32 on CPU when every weight is a bf16 value (engine/models/linear.py)

    def validate(self) -> None:
        path = Path(self.model_dir)
        if not (path / "config.json").is_file():
            raise UserError(f"no model at {path} (config.json missing); pass --model DIR")
        if self.dtype != "auto" and self.dtype not in DTYPES:
            raise UserError(f"--dtype must be one of auto, {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.weight_packing not in PACKINGS:
            raise UserError(f"--weight-packing must be one of {', '.join(PACKINGS)}; got {self.weight_packing!r}")
        if self.weight_packing == "fp16":
            if not self.device.startswith("cpu") or self.torch_dtype != torch.float32:
                raise UserError("--weight-packing fp16 applies to float32 on CPU (--device cpu --dtype float32)")
            if not fp16_packing_supported():
                raise UserError("--weight-packing fp16: this torch build has no FBGEMM fp16 matmul")
        if self.weight_packing == "onednn":
            if not self.device.startswith("cpu") or self.torch_dtype != torch.bfloat16:
                raise UserError("--weight-packing onednn applies to bfloat16 on CPU (--device cpu --dtype bfloat16)")
            if not onednn_packing_supported():
                raise UserError("--weight-packing onednn: this torch build or CPU has no oneDNN bf16 matmul "
                                "on reordered weights")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise UserError(f"--device {self.device}: CUDA is not available on this machine")
        if self.block_size <= 0 or (self.num_blocks is not None and self.num_blocks <= 0):
            raise UserError("--block-size and --num-blocks must be positive")
        if self.scheduler.max_tokens_per_step < self.scheduler.max_running * (1 + self.scheduler.lookahead):
            raise UserError(f"--max-tokens-per-step {self.scheduler.max_tokens_per_step} cannot give each of "
                            f"--max-running-requests {self.scheduler.max_running} its decode tokens every step")
        try:
            self.speculative.validate()
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if self.speculative.algorithm == "EAGLE3" and not (self.speculative.draft_dir / "config.json").is_file():
            hint = ("the shipped drafter is missing (train it with 'specgauge train draft')"
                    if self.speculative.draft_model_path is None else "config.json missing")
            raise UserError(f"no EAGLE-3 drafter at {self.speculative.draft_dir}: {hint}; "
                            f"pass --speculative-draft-model-path DIR")

    @property
    def torch_dtype(self) -> torch.dtype:
        if self.dtype == "auto":
            return torch.bfloat16 if self.device.startswith("cuda") or has_native_bf16() else torch.float32
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class StreamEvent:
    """What a request's sink receives after a step that touched it."""

    request_id: str
    text_delta: str
    token_ids: tuple[int, ...]
    prompt_tokens: int
    completion_tokens: int       # cumulative
    finished: bool
    finish_reason: str | None     # "stop" | "length" | "abort" | "error"
    matched_stop: str | int | None
    error: str | None = None
    spec: dict | None = None      # the request's speculation figures (SGLang meta_info names); None when off


Sink = Callable[[StreamEvent], None]


class Engine:
    """Loads a model directory and serves generation requests from a background thread."""

    def __init__(self, config: EngineConfig) -> None:
        config.validate()
        self.config = config
        if config.threads:
            torch.set_num_threads(config.threads)
        self.device = torch.device(config.device)
        if self.device.type == "cpu":
            keep_freed_memory()  # big step temporaries reused, not page-faulted in each step
        self.model = load_model(config.model_dir, device=self.device, dtype=config.torch_dtype)
        model_cfg = self.model.config
        eos = model_cfg.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self.tokenizer = EngineTokenizer(config.model_dir, eos_token_ids=eos_ids)
        self.max_model_len = min(config.max_model_len or min(model_cfg.max_position_embeddings, 4096),
                                 model_cfg.max_position_embeddings)
        spec = config.speculative
        lookahead = max(config.scheduler.lookahead, spec.lookahead)
        scheduler_config = dataclasses.replace(config.scheduler, lookahead=lookahead)
        self.model.prepare_for_inference(self.max_model_len + lookahead + 1, config.weight_packing)
        per_request = self.max_model_len + 1 + lookahead
        min_blocks = -(-per_request // config.block_size)
        num_blocks = config.num_blocks or max(2 * min_blocks,
                                              scheduler_config.max_running * -(-per_request // (4 * config.block_size)))
        if num_blocks < min_blocks:
            raise UserError(f"--num-blocks {num_blocks} cannot hold one request of {per_request} tokens "
                            f"({min_blocks} blocks of {config.block_size})")
        self.blocks = BlockManager(num_blocks, config.block_size)
        # K/V are stored in the dtype attention computes in (on CPU, bf16 with AMX, else fp32):
        # a step then gathers them without converting the whole context every layer.
        self.cache = KVCache(model_cfg.num_hidden_layers, num_blocks, config.block_size,
                             model_cfg.num_key_value_heads, model_cfg.head_size, self.model.attention_dtype,
                             self.device)
        self.scheduler = Scheduler(scheduler_config, self.blocks)
        self.metrics = EngineMetrics()
        self.speculating = spec.enabled
        if spec.enabled:
            from specgauge.engine.speculative.build import build_speculation

            self.runner, self.controller = build_speculation(spec, self.model, self.cache, self.blocks,
                                                             self.device, config.torch_dtype, config.weight_packing)
            self.metrics.enable_speculation(spec.max_drafts)
        else:
            self.runner, self.controller = ModelRunner(self.model, self.cache, self.blocks), NoSpeculation()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._outbox: list[tuple[Sink, StreamEvent]] = []

    # -- any thread ---------------------------------------------------------------------
    def new_request_id(self, prefix: str = "req") -> str:
        """A fresh id no caller can guess or squat (uuid4)."""
        return f"{prefix}-{uuid.uuid4().hex}"

    def submit(self, request_id: str, prompt_ids: list[int], params: SamplingParams, sink: Sink) -> None:
        """Queue a request; its events go to ``sink``.

        A plain sink is called in the engine thread. A sink with a ``loop`` attribute (an asyncio
        loop) is called on that loop: the engine hands each loop one batch per step.

        Raises ValueError when prompt + ``max_tokens`` exceed the context (the server checks first).
        """
        if not prompt_ids or len(prompt_ids) + params.max_tokens > self.max_model_len:
            raise ValueError(f"{len(prompt_ids)} prompt tokens + {params.max_tokens} new tokens do not fit "
                             f"the context of {self.max_model_len}")
        text_state = TextState(self.tokenizer, params.stop, context_ids=prompt_ids)
        request = Request(request_id, list(prompt_ids), params, eos_token_ids=self.tokenizer.eos_token_ids,
                          text_state=text_state, user_data=sink)
        self._inbox.put(("add", request))

    def abort(self, request_id: str) -> None:
        """Cancel a request (client went away); its KV blocks are freed before the next step."""
        self._inbox.put(("abort", request_id))

    def call(self, fn: Callable[["Engine"], object], timeout: float = 30.0) -> object:
        """Run ``fn(engine)`` in the engine thread between steps and return its result."""
        if self._thread is None or not self._thread.is_alive():
            return fn(self)
        future: Future = Future()
        self._inbox.put(("call", (fn, future)))
        return future.result(timeout)

    def check_integrity(self) -> None:
        """Assert the KV pool is consistent (run in the engine thread)."""
        self.call(lambda engine: engine.blocks.check_integrity())

    def kv_audit(self) -> dict:
        """The KV pool checked whole in the engine thread (``BlockManager.check_integrity``: free +
        used == total, every ref count exact): its counts, and ``error`` when the check failed."""
        def audit(engine: "Engine") -> dict:
            blocks = engine.blocks
            owned = {block for table in blocks.tables.values() for block in table.blocks}
            counts = {"kv_blocks_total": blocks.num_blocks, "kv_blocks_free": blocks.num_free_blocks,
                      "kv_blocks_used": len(owned), "requests_holding_blocks": len(blocks.tables),
                      "num_running_reqs": len(engine.scheduler.running),
                      "num_waiting_reqs": len(engine.scheduler.waiting)}
            try:
                blocks.check_integrity()
            except Exception as exc:  # noqa: BLE001 -- reported, not raised: this is a probe
                return {**counts, "whole": False, "error": str(exc)}
            return {**counts, "whole": True, "error": None}

        return self.call(audit)

    def snapshot(self) -> dict:
        """Counters for /server_info (read without locking: plain ints)."""
        return {
            "num_running_reqs": len(self.scheduler.running),
            "num_waiting_reqs": len(self.scheduler.waiting),
            "kv_blocks_total": self.blocks.num_blocks,
            "kv_blocks_free": self.blocks.num_free_blocks,
            "kv_block_size": self.blocks.block_size,
            "num_preemptions": self.scheduler.num_preemptions,
            "max_model_len": self.max_model_len,
            "max_running_requests": self.config.scheduler.max_running,
            "max_tokens_per_step": self.config.scheduler.max_tokens_per_step,
            "last_step_time_s": self.metrics.last_step_time,
            "steps": self.metrics.steps,
            # null while speculation is off (--speculative-algorithm NONE)
            "speculative_algorithm": self.config.speculative.algorithm if self.speculating else None,
            "avg_spec_accept_length": self.metrics.avg_spec_accept_length() if self.speculating else None,
            **(self.metrics.spec_snapshot(self.controller) if self.speculating else {}),
        }

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="specgauge-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._inbox.put(("wake", None))
        if self._thread is not None:
            self._thread.join(timeout=30)

    # -- the engine thread --------------------------------------------------------------
    def step(self) -> list[RequestUpdate]:
        """One scheduling step; returns what changed for which request.

        The controller chooses the step's k (0 without speculation), the scheduler reserves the
        KV slots its drafts need, the runner returns the outputs and, speculating, a report of the
        step, which goes to the metrics and back to the controller."""
        start = time.perf_counter()
        k = self.controller.choose(self.scheduler.num_active, self.scheduler.longest_context)
        batch = self.scheduler.schedule(lookahead=self.runner.slots_needed(k))
        if not batch:
            return []
        try:
            outputs, report = self.runner.run(batch, k) if batch.seqs else ([], None)
        except RequestError as exc:
            if not set(exc.request_ids) & {seq.request.request_id for seq in batch.seqs}:
                raise  # blames no request of this step: a failure of the step (all its requests fail)
            return self._isolate_failure(batch, exc)
        updates = self.scheduler.postprocess(batch, outputs)
        elapsed = time.perf_counter() - start
        self.metrics.observe_step(elapsed, batch, updates)
        if report is not None:
            self.metrics.observe_spec(report, record_verifies(report.verdicts, updates))
            self.controller.observe(report, elapsed)
        return updates

    def _isolate_failure(self, batch: ScheduledBatch, exc: RequestError) -> list[RequestUpdate]:
        """A step failed because of some requests: they fail with the error; the others go back
        to the front of the queue with their output kept, and their step is redone (from freshly
        recomputed KV, so nothing the failed step half-wrote is read)."""
        culprits = set(exc.request_ids)
        log.warning("request(s) %s failed in a step: %s", ", ".join(sorted(culprits)), exc)
        for seq in batch.seqs:
            if seq.request.request_id in culprits:
                self._fail(seq.request, f"request failed: {exc}")
        self.scheduler.retry([seq.request for seq in batch.seqs if seq.request.request_id not in culprits])
        return self.scheduler.postprocess(ScheduledBatch([], batch.rejected), [])

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.drain_inbox(block=not self.scheduler.has_work)
                if self.scheduler.has_work:
                    for update in self.step():
                        self._emit(update.request, update.text_delta, update.new_token_ids, update.finished)
                self.metrics.set_queues(len(self.scheduler.running), len(self.scheduler.waiting))
            except Exception as exc:  # a bug must fail the requests in flight, not the server
                log.error("engine step failed:\n%s", traceback.format_exc())
                self._fail_all(f"engine error: {type(exc).__name__}: {exc}")
            self._flush()
        self._fail_all("server shutting down")
        self._flush()

    def drain_inbox(self, block: bool) -> None:
        """Apply what other threads sent (submit, abort, call) to the scheduler. The engine thread
        calls it between steps; a caller that steps the engine itself (``step``, no thread) calls it
        to admit what it submitted. ``block``: wait up to 0.5 s for the first command."""
        try:
            item = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            kind, payload = item
            if kind == "add":
                self.scheduler.add(payload)
                self.metrics.on_arrival(len(payload.prompt_ids))
            elif kind == "abort":
                request = self.scheduler.abort(payload)
                if request is not None:
                    self._emit(request, "", [], True)
            elif kind == "call":
                fn, future = payload
                try:
                    future.set_result(fn(self))
                except Exception as exc:
                    future.set_exception(exc)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _fail_all(self, message: str) -> None:
        for request in list(self.scheduler.running) + list(self.scheduler.waiting):
            self._fail(request, message)

    def _fail(self, request: Request, message: str) -> None:
        """End ``request`` with an error event; its blocks are freed at once."""
        self.scheduler.abort(request.request_id)
        request.finish_reason = "error"
        self._emit(request, "", [], True, error=message)

    def _flush(self) -> None:
        """Hand this iteration's events over: one ``call_soon_threadsafe`` per event loop, not per event."""
        if not self._outbox:
            return
        pending, self._outbox = self._outbox, []
        by_loop: dict = {}
        for sink, event in pending:
            loop = getattr(sink, "loop", None)
            if loop is None:
                sink(event)
            else:
                by_loop.setdefault(loop, []).append((sink, event))
        for loop, pairs in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, pairs)
            except RuntimeError:
                pass  # that event loop is closed (server shut down)

    def _emit(self, request: Request, text: str, tokens: list[int], finished: bool, error: str | None = None) -> None:
        if finished:
            self.metrics.on_finish(request.finish_reason or "abort")
        spec = None
        if self.speculating:
            stats = request.spec_stats or SpecStats()
            spec = stats.meta_info(len(request.output_ids))
        self._outbox.append((request.user_data, StreamEvent(request.request_id, text, tuple(tokens), len(request.prompt_ids), len(request.output_ids),
                         finished, request.finish_reason if finished else None,
                         request.matched_stop if finished else None, error, spec)))


def _deliver(pairs: list[tuple[Sink, StreamEvent]]) -> None:
    for sink, event in pairs:
        sink(event)
