"""Read the tokenized corpus (``<split>/<source>/shard-*.jsonl``) and pack it for language-model training."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch


def iter_samples(source_dir: Path) -> Iterator[tuple[list[int], list[int]]]:
    """Stream ``(input_ids, loss_mask)`` of every sample in a source directory, shard by shard."""
    shards = sorted(Path(source_dir).glob("shard-*.jsonl"))
    if not shards:
        raise FileNotFoundError(f"no shard-*.jsonl in {source_dir}")
    for shard in shards:
        with shard.open() as handle:
            for line in handle:
                record = json.loads(line)
                ids = record["input_ids"]
                yield ids, record.get("loss_mask", [1] * len(ids))


def read_meta(source_dir: Path) -> dict:
    """The ``meta.json`` beside a source's shards."""
    return json.loads((Path(source_dir) / "meta.json").read_text())


@dataclass
class PackedSource:
    """One source's samples concatenated end to end (each starts with its BOS): sequence packing."""

    name: str
    tokens: torch.Tensor  # (N,) int64
    loss_mask: torch.Tensor  # (N,) bool, 1 on assistant-response tokens

    @classmethod
    def load(cls, source_dir: Path, name: str | None = None) -> "PackedSource":
        ids: list[int] = []
        mask: list[int] = []
        for sample_ids, sample_mask in iter_samples(source_dir):
            ids += sample_ids
            mask += sample_mask
        return cls(name or Path(source_dir).name, torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.bool))

    def __len__(self) -> int:
        return self.tokens.numel()

    def window(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``length + 1`` tokens from ``start`` (inputs and shifted targets come from it) and their mask."""
        return self.tokens[start : start + length + 1], self.loss_mask[start : start + length + 1]

    def eval_windows(self, length: int, max_windows: int) -> list[int]:
        """Start offsets of consecutive, non-overlapping evaluation windows."""
        count = min(max_windows, (len(self) - 1) // length)
        return [i * length for i in range(count)]


def load_split(corpus_dir: Path, split: str, sources: tuple[str, ...]) -> dict[str, PackedSource]:
    """``{source: PackedSource}`` for one split of the corpus."""
    out = {}
    for source in sources:
        folder = Path(corpus_dir) / split / source
        if not folder.is_dir():
            raise FileNotFoundError(f"corpus has no {split}/{source} (build it with `specgauge train corpus --tokenizer ...`)")
        out[source] = PackedSource.load(folder, source)
    return out


class BalancedBatches:
    """Random packed windows; each batch row picks its source by ``weights`` (a balanced mix by
    default), so small sources are seen as often as large ones. The generator's state is part of
    a checkpoint, so a resumed run draws the same batches."""

    def __init__(self, sources: dict[str, PackedSource], seq_len: int, batch_size: int, seed: int,
                 weights: dict[str, float] | None = None) -> None:
        self.sources = [sources[name] for name in sorted(sources)]
        for source in self.sources:
            if len(source) <= seq_len + 1:
                raise ValueError(f"source {source.name} has {len(source)} tokens, fewer than one window of {seq_len + 1}")
        raw = [float((weights or {}).get(s.name, 1.0)) for s in self.sources]
        self.weights = torch.tensor(raw) / sum(raw)
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """inputs (B, T), targets (B, T), target loss mask (B, T)."""
        picks = torch.multinomial(self.weights, self.batch_size, replacement=True, generator=self.generator)
        rows, masks = [], []
        for pick in picks.tolist():
            source = self.sources[pick]
            start = int(torch.randint(0, len(source) - self.seq_len - 1, (1,), generator=self.generator))
            tokens, mask = source.window(start, self.seq_len)
            rows.append(tokens)
            masks.append(mask)
        batch = torch.stack(rows)  # (B, T+1)
        mask = torch.stack(masks)  # (B, T+1)
        return batch[:, :-1], batch[:, 1:], mask[:, 1:]

    def state(self) -> torch.Tensor:
        return self.generator.get_state()

    def restore(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)
