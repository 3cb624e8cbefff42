"""Run a :class:`~specgauge.train.target.Trainer` with a rich progress bar and printed losses."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from specgauge.train.target import ModelShape, TrainConfig, Trainer, export_target

PRINT_EVERY = 25


def run_with_progress(corpus_dir: Path, tokenizer_dir: Path, run_dir: Path, shape: ModelShape, config: TrainConfig,
                      resume: bool, output: Path | None) -> None:
    """Train (resuming if asked), print loss every few steps and validation per source, export at the end."""
    from tokenizers import Tokenizer

    from specgauge.train.tokenizer import special_token_ids

    console = Console(highlight=False)
    tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    trainer = Trainer(corpus_dir, run_dir, shape, config, tokenizer.get_vocab_size(), special_token_ids(tokenizer))
    if resume:
        trainer.load_checkpoint()
        console.print(f"resumed at step {trainer.state.step} ({trainer.state.trained_seconds:.0f} s trained)")
    sizes = {name: len(source) for name, source in trainer.train_sources.items()}
    console.print(f"target: {trainer.model.num_parameters() / 1e6:.2f}M parameters, shape {shape}, train tokens {sizes}")
    total = config.max_steps
    window = {"loss": 0.0, "n": 0, "ul": 0.0, "ul_n": 0, "t": time.monotonic(), "step": trainer.state.step}
    with Progress(TextColumn("[bold]train target"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task("train", total=total, completed=trainer.state.step, info="")

        def on_step(step: int, loss: float, lr: float) -> None:
            kind = "ul" if trainer.is_unlikelihood_step(step - 1) else "loss"
            window[kind] += loss
            window["ul_n" if kind == "ul" else "n"] += 1
            bar.update(task, completed=step, info=f"{kind} {loss:.3f} lr {lr:.2e}")
            if step % PRINT_EVERY == 0:
                elapsed = time.monotonic() - window["t"]
                unlikelihood = f" unlikelihood {window['ul'] / window['ul_n']:.4f}" if window["ul_n"] else ""
                bar.console.print(f"step {step} loss {window['loss'] / max(window['n'], 1):.4f}{unlikelihood} lr {lr:.2e} "
                                  f"{(step - window['step']) / max(elapsed, 1e-9) * 60:.1f} steps/min progress {trainer.progress():.3f}")
                window.update(loss=0.0, n=0, ul=0.0, ul_n=0, t=time.monotonic(), step=step)

        def on_eval(step: int, losses: dict) -> None:
            shown = " ".join(f"{k} {v:.4f}" for k, v in losses.items())
            bar.console.print(f"eval step {step}: {shown} (best mean {trainer.state.best_val:.4f})")

        state = trainer.run(on_step, on_eval)
    console.print(f"stopped at step {state.step} after {state.trained_seconds:.0f} s of training; checkpoint in {run_dir}")
    if output is not None:
        export_target(run_dir, tokenizer_dir, output)
        console.print(f"exported best weights to {output}")
