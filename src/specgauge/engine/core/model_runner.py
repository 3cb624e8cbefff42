"""Runs a scheduled batch through the model: flat ragged layout → one cached forward → sampling.

A speculative runner later replaces :meth:`ModelRunner.run` with draft-then-verify; it returns
the same :class:`~specgauge.engine.core.scheduler.SeqOutput` list with several tokens per request.
"""

from __future__ import annotations

from itertools import groupby

import torch

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.kv_cache import ForwardBatch, KVCache, build_group, width_bucket
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


class ModelRunner:
    """Owns the model and the KV pool; turns scheduled sequences into new tokens."""

    def __init__(self, model: LlamaForCausalLM, cache: KVCache, blocks: BlockManager) -> None:
        self.model = model
        self.cache = cache
        self.blocks = blocks
        self.device = model.model.embed_tokens.weight.device

    def _group_key(self, seq: ScheduledSeq) -> tuple[int, int]:
        return seq.num_new, width_bucket(len(self.blocks.table(seq.request.request_id).blocks))

    def layout_order(self, seqs: list[ScheduledSeq]) -> list[ScheduledSeq]:
        """The order in which :meth:`build_forward_batch` lays the sequences' tokens out."""
        return sorted(seqs, key=self._group_key)

    def build_forward_batch(self, seqs: list[ScheduledSeq]) -> tuple[ForwardBatch, list[ScheduledSeq]]:
        """Lay the sequences out flat, grouped by their number of new tokens and, among those, by
        :func:`width_bucket` of their block tables.

        Returns the batch and the sequences in the order of ``logit_indices`` (those that sample).
        """
        ordered = self.layout_order(seqs)
        input_ids: list[int] = []
        positions, slots, groups = [], [], []
        logit_indices: list[int] = []
        sampling_seqs: list[ScheduledSeq] = []
        for (q_len, _), members in groupby(ordered, key=self._group_key):
            members = list(members)
            token_start = len(input_ids)
            for seq in members:
                input_ids.extend(seq.request.token_ids(seq.start, seq.start + seq.num_new))
            group, group_positions, group_slots = build_group(
                token_start, q_len, [s.start for s in members],
                [self.blocks.table(s.request.request_id).blocks for s in members],
                self.blocks.block_size, self.device, self.model.attention_dtype)
            groups.append(group)
            positions.append(group_positions)
            slots.append(group_slots)
            for i, seq in enumerate(members):
                if seq.samples:
                    logit_indices.append(token_start + (i + 1) * q_len - 1)
                    sampling_seqs.append(seq)
        batch = ForwardBatch(
            input_ids=torch.tensor(input_ids, dtype=torch.long, device=self.device),
            positions=torch.cat(positions).to(self.device),
            write_slots=torch.cat(slots).to(self.device),
            groups=groups,
            logit_indices=torch.tensor(logit_indices, dtype=torch.long, device=self.device),
        )
        return batch, sampling_seqs

    @torch.inference_mode()
    def run(self, batch: ScheduledBatch) -> list[SeqOutput]:
        """One forward over the batch; every sequence that reached its end gets one sampled token."""
        forward_batch, sampling_seqs = self.build_forward_batch(batch.seqs)
        logits, _ = self.model.forward_cached(forward_batch, self.cache)  # (M, V)
        return self.sampled_outputs(batch, sampling_seqs, logits)

    def sampled_outputs(self, batch: ScheduledBatch, sampling_seqs: list[ScheduledSeq],
                        logits: torch.Tensor) -> list[SeqOutput]:
        """One token sampled from ``logits`` (rows in ``sampling_seqs`` order) per sampling sequence."""
        tokens: dict[int, int] = {}
        if sampling_seqs:
            for seq in sampling_seqs:
                ensure_generator(seq.request, self.device)
            picked = sample_requests(logits, [s.request for s in sampling_seqs])
            tokens = {id(seq): token for seq, token in zip(sampling_seqs, picked)}
        return [SeqOutput([tokens[id(seq)]] if id(seq) in tokens else [], seq.num_new) for seq in batch.seqs]
