"""``TRAINING.md`` and ``SHA256SUMS`` beside shipped weights: what was measured, how to reproduce it."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from specgauge.train.corpus import TARGET_SOURCES, file_sha256

SHIPPED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def machine_description() -> str:
    """CPU model, core count, Python and torch versions of this machine."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPU cores visible, Python {platform.python_version()}, torch {torch.__version__}"


def write_sha256sums(model_dir: Path, names: tuple[str, ...]) -> dict[str, str]:
    """Write ``SHA256SUMS`` (``sha256sum`` format) for ``names`` in ``model_dir``; returns the digests."""
    digests = {name: file_sha256(Path(model_dir) / name) for name in names}
    (Path(model_dir) / "SHA256SUMS").write_text("".join(f"{d}  {n}\n" for n, d in digests.items()))
    return digests


def read_sha256sums(model_dir: Path) -> dict[str, str]:
    """``{file name: sha256}`` from a ``SHA256SUMS`` file."""
    out = {}
    for line in (Path(model_dir) / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        out[name.strip()] = digest
    return out


def run_summary(run_dir: Path, wall: str) -> dict:
    """Steps, seconds, history and the reproducing command of a finished run in ``run_dir``."""
    import torch

    saved = torch.load(Path(run_dir) / "checkpoint.pt", map_location="cpu", weights_only=False)
    best = torch.load(Path(run_dir) / "best.pt", map_location="cpu", weights_only=False)
    config, shape = saved["config"], saved["shape"]
    state = saved["state"]
    return {
        "step": state["step"], "trained_seconds": state["trained_seconds"], "history": state["history"],
        "best_step": best["step"], "batch_size": config["batch_size"], "seq_len": config["seq_len"], "wall": wall,
        "target_command": target_command_line(config, shape),
        "sources": tuple(config.get("sources", TARGET_SOURCES)),
        "init_from": config.get("init_from"), "bf16": config.get("bf16", True),
        "widened": bool(config.get("init_from")) and widened(config, shape),
        "eval_windows": config.get("eval_windows", 24),
    }


def start_head_dim(init_from: str | None) -> int | None:
    """head_dim of the model a run continued (``--init-from``), from its config.json; None when
    there was none or it is no longer there."""
    path = Path(init_from) / "config.json" if init_from else None
    if path is None or not path.is_file():
        return None
    config = json.loads(path.read_text())
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def widened(config: dict, shape: dict) -> bool:
    """Whether a continued run widened its starting model's heads (``--head-dim``): the start's
    head_dim differs from the run's (taken as widened when the start is gone)."""
    start = start_head_dim(config.get("init_from"))
    return start is None or start != shape["head_dim"]


def target_command_line(config: dict, shape: dict) -> str:
    """The ``specgauge train target`` invocation that trains with ``config`` and ``shape``."""
    parts = [
        "specgauge train target --corpus runs/corpus --tokenizer runs/tokenizer --run-dir runs/target",
        f"--minutes {config['minutes']:g}" if config.get("minutes") else "",
        f"--max-steps {config['max_steps']} --batch-size {config['batch_size']} --seq-len {config['seq_len']}",
        f"--lr {config['lr']:g} --warmup-steps {config['warmup_steps']} --loss-on {config['loss_on']}",
        "--bf16" if config["bf16"] else "--fp32",
        *([f"--init-from {config['init_from']}" + (f" --head-dim {shape['head_dim']}" if widened(config, shape) else "")]
          if config.get("init_from") else [
            f"--hidden-size {shape['hidden_size']} --layers {shape['num_hidden_layers']} --heads {shape['num_attention_heads']}",
            f"--kv-heads {shape['num_key_value_heads']} --intermediate-size {shape['intermediate_size']}"]),
        (f"--unlikelihood {config['unlikelihood']:g} --ul-batch {config['ul_batch']} --ul-prefix {config['ul_prefix']} "
         f"--ul-tokens {config['ul_tokens']}") if config.get("unlikelihood") else "",
        f"--eval-every {config['eval_every']} --eval-windows {config['eval_windows']} --seed {config['seed']} --threads {config['threads']}",
        f"--rope-theta {shape['rope_theta']:g}" if shape.get("rope_theta", 10000.0) != 10000.0 and not config.get("init_from") else "",
        f"--sources {','.join(config['sources'])}" if tuple(config.get("sources", TARGET_SOURCES)) != TARGET_SOURCES else "",
    ]
    return " ".join(p for p in parts if p)


def reproduce_commands(summary: dict, model_dir: Path, prompts: int, max_new_tokens: int) -> list[str]:
    """The command lines that rebuild corpus, tokenizer and target, export and evaluate them."""
    start = summary.get("init_from")
    tokenizer = start or "runs/tokenizer"  # a continued run keeps its starting model's tokenizer
    return [
        "pip install -e '.[engine]'",
        *([] if start else ["specgauge train corpus --output runs/corpus --seed 0",
                            "specgauge train tokenizer --corpus runs/corpus --output runs/tokenizer --vocab-size 4096"]),
        f"specgauge train corpus --output runs/corpus --seed 0 --tokenizer {tokenizer}",
        summary["target_command"].replace("--tokenizer runs/tokenizer", f"--tokenizer {tokenizer}"),
        f"specgauge train export runs/target --tokenizer {tokenizer} --output {model_dir}",
        f"specgauge train eval {model_dir} --corpus runs/corpus --prompts {prompts} --max-new-tokens {max_new_tokens} "
        f"--eval-windows {summary.get('eval_windows_at_eval', 64)} --run-dir runs/target",
    ]


def write_training_report(model_dir: Path, evaluation: dict, run_summary: dict, commands: list[str]) -> Path:
    """Write ``TRAINING.md`` from an :func:`~specgauge.train.evaluate.evaluate_model` report and a run
    summary (shape, steps, seconds, history), then ``SHA256SUMS`` over the shipped files and it."""
    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    digests = {name: file_sha256(model_dir / name) for name in SHIPPED_FILES}
    shape_keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "max_position_embeddings", "rope_theta", "tie_word_embeddings",
                  "torch_dtype")
    start = run_summary.get("init_from")
    started = []
    if start and (Path(start) / "model.safetensors").is_file():
        widening = ("its heads widened to this head_dim with the same function (`specgauge.train.widen`), then trained on"
                    if run_summary.get("widened", True) else "its weights trained further on")
        started = [f"- started from: `{start}` (model.safetensors sha256 `{file_sha256(Path(start) / 'model.safetensors')}`), "
                   + widening,
                   f"  the sources {', '.join(run_summary.get('sources', ()))}"]
    lines = [
        "# The embedded target model: how it was trained and what it measures",
        "",
        "Everything below was measured on the machine named here by the commands listed; nothing is estimated.",
        "",
        "## Reproduce",
        "",
        "```sh",
        *commands,
        "```",
        "",
        "## Run",
        "",
        f"- machine: {machine_description()}",
        *started,
        f"- parameters: {evaluation['parameters']:,} (tied embeddings), stored as bf16",
        f"- shape: " + ", ".join(f"{k}={config[k]}" for k in shape_keys if k in config),
        f"- optimizer steps: {run_summary['step']}, batch {run_summary['batch_size']} x {run_summary['seq_len']} tokens "
        f"({run_summary['step'] * run_summary['batch_size'] * run_summary['seq_len']:,} training tokens, balanced over sources)",
        f"- time in optimizer steps: {run_summary['trained_seconds'] / 60:.1f} min; wall time of the run: {run_summary['wall']}",
        f"- shipped checkpoint: step {run_summary['best_step']} (lowest mean validation loss)",
        "",
        "## Measured",
        "",
        f"Validation loss: mean next-token cross-entropy over all tokens of up to {evaluation.get('eval_windows', 64)} windows of "
        f"{config.get('max_position_embeddings')} tokens per source (fp32). Distinct-trigram share: distinct / all "
        f"token trigrams of greedy continuations (≤ {evaluation['max_new_tokens']} tokens, stopping at `<|end|>`"
        f"{' ignored' if evaluation['ignore_eos'] else ''}) of the first {evaluation['prompts_per_source']} held-out "
        "validation prompts per source, pooled; 1.0 means no trigram repeats.",
        "",
        "| source | val loss | distinct trigrams | mean generated tokens |",
        "| --- | --- | --- | --- |",
    ]
    for source, row in evaluation["sources"].items():
        lines.append(f"| {source} | {row['val_loss']:.3f} | {row['distinct_trigram_share']:.3f} | {row['mean_generated_tokens']:.1f} |")
    if run_summary.get("history"):
        precision = "bf16 autocast" if run_summary.get("bf16", True) else "fp32"
        lines += ["", f"Validation loss during training ({precision}, first {run_summary.get('eval_windows', 24)} "
                  "windows per source):", "",
                  "| step | " + " | ".join(evaluation["sources"]) + " |", "| --- |" + " --- |" * len(evaluation["sources"])]
        for entry in run_summary["history"]:
            lines.append(f"| {entry['step']} | " + " | ".join(f"{entry['val'][s]:.3f}" for s in evaluation["sources"]) + " |")
    lines += ["", "## Sample greedy continuations (held-out prompts)", ""]
    for source, row in evaluation["sources"].items():
        for sample in row["samples"][:2]:
            lines += [f"**{source}** — prompt ends with:", "", "````text", sample["prompt"].strip()[-240:], "````", "",
                      "continuation:", "", "````text", sample["continuation"], "````", ""]
    lines += ["## Files (sha256)", "", *[f"- `{name}`: `{digest}`" for name, digest in digests.items()], "",
              "`SHA256SUMS` lists the same digests and that of this file.", ""]
    path = model_dir / "TRAINING.md"
    path.write_text("\n".join(lines))
    write_sha256sums(model_dir, (*SHIPPED_FILES, "TRAINING.md"))
    return path
