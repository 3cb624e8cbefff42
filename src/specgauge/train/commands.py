"""CLI commands of this part: ``specgauge train corpus|tokenizer|target|export|eval|draft``.
Heavy imports (torch, tokenizers) stay inside the command bodies."""

from __future__ import annotations

from pathlib import Path

import click

from specgauge.errors import UserError, require_extra
from specgauge.train.mix import parse_weights


@click.group(name="train")
def train_group() -> None:
    """Build the corpus, tokenizer and target model of the embedded engine."""


@train_group.command("corpus")
@click.option("--output", "output", required=True, type=click.Path(file_okay=False, path_type=Path), help="Corpus directory.")
@click.option("--tokenizer", "tokenizer_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Tokenizer directory; with it the text is also written tokenized (DIR/<split>/<source>/shard-*.jsonl).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--validation-fraction", default=0.05, show_default=True, type=float)
@click.option("--agentic-samples", default=8000, show_default=True, type=click.IntRange(min=1))
def corpus_command(output: Path, tokenizer_dir: Path | None, seed: int, validation_fraction: float, agentic_samples: int) -> None:
    """Build the chat corpus (three target sources and a drafter-only one) from the standard library (deterministic for a seed)."""
    from specgauge.train.corpus import CorpusConfig, build_samples, write_text, write_tokenized

    try:
        config = CorpusConfig(seed=seed, validation_fraction=validation_fraction, agentic_samples=agentic_samples)
    except ValueError as exc:
        raise UserError(f"--validation-fraction: {exc}") from None
    if tokenizer_dir is not None and not (tokenizer_dir / "tokenizer.json").is_file():
        raise UserError(f"--tokenizer: no tokenizer.json in {tokenizer_dir}")
    samples = build_samples(config)
    write_text(samples, output)
    for source, splits in samples.items():
        click.echo(f"{source}: " + ", ".join(f"{split} {len(items)} samples" for split, items in splits.items()))
    if tokenizer_dir is not None:
        require_extra("engine", "tokenizers", "torch")
        totals = write_tokenized(output, tokenizer_dir, config)
        for source, splits in totals.items():
            click.echo(f"{source}: " + ", ".join(f"{split} {n} tokens" for split, n in splits.items()))
    click.echo(f"corpus written to {output}")


