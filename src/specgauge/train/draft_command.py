"""``specgauge train draft``: train the EAGLE-3 draft head (heavy imports inside the body)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from specgauge.errors import UserError, require_extra

def parse_mix(text: str | None) -> dict[str, float]:
    """``code_stdlib=0.5,agentic_tools=0.4`` → a weight for every source (sources left out get 0);
    unknown sources, bad numbers and an all-zero mix are UserErrors."""
    from specgauge.train.corpus import SOURCES
    from specgauge.train.mix import parse_weights

    weights = parse_weights(text, SOURCES)
    if not weights:
        return {}
    if not any(w > 0 for w in weights.values()):
        raise UserError("--weights: at least one source needs a positive weight")
    return {source: weights.get(source, 0.0) for source in SOURCES}


def parse_aux_layers(text: str, target_layers: int) -> tuple[int, ...]:
    """``--aux-layers I,J,K``: three distinct input indices of the target's layers."""
    try:
        ids = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"--aux-layers {text}: not comma-separated layer ids") from None
    if len(ids) != 3 or len(set(ids)) != 3 or min(ids) < 0:
        raise UserError(f"--aux-layers {text}: EAGLE-3 reads three distinct target layers (ids ≥ 0)")
    if max(ids) >= target_layers:
        raise UserError(f"--aux-layers {text}: the target has {target_layers} layers (ids 0..{target_layers - 1}: "
                        "the input of that layer)")
    return ids


