"""CLI commands of this part. Heavy imports stay inside the command bodies."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from specgauge.engine.serving.launch import READY_PREFIX
from specgauge.errors import UserError, require_extra
from specgauge.shipped_models import (DEFAULT, DIRECTORY_DRAFT_DIR, FIRST, ShippedModel, default_model, resolve_model,
                                      shipped_names)

# serve's EAGLE-3 chain defaults: the best pair for the shipped drafter on the reference CPU (docs/speculative.md)
SERVE_NUM_STEPS = 5
SERVE_MIN_DRAFT_PROB = 0.15


def _positive(ctx, param, value):
    if value is not None and value <= 0:
        raise click.BadParameter("must be positive", ctx=ctx, param=param)
    return value


def _schedule(ctx, param, value):
    """vLLM's schedule rules (``specgauge.speculation_schedule``), one line on a bad one."""
    if value is None:
        return None
    from specgauge.speculation_schedule import parse_schedule

    try:
        return tuple(parse_schedule(value))
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


TESTING_FAULTS = ("accept-bias",)


def _testing_fault(ctx, param, value):
    """``accept-bias=F`` → F (a float > 0); None when not given. One line on anything else."""
    if value is None:
        return None
    name, sep, number = value.partition("=")
    if name.strip() not in TESTING_FAULTS or not sep:
        raise click.BadParameter(f"{value!r}: must be accept-bias=F (F > 0, e.g. accept-bias=1.5)", ctx=ctx,
                                 param=param)
    try:
        factor = float(number)
    except ValueError:
        raise click.BadParameter(f"{value!r}: {number.strip()!r} is not a number", ctx=ctx, param=param) from None
    if not (factor > 0 and factor < float("inf")):
        raise click.BadParameter(f"{value!r}: F must be a finite number > 0", ctx=ctx, param=param)
    return factor


def _model(ctx, param, value: str | None) -> tuple[Path, ShippedModel | None]:
    """``--model``: an existing directory wins, else a shipped name (vLLM's --model: a local path or a
    repo id); neither → one line listing the shipped names. None → the default shipped model (a
    one-line error saying how to set it up when it is not)."""
    try:
        if value is None:
            return default_model().target_dir, DEFAULT
        return resolve_model(value)
    except KeyError as exc:
        raise click.BadParameter(exc.args[0], ctx=ctx, param=param) from None


def draft_model_path(shipped: ShippedModel | None, algorithm: str, given: Path | None) -> Path | None:
    """The ``--speculative-draft-model-path`` serve runs with: the flag's; else, for EAGLE-3 on a shipped
    model, that model's drafter; None (the engine's default, the specgauge-8m drafter) for a plain
    directory and for a model whose drafter is that one. A shipped model without a drafter is a
    UsageError (one line)."""
    if given is not None or algorithm.upper() != "EAGLE3" or shipped is None:
        return given
    if shipped.draft_dir == DIRECTORY_DRAFT_DIR:
        return None
    if shipped.draft_dir is None:
        raise click.UsageError(f"--model {shipped.name} ships no EAGLE-3 drafter: "
                               f"pass --speculative-draft-model-path DIR")
    return shipped.draft_dir


