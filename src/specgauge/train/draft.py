"""Train the EAGLE-3 draft head on the target's regenerated responses with training-time test.

The target is frozen; each batch row is a weighted choice of source (``weights``) and a random
regenerated conversation of it, whole (positions from 0, as the engine serves it), right-padded
to the longest row; the loss is on the regenerated responses only. The target's features
and its teacher distribution are computed once per sample before the first step and kept
(``cache_target``, :mod:`specgauge.train.target_outputs`), or on the fly per batch (SpecForge's
"online" mode). Resumable like the target
trainer: ``run_dir/draft_checkpoint.pt`` holds the head, optimizer, state and the batch
generator; the loop, the time budget and the learning-rate schedule (warm-up then cosine over
max(step / max_steps, seconds / budget)) are the target trainer's.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head, build_vocab_map, target_features
from specgauge.engine.models.llama import LlamaForCausalLM
from specgauge.train.dataset import iter_samples
from specgauge.train.target import Trainer, _atomic_save, check_checkpoint_shape, lr_at
from specgauge.train.target_outputs import SampleOutputs, compute_outputs, padded, teacher_and_greedy
from specgauge.train.ttt import acceptance_estimate, unrolled_loss_from


@dataclass(frozen=True)
class DraftTrainConfig:
    """Optimisation and head settings; validated here, at the edge."""

    max_len: int = 512  # samples are cut to this many tokens
    batch_size: int = 8
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 40
    weight_decay: float = 0.0
    cache_target: bool = True  # the target's outputs once per sample (target_outputs.py), not per batch
    teacher_top_k: int = 64  # cached teacher: the target's top-k logits over the draft vocabulary
    grad_clip: float = 1.0
    max_steps: int = 100_000
    minutes: float | None = None
    ttt_steps: int = 4
    step_decay: float = 0.8
    feed: str = "draft"
    draft_vocab_size: int = 2048
    intermediate_size: int | None = None  # the head's MLP width; None: the target's
    bf16: bool = True
    seed: int = 0
    threads: int = 2
    eval_every: int = 100
    eval_samples: int = 48
    checkpoint_minutes: float = 3.0
    weights: dict = field(default_factory=dict)
    init_from: str | None = None  # a trained head to start from (its vocabulary map and shape are kept)
    # The target layers whose inputs feed the head (vLLM's eagle_aux_hidden_state_layer_ids);
    # None: the init head's, else the default for the target's depth.
    aux_layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.ttt_steps < 3:
            raise ValueError("ttt_steps must be ≥ 3 (training-time test unrolls at least three steps)")
        if self.feed not in ("draft", "target"):
            raise ValueError("feed must be 'draft' or 'target'")
        if self.aux_layers is not None and (len(self.aux_layers) != 3 or len(set(self.aux_layers)) != 3
                                            or min(self.aux_layers) < 0):
            raise ValueError("aux_layers must be three distinct target layer ids ≥ 0 (EAGLE-3 reads three layers)")
        for name in ("max_len", "batch_size", "max_steps", "eval_every", "eval_samples", "draft_vocab_size",
                     "teacher_top_k"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.intermediate_size is not None and self.intermediate_size <= 0:
            raise ValueError("intermediate_size must be positive")
        if self.minutes is not None and self.minutes <= 0:
            raise ValueError("minutes must be positive")
        if not 0 < self.step_decay <= 1:
            raise ValueError("step_decay must be in (0, 1]")


@dataclass
class Conversations:
    """One source's regenerated samples, each ``(input_ids (T,), response_mask (T,) bool)``."""

    name: str
    samples: list[tuple[torch.Tensor, torch.Tensor]]

    @classmethod
    def load(cls, folder: Path, name: str, max_len: int) -> "Conversations":
        """Read ``folder/shard-*.jsonl``, cutting samples to ``max_len`` tokens."""
        samples = [(torch.tensor(ids[:max_len], dtype=torch.long), torch.tensor(mask[:max_len], dtype=torch.bool))
                   for ids, mask in iter_samples(folder)]
        return cls(name, [s for s in samples if s[1].any()])

    def response_tokens(self) -> torch.Tensor:
        """All response tokens (N,)."""
        return torch.cat([ids[mask] for ids, mask in self.samples]) if self.samples else torch.zeros(0, dtype=torch.long)


