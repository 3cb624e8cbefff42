"""Train the embedded target model on a balanced mix of every corpus source.

Resumable: ``run_dir/checkpoint.pt`` holds model, optimizer, step, trained seconds, the batch
generator's state and the best validation loss; ``run_dir/best.pt`` the weights with the lowest
mean validation loss. The learning rate follows warm-up then cosine decay over *progress* =
max(step / max_steps, trained_seconds / budget_seconds), so a time-budgeted run still ends its
decay when its minutes are up.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM, save_model
from specgauge.train.corpus import SOURCES, TARGET_SOURCES
from specgauge.train.dataset import BalancedBatches, PackedSource, load_split


@dataclass(frozen=True)
class ModelShape:
    """The target's architecture (Llama, GQA, tied embeddings)."""

    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    intermediate_size: int = 1024
    max_position_embeddings: int = 512
    rope_theta: float = 10000.0
    head_dim: int | None = None  # None: hidden_size // num_attention_heads

    @classmethod
    def continuing(cls, config: LlamaConfig, seq_len: int, head_dim: int | None) -> "ModelShape":
        """The shape of a run that continues training ``config``'s model at ``seq_len`` tokens,
        its heads widened to ``head_dim`` when that is larger (:mod:`specgauge.train.widen`)."""
        if head_dim is not None and head_dim != config.head_size:
            from specgauge.train.widen import widened_config

            config = widened_config(config, head_dim)
        return cls(hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
                   num_attention_heads=config.num_attention_heads, num_key_value_heads=config.num_key_value_heads,
                   intermediate_size=config.intermediate_size, max_position_embeddings=seq_len,
                   rope_theta=config.rope_theta, head_dim=config.head_size)

    def llama_config(self, vocab_size: int, special_ids: dict | None = None) -> LlamaConfig:
        ids = special_ids or {}
        return LlamaConfig(
            vocab_size=vocab_size, hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers, num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads, max_position_embeddings=self.max_position_embeddings,
            rope_theta=self.rope_theta, tie_word_embeddings=True, head_dim=self.head_dim,
            bos_token_id=ids.get("bos_token_id"), eos_token_id=ids.get("eos_token_id"),
            extra={"pad_token_id": ids["pad_token_id"]} if "pad_token_id" in ids else {},
        )


