"""``BenchConfig``: one benchmark run's settings, validated once at the edge (CLI or caller).

The config, less its secrets, is stored with the run, so ``bench --resume`` re-reads exactly
what the run was started with.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specgauge.analysis.aggregate import DEFAULT_MAX_ERROR_RATE
from specgauge.errors import UserError
from specgauge.client.endpoint import API_NAMES
from specgauge.analysis.definitions import GOODPUT_METRICS
from specgauge.load.peer_flags import PERCENTILE_METRICS
from specgauge.load.plan import PointSpec

# No ``--header`` value is ever written to the store, an export or a report: any of them may be a
# token (``X-Token``, a tenant key). Only the names are kept; ``--resume`` takes the values again.
REDACTED = "<redacted>"
DEFAULT_OPEN_LOOP_REQUESTS = 64


def check_slos(slos: dict[str, float]) -> dict[str, float]:
    """Goodput SLOs (ms per metric, ``GOODPUT_METRICS``): known names, finite values >= 0; else ValueError."""
    for name, value in slos.items():
        if name not in GOODPUT_METRICS:
            raise ValueError(f"unknown goodput metric {name!r} (one of: {', '.join(GOODPUT_METRICS)})")
        if not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"goodput {name} must be a number of ms >= 0 (got {value})")
    return slos


class PreparedWorkload(BaseModel):
    """What specgauge did to the workload before sending it, stored with the run config (so a
    resumed run sends the same thing, and every report can say it): the server's context and the
    prompts left out for it, the tokenizer and chat template used, how tokens per chunk are counted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requested_suite: str                       # what the user asked for (a suite ref or a dataset)
    tokenizer_source: str | None = None        # "--tokenizer", "the server's own (...)" or None
    chat_template: str | None = None           # how chat messages reach the model (None: no chat requests)
    context_length: int | None = None
    context_source: str | None = None
    left_out: int = 0                          # prompts whose prompt + max_tokens exceed the context
    trace: TraceReplay | None = None           # a trace replay: what the trace became
    token_counting: str = ""                   # how tokens per chunk are counted
    notes: tuple[str, ...] = ()                # the sentences the terminal prints


class TraceConfig(BaseModel):
    """``bench --trace FILE``: which trace, which part of it, how fast, and how to fill it
    (:mod:`specgauge.load.traces`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    format: Literal["mooncake", "vllm-timed", "bailian", "burstgpt", "timed-jsonl"] | None = None   # None: detected
    speed: float = Field(default=1.0, gt=0)                  # X times faster than recorded
    window: tuple[float, float | None] = (0.0, None)         # trace seconds
    max_requests: int | None = Field(default=None, ge=1)
    sort: bool = False
    fit: Literal["scale", "clip", "skip"] = "scale"
    text_from: str | None = None                             # a suite: the text of a length-only trace


class TraceReplay(BaseModel):
    """What the trace became (stored with the run): requests, their span, the fit counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str
    requests: int
    span_s: float                     # first to last send, trace seconds (before --trace-speed)
    with_output_lengths: bool         # every request has its recorded output length: sent with ignore_eos
    scaled: int = 0
    clipped: int = 0
    skipped: int = 0
    failed_in_log: int = 0
    inexact_lengths: int = 0


