"""Sequence-level unlikelihood training: teach the target not to repeat itself at temperature 0.

Welleck et al., "Neural Text Generation with Unlikelihood Training" (ICLR 2020, arXiv:1908.04319),
section 5.2: continue prefixes greedily with the model being trained, mark every generated token
that belongs to an n-gram already seen earlier in the sequence (prefix included), and lower
those tokens' probability with ``-log(1 - p)``. Alternated with ordinary next-token steps, this
removes greedy loops that more maximum-likelihood training does not.
"""

from __future__ import annotations

import torch

from specgauge.engine.models.llama import LlamaForCausalLM
from specgauge.train.greedy import greedy_batch

NGRAM = 4  # the paper's n


def repeated_ngram_mask(sequence: list[int], start: int, n: int = NGRAM) -> list[bool]:
    """For each token of ``sequence[start:]``: does it belong to an n-gram that occurred, whole,
    earlier in ``sequence``? (The n-gram ``sequence[i:i+n]`` repeats when the same n tokens
    appear at some j < i.)"""
    seen: set[tuple[int, ...]] = set()
    marked = [False] * len(sequence)
    for i in range(len(sequence) - n + 1):
        gram = tuple(sequence[i : i + n])
        if gram in seen:
            for j in range(i, i + n):
                marked[j] = True
        seen.add(gram)
    return marked[start:]


def stopped_mask(continuation: list[int], stop_ids: set[int]) -> list[bool]:
    """True up to and including the first stop token, False after it (tokens past a stop are never served)."""
    keep, alive = [], True
    for token in continuation:
        keep.append(alive)
        if token in stop_ids:
            alive = False
    return keep


def continue_and_mark(model: LlamaForCausalLM, prefixes: torch.Tensor, stop_ids: set[int],
                      steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Continue ``prefixes`` (B, P) greedily for ``steps`` tokens; return the sequences (B, P + steps)
    and which generated tokens (B, steps) sit in a repeated n-gram before the first stop token."""
    was_training = model.training
    model.eval()
    continuation = greedy_batch(model, prefixes, steps)  # (B, L)
    model.train(was_training)
    sequences = torch.cat([prefixes, continuation], dim=1)  # (B, P + L)
    start = prefixes.shape[1]
    marks = []
    for row in sequences.tolist():
        served = stopped_mask(row[start:], stop_ids)
        marks.append([r and s for r, s in zip(repeated_ngram_mask(row, start), served)])
    return sequences, torch.tensor(marks, dtype=torch.bool)


def unlikelihood_of(model: LlamaForCausalLM, sequences: torch.Tensor, start: int, mask: torch.Tensor,
                    bf16: bool) -> torch.Tensor:
    """Mean ``-log(1 - p(token))`` over the tokens of ``sequences[:, start:]`` where ``mask`` (B, L) is
    set (0 when none is)."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits, _ = model(sequences[:, :-1])  # (B, T - 1, V); position t predicts token t + 1
    logits = logits[:, start - 1 :].float()  # (B, L, V): the predictions of the tokens from start on
    log_p = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, start:].unsqueeze(-1)).squeeze(-1)  # (B, L)
    losses = -torch.log((1.0 - log_p.exp()).clamp(min=1e-5))
    return (losses * mask).sum() / max(int(mask.sum()), 1)


def unlikelihood_loss(model: LlamaForCausalLM, prefixes: torch.Tensor, stop_ids: set[int], steps: int,
                      bf16: bool) -> torch.Tensor:
    """The unlikelihood loss of ``model``'s own greedy continuations of ``prefixes`` (B, P)."""
    sequences, mask = continue_and_mark(model, prefixes, stop_ids, steps)
    return unlikelihood_of(model, sequences, prefixes.shape[1], mask, bf16)