class ConfigError(ValueError):
    """A training setting out of range; ``fields`` names the settings (their CLI flags are the names
    with dashes: ``ul_prefix`` → ``--ul-prefix``)."""

    def __init__(self, fields: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.fields = fields

    def flags(self) -> str:
        """``--ul-prefix/--ul-tokens``: the command-line flags of ``fields``."""
        return "/".join("--" + name.replace("_", "-") for name in self.fields)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; validated here, at the edge."""

    seq_len: int = 512
    batch_size: int = 16
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 200
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    max_steps: int = 100_000
    minutes: float | None = None
    bf16: bool = True
    loss_on: str = "all"  # "all" tokens or assistant "response" tokens only
    seed: int = 0
    threads: int = 2
    eval_every: int = 250
    eval_windows: int = 24
    checkpoint_minutes: float = 3.0
    weights: dict = field(default_factory=dict)
    sources: tuple = TARGET_SOURCES  # corpus sources trained on and validated per source
    init_from: str | None = None  # a model directory to continue training (else a fresh init)
    # sequence-level unlikelihood (train/unlikelihood.py): every second step, when the weight is > 0
    unlikelihood: float = 0.0  # weight of the unlikelihood loss; 0 = plain next-token training
    ul_batch: int = 8  # prefixes continued per unlikelihood step
    ul_prefix: int = 256  # tokens of each prefix, cut at random from a training window
    ul_tokens: int = 128  # greedy tokens generated after each prefix

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(self.sources))
        unknown = [s for s in self.sources if s not in SOURCES]
        if unknown or not self.sources:
            raise ConfigError(("sources",), f"{'unknown ' + ', '.join(unknown) if unknown else 'none given'}: sources must be "
                             f"a non-empty subset of {', '.join(SOURCES)}")
        if self.loss_on not in ("all", "response"):
            raise ConfigError(("loss_on",), "loss_on must be 'all' or 'response'")
        if self.unlikelihood < 0:
            raise ConfigError(("unlikelihood",), "unlikelihood must be >= 0")
        if self.unlikelihood and self.ul_prefix + self.ul_tokens > self.seq_len:
            raise ConfigError(("ul_prefix", "ul_tokens"), f"ul_prefix + ul_tokens ({self.ul_prefix} + {self.ul_tokens}) must fit "
                              f"seq_len {self.seq_len}, "
                             "the positions the model is trained at")
        for name in ("seq_len", "batch_size", "max_steps", "eval_every", "ul_batch", "ul_prefix", "ul_tokens"):
            if getattr(self, name) <= 0:
                raise ConfigError((name,), f"{name} must be positive")
        if self.minutes is not None and self.minutes <= 0:
            raise ConfigError(("minutes",), "minutes must be positive")


def lr_at(step: int, progress: float, config: TrainConfig) -> float:
    """Linear warm-up for ``warmup_steps``, then cosine from ``lr`` to ``lr * min_lr_ratio``."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


def lm_loss(model: LlamaForCausalLM, inputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None, bf16: bool) -> torch.Tensor:
    """Mean next-token cross-entropy of inputs (B, T) against targets (B, T), over ``mask`` if given."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits, _ = model(inputs)  # (B, T, V)
    losses = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")  # (B*T,)
    if mask is None:
        return losses.mean()
    weights = mask.flatten().float()
    return (losses * weights).sum() / weights.sum().clamp(min=1.0)


@torch.no_grad()
def validation_losses(model: LlamaForCausalLM, sources: dict[str, PackedSource], seq_len: int, max_windows: int, bf16: bool) -> dict[str, float]:
    """Mean all-token loss per source over its first ``max_windows`` consecutive validation windows."""
    was_training = model.training
    model.eval()
    out = {}
    for name, source in sources.items():
        starts = source.eval_windows(seq_len, max_windows)
        total, count = 0.0, 0
        for offset in range(0, len(starts), 8):
            batch = torch.stack([source.window(s, seq_len)[0] for s in starts[offset : offset + 8]])  # (b, T+1)
            loss = lm_loss(model, batch[:, :-1], batch[:, 1:], None, bf16)
            total += loss.item() * batch.shape[0]
            count += batch.shape[0]
        out[name] = total / max(count, 1)
    model.train(was_training)
    return out


def build_optimizer(model: LlamaForCausalLM, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not norms)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95), eps=1e-8)


def check_checkpoint_shape(path: Path, saved: dict, wanted: dict, what: str) -> None:
    """Refuse, in one line naming each field that differs, a checkpoint saved for another shape."""
    if saved == wanted:
        return
    from specgauge.errors import UserError

    differ = sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
    shown = ", ".join(f"{k} {saved.get(k)!r} there, {wanted.get(k)!r} here" for k in differ)
    raise UserError(f"--resume: {path} was saved for another {what} ({shown}); resume with the flags of the run "
                    f"that wrote it, or use another --run-dir")


def _atomic_save(obj: object, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


@dataclass
class TrainState:
    """What a checkpoint restores."""

    step: int = 0
    trained_seconds: float = 0.0
    best_val: float = float("inf")
    history: list = field(default_factory=list)


class Trainer:
    """One training run in ``run_dir``; ``run()`` trains until max_steps or the time budget."""

    def __init__(self, corpus_dir: Path, run_dir: Path, shape: ModelShape, config: TrainConfig,
                 vocab_size: int, special_ids: dict | None = None) -> None:
        self.corpus_dir, self.run_dir = Path(corpus_dir), Path(run_dir)
        self.shape, self.config = shape, config
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        torch.set_num_threads(config.threads)
        self.model = LlamaForCausalLM(shape.llama_config(vocab_size, special_ids))
        if config.init_from:
            self._start_from(Path(config.init_from), vocab_size)
        else:
            self._init_weights()
        self.optimizer = build_optimizer(self.model, config)
        self.train_sources = load_split(self.corpus_dir, "train", config.sources)
        self.val_sources = load_split(self.corpus_dir, "validation", config.sources)
        self.batches = BalancedBatches(self.train_sources, config.seq_len, config.batch_size, config.seed, config.weights)
        self.state = TrainState()
        self._stop = False

    def _init_weights(self) -> None:
        # GPT-2 style: N(0, 0.02), residual output projections scaled by 1/sqrt(2 * layers).
        residual_std = 0.02 / math.sqrt(2 * self.shape.num_hidden_layers)
        for name, param in self.model.named_parameters():
            if param.dim() >= 2:
                std = residual_std if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                torch.nn.init.normal_(param, mean=0.0, std=std)

    def _start_from(self, model_dir: Path, vocab_size: int) -> None:
        """Load a trained model (its heads widened to this run's head_dim) as step 0's weights."""
        from specgauge.engine.models.llama import load_model
        from specgauge.train.widen import widen_head_dim

        start = load_model(model_dir, dtype=torch.float32)
        if start.config.vocab_size != vocab_size:
            raise ValueError(f"{model_dir} has vocab_size {start.config.vocab_size}, the tokenizer {vocab_size}")
        if start.config.head_size != self.model.config.head_size:
            start = widen_head_dim(start, self.model.config.head_size, seed=self.config.seed)
        expected = ModelShape.continuing(start.config, self.shape.max_position_embeddings, None)
        if expected != self.shape:
            raise ValueError(f"{model_dir} gives shape {expected}, not the run's {self.shape}")
        self.model.load_state_dict(start.state_dict())

    # -- checkpoints ---------------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path:
        return self.run_dir / "checkpoint.pt"

    def save_checkpoint(self) -> None:
        """Write ``checkpoint.pt`` atomically (model, optimizer, state, batch generator)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _atomic_save({
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "state": asdict(self.state), "batches": self.batches.state(), "torch_rng": torch.get_rng_state(),
            "shape": asdict(self.shape), "config": asdict(self.config),
        }, self.checkpoint_path)

    def load_checkpoint(self) -> None:
        """Restore everything ``save_checkpoint`` wrote; the run continues at the saved step."""
        saved = torch.load(self.checkpoint_path, map_location="cpu", weights_only=False)
        check_checkpoint_shape(self.checkpoint_path, saved["shape"], asdict(self.shape), "model shape")
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.state = TrainState(**saved["state"])
        self.batches.restore(saved["batches"])
        torch.set_rng_state(saved["torch_rng"])

    # -- the loop ------------------------------------------------------------------------------
    def progress(self) -> float:
        by_steps = self.state.step / self.config.max_steps
        by_time = self.state.trained_seconds / (self.config.minutes * 60) if self.config.minutes else 0.0
        return max(by_steps, by_time)

    def is_unlikelihood_step(self, step: int) -> bool:
        """Is the step after ``step`` completed steps an unlikelihood step (every second one when its weight is > 0)?"""
        return self.config.unlikelihood > 0 and step % 2 == 1

    def _unlikelihood_loss(self, inputs: torch.Tensor) -> torch.Tensor:
        """The weighted unlikelihood loss of greedy continuations of prefixes cut from ``inputs`` (B, T)."""
        from specgauge.train.unlikelihood import unlikelihood_loss

        count, prefix = self.config.ul_batch, self.config.ul_prefix
        rows = torch.arange(count) % inputs.shape[0]
        starts = torch.randint(0, inputs.shape[1] - prefix + 1, (count,))
        prefixes = torch.stack([inputs[r, s : s + prefix] for r, s in zip(rows.tolist(), starts.tolist())])  # (count, P)
        eos = self.model.config.eos_token_id
        stop_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        return self.config.unlikelihood * unlikelihood_loss(self.model, prefixes, stop_ids, self.config.ul_tokens,
                                                             self.config.bf16)

    def train_step(self) -> float:
        """One optimizer step on a fresh balanced batch; returns the loss (the unlikelihood loss on
        an unlikelihood step)."""
        inputs, targets, mask = self.batches.next()
        lr = lr_at(self.state.step, self.progress(), self.config)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if self.is_unlikelihood_step(self.state.step):
            loss = self._unlikelihood_loss(inputs)
        else:
            loss = lm_loss(self.model, inputs, targets, mask if self.config.loss_on == "response" else None, self.config.bf16)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        self.state.step += 1
        return loss.item()

    def evaluate(self) -> dict[str, float]:
        """Validation loss per source; keeps ``best.pt`` when the mean improves."""
        losses = validation_losses(self.model, self.val_sources, self.config.seq_len, self.config.eval_windows, self.config.bf16)
        mean = sum(losses.values()) / len(losses)
        self.state.history.append({"step": self.state.step, "trained_seconds": round(self.state.trained_seconds, 1), "val": losses})
        if mean < self.state.best_val:
            self.state.best_val = mean
            self.run_dir.mkdir(parents=True, exist_ok=True)
            _atomic_save({"model": self.model.state_dict(), "step": self.state.step, "val": losses}, self.run_dir / "best.pt")
        return losses

    def request_stop(self, *_: object) -> None:
        """Stop after the current step (checkpointing first); also the SIGTERM/SIGINT handler."""
        self._stop = True

    def run(self, on_step: Callable[[int, float, float], None] | None = None,
            on_eval: Callable[[int, dict], None] | None = None) -> TrainState:
        """Train until ``max_steps``, the ``minutes`` budget, or SIGTERM/SIGINT (then checkpoint and return)."""
        previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGTERM, signal.SIGINT)} \
            if _in_main_thread() else {}
        self.model.train()
        last_checkpoint = time.monotonic()
        try:
            while not self._stop and self.state.step < self.config.max_steps:
                if self.config.minutes and self.state.trained_seconds >= self.config.minutes * 60:
                    break
                started = time.monotonic()
                loss = self.train_step()
                self.state.trained_seconds += time.monotonic() - started
                if on_step:
                    on_step(self.state.step, loss, self.optimizer.param_groups[0]["lr"])
                if self.state.step % self.config.eval_every == 0:
                    losses = self.evaluate()
                    if on_eval:
                        on_eval(self.state.step, losses)
                if time.monotonic() - last_checkpoint >= self.config.checkpoint_minutes * 60:
                    self.save_checkpoint()
                    last_checkpoint = time.monotonic()
            if not self.state.history or self.state.history[-1]["step"] != self.state.step:
                losses = self.evaluate()
                if on_eval:
                    on_eval(self.state.step, losses)
            self.save_checkpoint()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.state


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def export_target(run_dir: Path, tokenizer_dir: Path, out_dir: Path, which: str = "best") -> LlamaForCausalLM:
    """Write the ``best`` (or ``last``) weights of a run as a model directory in HF layout:
    ``config.json`` + ``model.safetensors`` (bf16) + the tokenizer files."""
    import shutil

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    saved = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=False)
    shape = ModelShape(**saved["shape"])
    from tokenizers import Tokenizer

    from specgauge.train.tokenizer import special_token_ids

    tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    model = LlamaForCausalLM(shape.llama_config(tokenizer.get_vocab_size(), special_token_ids(tokenizer)))
    weights = torch.load(run_dir / "best.pt", map_location="cpu", weights_only=False)["model"] if which == "best" else saved["model"]
    model.load_state_dict(weights)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_model(model, out_dir, dtype=torch.bfloat16)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(Path(tokenizer_dir) / name, out_dir / name)
    config_path = out_dir / "tokenizer_config.json"
    tok_config = json.loads(config_path.read_text())
    tok_config["model_max_length"] = shape.max_position_embeddings
    config_path.write_text(json.dumps(tok_config, indent=2) + "\n")
    return model
