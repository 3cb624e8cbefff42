"""``specgauge train draft`` end to end: regenerate, train with progress, export with TRAINING.md."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from specgauge.train.corpus import SOURCES, file_sha256
from specgauge.train.draft import DraftTrainConfig, DraftTrainer, load_regenerated
from specgauge.train.regenerate import RegenerateConfig, regenerate_source

PRINT_EVERY = 10
DRAFT_FILES = ("config.json", "model.safetensors")


@dataclass(frozen=True)
class DraftRun:
    """Everything ``train draft`` was asked to do (written into TRAINING.md)."""

    target_dir: Path
    corpus_dir: Path
    run_dir: Path
    output: Path | None
    regenerate: RegenerateConfig
    validation_samples: int
    train: DraftTrainConfig
    resume: bool = False
    command: str = ""


def _columns(label: str) -> tuple:
    return (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
            TimeElapsedColumn())


def regenerate_all(run: DraftRun, console: Console) -> Path:
    """Regenerate every source needed (train: sources with weight > 0, scaled by weight; validation: all)."""
    out = run.run_dir / "regenerated"
    digest = file_sha256(run.target_dir / "model.safetensors")
    weights = {s: float(run.train.weights.get(s, 1.0)) for s in SOURCES}
    top = max(weights.values())
    plan = [("train", s, max(1, round(run.regenerate.samples_per_source * w / top))) for s, w in weights.items() if w > 0]
    plan += [("validation", s, run.validation_samples) for s in SOURCES]
    with Progress(*_columns("regenerate"), console=console) as bar:
        task = bar.add_task("regen", total=None, info="")

        def on_start(name: str, count: int) -> None:
            bar.reset(task, total=count, info=name)

        for split, source, count in plan:
            config = RegenerateConfig(**{**asdict(run.regenerate), "samples_per_source": count})
            started = time.monotonic()
            folder = regenerate_source(run.corpus_dir, run.target_dir, out, split, source, config, digest,
                                       on_start=on_start, on_done=lambda n: bar.advance(task, n))
            meta = json.loads((folder / "meta.json").read_text())
            bar.console.print(f"{split}/{source}: {meta['num_samples']} prompts, {meta['num_response_tokens']} response "
                              f"tokens ({time.monotonic() - started:.0f} s)")
    return out


def head_aux_layers(run: DraftRun, start, saved: dict | None) -> tuple[int, ...] | None:
    """The target layers the head reads: ``--aux-layers``; else, resuming, those of the checkpoint's
    head (``saved``); else the ``--init-from`` head's; else None (the default for the target's depth)."""
    if run.train.aux_layers:
        return run.train.aux_layers
    if saved is not None:
        from specgauge.engine.models.eagle3 import Eagle3Config

        return Eagle3Config.from_dict(saved["head_config"]).aux_layers
    return start.config.aux_layers if start is not None else None


def resumed_config(train: DraftTrainConfig, saved: dict | None) -> DraftTrainConfig:
    """Resuming (``saved``: the checkpoint) with no MLP width given: the checkpoint head's width, as
    its aux layers are kept (``head_aux_layers``); a fresh run's default is the target's width."""
    if saved is None or train.intermediate_size is not None:
        return train
    return replace(train, intermediate_size=int(saved["head_config"]["intermediate_size"]))


def train_head(run: DraftRun, regenerated: Path, console: Console) -> DraftTrainer:
    """Train (resuming if asked) with a progress bar and per-source validation prints."""
    from specgauge.engine.models.llama import load_model

    target = load_model(run.target_dir)
    # EOS and pad ids from the target's config (this project's targets and a model of its own alike)
    eos = target.config.eos_token_id
    eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
    pad_id = target.config.extra.get("pad_token_id", eos_ids[0] if eos_ids else 0)
    limit = run.train.max_len
    start = None
    if run.train.init_from:
        from specgauge.engine.models.eagle3 import load_eagle3

        start = load_eagle3(run.train.init_from, target)
    from specgauge.train.draft import read_draft_checkpoint

    saved = read_draft_checkpoint(run.run_dir) if run.resume else None   # read once: its shape, then the state
    trainer = DraftTrainer(target, load_regenerated(regenerated, SOURCES, "train", limit),
                           load_regenerated(regenerated, SOURCES, "validation", limit), run.run_dir,
                           resumed_config(run.train, saved),
                           aux_layers=head_aux_layers(run, start, saved),
                           eos_ids=eos_ids, pad_id=pad_id, start=start)
    if saved is not None:
        trainer.load_checkpoint(saved)
        console.print(f"resumed at step {trainer.state.step} ({trainer.state.trained_seconds:.0f} s trained)")
    sizes = {name: int(source.response_tokens().numel()) for name, source in trainer.train_sources.items()}
    console.print(f"draft head: {sum(p.numel() for p in trainer.head.trainable_parameters()) / 1e6:.2f}M trainable "
                  f"parameters, aux layers {trainer.head.config.aux_layers}, draft vocab {run.train.draft_vocab_size} "
                  f"(covers {trainer.vocab_coverage:.2%} of held-out response tokens, weighted as the mix), response tokens {sizes}")
    kept_in, digest = run.run_dir / "target_outputs", file_sha256(run.target_dir / "model.safetensors")
    to_compute = trainer.samples_to_compute(kept_in, digest)
    if to_compute:
        started = time.monotonic()
        with Progress(*_columns("target outputs"), console=console) as bar:
            task = bar.add_task("target", total=to_compute, info="")
            kept = trainer.compute_target_outputs(lambda n: bar.advance(task, n), kept_in, digest)
        console.print(f"target outputs: {to_compute} samples through the target once, {kept / 2**20:.0f} MiB kept "
                      f"(teacher: its top {run.train.teacher_top_k} logits over the draft vocabulary) in "
                      f"{time.monotonic() - started:.0f} s; kept in {kept_in} for a rerun")
    elif run.train.cache_target:
        kept = trainer.compute_target_outputs(keep_in=kept_in, target_digest=digest)
        console.print(f"target outputs: read back from {kept_in} ({kept / 2**20:.0f} MiB)")
    total = run.train.max_steps if not run.train.minutes else None
    with Progress(*_columns("train draft"), console=console) as bar:
        task = bar.add_task("train", total=total, completed=trainer.state.step, info="")

        def on_step(step: int, loss: float, lr: float) -> None:
            shown = " ".join(f"{a:.2f}" for a in trainer.last_step_accuracy)
            bar.update(task, completed=step, info=f"loss {loss:.3f} acc {shown} lr {lr:.1e} "
                                                  f"progress {trainer.progress():.2f}")
            if step % PRINT_EVERY == 0:
                bar.console.print(f"step {step} loss {loss:.4f} step accuracy {shown} lr {lr:.2e}")

        def on_eval(step: int, report: dict) -> None:
            bar.console.print(f"eval step {step}: " + format_eval(report))

        state = trainer.run(on_step, on_eval)
    console.print(f"stopped at step {state.step} after {state.trained_seconds:.0f} s of training; checkpoint in {run.run_dir}")
    return trainer


def format_eval(report: dict) -> str:
    """One line per source: step accuracies and the chain's expected tokens per verify."""
    return "; ".join(f"{name} acc " + "/".join(f"{a:.2f}" for a in row["step_accuracy"])
                     + f" accept≈{row['expected_accept_length']:.2f}" for name, row in report.items())


