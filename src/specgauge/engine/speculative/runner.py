"""The speculative step: draft → verify in one target forward → accept → roll back.

:meth:`SpeculativeRunner.run` takes a batch and ``k`` and returns the step's outputs and its
:class:`~specgauge.engine.speculative.step_report.StepReport`. For every decoding request (one
pending token, with the draft slots ``k`` needs reserved by the scheduler) the drafter proposes
a chain or tree; the target runs root + drafts — beside the step's prefill chunks — in one
``forward_cached`` with a tree mask where needed; each request accepts a ragged number of
tokens; a tree's accepted path is compacted in the target's KV (``KVCache.copy_slots``); and the
returned :class:`SeqOutput` (tokens, ``num_kv_kept = 1 + accepted``) lets ``postprocess`` set
``num_computed`` and free the blocks past it. The drafter is told the target features of the
kept positions (EAGLE-3 needs them; the n-gram drafter ignores them).
"""

from __future__ import annotations

import time

import torch

from specgauge.engine.core.batch_layout import Segment, lay_out
from specgauge.engine.core.model_runner import ModelRunner, ensure_generator, sample_requests
from specgauge.engine.core.sampling import greedy_tokens, probabilities
from specgauge.engine.core.scheduler import RequestError, ScheduledBatch, ScheduledSeq, SeqOutput
from specgauge.engine.speculative.step_report import StepReport
from specgauge.engine.speculative.tree import DraftTree
from specgauge.engine.speculative.verify import Verdict, accept_greedy, accept_sampled


def is_decode(seq: ScheduledSeq) -> bool:
    """A decode step: one pending token that is the request's last output (not a prompt's tail)."""
    return seq.num_new == 1 and seq.samples and bool(seq.request.output_ids)


