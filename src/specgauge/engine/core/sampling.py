"""Sampling parameters and the batched sampler: greedy, temperature, top-k, top-p, per-request seed."""

from __future__ import annotations

import random

import torch

from specgauge.engine.core.sampling_params import SamplingParams

__all__ = ["SamplingParams", "SamplingError", "make_generator", "sample", "probabilities", "greedy_tokens"]


class SamplingError(Exception):
    """Sampling failed for some rows of a batch (their parameters); ``rows`` says which."""

    def __init__(self, rows: list[int], message: str) -> None:
        super().__init__(message)
        self.rows = rows


def _rows_at_fault(count: int, attempt) -> SamplingError:
    """Redo a batched computation one row at a time: the rows whose own attempt raises."""
    rows, message = [], ""
    for row in range(count):
        try:
            attempt(row)
        except Exception as exc:  # noqa: BLE001 -- any failure of that row's own computation
            rows.append(row)
            message = message or f"{type(exc).__name__}: {exc}"
    return SamplingError(rows, message)


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """The argmax of each row of ``logits`` (…, V), the first index on a tie — as ``argmax``
    returns it, but from ``max``'s reduction, which torch 2.13's CPU kernels run 4x faster on
    bf16 rows (64 x 49,152: 3.6 ms against 14.8 ms, one thread; equal indices on rows of massive
    ties, one and two threads)."""
    return logits.max(dim=-1).indices


def make_generator(params: SamplingParams, device: torch.device | str) -> torch.Generator | None:
    """The request's own random stream (seeded when it asked for a seed), or None for greedy."""
    if params.greedy:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(params.seed if params.seed is not None else random.randrange(2**63))
    return generator


def sample(logits: torch.Tensor, params: list[SamplingParams],
           generators: list[torch.Generator | None]) -> list[int]:
    """Pick one token per row of ``logits`` (M, V) under each row's parameters.

    Raises :class:`SamplingError` naming the rows whose sampling failed (the others' rows are
    not at fault), so that the engine fails those requests only."""
    choice = greedy_tokens(logits)  # (M,)
    rows = [i for i, p in enumerate(params) if not p.greedy]
    if not rows:
        return choice.tolist()
    try:
        probs, sorted_idx = _sorted_probs(logits[rows], [params[i] for i in rows])
    except Exception:  # noqa: BLE001 -- find the rows whose parameters caused it
        fault = _rows_at_fault(len(rows), lambda r: _sorted_probs(logits[rows[r]:rows[r] + 1], [params[rows[r]]]))
        if not fault.rows:
            raise  # no row fails alone: the batch's failure, not a request's
        raise SamplingError([rows[r] for r in fault.rows], str(fault)) from None
    out = choice.tolist()
    failed, message = [], ""
    for row, i in enumerate(rows):
        try:
            pick = torch.multinomial(probs[row], 1, generator=generators[i])
        except Exception as exc:  # noqa: BLE001 -- this row's distribution or generator
            failed.append(i)
            message = message or f"{type(exc).__name__}: {exc}"
            continue
        out[i] = int(sorted_idx[row, pick])
    if failed:
        raise SamplingError(failed, message)
    return out


def _sorted_probs(logits: torch.Tensor, params: list[SamplingParams]) -> tuple[torch.Tensor, torch.Tensor]:
    """Temperature, top-k and top-p applied to ``logits`` (R, V): probabilities sorted best first
    (R, V) and the token id of each sorted column (R, V)."""
    sub = logits.float()  # (R, V)
    temps = torch.tensor([p.temperature for p in params], device=sub.device).unsqueeze(1)
    sorted_logits, sorted_idx = torch.sort(sub / temps, dim=-1, descending=True)  # (R, V)
    vocab = sub.shape[-1]
    ranks = torch.arange(vocab, device=sub.device).unsqueeze(0)  # (1, V)
    top_k = torch.tensor([p.top_k if p.top_k > 0 else vocab for p in params], device=sub.device).unsqueeze(1)
    drop = ranks >= top_k  # (R, V)
    probs = torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), dim=-1)
    top_p = torch.tensor([p.top_p for p in params], device=sub.device).unsqueeze(1)
    mass_before = probs.cumsum(-1) - probs  # (R, V) probability of strictly better tokens
    drop |= mass_before >= top_p
    drop[:, 0] = False  # always keep the best token
    return torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), dim=-1), sorted_idx


def probabilities(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """The distribution each row of ``logits`` (R, V) is sampled from under its (non-greedy)
    parameters, in vocabulary order (R, V): what speculative verification accepts against.

    Raises :class:`SamplingError` naming the rows at fault."""
    try:
        probs, sorted_idx = _sorted_probs(logits, params)
    except Exception:  # noqa: BLE001 -- find the rows whose parameters caused it
        fault = _rows_at_fault(len(params), lambda r: _sorted_probs(logits[r:r + 1], [params[r]]))
        if not fault.rows:
            raise  # no row fails alone: the batch's failure, not a request's
        raise fault from None
    return torch.zeros_like(probs).scatter_(1, sorted_idx, probs)