def serving_threads() -> int:
    """The engine's CPU threads when serving: the usable cores less one, at least 1. The server's
    event loop (and a benchmark client on the same machine) needs a core that the engine's
    OpenMP threads, which spin while they wait, do not take; vLLM's CPU backend reserves one core
    per rank for its scheduler process the same way (vllm/utils/ompmultiprocessing.py,
    ``OMPProcessManager.reserve_cpu_num``). On a 2-core machine one thread served a single stream
    at 3.7 ms per output token against 6.3 ms with torch's default of two (docs/results.md)."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


@click.command("serve")
@click.option("--model", "model", metavar="NAME|DIR", default=None, callback=_model,
              show_default=DEFAULT.name,
              help="A model directory in Hugging Face layout, or a shipped model's name "
                   f"({', '.join(shipped_names()) or DEFAULT.name}; 'specgauge models' lists them); "
                   "an existing directory of that name wins.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to bind; 0 picks a free one (the URL is printed).")
@click.option("--device", default="cpu", show_default=True, help="torch device: cpu, cuda, cuda:1 ...")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default="auto",
              show_default=True, help="Weights and KV dtype; auto = bfloat16 on CUDA and on CPUs with native bf16 (AVX512-BF16, AMX), else float32.")
@click.option("--weight-packing", type=click.Choice(["auto", "none", "fp16", "onednn"]), default="auto", show_default=True,
              help="How matmuls on CPU hold their weights: fp16 = float32 math on weights packed for FBGEMM (half the "
                   "bytes; exact for bf16-valued weights but below 2^-14); onednn = bfloat16 weights reordered once "
                   "for oneDNN (same bits, less time); auto = onednn for bfloat16, fp16 for float32 when every "
                   "weight is a bf16 value.")
@click.option("--served-model-name", default="specgauge-target", show_default=True,
              help="Model name the OpenAI routes answer to.")
@click.option("--max-model-len", type=int, default=None, callback=_positive,
              help="Context length (prompt + output); default the model's, at most 4096.")
@click.option("--max-running-requests", type=int, default=64, show_default=True, callback=_positive,
              help="Requests decoded together at most.")
@click.option("--max-waiting-requests", type=int, default=256, show_default=True, callback=_positive,
              help="Queued requests beyond the running ones; more answer 503 with Retry-After.")
@click.option("--max-tokens-per-step", type=int, default=512, show_default=True, callback=_positive,
              help="Token budget of one engine step (decodes + prefill chunks).")
@click.option("--block-size", type=int, default=16, show_default=True, callback=_positive,
              help="Tokens per KV block.")
@click.option("--num-blocks", type=int, default=None, callback=_positive,
              help="KV blocks in the pool (default: sized from the running limit and context).")
@click.option("--api-key", default=None, envvar="SPECGAUGE_API_KEY", show_envvar=True,
              help="Require 'Authorization: Bearer KEY' on every route but /health (the environment "
                   "variable keeps the key out of `ps`).")
@click.option("--incremental-streaming-output", is_flag=True,
              help="/generate streams text deltas instead of cumulative text (SGLang's flag).")
@click.option("--max-body-bytes", type=int, default=1 << 20, show_default=True, callback=_positive,
              help="Largest request body accepted (413 beyond).")
@click.option("--header-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              help="Seconds a connection has to send a request's whole head (from its start or its previous "
                   "response); then it is closed.")
@click.option("--keep-alive-timeout", type=click.IntRange(min=1), default=5, show_default=True,
              help="Seconds an idle keep-alive connection is kept open (uvicorn's timeout_keep_alive).")
@click.option("--threads", type=int, default=None, callback=_positive,
              help="torch CPU threads; default on CPU: the usable cores less one (at least 1), the one left to the "
                   "HTTP server and the clients beside it.")
@click.option("--speculative-algorithm", type=click.Choice(["NONE", "EAGLE3", "NGRAM"], case_sensitive=False),
              default="NONE", show_default=True,
              help="Speculative decoding (SGLang's flag): EAGLE3 (the shipped drafter of --model NAME, or of "
                   f"{FIRST.name} for a directory, unless --speculative-draft-model-path), NGRAM (prompt "
                   "lookup), NONE (plain decoding).")
@click.option("--speculative-draft-model-path", type=click.Path(path_type=Path), default=None,
              show_default="the shipped drafter", help="EAGLE-3 head directory (published layout).")
@click.option("--speculative-num-steps", type=int, default=SERVE_NUM_STEPS, show_default=True, callback=_positive,
              help="Draft steps per verify (depth of the chain or tree).")
@click.option("--speculative-eagle-topk", type=int, default=1, show_default=True, callback=_positive,
              help="Branching of the EAGLE-3 draft tree; 1 drafts a chain.")
@click.option("--speculative-num-draft-tokens", type=int, default=None, callback=_positive,
              help="Tokens verified per request per step, root included (default: num-steps + 1).")
@click.option("--speculative-disable-above", type=click.IntRange(min=0), default=None,
              help="Decode without speculation whenever a step serves more than N requests (running, or waiting to be admitted).")
@click.option("--speculative-min-draft-prob", type=float, default=SERVE_MIN_DRAFT_PROB, show_default=True,
              help="EAGLE-3 chain: stop drafting after a token whose draft probability is below this (0 = off).")
@click.option("--speculative-adaptive", is_flag=True,
              help="Choose the number of draft tokens (0 = off) each step from measured step times and acceptance.")
@click.option("--speculative-schedule", "speculative_schedule", default=None, callback=_schedule,
              metavar="JSON",
              help="Draft tokens by batch size (and context length), vLLM's num_speculative_tokens_per_batch_size "
                   "form: a JSON list of [bs_lo, bs_hi, K] or [bs_lo, bs_hi, ctx_lo, ctx_hi, K]; K 0 = no drafting, "
                   "clamped to the draft depth; a gap inherits the previous entry's K.")
@click.option("--testing-fault", "accept_bias", default=None, callback=_testing_fault, metavar="accept-bias=F",
              help="For tests of specgauge itself: a wrong sampler. accept-bias=F multiplies each drafted token's "
                   "acceptance probability by F (clamped to 1) at temperature > 0, shifting the output distribution "
                   "(compare --samples-per-prompt must flag it).")
def serve(model: tuple[Path, ShippedModel | None], host: str, port: int, device: str, dtype: str, weight_packing: str, served_model_name: str,
          max_model_len: int | None, max_running_requests: int, max_waiting_requests: int,
          max_tokens_per_step: int, block_size: int, num_blocks: int | None, api_key: str | None,
          incremental_streaming_output: bool, max_body_bytes: int, header_timeout: float,
          keep_alive_timeout: int, threads: int | None,
          speculative_algorithm: str, speculative_draft_model_path: Path | None, speculative_num_steps: int,
          speculative_eagle_topk: int, speculative_num_draft_tokens: int | None,
          speculative_disable_above: int | None, speculative_min_draft_prob: float,
          speculative_adaptive: bool, speculative_schedule: tuple | None, accept_bias: float | None) -> None:
    """Serve a model with the embedded engine (OpenAI + SGLang-native routes), in the foreground."""
    require_extra("engine", "torch", "safetensors", "tokenizers", "fastapi", "uvicorn", "jinja2",
                  "prometheus_client", "orjson")
    model_dir, shipped = model
    if not (model_dir / "config.json").is_file():
        hint = ("the shipped target model is missing (train it with 'specgauge train target')"
                if shipped is DEFAULT else "config.json missing")
        raise UserError(f"no model at {model_dir}: {hint}; pass --model DIR")
    speculative_draft_model_path = draft_model_path(shipped, speculative_algorithm, speculative_draft_model_path)
    from specgauge.engine.core.engine import Engine, EngineConfig
    from specgauge.engine.core.scheduler import SchedulerConfig
    from specgauge.engine.serving.app import ServerSettings, bind_or_explain, serve_forever
    from specgauge.engine.speculative.config import SpeculativeConfig

    if threads is None and device.startswith("cpu"):
        threads = serving_threads()
    config = EngineConfig(
        model_dir=str(model_dir), device=device, dtype=dtype, max_model_len=max_model_len,
        block_size=block_size, num_blocks=num_blocks, threads=threads, weight_packing=weight_packing,
        scheduler=SchedulerConfig(max_running=max_running_requests, max_tokens_per_step=max_tokens_per_step,
                                  max_waiting=max_waiting_requests),
        speculative=SpeculativeConfig(
            algorithm=speculative_algorithm.upper(), num_steps=speculative_num_steps,
            eagle_topk=speculative_eagle_topk, num_draft_tokens=speculative_num_draft_tokens,
            draft_model_path=str(speculative_draft_model_path) if speculative_draft_model_path else None,
            disable_above=speculative_disable_above, adaptive=speculative_adaptive, schedule=speculative_schedule,
            min_draft_prob=speculative_min_draft_prob, accept_bias=accept_bias or 1.0),
    )
    config.validate()  # bad flags fail with one line before anything loads
    sock = bind_or_explain(host, port)  # a busy port or a bad host, too
    print(f"loading {model_dir} on {device} ...", file=sys.stderr, flush=True)
    try:
        engine = Engine(config)
    except BaseException:
        sock.close()
        raise
    print(compute_line(engine), file=sys.stderr, flush=True)
    settings = ServerSettings(served_model_name=served_model_name, api_key=api_key, max_body_bytes=max_body_bytes,
                              incremental_streaming_output=incremental_streaming_output,
                              header_timeout_s=header_timeout, keep_alive_timeout_s=keep_alive_timeout)
    serve_forever(engine, settings, sock, on_ready=lambda url: print(READY_PREFIX + url, flush=True))


def compute_line(engine) -> str:
    """What the loaded model computes in, as probed at load time (the same fields as
    ``/server_info``): its weights' dtype and packing, the attention (K/V) dtype, whether every
    token's logits are the same bits whatever shares its step, the compute threads, and how decode
    attention reads the KV pool (in place, or gathered and why)."""
    import torch

    model = engine.model
    dtype = str(engine.config.torch_dtype).removeprefix("torch.")
    return (f"computing in {dtype} (weights {model.weight_packing}), attention in "
            f"{str(model.attention_dtype).removeprefix('torch.')}, batch-invariant "
            f"{'yes' if model.batch_invariant else 'no'}, {torch.get_num_threads()} thread(s), "
            f"KV pool read {model.attention_path}")


@click.command("models")
def models() -> None:
    """The shipped models --model NAME accepts: name, context, parameters, drafter."""
    from specgauge.shipped_models import SHIPPED, absent_setup_models, describe

    rows = [describe(SHIPPED[name]) for name in shipped_names()] + [describe(m) for m in absent_setup_models()]
    if not rows:
        raise UserError(f"no shipped model in this checkout (the default, {DEFAULT.name}, is missing from "
                        f"{DEFAULT.target_dir}); train it with 'specgauge train target'")
    click.echo(f"{'name':<20} {'context':>8} {'parameters':>11}  {'drafter':<20}  description")
    for row in rows:
        default = " (default)" if row.name == DEFAULT.name else ""
        size = f"{row.parameters / 1e6:>10.1f}M" if row.parameters else f"{'-':>11}"
        click.echo(f"{row.name:<20} {row.context:>8} {size}  {row.drafter:<20}  "
                   f"{row.description}{default}")


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    app.add_command(serve)
    app.add_command(models)