def export(run: DraftRun, trainer: DraftTrainer, wall_seconds: float) -> Path:
    """Write the head (bf16) to ``run.output`` with TRAINING.md and SHA256SUMS."""
    from specgauge.engine.models.eagle3 import save_eagle3
    from specgauge.train.report import machine_description, write_sha256sums

    assert run.output is not None
    save_eagle3(trainer.head, run.output)
    final = trainer.state.history[-1]
    lines = [
        "# EAGLE-3 draft head", "",
        "Trained by `specgauge train draft` (docs/eagle3.md) against the target whose weights have sha256 "
        f"`{file_sha256(run.target_dir / 'model.safetensors')}`.", "",
        "## Reproduce", "", "```sh", run.command, "```", "",
        f"- wall time: {wall_seconds / 60:.1f} min (regeneration + training + evaluation); "
        f"training {trainer.state.trained_seconds / 60:.1f} min, {trainer.state.step} optimizer steps",
        f"- machine: {machine_description()}",
        f"- corpus: `{run.corpus_dir}`, the corpus of `specgauge train corpus` tokenized with the target's "
        "tokenizer and chat template (docs/train.md); only its prompts are used, the answers are the target's",
        f"- data mix (train): {json.dumps(run.train.weights) if run.train.weights else 'balanced'}; responses regenerated "
        f"by the target ({'greedy' if run.regenerate.temperature == 0 else f'temperature {run.regenerate.temperature}'}, "
        f"≤ {run.regenerate.max_new_tokens} new tokens)",
        f"- head: {sum(p.numel() for p in trainer.head.trainable_parameters()):,} trainable parameters, aux layers "
        f"(inputs of target layers) {list(trainer.head.config.aux_layers)}, draft vocab {run.train.draft_vocab_size} "
        f"covering {trainer.vocab_coverage:.2%} of held-out response tokens (weighted as the mix)",
        *([f"- started from the head in `{run.train.init_from}` ("
           + ("its vocabulary map, MLP and norms" if trainer.kept_start_map else
              "its MLP and norms, and its lm_head rows for the tokens of the new vocabulary map it also had")
           + (f"; its MLP widened from {trainer.widened_mlp_from} to {trainer.head.config.intermediate_size} units "
              "with the same function" if trainer.widened_mlp_from else "")
           + "; its attention widened to the target's head_dim, docs/train.md)"] if run.train.init_from else []),
        f"- training-time test: {run.train.ttt_steps} unrolled steps, weights {run.train.step_decay}^i, fed-back "
        f"token: {run.train.feed}, soft cross-entropy against the target's distribution over the draft vocabulary", "",
        f"## Validation (held-out prompts, responses regenerated by the target), step {final['step']}", "",
        "Step k accuracy: the head's k-th token equals the target's greedy token, the head running on its own",
        "fed-back features and tokens from step 1 on. Prefix: steps 1..k all right (a chain accepts k drafts).",
        "Expected accept length: 1 + Σ prefix rates (tokens per verify of a chain as long as the unroll).", "",
        "| source | " + " | ".join(f"step {k + 1}" for k in range(run.train.ttt_steps)) + " | "
        + " | ".join(f"prefix {k + 1}" for k in range(run.train.ttt_steps)) + " | expected accept length | scored tokens |",
        "| --- |" + " --- |" * (2 * run.train.ttt_steps + 2),
    ]
    for name, row in final["val"].items():
        lines.append(f"| {name} | " + " | ".join(f"{a:.3f}" for a in row["step_accuracy"]) + " | "
                     + " | ".join(f"{a:.3f}" for a in row["prefix_accuracy"])
                     + f" | {row['expected_accept_length']:.2f} | {row['scored_tokens']} |")
    lines += ["", "## Validation during training (per-step accuracy per source)", ""]
    lines += [f"- step {entry['step']} ({entry['trained_seconds']:.0f} s): {format_eval(entry['val'])}"
              for entry in trainer.state.history]
    digests = {name: file_sha256(run.output / name) for name in DRAFT_FILES}
    lines += ["", "## Files (sha256)", "", *[f"- `{name}`: `{digest}`" for name, digest in digests.items()], "",
              "`SHA256SUMS` lists the same digests and that of this file.", ""]
    (run.output / "TRAINING.md").write_text("\n".join(lines))
    write_sha256sums(run.output, (*DRAFT_FILES, "TRAINING.md"))
    return run.output


def run_draft_training(run: DraftRun) -> None:
    """Regenerate, train, export; prints as it goes."""
    console = Console(highlight=False)
    started = time.monotonic()
    regenerated = regenerate_all(run, console)
    trainer = train_head(run, regenerated, console)
    console.print("validation: " + format_eval(trainer.state.history[-1]["val"]))
    if run.output is not None:
        export(run, trainer, time.monotonic() - started)
        console.print(f"wrote the head, TRAINING.md and SHA256SUMS to {run.output}")


def command_line(args: list[str]) -> str:
    """The reproducing command for TRAINING.md."""
    return "PYTHONPATH=src python -m specgauge train draft " + " ".join(shlex.quote(a) for a in args)