@train_group.command("tokenizer")
@click.option("--corpus", "corpus_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--output", "output", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--vocab-size", default=4096, show_default=True, type=click.IntRange(512, 65536))
def tokenizer_command(corpus_dir: Path, output: Path, vocab_size: int) -> None:
    """Train a byte-level BPE on the corpus text (DIR/text) and write tokenizer.json + tokenizer_config.json."""
    require_extra("engine", "tokenizers")
    from specgauge.train.tokenizer import corpus_texts, save_tokenizer, train_tokenizer

    if not (corpus_dir / "text").is_dir():
        raise UserError(f"--corpus: {corpus_dir} has no text/ folder (run `specgauge train corpus --output {corpus_dir}` first)")
    tokenizer = train_tokenizer(corpus_texts(corpus_dir), vocab_size)
    save_tokenizer(tokenizer, output)
    click.echo(f"tokenizer with {tokenizer.get_vocab_size()} tokens written to {output}")


@train_group.command("target")
@click.option("--corpus", "corpus_dir", required=True, type=click.Path(file_okay=False, path_type=Path), help="Tokenized corpus.")
@click.option("--tokenizer", "tokenizer_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path), help="Checkpoints go here.")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=None, help="Export the best weights here at the end.")
@click.option("--resume", is_flag=True, help="Continue from RUN_DIR/checkpoint.pt.")
@click.option("--minutes", type=float, default=None, help="Training-time budget (the cosine decay ends with it).")
@click.option("--max-steps", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--seq-len", type=click.IntRange(min=8), default=512, show_default=True)
@click.option("--lr", type=float, default=2e-3, show_default=True)
@click.option("--warmup-steps", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--bf16/--fp32", default=True, show_default=True, help="bf16 autocast on CPU.")
@click.option("--loss-on", type=click.Choice(["all", "response"]), default="all", show_default=True)
@click.option("--weights", default=None, help="Source mix, e.g. code_stdlib=1,agentic_tools=1,prose_docs=1 (default balanced).")
@click.option("--sources", default=None, help="Corpus sources to train on, comma-separated (default: "
              "code_stdlib,agentic_tools,prose_docs; add code_files,agentic_sessions,prose_long for a long context).")
@click.option("--rope-theta", type=click.FloatRange(min=1.0, min_open=True), default=10000.0, show_default=True,
              help="RoPE base.")
@click.option("--init-from", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Continue training this model directory (e.g. the shipped target) instead of a fresh init; its "
                   "shape replaces --hidden-size/--layers/--heads/--kv-heads/--intermediate-size/--rope-theta.")
@click.option("--head-dim", type=click.IntRange(min=2), default=None,
              help="With --init-from: widen the attention heads to this head_dim, same function (train/widen.py).")
@click.option("--hidden-size", type=int, default=384, show_default=True)
@click.option("--layers", type=int, default=6, show_default=True)
@click.option("--heads", type=int, default=6, show_default=True)
@click.option("--kv-heads", type=int, default=2, show_default=True)
@click.option("--intermediate-size", type=int, default=1024, show_default=True)
@click.option("--eval-every", type=click.IntRange(min=1), default=250, show_default=True)
@click.option("--eval-windows", type=click.IntRange(min=1), default=24, show_default=True,
              help="Validation windows of --seq-len tokens per source at each evaluation.")
@click.option("--unlikelihood", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Weight of sequence-level unlikelihood steps (every second step; train/unlikelihood.py): greedy "
                   "continuations are generated and tokens in repeated 4-grams made less likely. 0 = off.")
@click.option("--ul-batch", type=click.IntRange(min=1), default=8, show_default=True, help="Prefixes per unlikelihood step.")
@click.option("--ul-prefix", type=click.IntRange(min=1), default=256, show_default=True, help="Tokens per prefix.")
@click.option("--ul-tokens", type=click.IntRange(min=4), default=128, show_default=True, help="Greedy tokens per prefix.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
def target_command(corpus_dir: Path, tokenizer_dir: Path, run_dir: Path, output: Path | None, resume: bool,
                   minutes: float | None, max_steps: int, batch_size: int, seq_len: int, lr: float, warmup_steps: int,
                   bf16: bool, loss_on: str, weights: str | None, sources: str | None, rope_theta: float, init_from: Path | None,
                   head_dim: int | None, hidden_size: int, layers: int, heads: int,
                   kv_heads: int, intermediate_size: int, eval_every: int, eval_windows: int, unlikelihood: float,
                   ul_batch: int, ul_prefix: int, ul_tokens: int, seed: int, threads: int) -> None:
    """Train the target on a balanced mix of all sources, with resumable checkpoints."""
    require_extra("engine", "torch", "tokenizers", "safetensors")
    import json

    from specgauge.train.corpus import TARGET_SOURCES
    from specgauge.train.progress import run_with_progress
    from specgauge.train.target import ConfigError, ModelShape, TrainConfig

    if hidden_size % heads or heads % kv_heads:
        raise UserError("--hidden-size must be divisible by --heads, and --heads by --kv-heads")
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise UserError(f"--tokenizer: no tokenizer.json in {tokenizer_dir}")
    if resume and not (run_dir / "checkpoint.pt").is_file():
        raise UserError(f"--resume: no checkpoint.pt in {run_dir}")
    chosen = tuple(s.strip() for s in sources.split(",") if s.strip()) if sources else TARGET_SOURCES
    try:
        config = TrainConfig(seq_len=seq_len, batch_size=batch_size, lr=lr, warmup_steps=warmup_steps, max_steps=max_steps,
                             minutes=minutes, bf16=bf16, loss_on=loss_on, seed=seed, threads=threads,
                             eval_every=eval_every, eval_windows=eval_windows, sources=chosen, init_from=str(init_from) if init_from else None,
                             weights=parse_weights(weights, chosen), unlikelihood=unlikelihood, ul_batch=ul_batch,
                             ul_prefix=ul_prefix, ul_tokens=ul_tokens)
    except ConfigError as exc:
        raise UserError(f"{exc.flags()}: {exc}") from None
    if head_dim is not None and init_from is None:
        raise UserError("--head-dim: only with --init-from (a fresh target's head_dim is --hidden-size / --heads)")
    if init_from is not None:
        from specgauge.engine.models.llama import LlamaConfig

        if not (init_from / "config.json").is_file():
            raise UserError(f"--init-from: no config.json in {init_from}")
        start = LlamaConfig.from_dict(json.loads((init_from / "config.json").read_text()))
        from tokenizers import Tokenizer

        vocab = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).get_vocab_size()
        if vocab != start.vocab_size:
            raise UserError(f"--init-from: {init_from} has vocab_size {start.vocab_size}, the --tokenizer {vocab}; "
                            "continue a model with its own tokenizer")
        try:
            shape = ModelShape.continuing(start, seq_len, head_dim)
        except ValueError as exc:
            raise UserError(f"--head-dim: {exc}") from None
    else:
        shape = ModelShape(hidden_size=hidden_size, num_hidden_layers=layers, num_attention_heads=heads,
                           num_key_value_heads=kv_heads, intermediate_size=intermediate_size,
                           max_position_embeddings=seq_len, rope_theta=rope_theta)
    run_with_progress(corpus_dir, tokenizer_dir, run_dir, shape, config, resume, output)


@train_group.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--tokenizer", "tokenizer_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--output", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--which", type=click.Choice(["best", "last"]), default="best", show_default=True)
def export_command(run_dir: Path, tokenizer_dir: Path, output: Path, which: str) -> None:
    """Export a run's best (or last) weights as a model directory: config.json, bf16 safetensors, tokenizer."""
    require_extra("engine", "torch", "safetensors", "tokenizers")
    from specgauge.train.target import export_target

    needed = run_dir / ("best.pt" if which == "best" else "checkpoint.pt")
    if not (run_dir / "checkpoint.pt").is_file() or not needed.is_file():
        raise UserError(f"RUN_DIR: {run_dir} has no {needed.name} and checkpoint.pt")
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise UserError(f"--tokenizer: no tokenizer.json in {tokenizer_dir}")
    model = export_target(run_dir, tokenizer_dir, output, which)
    click.echo(f"exported {model.num_parameters():,} parameters to {output}")


@train_group.command("export-draft")
@click.argument("draft_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--engine", type=click.Choice(["vllm", "sglang", "specgauge"]), required=True,
              help="the engine the copy is for: its config names the same target layers in that engine's meaning")
@click.option("--output", required=True, type=click.Path(file_okay=False, path_type=Path))
def export_draft_command(draft_dir: Path, engine: str, output: Path) -> None:
    """Copy an EAGLE-3 drafter (config ids in vLLM's meaning) for ENGINE: SGLang reads
    eagle_aux_hidden_state_layer_ids one layer later, so its copy says one less (docs/eagle3.md)."""
    import json
    import shutil

    from specgauge.engine.models.eagle3 import config_for_engine

    config_path = draft_dir / "config.json"
    if not config_path.is_file():
        raise UserError(f"DRAFT_DIR: no config.json in {draft_dir}")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"DRAFT_DIR: {config_path} is not JSON ({exc})") from None
    if output.resolve() == draft_dir.resolve():
        raise UserError("--output: must differ from DRAFT_DIR")
    output.mkdir(parents=True, exist_ok=True)
    for item in draft_dir.iterdir():
        if item.is_file() and item.name not in ("config.json", "SHA256SUMS"):
            shutil.copyfile(item, output / item.name)
    converted = config_for_engine(config, engine)
    (output / "config.json").write_text(json.dumps(converted, indent=2) + "\n")
    ids = (converted.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    click.echo(f"wrote {output} for {engine}: eagle_aux_hidden_state_layer_ids {ids}")


@train_group.command("eval")
@click.argument("model_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--corpus", "corpus_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--prompts", type=click.IntRange(min=1), default=8, show_default=True, help="Held-out prompts per source.")
@click.option("--max-new-tokens", type=click.IntRange(min=8), default=128, show_default=True)
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--ignore-eos", is_flag=True, help="Always generate --max-new-tokens tokens.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With it, write MODEL_DIR/TRAINING.md and SHA256SUMS from this run and the evaluation.")
@click.option("--wall", default="not recorded", help="Wall time of the run, for TRAINING.md.")
@click.option("--eval-windows", type=click.IntRange(min=1), default=64, show_default=True,
              help="Validation windows of the model's context length per source.")
@click.option("--sources", default=None, help="Corpus sources to evaluate, comma-separated (default: the run's, "
              "else code_stdlib,agentic_tools,prose_docs).")
def eval_command(model_dir: Path, corpus_dir: Path, prompts: int, max_new_tokens: int, json_out: Path | None, threads: int,
                 ignore_eos: bool, run_dir: Path | None, wall: str, eval_windows: int, sources: str | None) -> None:
    """Validation loss per source and the distinct-trigram share of greedy continuations."""
    require_extra("engine", "torch", "tokenizers", "safetensors")
    import json

    from specgauge.train.evaluate import evaluate_model

    if not (model_dir / "config.json").is_file():
        raise UserError(f"MODEL_DIR: no config.json in {model_dir}")
    if not (corpus_dir / "validation").is_dir():
        raise UserError(f"--corpus: {corpus_dir} has no tokenized validation/ split")
    if run_dir is not None and not (run_dir / "checkpoint.pt").is_file():
        raise UserError(f"--run-dir: no checkpoint.pt in {run_dir}")
    from specgauge.train.corpus import SOURCES, TARGET_SOURCES

    summary = None
    if run_dir is not None:
        from specgauge.train.report import run_summary

        summary = run_summary(run_dir, wall)
    chosen = tuple(s.strip() for s in sources.split(",") if s.strip()) if sources else \
        (summary["sources"] if summary else TARGET_SOURCES)
    unknown = [s for s in chosen if s not in SOURCES]
    if unknown or not chosen:
        raise UserError(f"--sources: {', '.join(unknown) or 'none given'}; expected some of {', '.join(SOURCES)}")
    report = evaluate_model(model_dir, corpus_dir, prompts_per_source=prompts, max_new_tokens=max_new_tokens,
                            threads=threads, ignore_eos=ignore_eos, sources=chosen, eval_windows=eval_windows)
    for source, row in report["sources"].items():
        click.echo(f"{source}: val loss {row['val_loss']:.3f}, distinct trigrams {row['distinct_trigram_share']:.3f}, "
                   f"mean generated {row['mean_generated_tokens']:.1f} tokens")
    if json_out:
        json_out.write_text(json.dumps(report, indent=2) + "\n")
    if summary is not None:
        from specgauge.train.report import reproduce_commands, write_training_report

        summary = {**summary, "eval_windows_at_eval": eval_windows}
        path = write_training_report(model_dir, report, summary, reproduce_commands(summary, model_dir, prompts, max_new_tokens))
        click.echo(f"wrote {path} and SHA256SUMS")


def _add_draft_command() -> None:
    from specgauge.train.draft_command import draft_command

    train_group.add_command(draft_command)


_add_draft_command()


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    app.add_command(train_group)
