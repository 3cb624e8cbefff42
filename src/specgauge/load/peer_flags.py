"""The flag names of vLLM's ``vllm bench serve`` and SGLang's ``python -m sglang.bench_serving``,
accepted by ``bench`` and ``compare`` and translated into specgauge's own settings (docs/bench.md
has the side-by-side table).

Sources: ``vllm/benchmarks/serve.py`` (``add_cli_args``, ``parse_goodput``, ``check_goodput_args``),
``vllm/benchmarks/lib/endpoint_request_func.py`` (``ASYNC_REQUEST_FUNCS``: ``vllm`` and ``openai``
post to ``/v1/completions``, ``openai-chat`` to ``/v1/chat/completions``),
``vllm/benchmarks/datasets/random.py`` (the random dataset), and SGLang's
``python/sglang/bench_serving.py`` (``ASYNC_REQUEST_FUNCS`` and ``run_benchmark``: ``sglang`` /
``sglang-native`` post to ``/generate``, ``sglang-oai``/``vllm``/``lmdeploy`` to ``/v1/completions``,
``sglang-oai-chat``/``vllm-chat``/``lmdeploy-chat`` to ``/v1/chat/completions``).
"""

from __future__ import annotations

import math
import re

import click

from specgauge.analysis.definitions import GOODPUT_METRICS
from specgauge.cli_options import CommaList

PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")      # vLLM's --percentile-metrics names
INF_RATE_DEFAULT_REQUESTS = 64                            # bench's open-loop default count

# Peer backend name -> specgauge --api (the endpoint each peer client posts to).
BACKEND_APIS = {
    "vllm": "openai-completions", "openai": "openai-completions", "sglang-oai": "openai-completions",
    "lmdeploy": "openai-completions",
    "openai-chat": "openai-chat", "vllm-chat": "openai-chat", "sglang-oai-chat": "openai-chat",
    "lmdeploy-chat": "openai-chat",
    "sglang": "sglang", "sglang-native": "sglang",
}
# Options that define a run's load (``--resume`` refuses them, like the native ones).
PEER_RUN_OPTIONS = ("base_url", "host", "port", "backend", "request_rate", "dataset_name",
                    "dataset_path", "random_input_len",
                    "random_output_len", "random_range_ratio", "ignore_eos", "goodput", "percentile_metrics",
                    "metric_percentiles", "raw_chat_format")
SLO_PAIR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*:[^\s:]+$")


# ``--request-rate``: requests/s, comma-separated; ``inf`` sends every request at once.
RATE_LIST = CommaList(float, metavar="RATE,...", low=0, low_open=True, finite=False)
METRIC_NAMES = CommaList(str, metavar="METRIC,...", choices=PERCENTILE_METRICS)
PERCENTILES = CommaList(float, metavar="P,...", low=0, low_open=True, high=100)


def _shared_peer_options(scope: str) -> list:
    """The dataset, EOS, summary and result-file flags ``bench`` and ``compare`` share; ``scope``
    ("bench" or "compare") words their help."""
    compare = scope == "compare"
    summary = "each arm's vLLM-style result" if compare else "the vLLM-style summary"
    return [
        click.option("--dataset-name", type=click.Choice(["random", "sharegpt", "custom"]),
                     help=("prompts of every stage, both arms: " if compare else "prompts: ")
                     + "random (exact token lengths), sharegpt or custom (--dataset-path); "
                     + ("instead of --suite/--domains" if compare else "else --suite")),
        click.option("--dataset-path", type=click.Path(exists=True, dir_okay=False), help="file of --dataset-name"),
        click.option("--random-input-len", type=click.IntRange(min=1), default=1024, show_default=True),
        click.option("--random-output-len", type=click.IntRange(min=1), default=128, show_default=True),
        click.option("--random-range-ratio", type=click.FloatRange(0, 1, max_open=True), default=0.0,
                     show_default=True, help="lengths drawn from [L(1-r), L(1+r)] as vLLM does"),
        click.option("--ignore-eos", is_flag=True, help="generate every max_tokens token" + (", both arms" if compare
                                                        else "") + " (on by default with random)"),
        click.option("--percentile-metrics", type=METRIC_NAMES, default="ttft,tpot,itl", show_default=True,
                     help=f"metrics of {summary} ({','.join(PERCENTILE_METRICS)})"),
        click.option("--metric-percentiles", type=PERCENTILES, default="99", show_default=True,
                     help="percentiles, e.g. 50,90,99"),
        click.option("--goodput", multiple=True, metavar="METRIC:MS",
                     help=("SLO goodput per arm and point" if compare else "SLO goodput")
                     + ", e.g. --goodput ttft:200 tpot:50 (ttft, tpot, e2el in ms)"),
        click.option("--save-result", is_flag=True,
                     help="write one vLLM-style result JSON per arm" if compare else "write a vLLM-style result JSON"),
        click.option("--result-filename", metavar="FILE",
                     help="NAME.json → NAME-baseline.json and NAME-speculative.json (implies --save-result)"
                     if compare else "its file name (implies --save-result)"),
        click.option("--raw-chat-format", is_flag=True,
                     help="allow plain 'User: ...' text for chat suites on a raw-text API with no chat template"),
    ]


