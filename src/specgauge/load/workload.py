"""Fix a run's workload once, before its first request, from what the server says about its model.

:func:`prepare_workload` returns the config the run is stored and resumed with:

1. the tokenizer: ``--tokenizer``, else the server's own when the path it reports is on this
   machine (:mod:`specgauge.client.server_model`); it counts tokens per chunk where the server
   gives no per-chunk counts, renders chat messages for raw-text APIs, and builds random prompts;
2. the prompts: the suite, or a dataset (``--dataset-name random|sharegpt|custom``) written as a
   suite file under ``work_dir`` (deterministic, so both arms of a comparison and a resume read the
   same file);
3. chat messages on a raw-text API (``sglang``, ``openai-completions``): rendered with the model's
   own chat template when the tokenizer has one; otherwise the run is refused unless
   ``raw_chat_format`` allows plain ``Role: content`` blocks;
4. the context: prompts whose prompt tokens + ``max_tokens`` exceed the server's context are left
   out (a derived suite ``NAME-fitN``), and the run says how many and why.

Everything it decided is in ``config.prepared`` (:class:`PreparedWorkload`).
"""

from __future__ import annotations

from pathlib import Path

from specgauge.client.endpoint import Endpoint
from specgauge.client.prompts import chat_template, prompt_text
from specgauge.client.server_model import ServerModel, describe_server_model
from specgauge.client.tokens import load_tokenizer
from specgauge.errors import UserError
from specgauge.load.bench_config import DEFAULT_OPEN_LOOP_REQUESTS, BenchConfig, PreparedWorkload, TraceReplay
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest, write_suite_jsonl
from specgauge.suites.registry import load_suite

RAW_TEXT_APIS = ("sglang", "openai-completions")
SUITES_DIR = "specgauge-suites"


def write_derived_suite(suite: Suite, work_dir: Path) -> str:
    """Write ``suite`` under ``work_dir/specgauge-suites`` (name + content hash) and return its path."""
    directory = Path(work_dir) / SUITES_DIR
    path = directory / f"{suite.name}-{suite.content_hash[:10]}.jsonl"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            write_suite_jsonl(suite, path)
    except OSError as exc:
        raise UserError(f"cannot write the derived suite {path}: {exc.strerror or exc}") from None
    return str(path)


def _dataset_suite(config: BenchConfig, tokenizer_path: str | None) -> Suite:
    """The suite a ``--dataset-name`` describes."""
    if config.dataset_name == "random":
        if not tokenizer_path:
            raise UserError("--dataset-name random builds exact-length prompts from the model's tokenizer: the server "
                            "reports none on this machine; pass --tokenizer PATH (a tokenizer.json)")
        from specgauge.suites.random_prompts import random_suite

        count = config.num_requests or DEFAULT_OPEN_LOOP_REQUESTS
        ratio = f"-r{config.random_range_ratio:g}" if config.random_range_ratio else ""
        return random_suite(load_tokenizer(tokenizer_path), num_prompts=count, input_len=config.random_input_len,
                            output_len=config.random_output_len, range_ratio=config.random_range_ratio,
                            seed=config.seed,
                            name=f"random-in{config.random_input_len}-out{config.random_output_len}{ratio}-n{count}"
                                 f"-s{config.seed}")
    from specgauge.suites.importers import import_suite

    fmt = "sharegpt" if config.dataset_name == "sharegpt" else "jsonl"
    return import_suite(config.dataset_path, name=f"{config.dataset_name}-{Path(config.dataset_path).stem}", fmt=fmt,
                        max_tokens=config.max_tokens or 256)


def write_dataset_suite(config: BenchConfig, tokenizer_path: str | None, work_dir: Path) -> str:
    """The suite file ``config.dataset_name`` describes, written once under ``work_dir`` (``compare``
    gives this one file to both arms, every stage and every round); its path."""
    return write_derived_suite(_dataset_suite(config, tokenizer_path), work_dir)