def pad_batch(samples: list[tuple[torch.Tensor, torch.Tensor]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad samples to the longest: ids (B, T) and response mask (B, T), False on padding."""
    length = max(ids.numel() for ids, _ in samples)
    ids = torch.full((len(samples), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), length), dtype=torch.bool)
    for row, (sample_ids, sample_mask) in enumerate(samples):
        ids[row, :sample_ids.numel()] = sample_ids
        mask[row, :sample_mask.numel()] = sample_mask
    return ids, mask


class MixBatches:
    """Each batch row picks a source by ``weights`` and one of its samples at random; the
    generator's state goes into checkpoints, so a resumed run draws the same batches."""

    def __init__(self, sources: dict[str, Conversations], batch_size: int, seed: int, weights: dict[str, float],
                 pad_id: int) -> None:
        self.sources = [sources[name] for name in sorted(sources) if sources[name].samples]
        if not self.sources:
            raise ValueError("no regenerated training samples")
        raw = torch.tensor([float(weights.get(s.name, 1.0)) for s in self.sources])
        self.weights = raw / raw.sum()
        self.batch_size, self.pad_id = batch_size, pad_id
        self.generator = torch.Generator().manual_seed(seed)

    def pick(self) -> list[tuple[str, int]]:
        """The next batch's samples as (source name, sample index)."""
        picks = torch.multinomial(self.weights, self.batch_size, replacement=True, generator=self.generator)
        rows = []
        for pick in picks.tolist():
            source = self.sources[pick]
            rows.append((source.name, int(torch.randint(0, len(source.samples), (1,), generator=self.generator))))
        return rows

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, T) and response mask (B, T) of the next batch."""
        by_name = {source.name: source for source in self.sources}
        return pad_batch([by_name[name].samples[index] for name, index in self.pick()], self.pad_id)

    def state(self) -> torch.Tensor:
        return self.generator.get_state()

    def restore(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)


def token_counts(sources: dict[str, Conversations], vocab_size: int, weights: dict[str, float]) -> torch.Tensor:
    """Frequency (V,) of response tokens in the training mix: each source's counts scaled by its
    weight over its response-token total, so the draft vocabulary follows the mix."""
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for name, source in sources.items():
        weight = float(weights.get(name, 1.0))
        tokens = source.response_tokens()
        if weight <= 0 or tokens.numel() == 0:
            continue
        counts += torch.bincount(tokens, minlength=vocab_size).double() * (weight / tokens.numel())
    return counts


@dataclass
class DraftState:
    """What a checkpoint restores besides weights."""

    step: int = 0
    trained_seconds: float = 0.0
    history: list = field(default_factory=list)


CHECKPOINT_NAME = "draft_checkpoint.pt"


def read_draft_checkpoint(run_dir: Path) -> dict:
    """``run_dir/draft_checkpoint.pt`` as ``save_checkpoint`` wrote it."""
    return torch.load(Path(run_dir) / CHECKPOINT_NAME, map_location="cpu", weights_only=False)


class DraftTrainer(Trainer):
    """One head-training run in ``run_dir``. ``run()``, ``progress()`` and ``request_stop()`` are
    the target trainer's (the same loop, budget, signals and checkpoint cadence); this class
    supplies the head, its batches, its step, its evaluation and its checkpoint contents."""

    def __init__(self, target: LlamaForCausalLM, train_sources: dict[str, Conversations],
                 val_sources: dict[str, Conversations], run_dir: Path, config: DraftTrainConfig,
                 aux_layers: tuple[int, ...] | None = None, eos_ids: tuple[int, ...] = (), pad_id: int = 0,
                 start: Eagle3Head | None = None) -> None:
        """``start``: a trained head to begin from (``config.init_from``); its MLP is widened to the
        config's width (not narrowed), its attention to the target's head_dim
        (:func:`specgauge.train.widen.warm_start_head`), and its vocabulary map kept — unless the
        config's draft vocabulary is of another size: then the map is built from these responses,
        as for a new head, and a token in both keeps its lm_head row."""
        self.run_dir, self.config = Path(run_dir), config
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        torch.set_num_threads(config.threads)
        self.target = target.eval().requires_grad_(False)
        self.head = Eagle3Head(Eagle3Config.for_target(target.config, config.draft_vocab_size, aux_layers,
                                                       intermediate_size=config.intermediate_size))
        self.head.share_embeddings(target)
        self.model = self.head  # what the inherited loop puts in train mode
        new_map = start is None or start.config.draft_vocab_size != config.draft_vocab_size
        self.kept_start_map = not new_map  # for the report: whether a start head's map was kept
        # for the report: the start head's MLP width when it was widened to the config's
        self.widened_mlp_from = (start.config.intermediate_size if start is not None
                                 and start.config.intermediate_size != self.head.config.intermediate_size else None)
        vocab_map = build_vocab_map(token_counts(train_sources, target.config.vocab_size, config.weights),
                                    config.draft_vocab_size, always=eos_ids) if new_map else None
        if start is None:
            self.head.set_vocab_map(*vocab_map)
            self._init_weights()
        else:
            from specgauge.train.widen import warm_start_head

            warm_start_head(self.head, start, seed=config.seed, vocab_map=vocab_map,
                            fresh_rows=target.lm_head.weight if new_map else None)
        held_out = token_counts(val_sources, target.config.vocab_size, config.weights)
        # Share of held-out response tokens (weighted like the mix) that the draft vocabulary can produce.
        self.vocab_coverage = float(held_out[self.head.t2d].sum() / held_out.sum().clamp(min=1e-12))
        params = self.head.trainable_parameters()
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        self.optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                            {"params": no_decay, "weight_decay": 0.0}],
                                           lr=config.lr, betas=(0.9, 0.95), eps=1e-8)
        used = {k: v for k, v in train_sources.items() if float(config.weights.get(k, 1.0)) > 0}
        self.train_sources, self.val_sources, self.pad_id = used, val_sources, pad_id
        self.batches = MixBatches(used, config.batch_size, config.seed, config.weights, pad_id)
        self.state = DraftState()
        self.last_step_accuracy: list[float] = []
        self._stop = False
        # (split, source) → the target's outputs per sample (target_outputs.py); empty: computed per batch
        self.target_outputs: dict[tuple[str, str], list[SampleOutputs]] = {}

    def _outputs_plan(self, keep_in: Path | None, target_digest: str) -> list[tuple[str, str, list, dict | None, bool]]:
        """Per (split, source) whose outputs are cached: its samples' tokens, the key they are kept
        under in ``keep_in`` (None: not kept) and whether ``keep_in`` already holds them."""
        from specgauge.train.target_outputs import has_saved, outputs_key

        if not self.config.cache_target:
            return []
        plan = []
        for split, sources in (("train", self.train_sources), ("validation", self.val_sources)):
            for name, source in sources.items():
                samples = source.samples if split == "train" else source.samples[:self.config.eval_samples]
                ids = [ids for ids, _ in samples]
                key = None if keep_in is None else outputs_key(target_digest, self.head, ids, self.config.teacher_top_k,
                                                                self._kept_dtype(), self.config.bf16)
                plan.append((split, name, ids, key, key is not None and has_saved(keep_in, f"{split}.{name}", key)))
        return plan

    def _kept_dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.config.bf16 else torch.float32

    def compute_target_outputs(self, on_done: Callable[[int], None] | None = None, keep_in: Path | None = None,
                               target_digest: str = "") -> int:
        """With ``cache_target``: the target's outputs for every training and validation sample
        (the validation ones only as far as ``eval_samples``), once; returns the bytes kept.
        ``keep_in``: a folder they are read back from when it holds them for the same target
        (``target_digest``), head and samples, and written to when computed."""
        from specgauge.train.target_outputs import load_outputs, save_outputs

        for split, name, ids, key, saved in self._outputs_plan(keep_in, target_digest):
            if saved:
                self.target_outputs[(split, name)] = load_outputs(keep_in, f"{split}.{name}")
                continue
            self.target_outputs[(split, name)] = compute_outputs(
                self.target, self.head, ids, self.config.teacher_top_k, dtype=self._kept_dtype(), bf16=self.config.bf16,
                on_done=on_done)
            if key is not None and ids:  # a source without samples costs nothing to compute again
                save_outputs(keep_in, f"{split}.{name}", key, self.target_outputs[(split, name)])
        return sum(out.nbytes() for outs in self.target_outputs.values() for out in outs)

    def samples_to_compute(self, keep_in: Path | None = None, target_digest: str = "") -> int:
        """How many samples :meth:`compute_target_outputs` runs through the target (the others
        are read back from ``keep_in``)."""
        return sum(len(ids) for _, _, ids, _, saved in self._outputs_plan(keep_in, target_digest) if not saved)

    def _init_weights(self) -> None:
        """N(0, 0.02) matrices; lm_head rows and ``norm`` start as the target's (tied) output
        head restricted to the draft vocabulary — the head's feature lives in the target's space."""
        for name, param in self.head.named_parameters():
            if param.dim() >= 2 and name != "embed_tokens.weight":
                torch.nn.init.normal_(param, mean=0.0, std=0.02)
        with torch.no_grad():
            ids = self.head.draft_to_target(torch.arange(self.config.draft_vocab_size))
            self.head.lm_head.weight.copy_(self.target.lm_head.weight[ids])
            self.head.norm.weight.copy_(self.target.model.norm.weight)

    # -- checkpoints ---------------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path:
        return self.run_dir / CHECKPOINT_NAME

    def head_state(self) -> dict:
        return {k: v for k, v in self.head.state_dict().items() if k != "embed_tokens.weight"}

    def save_checkpoint(self) -> None:
        """Write ``draft_checkpoint.pt`` atomically (head, optimizer, state, batch generator)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _atomic_save({"head": self.head_state(), "optimizer": self.optimizer.state_dict(), "state": asdict(self.state),
                      "batches": self.batches.state(), "torch_rng": torch.get_rng_state(),
                      "head_config": self.head.config.to_dict(), "config": asdict(self.config)}, self.checkpoint_path)

    def load_checkpoint(self, saved: dict | None = None) -> None:
        """Restore what ``save_checkpoint`` wrote (``saved``: that file, already read); the run
        continues at the saved step."""
        saved = saved if saved is not None else read_draft_checkpoint(self.run_dir)
        check_checkpoint_shape(self.checkpoint_path, saved["head_config"], self.head.config.to_dict(),
                               "head shape or target")
        self.head.load_state_dict(saved["head"], strict=False)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.state = DraftState(**saved["state"])
        self.batches.restore(saved["batches"])
        torch.set_rng_state(saved["torch_rng"])

    # -- one batch -------------------------------------------------------------------------------
    def batch_loss(self, split: str, picks: list[tuple[str, int]]):
        """TTT loss and stats of the samples ``picks`` ((source, index) of ``split``), padded to the longest."""
        sources = self.train_sources if split == "train" else self.val_sources
        window, response_mask = pad_batch([sources[name].samples[index] for name, index in picks], self.pad_id)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.config.bf16):
            if self.target_outputs:
                aux, teacher, greedy = padded([self.target_outputs[(split, name)][index] for name, index in picks],
                                              window.shape[1], self.head.config.draft_vocab_size)
            else:
                with torch.no_grad():
                    logits, aux = target_features(self.target, window, self.head.config.aux_layers)  # (B,T,V), (B,T,3H)
                    teacher, greedy = teacher_and_greedy(self.head, logits.float())
            return unrolled_loss_from(self.head, window, aux.float(), teacher, greedy, response_mask,
                                      self.config.ttt_steps, self.config.step_decay, self.config.feed)

    def train_step(self) -> float:
        """One optimizer step; returns the weighted loss (the batch's per-step accuracies go to
        ``last_step_accuracy``)."""
        picks = self.batches.pick()
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(self.state.step, self.progress(), self.config)
        self.head.train()
        loss, stats = self.batch_loss("train", picks)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.head.trainable_parameters(), self.config.grad_clip)
        self.optimizer.step()
        self.state.step += 1
        self.last_step_accuracy = (stats.correct / stats.counts.clamp(min=1)).tolist()
        return loss.item()

    @torch.no_grad()
    def evaluate(self) -> dict[str, dict]:
        """Per source: per-step accuracy (each step on its own fed-back features and tokens), the
        rate of all-right prefixes, the chain's expected tokens per verify, and the mean step loss."""
        self.head.eval()
        report = {}
        for name, source in self.val_sources.items():
            correct = prefix = counts = None
            losses = []
            count = min(len(source.samples), self.config.eval_samples)
            for offset in range(0, count, 4):
                _, stats = self.batch_loss("validation", [(name, i) for i in range(offset, min(offset + 4, count))])
                correct = stats.correct if correct is None else correct + stats.correct
                prefix = stats.prefix_correct if prefix is None else prefix + stats.prefix_correct
                counts = stats.counts if counts is None else counts + stats.counts
                losses.append(stats.losses)
            if counts is None:
                continue
            prefix_rates = (prefix / counts.clamp(min=1)).tolist()
            report[name] = {
                "step_accuracy": [round(x, 4) for x in (correct / counts.clamp(min=1)).tolist()],
                "prefix_accuracy": [round(x, 4) for x in prefix_rates],
                "expected_accept_length": round(acceptance_estimate(prefix_rates), 3),
                "step_loss": [round(sum(col) / len(col), 4) for col in zip(*losses)],
                "scored_tokens": int(counts[0]),
            }
        self.head.train()
        self.state.history.append({"step": self.state.step, "trained_seconds": round(self.state.trained_seconds, 1),
                                   "val": report})
        return report


def load_regenerated(folder: Path, sources: tuple[str, ...], split: str, max_len: int) -> dict[str, Conversations]:
    """``{source: Conversations}`` of a regenerated split (``folder/<split>/<source>``)."""
    return {name: Conversations.load(Path(folder) / split / name, name, max_len) for name in sources
            if (Path(folder) / split / name / "shard-00000.jsonl").is_file()}