class SpeculativeRunner(ModelRunner):
    """A :class:`ModelRunner` whose decode steps draft and verify (see the module docstring)."""

    def __init__(self, model, cache, blocks, drafter, accept_bias: float = 1.0) -> None:
        super().__init__(model, cache, blocks)
        self.drafter = drafter
        self.accept_bias = accept_bias   # a testing fault above 1 (verify.accept_sampled); 1: correct

    def slots_needed(self, k: int) -> int:
        """KV slots a decoding request needs beyond its next token for ``k`` drafts (the drafter's)."""
        return self.drafter.slots_needed(k)

    def drafts_allowed(self, seq: ScheduledSeq, k: int) -> int:
        """Drafts this sequence may get: 0 unless it is decoding with its slots reserved; never
        more than the tokens ``max_tokens`` still allows after the one every step emits."""
        request = seq.request
        if k <= 0 or seq.num_new != 1 or not seq.samples:
            return 0
        if self.blocks.num_tokens(request.request_id) < seq.start + 1 + self.drafter.slots_needed(k):
            return 0
        left = request.params.max_tokens - len(request.output_ids) - 1
        if self.drafter.is_tree:
            return k if left >= self.drafter.num_steps else 0
        return max(0, min(k, left))

    @torch.inference_mode()
    def run(self, batch: ScheduledBatch, k: int) -> tuple[list[SeqOutput], StepReport]:
        """Draft up to ``k`` tokens per decoding request, verify them in one forward beside the
        prefill chunks, accept; ``k`` = 0 runs a plain step. Returns the outputs (one per
        scheduled sequence) and the step's report."""
        if k <= 0:
            return self._run_plain(batch)
        start = time.perf_counter()
        decode = [(seq, self.drafts_allowed(seq, k)) for seq in batch.seqs if is_decode(seq)]
        trees, catch_up, ineligible = self._draft(decode)
        draft_seconds = time.perf_counter() - start
        segments = [self._segment(seq, trees.get(id(seq))) for seq in batch.seqs]
        layout = lay_out(segments, self.blocks, self.device, self.model.attention_dtype)
        logits, aux = self.model.forward_cached(layout.batch, self.cache, aux_layers=self.drafter.aux_layers)
        features = self.drafter.features(aux) if aux else None  # (N, 3H)
        verdicts = self._accept(batch.seqs, segments, layout.logit_offsets, trees, logits)
        outputs, figures = self._keep(batch.seqs, layout.offsets, trees, verdicts, features)
        report = StepReport(k=k, draft_seconds=draft_seconds,
                            verify_seconds=time.perf_counter() - start - draft_seconds,
                            decoding=len(decode), pure_decode=len(decode) == len(batch.seqs),
                            catch_up=catch_up, verdicts=figures, ineligible=ineligible)
        return outputs, report

    def _draft(self, decode: list[tuple[ScheduledSeq, int]]) -> tuple[dict[int, DraftTree], int, frozenset[str]]:
        """The drafter's trees for the decoding sequences (by ``id(seq)``, each with the drafts it
        may get), the draft pairs it caught up first, and the requests it left undrafted because
        their backlog after an off period was not worth catching up."""
        if not decode:
            return {}, 0, frozenset()
        proposal = self.drafter.propose([seq.request for seq, _ in decode], [k for _, k in decode])
        trees = {id(seq): tree for (seq, _), tree in zip(decode, proposal.trees)}
        return trees, proposal.catch_up, frozenset(proposal.skipped)

    def _segment(self, seq: ScheduledSeq, tree: DraftTree | None) -> Segment:
        """``seq``'s rows of the verify forward: its new tokens, then its drafts (if any)."""
        tokens = seq.request.token_ids(seq.start, seq.start + seq.num_new)
        if tree:
            mask = None if tree.is_chain else tree.ancestor_mask()
            depths = None if tree.is_chain else tree.node_depths()
            return Segment(seq.request.request_id, seq.start, tokens + list(tree.tokens),
                           list(range(len(tree) + 1)), mask, depths)
        return Segment(seq.request.request_id, seq.start, tokens, [seq.num_new - 1] if seq.samples else [],
                       prompt_rows=self.prompt_rows(seq))

    def _keep(self, seqs: list[ScheduledSeq], offsets: tuple[int, ...], trees: dict[int, DraftTree],
              verdicts: dict[int, Verdict], features: torch.Tensor | None
              ) -> tuple[list[SeqOutput], dict[str, tuple[int, int]]]:
        """Keep each sequence's accepted rows: compact a tree's path in the KV, tell the drafter
        the kept rows' features (``seq``'s rows start at ``offsets[i]``). Returns the outputs and,
        per decoding request, (proposed, accepted)."""
        outputs, figures = [], {}
        for seq, offset in zip(seqs, offsets):
            verdict = verdicts[id(seq)]
            tree = trees.get(id(seq))
            if tree:
                kept_rows = [0, *verdict.accepted_nodes]
                self._compact(seq, kept_rows)
                figures[seq.request.request_id] = (len(tree), verdict.num_accepted)
                outputs.append(SeqOutput(list(verdict.tokens), 1 + verdict.num_accepted))
            else:
                kept_rows = list(range(seq.num_new))
                if is_decode(seq):
                    figures[seq.request.request_id] = (0, 0)
                outputs.append(SeqOutput(list(verdict.tokens), seq.num_new))
            if features is not None:
                if tree and kept_rows != list(range(len(kept_rows))):  # a tree's path: gather its rows
                    rows = torch.tensor([offset + r for r in kept_rows], device=self.device)
                    self.drafter.observe(seq.request, features.index_select(0, rows))
                else:  # a chain prefix or a plain step: consecutive rows, a view (no copy)
                    self.drafter.observe(seq.request, features[offset:offset + len(kept_rows)])
        return outputs, figures

    def _run_plain(self, batch: ScheduledBatch) -> tuple[list[SeqOutput], StepReport]:
        """A step with speculation off: the plain runner's layout, forward and sampling, plus the
        target features the drafter will need. The drafter does nothing: EAGLE-3's pending
        features pile up and its next catch-up forward covers every token decoded meanwhile.
        (The plain layout, not the speculative segments and verdicts: a step at k = 0 costs what a
        plain engine's step costs.)"""
        start = time.perf_counter()
        layout = self.lay_out(batch.seqs)
        logits, aux = self.model.forward_cached(layout.batch, self.cache, aux_layers=self.drafter.aux_layers)
        outputs = self.sampled_outputs(batch, logits)
        features = self.drafter.features(aux) if aux else None  # (N, 3H)
        figures = {}
        for seq, offset in zip(batch.seqs, layout.offsets):
            if features is not None:
                self.drafter.observe(seq.request, features[offset:offset + seq.num_new])
            if is_decode(seq):
                figures[seq.request.request_id] = (0, 0)
        report = StepReport(k=0, verify_seconds=time.perf_counter() - start, decoding=len(figures),
                            pure_decode=len(figures) == len(batch.seqs), verdicts=figures)
        return outputs, report

    def _accept(self, seqs: list[ScheduledSeq], segments: list[Segment], logit_offsets: tuple[int, ...],
                trees: dict[int, DraftTree], logits: torch.Tensor) -> dict[int, Verdict]:
        """Greedy or rejection-sampling acceptance per sequence (its logits rows from
        ``logit_offsets[i]`` on); plain sequences sample one token."""
        verdicts: dict[int, Verdict] = {}
        argmax = greedy_tokens(logits).tolist() if trees else []  # (M,); only verifies read it
        plain = [(seq, row) for seq, seg, row in zip(seqs, segments, logit_offsets)
                 if not trees.get(id(seq)) and seg.logit_rows]
        if plain:
            for seq, _ in plain:
                ensure_generator(seq.request, self.device)
            rows = torch.tensor([row for _, row in plain], device=self.device)
            picked = sample_requests(logits.index_select(0, rows), [s.request for s, _ in plain])
            for (seq, _), token in zip(plain, picked):
                verdicts[id(seq)] = Verdict((), (token,), bonus=False)
        for seq, first in zip(seqs, logit_offsets):
            tree = trees.get(id(seq))
            if not tree:
                verdicts.setdefault(id(seq), Verdict((), (), bonus=False))
                continue
            request = seq.request
            rows = slice(first, first + len(tree) + 1)
            if request.params.greedy:
                verdicts[id(seq)] = accept_greedy(tree, argmax[rows])
            else:
                ensure_generator(request, self.device)
                try:  # a failure here is this request's (its parameters, its random stream)
                    probs = probabilities(logits[rows], [request.params] * (len(tree) + 1))  # (1+M, V)
                    verdicts[id(seq)] = accept_sampled(tree, probs, request.generator, self.accept_bias)
                except Exception as exc:  # noqa: BLE001
                    raise RequestError([request.request_id], f"{type(exc).__name__}: {exc}") from None
        return verdicts

    def _compact(self, seq: ScheduledSeq, kept_rows: list[int]) -> None:
        """Move the accepted path's K/V (verify rows ``kept_rows``) to consecutive positions."""
        if kept_rows == list(range(len(kept_rows))):
            return  # a chain prefix: already in place
        rid = seq.request.request_id
        src = [self.blocks.slot(rid, seq.start + r) for r in kept_rows]
        dst = [self.blocks.slot(rid, seq.start + i) for i in range(len(kept_rows))]
        self.cache.copy_slots(torch.tensor(src, device=self.device), torch.tensor(dst, device=self.device))
