"""The frozen target's outputs for every regenerated sample, computed once before training.

The target never changes while the head trains, so its features and its distribution of the
next token over the draft vocabulary are the same every time a sample is drawn (SpecForge's
"offline" mode; its "online" mode recomputes them per batch). Computing them once takes one
target pass per sample; every later step costs only the head. Per sample this keeps:

- ``aux`` (T, 3H): the concatenated inputs of the aux layers, in ``dtype`` (bf16 by default);
- ``top_values`` / ``top_ids`` (T, k): the target's ``k`` largest logits over the draft
  vocabulary and their draft ids — the teacher of the soft cross-entropy, truncated to its top
  ``k`` (with k = the draft vocabulary it is the whole teacher);
- ``greedy`` (T,): the target's argmax over its full vocabulary (what a drafted token must equal).

:func:`padded` turns a batch of them into the dense tensors :func:`specgauge.train.ttt.unrolled_loss_from`
reads, padded as :func:`specgauge.train.draft.pad_batch` pads the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from specgauge.engine.models.eagle3 import Eagle3Head, target_features
from specgauge.engine.models.llama import LlamaForCausalLM

# A logit outside the stored top-k: finite, so that a padded row (every entry this value) gives a
# uniform teacher rather than NaN, and far enough below any real logit that exp() is 0 in float32.
OUTSIDE_TOP_K = -1e4


@dataclass(frozen=True)
class SampleOutputs:
    """The target's outputs over one sample of T tokens (module doc)."""

    aux: torch.Tensor  # (T, 3H)
    top_values: torch.Tensor  # (T, k) float32
    top_ids: torch.Tensor  # (T, k) draft ids
    greedy: torch.Tensor  # (T,) target ids

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.aux, self.top_values, self.top_ids, self.greedy))