def _chat_template_choice(config: BenchConfig, suite: Suite, tokenizer_path: str | None) -> str | None:
    """How chat messages reach the model, or a :class:`UserError` when they cannot honestly."""
    if not any(r.messages is not None for r in suite.requests):
        return None
    if config.api not in RAW_TEXT_APIS:
        return "the server's own (chat API: the server applies its template)"
    if tokenizer_path and chat_template(tokenizer_path) is not None:
        return f"the model's chat template ({Path(tokenizer_path).with_name('tokenizer_config.json')})"
    if config.raw_chat_format:
        return "plain 'Role: content' blocks ending in 'Assistant:' (--raw-chat-format; not the model's template)"
    where = ("no chat_template next to " + tokenizer_path) if tokenizer_path else \
        "no tokenizer: the server reports none on this machine and no --tokenizer was given"
    raise UserError(f"suite '{suite.name}' has chat messages but --api {config.api} sends raw text and the model's "
                    f"chat template is unknown ({where}); pass --tokenizer PATH/tokenizer.json (with its "
                    f"tokenizer_config.json), use --api openai-chat, or --raw-chat-format to send plain "
                    f"'User: ...' text")


def _prompt_tokens(tokenizer, tokenizer_path: str, request: SuiteRequest, api: str, templated: bool) -> int:
    """A request's prompt length in tokens as the server will see it (as far as the client can tell)."""
    if api in RAW_TEXT_APIS:
        text = prompt_text(request, tokenizer_path)
    elif templated:   # a chat API applies the model's template to the messages (a raw prompt: one user message)
        as_chat = request if request.messages is not None else SuiteRequest(
            messages=(ChatMessage(role="user", content=request.prompt or ""),), max_tokens=request.max_tokens)
        text = prompt_text(as_chat, tokenizer_path)
    else:             # no template known: the messages' text alone, a lower bound
        text = request.prompt if request.messages is None else "\n".join(m.content for m in request.messages)
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def prompt_tokens_as_served(tokenizer, tokenizer_path: str, request: SuiteRequest, api: str, templated: bool) -> int:
    """A request's prompt length in tokens as the server will see it (``templated``: the tokenizer
    has a chat template) — the count the context check uses; ``tune --context-lengths`` bands by it."""
    return _prompt_tokens(tokenizer, tokenizer_path, request, api, templated)


def _fit_to_context(config: BenchConfig, suite: Suite, server: ServerModel, tokenizer_path: str | None,
                    work_dir: Path) -> tuple[Suite, int, list[str]]:
    """``suite`` less the requests that cannot fit the server's context; how many left, and notes."""
    context = server.context_length
    if context is None:
        return suite, 0, ["the server reports no context length: prompt lengths not checked"]
    if not tokenizer_path:
        return suite, 0, [f"the server's context is {context} tokens, but no tokenizer is known to count prompt "
                          f"tokens (pass --tokenizer): prompt lengths not checked"]
    tokenizer = load_tokenizer(tokenizer_path)
    templated = chat_template(tokenizer_path) is not None
    keep = [r for r in suite.requests
            if _prompt_tokens(tokenizer, tokenizer_path, r, config.api, templated)
            + (config.max_tokens or r.max_tokens) <= context]
    left_out = len(suite.requests) - len(keep)
    if left_out == 0:
        return suite, 0, []
    output = f"{config.max_tokens} output tokens" if config.max_tokens else "its max_tokens"
    reason = (f"left out {left_out} of {len(suite.requests)} prompts of suite '{suite.name}': prompt + {output} "
              f"exceed the server's {context}-token context ({server.context_source})")
    if not keep:
        raise UserError(reason.replace("left out", "none fits:", 1) + "; lower --max-tokens or use shorter prompts")
    fitted = Suite(name=f"{suite.name}-fit{context}", version=suite.version, requests=tuple(keep),
                   description=f"{suite.ref} less the {left_out} requests whose prompt + {output} exceed a "
                               f"{context}-token context")
    return fitted, left_out, [reason]


def _token_counting(api: str, tokenizer_source: str | None) -> str:
    first = "the server's cumulative count per chunk when it sends one"
    fallback = (f"else the tokenizer ({tokenizer_source})" if tokenizer_source
                else "else the final usage count spread evenly over the chunks")
    return f"{first}, {fallback}"