class BenchConfig(BaseModel):
    """Settings of one ``specgauge bench`` run: the server, the suite and the load points.

    Points run in order: one closed-loop point per ``concurrency`` entry, then one open-loop point
    per ``rates`` entry. With neither, the single-stream point (concurrency 1) runs.
    Without ``num_requests`` or ``duration_s``, a closed-loop point sends max(``min_requests``,
    ``requests_per_user`` x concurrency) requests (16 and 4 by default) and an open-loop point 64.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    api: str
    suite: str = "smoke"
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    num_requests: int | None = Field(default=None, ge=1)
    requests_per_user: int = Field(default=4, ge=1)
    min_requests: int = Field(default=16, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    warmup: int = Field(default=0, ge=0)
    seed: int = 0
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)   # None: not sent (the server's default, 1)
    top_k: int | None = Field(default=None, ge=-1)          # None: not sent; 0 or -1: no cut
    sampling_seed: int | None = None   # base of the per-request seeds at temperature > 0 (None: ``seed``)
    model: str | None = None
    api_key: str | None = Field(default=None, repr=False)               # never stored, never shown
    headers: tuple[tuple[str, str], ...] = Field(default=(), repr=False)  # stored by name only
    tokenizer_path: str | None = None
    insecure: bool = False                     # https without certificate checks (--insecure)
    max_error_rate: float = Field(default=DEFAULT_MAX_ERROR_RATE, ge=0, le=1)
    # The workload options of vLLM's `bench serve` / SGLang's `bench_serving` (docs/bench.md).
    dataset_name: Literal["random", "sharegpt", "custom"] | None = None
    dataset_path: str | None = None
    random_input_len: int = Field(default=1024, ge=1)
    random_output_len: int = Field(default=128, ge=1)
    random_range_ratio: float = Field(default=0.0, ge=0, lt=1)
    ignore_eos: bool = False
    raw_chat_format: bool = False              # allow plain "User: ..." text when no chat template is found
    think_time_ms: float = Field(default=0.0, ge=0)   # multi-turn sessions: pause before each later turn
    think_time_distribution: Literal["fixed", "exponential", "uniform"] = "fixed"
    goodput: dict[str, float] = Field(default_factory=dict)    # SLO in ms per metric (GOODPUT_METRICS)
    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")
    metric_percentiles: tuple[float, ...] = (99.0,)
    trace: TraceConfig | None = None           # replay a timed trace: one open-loop point at its times
    prepared: PreparedWorkload | None = None   # set once, before the first request (load/workload.py)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {url!r})")
        return url.rstrip("/")

    @field_validator("api")
    @classmethod
    def _known_api(cls, api: str) -> str:
        if api not in API_NAMES:
            raise ValueError(f"unknown API {api!r} (one of: {', '.join(API_NAMES)})")
        return api

    @field_validator("concurrency")
    @classmethod
    def _positive_concurrency(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        bad = [v for v in values if v < 1]
        if bad:
            raise ValueError(f"concurrency must be >= 1 (got {bad[0]})")
        return values

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        bad = [v for v in values if not (v > 0 and math.isfinite(v))]
        if bad:
            raise ValueError(f"rate must be > 0 requests/s (got {bad[0]})")
        return values

    @field_validator("goodput")
    @classmethod
    def _known_slos(cls, slos: dict[str, float]) -> dict[str, float]:
        return check_slos(slos)

    @field_validator("percentile_metrics")
    @classmethod
    def _known_percentile_metrics(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        bad = [n for n in names if n not in PERCENTILE_METRICS]
        if bad:
            raise ValueError(f"unknown metric {bad[0]!r} (one of: {', '.join(PERCENTILE_METRICS)})")
        return names

    @field_validator("metric_percentiles")
    @classmethod
    def _valid_percentiles(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        bad = [v for v in values if not 0 < v <= 100]
        if bad:
            raise ValueError(f"percentiles must be in (0, 100] (got {bad[0]:g})")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> "BenchConfig":
        if self.dataset_name in ("sharegpt", "custom") and not self.dataset_path:
            raise ValueError(f"--dataset-name {self.dataset_name} needs --dataset-path FILE")
        if self.dataset_name == "random" and self.dataset_path:
            raise ValueError("--dataset-name random builds its prompts; drop --dataset-path")
        if self.trace is not None and (self.concurrency or self.rates or self.dataset_name):
            raise ValueError("--trace replays the trace's own arrival times and requests: drop --concurrency, "
                             "--rate and --dataset-name")
        if self.arrival == "poisson" and self.burstiness != 1.0:
            raise ValueError("--burstiness needs --arrival gamma (Poisson arrivals have burstiness 1)")
        return self

    def point_specs(self) -> list[PointSpec]:
        """The run's load points, in the order they run. ``max_concurrency`` caps open-loop points'
        requests in flight and, for closed-loop points, their concurrency (alone: one closed-loop
        point at that concurrency)."""
        common = dict(duration_s=self.duration_s, warmup_requests=self.warmup, seed=self.seed,
                      max_tokens=self.max_tokens, temperature=self.temperature, ignore_eos=self.ignore_eos,
                      think_time_ms=self.think_time_ms, think_time_distribution=self.think_time_distribution,
                      top_p=self.top_p, top_k=self.top_k,
                      sampling_seed=self.seed if self.sampling_seed is None else self.sampling_seed)
        if self.trace is not None:
            return [self._trace_spec(common)]
        closed = self.concurrency or (() if self.rates else (self.max_concurrency or 1,))
        if self.max_concurrency is not None:
            closed = tuple(dict.fromkeys(min(c, self.max_concurrency) for c in closed))
        specs = [PointSpec(mode="closed", concurrency=c,
                           num_requests=self._count(max(self.min_requests, self.requests_per_user * c)), **common)
                 for c in closed]
        specs += [PointSpec(mode="open", rate=r, arrival=self.arrival, burstiness=self.burstiness,
                            max_concurrency=self.max_concurrency,
                            num_requests=self._count(DEFAULT_OPEN_LOOP_REQUESTS), **common)
                  for r in self.rates]
        return specs

    def _trace_spec(self, common: dict) -> PointSpec:
        """The replay's one point: its requests at their trace times / ``trace.speed``; before the
        trace is read (``prepared`` unset), a stand-in with the same settings."""
        replay = self.prepared.trace if self.prepared is not None else None
        if replay is None:
            return PointSpec(mode="open", rate=1.0, max_concurrency=self.max_concurrency, trace_speed=self.trace.speed,
                             num_requests=self.num_requests or self.trace.max_requests or 1, **common)
        span = replay.span_s / self.trace.speed
        rate = (replay.requests - 1) / span if span > 0 and replay.requests > 1 else float(replay.requests)
        count = min(replay.requests, self.num_requests or replay.requests)
        return PointSpec(mode="open", rate=round(rate, 6), max_concurrency=self.max_concurrency,
                         trace_speed=self.trace.speed, num_requests=count,
                         **{**common, "ignore_eos": self.ignore_eos or replay.with_output_lengths})

    def _count(self, default: int) -> int | None:
        if self.num_requests is not None:
            return self.num_requests
        return None if self.duration_s is not None else default

    def stored(self) -> dict:
        """The config as stored with the run: no API key, every header's value redacted (names kept)."""
        data = self.model_dump(mode="json", exclude={"api_key"})
        data["headers"] = redacted_headers(self.headers)
        return data


def redacted_headers(headers) -> list[list[str]]:
    """``[[name, "<redacted>"], ...]``: what is stored of ``--header`` pairs (the names alone)."""
    return [[name, REDACTED] for name, _ in headers]


def restore_headers(stored: list, given: tuple[tuple[str, str], ...], *,
                    what: str = "the run") -> list[tuple[str, str]]:
    """The header pairs to send again for a stored config: each stored name takes its value from
    ``given`` (``--header`` on this command line; a UserError names a missing one), and given
    headers the run did not have are added."""
    supplied = {name.lower(): (name, value) for name, value in given}
    restored = []
    for name, value in stored:
        if value == REDACTED:
            if name.lower() not in supplied:
                raise UserError(f"{what} was started with header '{name}', whose value is not stored; "
                                f"pass it again with --header '{name}: ...'")
            value = supplied.pop(name.lower())[1]
        elif name.lower() in supplied:   # a value stored by an older version: the command line wins
            value = supplied.pop(name.lower())[1]
        restored.append((name, value))
    restored.extend(supplied.values())
    return restored