def teacher_and_greedy(head: Eagle3Head, target_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(…, V) target logits → the teacher over the draft vocabulary (…, Vd) and the target's argmax (…,)."""
    return head.target_to_draft_logits(target_logits).float(), target_logits.argmax(-1)


@torch.no_grad()
def compute_outputs(target: LlamaForCausalLM, head: Eagle3Head, samples: Sequence[torch.Tensor], top_k: int,
                    dtype: torch.dtype = torch.bfloat16, bf16: bool = True, tokens_per_pass: int = 4096,
                    on_done: Callable[[int], None] | None = None) -> list[SampleOutputs]:
    """The target's outputs for each token sequence of ``samples`` (each (T,)), in their order.

    Samples go through the target in groups of similar length (at most ``tokens_per_pass``
    padded tokens a pass); right padding does not change a causal model's outputs at the real
    positions. ``bf16``: the same autocast as the online training step. ``on_done(n)`` after each
    pass with the samples it finished."""
    k = min(top_k, head.config.draft_vocab_size)
    id_dtype = torch.int16 if head.config.draft_vocab_size <= torch.iinfo(torch.int16).max else torch.int32
    order = sorted(range(len(samples)), key=lambda i: samples[i].numel())
    results: list[SampleOutputs | None] = [None] * len(samples)
    start = 0
    while start < len(order):
        longest = samples[order[start]].numel()
        group = [order[start]]
        while start + len(group) < len(order):
            nxt = samples[order[start + len(group)]].numel()
            if max(longest, nxt) * (len(group) + 1) > tokens_per_pass:
                break
            group.append(order[start + len(group)])
            longest = max(longest, nxt)
        ids = torch.zeros((len(group), longest), dtype=torch.long)
        for row, index in enumerate(group):
            ids[row, :samples[index].numel()] = samples[index]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits, aux = target_features(target, ids, head.config.aux_layers)  # (b, T, V), (b, T, 3H)
        teacher, greedy = teacher_and_greedy(head, logits.float())
        values, top = teacher.topk(k, dim=-1)  # (b, T, k)
        for row, index in enumerate(group):
            n = samples[index].numel()
            results[index] = SampleOutputs(aux[row, :n].to(dtype).clone(), values[row, :n].clone(),
                                           top[row, :n].to(id_dtype).clone(),
                                           greedy[row, :n].to(torch.int32).clone())
        start += len(group)
        if on_done:
            on_done(len(group))
    return [r for r in results if r is not None]


def padded(outputs: Sequence[SampleOutputs], length: int, draft_vocab_size: int
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch's dense aux (B, T, 3H) float32, teacher logits (B, T, Vd) float32 (entries outside
    each row's top-k and padding at :data:`OUTSIDE_TOP_K`) and greedy ids (B, T), padded to ``length``."""
    width = outputs[0].aux.shape[-1]
    aux = torch.zeros((len(outputs), length, width), dtype=torch.float32)
    teacher = torch.full((len(outputs), length, draft_vocab_size), OUTSIDE_TOP_K, dtype=torch.float32)
    greedy = torch.zeros((len(outputs), length), dtype=torch.long)
    for row, out in enumerate(outputs):
        n = out.aux.shape[0]
        aux[row, :n] = out.aux.float()
        teacher[row, :n].scatter_(-1, out.top_ids.long(), out.top_values)
        greedy[row, :n] = out.greedy.long()
    return aux, teacher, greedy


# -- kept on disk ----------------------------------------------------------------------------
# A run's target outputs take the target a pass over every sample (40 minutes for 4,000 samples on
# two cores); kept in the run directory, a resumed or continued run on the same machine reads them
# back. A folder is used only when everything that decides its contents is the same (``outputs_key``).

def outputs_key(target_digest: str, head: Eagle3Head, samples: Sequence[torch.Tensor], top_k: int,
                dtype: torch.dtype, bf16: bool) -> dict:
    """What decides a list of outputs: the target's weights, the head's aux layers and vocabulary
    map, the samples' tokens, the teacher's top-k, the kept dtype and the autocast."""
    import hashlib

    tokens = hashlib.sha256()
    for ids in samples:
        tokens.update(ids.to(torch.int32).numpy().tobytes())
        tokens.update(b"|")
    return {"target_sha256": target_digest, "aux_layers": list(head.config.aux_layers),
            "vocab_map_sha256": hashlib.sha256(head.d2t.to(torch.int64).numpy().tobytes()).hexdigest(),
            "samples_sha256": tokens.hexdigest(), "num_samples": len(samples),
            "top_k": min(top_k, head.config.draft_vocab_size), "dtype": str(dtype), "bf16": bf16}


def _files(folder: Path, name: str) -> tuple[Path, Path]:
    return folder / f"{name}.json", folder / f"{name}.pt"


def has_saved(folder: Path, name: str, key: dict) -> bool:
    """Whether ``folder`` holds outputs ``name`` made as ``key`` says."""
    import json

    meta, data = _files(Path(folder), name)
    return meta.is_file() and data.is_file() and json.loads(meta.read_text()) == key


def save_outputs(folder: Path, name: str, key: dict, outputs: Sequence[SampleOutputs]) -> None:
    """Write ``outputs`` as ``folder/name.pt`` (each field concatenated over samples, with their
    lengths) and ``key`` as ``folder/name.json``, the key last: a file cut short is never read back."""
    import json

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    meta, data = _files(folder, name)
    meta.unlink(missing_ok=True)
    torch.save({"lengths": torch.tensor([o.greedy.numel() for o in outputs]),
                **{field: torch.cat([getattr(o, field) for o in outputs]) for field in
                   ("aux", "top_values", "top_ids", "greedy")}}, data)
    meta.write_text(json.dumps(key, indent=2))


def load_outputs(folder: Path, name: str) -> list[SampleOutputs]:
    """What :func:`save_outputs` wrote (check :func:`has_saved` first)."""
    saved = torch.load(_files(Path(folder), name)[1], map_location="cpu", weights_only=True)
    lengths = saved["lengths"].tolist()
    parts = {field: saved[field].split(lengths) for field in ("aux", "top_values", "top_ids", "greedy")}
    return [SampleOutputs(*(parts[field][i] for field in ("aux", "top_values", "top_ids", "greedy")))
            for i in range(len(lengths))]