async def prepare_workload(config: BenchConfig, endpoint: Endpoint, work_dir: Path) -> BenchConfig:
    """The config with its workload fixed for this server (module doc); unchanged when already
    prepared (a resumed run). Raises :class:`UserError` before anything is sent when the workload
    cannot be sent as asked."""
    if config.prepared is not None:
        return config
    server = await describe_server_model(endpoint)
    if config.tokenizer_path:
        tokenizer_path, tokenizer_source = config.tokenizer_path, f"--tokenizer {config.tokenizer_path}"
    else:
        tokenizer_path, tokenizer_source = server.tokenizer_path, server.tokenizer_source
    if tokenizer_path:
        load_tokenizer(tokenizer_path)   # a bad file: one line, before anything is sent
    if config.trace is not None:
        return _prepare_trace(config, server, tokenizer_path, tokenizer_source, work_dir)
    if config.dataset_name is not None:
        suite = _dataset_suite(config, tokenizer_path)
        requested = f"--dataset-name {config.dataset_name}" + (f" {config.dataset_path}" if config.dataset_path else "")
        suite_ref = write_derived_suite(suite, work_dir)
    else:
        suite, requested, suite_ref = load_suite(config.suite), config.suite, config.suite
    template = _chat_template_choice(config, suite, tokenizer_path)
    fitted, left_out, notes = _fit_to_context(config, suite, server, tokenizer_path, work_dir)
    if fitted is not suite:
        suite_ref = write_derived_suite(fitted, work_dir)
    if template is not None:
        notes.append(f"chat template: {template}")
    counting = _token_counting(config.api, tokenizer_source)
    prepared = PreparedWorkload(requested_suite=requested, tokenizer_source=tokenizer_source, chat_template=template,
                                context_length=server.context_length, context_source=server.context_source,
                                left_out=left_out, token_counting=counting, notes=tuple(notes))
    return config.model_copy(update={"suite": suite_ref, "tokenizer_path": tokenizer_path, "prepared": prepared})


def _prepare_trace(config: BenchConfig, server: ServerModel, tokenizer_path: str | None,
                   tokenizer_source: str | None, work_dir: Path) -> BenchConfig:
    """``--trace``: the selected trace requests as a derived suite with their trace times, lengths
    fitted to the server's context by ``--trace-fit`` (:mod:`specgauge.load.traces.replay`)."""
    from specgauge.load.traces.formats import detect_format
    from specgauge.load.traces.replay import TraceSource, build_trace
    from specgauge.load.traces.selection import TraceSelection

    trace = config.trace
    fmt = trace.format or detect_format(trace.path)
    tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path else None
    templated = bool(tokenizer_path) and chat_template(tokenizer_path) is not None
    count_tokens = overhead = None
    if tokenizer is not None:
        def count_tokens(request: SuiteRequest) -> int:
            return _prompt_tokens(tokenizer, tokenizer_path, request, config.api, templated)

        probe = SuiteRequest(prompt="x", max_tokens=1)
        overhead = max(0, count_tokens(probe) - len(tokenizer.encode("x", add_special_tokens=False).ids))
    source = TraceSource(path=trace.path, fmt=fmt, selection=TraceSelection(trace.window, trace.max_requests,
                                                                          trace.sort),
                         fit=trace.fit, text_from=trace.text_from)
    built = build_trace(source, tokenizer=tokenizer, context=server.context_length, count_tokens=count_tokens,
                        served_overhead=overhead or 0)
    template = _chat_template_choice(config, built.suite, tokenizer_path)
    notes = list(built.notes)
    if template is not None:
        notes.append(f"chat template: {template}")
    if overhead:
        notes.append(f"trace prompt lengths count the {overhead} tokens the chat template adds")
    counts = built.counts
    replay = TraceReplay(format=fmt, requests=len(built.suite.requests),
                         span_s=max(built.times_s) - min(built.times_s), with_output_lengths=built.with_output_lengths,
                         scaled=counts.scaled, clipped=counts.clipped, skipped=counts.skipped,
                         failed_in_log=counts.failed_in_log, inexact_lengths=built.inexact_lengths)
    prepared = PreparedWorkload(requested_suite=f"--trace {trace.path} ({fmt})", tokenizer_source=tokenizer_source,
                                chat_template=template, context_length=server.context_length,
                                context_source=server.context_source, left_out=counts.skipped,
                                token_counting=_token_counting(config.api, tokenizer_source), notes=tuple(notes),
                                trace=replay)
    return config.model_copy(update={"suite": write_derived_suite(built.suite, work_dir),
                                     "tokenizer_path": tokenizer_path, "prepared": prepared})