def start_head_shape(ctx: click.Context, init_from: Path, draft_vocab_size: int,
                     intermediate_size: int | None) -> tuple[int, int]:
    """The draft vocabulary and MLP width a run started from the head ``--init-from`` names trains:
    the head's, but for a ``--draft-vocab-size`` given on the command line (of another size: a new
    map, built from the regenerated responses) and a wider ``--intermediate-size`` given (the MLP
    widened with the same function); a narrower one is a UserError."""
    import json

    config_path = init_from / "config.json"
    if not config_path.is_file() or not any(init_from.glob("*.safetensors")):
        raise UserError(f"--init-from: {init_from} has no config.json and *.safetensors of an EAGLE-3 head")
    try:
        config = json.loads(config_path.read_text())
        shape = {"draft_vocab_size": int(config.get("draft_vocab_size") or config["vocab_size"]),
                 "intermediate_size": int(config["intermediate_size"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--init-from: {config_path} is not an EAGLE-3 head's config ({exc})") from None
    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE

    width = shape["intermediate_size"]
    if given("intermediate_size"):
        if intermediate_size < width:
            raise UserError(f"--intermediate-size {intermediate_size}: the head in {init_from} has {width}; "
                            "--init-from can widen its MLP, not narrow it")
        width = intermediate_size
    return (draft_vocab_size if given("draft_vocab_size") else shape["draft_vocab_size"]), width


@click.command("draft")
@click.option("--target", "target_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Target model directory (HF layout with tokenizer); default: the shipped target.")
@click.option("--corpus", "corpus_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Tokenized corpus (DIR/<split>/<source>/shard-*.jsonl).")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Regenerated data and checkpoints go here.")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the trained head here (config.json, model.safetensors, TRAINING.md, SHA256SUMS).")
@click.option("--resume", is_flag=True, help="Continue from RUN_DIR/draft_checkpoint.pt.")
@click.option("--init-from", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Start from this trained head (e.g. the shipped drafter, for a target continued from its "
                   "target): its vocabulary map (unless --draft-vocab-size), aux layers (unless --aux-layers) and MLP "
                   "width (unless a wider --intermediate-size) are kept, its attention widened to the target's "
                   "head_dim.")
@click.option("--weights", default="code_stdlib=0.5,code_questions=0.5,agentic_tools=0.4,prose_docs=0.1", show_default=True,
              help="Training mix: source=weight, comma separated (sources left out get 0).")
@click.option("--minutes", type=float, default=None, help="Training-time budget (the cosine decay ends with it).")
@click.option("--max-steps", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--max-len", type=click.IntRange(min=8), default=512, show_default=True, help="Samples are cut to this many tokens.")
@click.option("--lr", type=float, default=2e-3, show_default=True)
@click.option("--warmup-steps", type=click.IntRange(min=1), default=40, show_default=True)
@click.option("--ttt-steps", type=click.IntRange(min=3), default=4, show_default=True, help="Unrolled training-time-test steps.")
@click.option("--feed", type=click.Choice(["draft", "target"]), default="draft", show_default=True,
              help="Token fed to unrolled steps: the head's own argmax, or the sequence's token (SpecForge).")
@click.option("--draft-vocab-size", type=click.IntRange(min=1), default=2048, show_default=True,
              help="Target tokens the head drafts from (the most frequent of the regenerated responses); with "
                   "--init-from, given and not the head's size: a new map of this size, the head's lm_head rows kept "
                   "for tokens in both.")
@click.option("--intermediate-size", type=click.IntRange(min=1), default=None,
              help="The head's MLP width (default: the target's; with --resume, the checkpoint's). A narrower "
                   "head drafts faster.")
@click.option("--aux-layers", default=None, metavar="I,J,K",
              help="The three target layers whose inputs feed the head (vLLM's eagle_aux_hidden_state_layer_ids); "
                   "default: the --init-from head's, else SGLang's default for the target's depth.")
@click.option("--regen-samples", type=click.IntRange(min=1), default=400, show_default=True,
              help="Prompts regenerated per training source (scaled by its weight).")
@click.option("--regen-validation-samples", type=click.IntRange(min=1), default=48, show_default=True)
@click.option("--max-prompt-tokens", type=click.IntRange(min=2), default=320, show_default=True)
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=160, show_default=True)
@click.option("--temperature", type=float, default=0.0, show_default=True, help="0: greedy regeneration.")
@click.option("--max-running", type=click.IntRange(min=1), default=96, show_default=True, help="Regeneration batch.")
@click.option("--eval-every", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--eval-samples", type=click.IntRange(min=1), default=48, show_default=True, help="Validation samples per source.")
@click.option("--cache-target/--online-target", default=True, show_default=True,
              help="Run every sample through the target once before training and keep its features and teacher "
                   "(--teacher-top-k), or recompute them for every batch (less memory, each step slower).")
@click.option("--teacher-top-k", type=click.IntRange(min=1), default=64, show_default=True,
              help="With --cache-target: the target's largest logits over the draft vocabulary kept per position "
                   "(the soft cross-entropy's teacher, renormalised over them).")
@click.option("--bf16/--fp32", default=True, show_default=True, help="bf16 autocast on CPU while training.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.pass_context
def draft_command(ctx: click.Context, target_dir: Path | None, corpus_dir: Path, run_dir: Path, output: Path | None,
                  resume: bool, init_from: Path | None, weights: str,
                  minutes: float | None, max_steps: int, batch_size: int, max_len: int, lr: float, warmup_steps: int,
                  ttt_steps: int, feed: str, draft_vocab_size: int, intermediate_size: int | None, regen_samples: int, regen_validation_samples: int,
                  max_prompt_tokens: int, max_new_tokens: int, temperature: float, max_running: int, eval_every: int,
                  eval_samples: int, cache_target: bool, teacher_top_k: int, bf16: bool, seed: int, threads: int, aux_layers: str | None) -> None:
    """Train the EAGLE-3 draft head: regenerate responses with the target, then training-time test."""
    require_extra("engine", "torch", "tokenizers", "safetensors")
    mix = parse_mix(weights)
    if target_dir is None:
        from specgauge.train.assets import shipped_target_dir

        target_dir = shipped_target_dir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (target_dir / name).is_file():
            raise UserError(f"--target: no {name} in {target_dir}")
    from specgauge.train.corpus import SOURCES

    for source in SOURCES:
        if not (corpus_dir / "train" / source).is_dir() or not (corpus_dir / "validation" / source).is_dir():
            raise UserError(f"--corpus: {corpus_dir} has no train/{source} and validation/{source} "
                            "(build it with `specgauge train corpus --tokenizer ...`)")
    import json

    target_config = json.loads((target_dir / "config.json").read_text())
    context = target_config.get("max_position_embeddings", 2048)
    aux = parse_aux_layers(aux_layers, int(target_config.get("num_hidden_layers", 0))) if aux_layers else None
    if max_prompt_tokens + max_new_tokens > context:
        raise UserError(f"--max-prompt-tokens {max_prompt_tokens} + --max-new-tokens {max_new_tokens} exceed the "
                        f"target's context of {context} tokens")
    if init_from is not None:
        draft_vocab_size, intermediate_size = start_head_shape(ctx, init_from, draft_vocab_size, intermediate_size)
    if resume and not (run_dir / "draft_checkpoint.pt").is_file():
        raise UserError(f"--resume: no draft_checkpoint.pt in {run_dir}")
    from specgauge.train.draft import DraftTrainConfig
    from specgauge.train.draft_run import DraftRun, command_line, run_draft_training
    from specgauge.train.regenerate import RegenerateConfig

    try:
        regen = RegenerateConfig(samples_per_source=regen_samples, max_prompt_tokens=max_prompt_tokens,
                                 max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                                 max_running=max_running, threads=threads)
        train = DraftTrainConfig(max_len=max_len, batch_size=batch_size, lr=lr, warmup_steps=warmup_steps,
                                 max_steps=max_steps, minutes=minutes, ttt_steps=ttt_steps, feed=feed,
                                 draft_vocab_size=draft_vocab_size, intermediate_size=intermediate_size, bf16=bf16, seed=seed, threads=threads,
                                 eval_every=eval_every, eval_samples=eval_samples, weights=mix,
                                 cache_target=cache_target, teacher_top_k=teacher_top_k,
                                 init_from=str(init_from) if init_from is not None else None, aux_layers=aux)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    args = sys.argv[sys.argv.index("draft") + 1:] if "draft" in sys.argv else []
    run_draft_training(DraftRun(target_dir=target_dir, corpus_dir=corpus_dir, run_dir=run_dir, output=output,
                                regenerate=regen, validation_samples=regen_validation_samples, train=train,
                                resume=resume, command=command_line(args)))
