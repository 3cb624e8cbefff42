"""Runs a scheduled batch through the model: flat ragged layout → one cached forward → sampling.

Every runner has one step shape, ``run(batch, k) -> (outputs, report)``: the plain runner here
ignores ``k`` and reports nothing (None); the speculative runner
(:class:`~specgauge.engine.speculative.runner.SpeculativeRunner`) drafts up to ``k`` tokens,
verifies them and returns a :class:`~specgauge.engine.speculative.step_report.StepReport`. Beside
it, :class:`NoSpeculation` is the controller of an engine that does not speculate: it chooses
k = 0 every step, so the engine's step has no branch for speculation being off.
"""

from __future__ import annotations

import torch

from specgauge.engine.core.batch_layout import BatchLayout, Segment, lay_out
from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.kv_cache import KVCache
from specgauge.engine.models.llama import LlamaForCausalLM
from specgauge.engine.core.sampling import SamplingError, make_generator, sample
from specgauge.engine.core.scheduler import Request, RequestError, ScheduledBatch, ScheduledSeq, SeqOutput


def ensure_generator(request: Request, device: torch.device) -> None:
    """Give a sampled request its random stream once; a failure is that request's alone."""
    if request.generator is None and not request.params.greedy:
        try:
            request.generator = make_generator(request.params, device)
        except Exception as exc:  # noqa: BLE001 -- its seed or device: fail this request only
            raise RequestError([request.request_id], f"{type(exc).__name__}: {exc}") from None


def sample_requests(logits: torch.Tensor, requests: list[Request]) -> list[int]:
    """One token per row of ``logits`` (M, V) for ``requests`` (one per row); a failure names
    the requests whose rows caused it (:class:`RequestError`)."""
    try:
        return sample(logits, [r.params for r in requests], [r.generator for r in requests])
    except SamplingError as exc:
        raise RequestError([requests[row].request_id for row in exc.rows], str(exc)) from None


class NoSpeculation:
    """The controller of a plain engine: k = 0 every step, nothing to learn, never drafting."""

    current_k = 0
    mode = "plain"

    def choose(self, num_active: int, context_length: int = 1) -> int:
        return 0

    def observe(self, report, seconds: float) -> None:
        """Nothing to learn (a plain runner reports nothing; the engine passes its None)."""


class ModelRunner:
    """Owns the model and the KV pool; turns scheduled sequences into new tokens."""

    def __init__(self, model: LlamaForCausalLM, cache: KVCache, blocks: BlockManager) -> None:
        self.model = model
        self.cache = cache
        self.blocks = blocks
        self.device = model.model.embed_tokens.weight.device

    def lay_out(self, seqs: list[ScheduledSeq]) -> BatchLayout:
        """The flat ragged layout (:func:`lay_out`) of the sequences' new tokens, one segment per
        sequence in order; a sequence that samples wants its last new token's logits."""
        return lay_out([Segment(seq.request.request_id, seq.start, seq.request.token_ids(seq.start, seq.start + seq.num_new),
                                [seq.num_new - 1] if seq.samples else [],
                                prompt_rows=self.prompt_rows(seq)) for seq in seqs],
                       self.blocks, self.device, self.model.attention_dtype)

    def prompt_rows(self, seq: ScheduledSeq) -> int:
        """How many of ``seq``'s new tokens a batch-invariant model attends as prompt rows (in
        position-aligned blocks); 0 for a model that is not batch-invariant (it attends every group
        as one call, so grouping prompt rows apart would gain nothing)."""
        return seq.request.prompt_rows(seq.start, seq.num_new) if self.model.batch_invariant else 0

    def slots_needed(self, k: int) -> int | None:
        """KV slots a decoding request needs beyond its next token for ``k`` drafts: None, the
        scheduler's configured lookahead (a plain step drafts nothing)."""
        return None

    @torch.inference_mode()
    def run(self, batch: ScheduledBatch, k: int = 0) -> tuple[list[SeqOutput], None]:
        """One forward over the batch; every sequence that reached its end gets one sampled token
        (``k`` is ignored: nothing is drafted; no report)."""
        logits, _ = self.model.forward_cached(self.lay_out(batch.seqs).batch, self.cache)  # (M, V)
        return self.sampled_outputs(batch, logits), None

    def sampled_outputs(self, batch: ScheduledBatch, logits: torch.Tensor) -> list[SeqOutput]:
        """One token sampled from ``logits`` (one row per sampling sequence, in batch order) per sampling sequence."""
        sampling_seqs = [seq for seq in batch.seqs if seq.samples]
        tokens: dict[int, int] = {}
        if sampling_seqs:
            for seq in sampling_seqs:
                ensure_generator(seq.request, self.device)
            picked = sample_requests(logits, [s.request for s in sampling_seqs])
            tokens = {id(seq): token for seq, token in zip(sampling_seqs, picked)}
        return [SeqOutput([tokens[id(seq)]] if id(seq) in tokens else [], seq.num_new) for seq in batch.seqs]