def peer_options(function):
    """Add the peer clients' flags to a click command (``bench``; ``compare`` takes a subset)."""
    options = [
        click.option("--base-url", help="vLLM/SGLang: the server's base URL (instead of URL)"),
        click.option("--host", help="vLLM/SGLang: server host (with --port; instead of URL)"),
        click.option("--port", type=click.IntRange(1, 65535), help="vLLM/SGLang: server port (with --host)"),
        click.option("--backend", type=click.Choice(sorted(BACKEND_APIS)),
                     help="vLLM/SGLang benchmark backend name, an alias of --api (docs/bench.md)"),
        click.option("--request-rate", type=RATE_LIST,
                     help="vLLM/SGLang: requests/s (open loop); inf sends all at once (closed loop at "
                          "--max-concurrency, else every request in flight)"),
        *_shared_peer_options("bench"),
    ]
    for option in reversed(options):
        function = option(function)
    return function


class PeerFlagsCommand(click.Command):
    """Accepts vLLM's space-separated ``--goodput ttft:200 tpot:50`` (argparse ``nargs='+'``): the
    ``NAME:VALUE`` words after ``--goodput`` join its value."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        joined: list[str] = []
        index = 0
        while index < len(args):
            word = args[index]
            joined.append(word)
            index += 1
            if word == "--goodput":
                pairs = []
                while index < len(args) and SLO_PAIR.match(args[index]):
                    pairs.append(args[index])
                    index += 1
                if pairs:
                    joined.append(" ".join(pairs))
        return super().parse_args(ctx, joined)


def parse_goodput(values: tuple[str, ...]) -> dict[str, float]:
    """``("ttft:200 tpot:50",)`` → ``{"ttft": 200.0, "tpot": 50.0}``; a bad pair is a BadParameter."""
    slos: dict[str, float] = {}
    for pair in (p for value in values for p in re.split(r"[\s,]+", value.strip()) if p):
        name, sep, number = pair.partition(":")
        try:
            if not sep:
                raise ValueError
            slos[name] = float(number)
        except ValueError:
            raise click.BadParameter(f"{pair!r} is not METRIC:MILLISECONDS (e.g. ttft:200)",
                                     param_hint="'--goodput'") from None
        if name not in GOODPUT_METRICS:
            raise click.BadParameter(f"unknown metric {name!r} (one of: {', '.join(GOODPUT_METRICS)})",
                                     param_hint="'--goodput'")
        if not (slos[name] >= 0 and math.isfinite(slos[name])):
            raise click.BadParameter(f"{pair!r}: the value must be a number of ms >= 0", param_hint="'--goodput'")
    return slos


def resolve_url(options: dict) -> str | None:
    """``URL``, or vLLM's ``--base-url``, or ``--host``/``--port`` (vLLM's defaults 127.0.0.1:8000)."""
    given = [name for name in ("url", "base_url") if options.get(name)]
    if options.get("host") or options.get("port"):
        given.append("host/port")
    if len(given) > 1:
        raise click.UsageError("give the server once: URL, --base-url or --host/--port")
    if options.get("url") or options.get("base_url"):
        return options.get("url") or options.get("base_url")
    if given:
        return f"http://{options.get('host') or '127.0.0.1'}:{options.get('port') or 8000}"
    return None


def resolve_api(options: dict, default: str | None) -> str | None:
    """``--api``, or the API of ``--backend``; both given must agree."""
    backend, api = options.get("backend"), options.get("api")
    if backend is None:
        return api or default
    mapped = BACKEND_APIS[backend]
    if api is not None and api != mapped:
        raise click.UsageError(f"--backend {backend} means --api {mapped}, but --api {api} was given")
    return mapped


def bench_settings(options: dict) -> dict:
    """The ``BenchConfig`` fields the peer flags set, for ``bench`` (``options``: click's values).

    ``--request-rate`` finite values become open-loop points; ``inf`` (vLLM: every request at
    time 0) a closed-loop point at ``--max-concurrency``, else at the request count. A random
    dataset turns ``ignore_eos`` on, as ``vllm bench serve`` does for it.
    """
    api = resolve_api(options, default="openai-chat")
    count = options.get("num_requests")
    concurrency, rates = tuple(options.get("concurrency") or ()), tuple(options.get("rate") or ())
    request_rates = options.get("request_rate") or ()
    if request_rates and rates:
        raise click.UsageError("give --rate or --request-rate, not both")
    if request_rates:
        rates = tuple(r for r in request_rates if math.isfinite(r))
        if any(math.isinf(r) for r in request_rates):
            if count is None and options.get("duration") is None:
                count = INF_RATE_DEFAULT_REQUESTS
            burst = options.get("max_concurrency") or count
            if burst is None:
                raise click.UsageError("--request-rate inf with --duration needs --max-concurrency")
            concurrency = concurrency + (burst,)
    return dict(
        api=api, concurrency=concurrency, rates=rates, num_requests=count,
        **{name: options[name] for name in ("requests_per_user", "min_requests") if options.get(name) is not None},
        dataset_name=options.get("dataset_name"), dataset_path=options.get("dataset_path"),
        random_input_len=options["random_input_len"], random_output_len=options["random_output_len"],
        random_range_ratio=options["random_range_ratio"],
        ignore_eos=bool(options.get("ignore_eos")) or options.get("dataset_name") == "random",
        raw_chat_format=bool(options.get("raw_chat_format")),
        goodput=parse_goodput(tuple(options.get("goodput") or ())),
        percentile_metrics=options["percentile_metrics"], metric_percentiles=options["metric_percentiles"],
    )


def wants_peer_summary(options: dict) -> bool:
    """Whether to print the vLLM-style summary: goodput, percentiles or a result file asked for."""
    ctx = click.get_current_context(silent=True)
    given = {name for name in ("percentile_metrics", "metric_percentiles")
             if ctx is not None and ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)}
    return bool(options.get("goodput") or given or options.get("save_result") or options.get("result_filename"))


def compare_peer_options(function):
    """The peer flags ``compare`` takes: the API, the request count, the concurrency cap, EOS, the
    chat-format choice, the dataset (its prompts for every stage, both arms), ``--request-rate inf``,
    goodput, percentiles and one result file per arm (docs/compare.md)."""
    options = [
        click.option("--backend", type=click.Choice(sorted(BACKEND_APIS)),
                     help="vLLM/SGLang benchmark backend name, an alias of --api"),
        click.option("--max-concurrency", type=click.IntRange(min=1),
                     help="cap on the sweep's concurrency (levels above it run at it)"),
        click.option("--request-rate", type=RATE_LIST,
                     help="vLLM/SGLang: only inf (compare's sweep is closed loop; use bench for open loop)"),
        *_shared_peer_options("compare"),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def compare_settings(options: dict) -> dict:
    """The ``ComparePlan`` fields the peer flags of ``compare`` set (``options``: click's values)."""
    ctx = click.get_current_context(silent=True)
    api_given = ctx is not None and ctx.get_parameter_source("api") not in (None, click.core.ParameterSource.DEFAULT)
    api = resolve_api({**options, "api": options["api"] if api_given else None}, default=options["api"])
    levels = tuple(options["concurrency"])
    if options.get("max_concurrency") is not None:
        levels = tuple(sorted({min(c, options["max_concurrency"]) for c in levels}))
    finite = [r for r in options.get("request_rate") or () if math.isfinite(r)]
    if finite:
        raise click.UsageError(f"--request-rate {finite[0]:g}: compare's sweep is closed loop (concurrency levels) "
                               f"and has no open-loop points; use --request-rate inf, or specgauge bench for rates")
    dataset = options.get("dataset_name")
    if dataset is not None:
        given = [flag for flag, name in (("--suite", "suite"), ("--sweep-suite", "sweep_suite"))
                 if options.get(name) is not None]
        if given:
            raise click.UsageError(f"--dataset-name is the prompts of every stage: drop {given[0]}")
        if dataset in ("sharegpt", "custom") and not options.get("dataset_path"):
            raise click.UsageError(f"--dataset-name {dataset} needs --dataset-path FILE")
        if dataset == "random" and options.get("dataset_path"):
            raise click.UsageError("--dataset-name random makes its prompts: drop --dataset-path")
    elif options.get("dataset_path"):
        raise click.UsageError("--dataset-path needs --dataset-name sharegpt or custom")
    return dict(api=api, concurrency=levels,
                ignore_eos=bool(options.get("ignore_eos")) or dataset == "random",
                raw_chat_format=bool(options.get("raw_chat_format")))


def compare_result_settings(options: dict) -> dict:
    """Goodput SLOs, percentile metrics and percentiles of ``compare``'s per-arm vLLM-style results
    (one-line BadParameter on a bad value)."""
    return dict(goodput=parse_goodput(tuple(options.get("goodput") or ())),
                percentile_metrics=options["percentile_metrics"], metric_percentiles=options["metric_percentiles"])


COMPARE_WORKLOAD_OPTIONS = ("request_rate", "dataset_name", "dataset_path", "random_input_len", "random_output_len",
                            "random_range_ratio", "goodput", "percentile_metrics", "metric_percentiles",
                            "save_result", "result_filename")


def refuse_workload_flags(ctx: click.Context, why: str) -> None:
    """A one-line UsageError naming the first dataset/result flag given on the command line (``why``:
    what takes its place, e.g. ``--against-baseline takes its workload from the baseline``)."""
    for param in ctx.command.params:
        if param.name in COMPARE_WORKLOAD_OPTIONS and ctx.get_parameter_source(param.name) not in (
                None, click.core.ParameterSource.DEFAULT):
            raise click.UsageError(f"{why}; drop {param.opts[0]}")
