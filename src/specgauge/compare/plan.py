"""``ComparePlan``: what one comparison runs, validated once at the edge (CLI, demo, caller)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from specgauge.compare.arms import ArmSpec
from specgauge.load.bench_config import BenchConfig, TraceConfig, check_slos

SWEEP_PREFIX = "sweep:c="   # one run per arm and sweep concurrency: "sweep:c=16"
RATE_PREFIX = "rate:"       # --rates: one open-loop run per arm and rate: "rate:2"
DEFAULT_RATE_REQUESTS = 32  # requests per open-loop point and arm without --num-requests
SINGLE_PREFIX = "single:"
SPLIT_SINGLE_STAGE = "single"   # one single-stream run over a suite file, split by its domain tags
TEMPERATURE_MARK = "@t="         # a single-stream stage at another than the plan's temperature: "single:coding@t=0.7"
TRACE_STAGE = "trace"           # compare --trace: both arms replay the trace (ABBA by repeat); the only stage
DISTRIBUTION_STAGE = "distribution"   # --samples-per-prompt: each of a few prompts sampled N times per arm
DISTRIBUTION_CONCURRENCY = 8     # its requests in flight per arm (batched: the same distribution, sooner)
DISTRIBUTION_PROMPTS = 2         # prompts it samples (the first of the first domain's suite, or of --suite)
DISTRIBUTION_POSITIONS = 12      # output tokens per sample, the positions tested
# Default rounds when an arm is a launch command: its arms run one after the other, so one round
# would put a slow minute on one arm only; two run A B | B A. Other arms are up at once (ABBA by point): 1.
LAUNCHED_ROUNDS = 2
# The store's key of each speculative arm after the first (a comparison of several): "speculative-2", ...;
# its runs are linked as arm "speculative" of stage "STAGE|arm2" (the store's arm column takes
# baseline/speculative/verify only), so that a two-arm comparison's store rows stay as they were.
MORE_ARM_PREFIX = "speculative-"
STAGE_ARM_MARK = "|arm"


def store_link(arm_key: str, stage_name: str) -> tuple[str, str]:
    """(arm, stage) as the store links the run of ``arm_key`` in ``stage_name``."""
    if arm_key.startswith(MORE_ARM_PREFIX):
        return "speculative", f"{stage_name}{STAGE_ARM_MARK}{arm_key[len(MORE_ARM_PREFIX):]}"
    return arm_key, stage_name


def from_store_link(arm: str, stage_name: str) -> tuple[str, str]:
    """The inverse of :func:`store_link`: (arm key, stage name)."""
    stage, mark, number = stage_name.partition(STAGE_ARM_MARK)
    return (f"{MORE_ARM_PREFIX}{number}", stage) if mark else (arm, stage_name)


def split_temperature(stage_name: str) -> tuple[str, float | None]:
    """``single:coding@t=0.7`` → (``single:coding``, 0.7); an unmarked name → (name, None)."""
    name, mark, value = stage_name.partition(TEMPERATURE_MARK)
    return (name, float(value)) if mark else (stage_name, None)


class ArmConfig(BaseModel):
    """One arm as stored with the comparison."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Literal["baseline", "speculative"]
    kind: Literal["url", "command", "engine"]
    value: str

    def spec(self) -> ArmSpec:
        return ArmSpec(self.name, self.kind, self.value)


class Stage(BaseModel):
    """A part of the comparison with its own suite: a domain's single stream, or the sweep."""

    model_config = ConfigDict(frozen=True)

    name: str
    suite: str
    concurrency: tuple[int, ...]
    num_requests: int | None
    temperature: float | None = None   # None: the plan's
    max_tokens: int | None = None      # None: the plan's
    seeds_per_arm: bool = False        # each arm and round its own request seeds (independent samples)


class ComparePlan(BaseModel):
    """A comparison of two arms on the same suites, prompts, seed and settings.

    Single stream per domain (each built-in domain suite at concurrency 1, or ``suite`` split by
    its domain tags), then the concurrency sweep on ``sweep_suite`` (default: ``suite``, else the
    first domain's suite), one run per arm and concurrency so that each point has its own request
    count: ``num_requests_sweep`` when given, else max(``sweep_min_requests``,
    ``sweep_requests_per_user`` x concurrency). ``rounds`` repeats everything; rounds pool as more
    requests; left out, it is 2 when an arm is a launch command (A B | B A), else 1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    baseline: ArmConfig
    speculative: ArmConfig
    # a comparison of several speculative arms: the arms after ``speculative``, and every speculative
    # arm's label (``speculative`` first); both empty for two arms, and then left out of the stored plan
    more_speculative: tuple[ArmConfig, ...] = ()
    arm_labels: tuple[str, ...] = ()
    api: str = "openai-chat"
    domains: tuple[str, ...] = ("coding", "encyclopedic")
    domain_suites: dict[str, str] = Field(default_factory=dict)   # domain -> suite ref (default: the built-in)
    suite: str | None = None
    # --suite's single stream: a derived suite of up to num_requests_single prompts per domain tag
    # (compare/per_domain.py) and its size, one pass of it per round; None: ``suite`` itself
    single_suite: str | None = None
    single_requests: int | None = Field(default=None, ge=1)
    suite_layout: Literal["specbench", "mtbench"] | None = None   # the field's per-category table
    sweep_suite: str | None = None
    trace: TraceConfig | None = None              # --trace: the trace replayed on both arms, the only stage
    trace_bin_s: float = Field(default=10.0, gt=0)   # --trace-bin: window of trace seconds
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    rates: tuple[float, ...] = ()   # --rates: open-loop points (requests/s), Poisson or gamma as bench's
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    num_requests_single: int = Field(default=12, ge=1)
    num_requests_sweep: int | None = Field(default=None, ge=1)   # fixed count per sweep point; else scaled:
    sweep_requests_per_user: int = Field(default=2, ge=1)        # max(sweep_min_requests, this x concurrency)
    sweep_min_requests: int = Field(default=16, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int = 0
    temperature: float = Field(default=0.0, ge=0)   # the sweep's, the recommendation's: the one you serve at
    temperatures: tuple[float, ...] = ()            # --temperatures: single stream at each (empty: temperature)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    speculative_arm_config: dict | None = None   # a URL arm's declared --speculative-config (vLLM's form)
    samples_per_prompt: int | None = Field(default=None, ge=2)   # the distribution check (analysis/distribution.py)
    distribution_suite: str | None = None   # its prompts: a derived suite of DISTRIBUTION_PROMPTS prompts
    warmup: int = Field(default=2, ge=0)
    rounds: int = Field(default=1, ge=1)   # left out: LAUNCHED_ROUNDS when an arm is a launch command, else 1
    model: str | None = None
    tokenizer: str | None = None   # tokenizer.json: chat template for /generate, tokens per chunk when uncounted
    label: str = "speculation"
    ignore_eos: bool = False         # both arms generate every max_tokens token
    raw_chat_format: bool = False    # allow plain "User: ..." text when a raw-text API has no chat template
    goodput: dict[str, float] = Field(default_factory=dict)   # --goodput SLOs, ms per metric: the result's goodput
    think_time_ms: float = Field(default=0.0, ge=0)            # multi-turn sessions: pause before a later turn
    think_time_distribution: Literal["fixed", "exponential", "uniform"] = "fixed"
    bootstrap_resamples: int = Field(default=2000, ge=100)
    start_timeout_s: float = Field(default=180.0, gt=0)
    insecure: bool = False   # https arms: no certificate checks (--insecure)
    api_key: str | None = Field(default=None, exclude=True, repr=False)
    headers: tuple[tuple[str, str], ...] = Field(default=(), exclude=True, repr=False)   # --header: sent, never stored

    @model_validator(mode="before")
    @classmethod
    def _default_rounds(cls, data: object) -> object:
        """``rounds`` left out (or None): :data:`LAUNCHED_ROUNDS` when an arm is a launch command, else 1."""
        if isinstance(data, dict) and data.get("rounds") is None:
            kinds = [getattr(arm, "kind", None) if not isinstance(arm, dict) else arm.get("kind")
                     for arm in (data.get("baseline"), data.get("speculative"), *(data.get("more_speculative") or ()))]
            data = {**data, "rounds": LAUNCHED_ROUNDS if "command" in kinds else 1}
        return data

    @model_serializer(mode="wrap")
    def _two_arm_shape(self, handler):
        """A two-arm plan is stored as it always was: without the keys of several arms."""
        data = handler(self)
        if isinstance(data, dict) and not self.more_speculative:
            data.pop("more_speculative", None)
            data.pop("arm_labels", None)
        return data

    @field_validator("goodput")
    @classmethod
    def _known_slos(cls, slos: dict[str, float]) -> dict[str, float]:
        return check_slos(slos)

    @field_validator("temperatures")
    @classmethod
    def _sorted_temperatures(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if any(v < 0 for v in values):
            raise ValueError("--temperatures must be >= 0")
        return tuple(sorted(set(values)))

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if any(not (v > 0 and math.isfinite(v)) for v in values):
            raise ValueError("--rates must be requests/s > 0")
        return tuple(sorted(set(values)))

    @field_validator("concurrency")
    @classmethod
    def _sorted_levels(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(set(values)))

    @model_validator(mode="after")
    def _consistent(self) -> "ComparePlan":
        if self.baseline.name != "baseline" or self.speculative.name != "speculative":
            raise ValueError("arms must be named baseline and speculative")
        if any(arm.name != "speculative" for arm in self.more_speculative):
            raise ValueError("every arm after the baseline must be named speculative")
        if self.more_speculative:
            if len(self.arm_labels) != 1 + len(self.more_speculative):
                raise ValueError("several speculative arms need one label each")
            if len(set(self.arm_labels)) != len(self.arm_labels) or not all(self.arm_labels):
                raise ValueError(f"arm labels must be unique and non-empty, got {', '.join(self.arm_labels)}")
            if self.trace is not None:
                raise ValueError("--trace replays the trace on two arms: give one speculative arm")
        if not self.domains and not self.suite and not self.concurrency:
            raise ValueError("nothing to run: give --domains, --suite or --concurrency")
        if self.samples_per_prompt is not None and self.distribution_temperature == 0:
            raise ValueError("--samples-per-prompt compares sampled outputs: give a --temperature (or --temperatures) "
                             "above 0 (at temperature 0 the outputs are compared text for text)")
        for stage in self.stages():   # the bench rules (API name, concurrency >= 1, ...) apply to every stage
            self.bench_config(stage, "http://127.0.0.1")
        return self

    @property
    def schedule(self) -> Literal["abba_by_point", "sequential_rounds"]:
        """ABBA by point when both arms can be up at once; arms one after the other when one is a
        launch command (it may need the whole machine or GPU)."""
        if "command" in (arm.kind for arm in self.arm_configs.values()):
            return "sequential_rounds"
        return "abba_by_point"

    @property
    def arm_keys(self) -> tuple[str, ...]:
        """Every arm's key, baseline first: ``baseline``, ``speculative``, ``speculative-2``, ..."""
        return ("baseline", "speculative", *(f"{MORE_ARM_PREFIX}{i + 2}" for i in range(len(self.more_speculative))))

    @property
    def arm_configs(self) -> dict[str, ArmConfig]:
        """Every arm by its key."""
        return dict(zip(self.arm_keys, (self.baseline, self.speculative, *self.more_speculative)))

    @property
    def speculative_labels(self) -> dict[str, str]:
        """Each speculative arm's label by its key (two arms: ``label``)."""
        return dict(zip(self.arm_keys[1:], self.arm_labels or (self.label,)))

    @property
    def single_temperatures(self) -> tuple[float, ...]:
        """The temperatures of the single-stream stages: ``--temperatures``, else ``temperature``."""
        return self.temperatures or (self.temperature,)

    @property
    def distribution_temperature(self) -> float:
        """The distribution check's: ``temperature`` when above 0, else the highest of ``temperatures``."""
        return self.temperature if self.temperature > 0 else max(self.temperatures, default=0.0)

    def stages(self) -> list[Stage]:
        """Single-stream stages (per domain and single-stream temperature), the distribution check, the sweep;
        with ``trace``, the trace replay alone."""
        if self.trace is not None:
            return [Stage(name=TRACE_STAGE, suite=self.trace.text_from or "smoke", concurrency=(1,), num_requests=None)]
        stages = []
        for temperature in self.single_temperatures:
            mark = "" if temperature == self.temperature else f"{TEMPERATURE_MARK}{temperature:g}"
            if self.suite is not None:
                stages.append(Stage(name=SPLIT_SINGLE_STAGE + mark, suite=self.single_suite or self.suite,
                                    concurrency=(1,), num_requests=self.single_requests or self.num_requests_single,
                                    temperature=temperature))
            else:
                stages += [Stage(name=SINGLE_PREFIX + d + mark, suite=self.domain_suites.get(d, d), concurrency=(1,),
                                 num_requests=self.num_requests_single, temperature=temperature)
                           for d in self.domains]
        if self.samples_per_prompt is not None:
            stages.append(Stage(name=DISTRIBUTION_STAGE, suite=self.distribution_suite or self.first_suite,
                                concurrency=(DISTRIBUTION_CONCURRENCY,),
                                num_requests=DISTRIBUTION_PROMPTS * -(-self.samples_per_prompt // self.rounds),
                                temperature=self.distribution_temperature, max_tokens=DISTRIBUTION_POSITIONS,
                                seeds_per_arm=True))
        sweep_suite = self.sweep_suite or self.first_suite
        stages += [Stage(name=f"{SWEEP_PREFIX}{c}", suite=sweep_suite, concurrency=(c,),
                         num_requests=self.sweep_requests(c)) for c in self.concurrency]
        stages += [Stage(name=f"{RATE_PREFIX}{r:g}", suite=sweep_suite, concurrency=(1,),
                         num_requests=self.num_requests_sweep or DEFAULT_RATE_REQUESTS) for r in self.rates]
        return stages

    @property
    def first_suite(self) -> str:
        """``--suite``, else the first domain's suite: the sweep's default, the distribution check's source."""
        return self.suite or (self.domain_suites.get(self.domains[0], self.domains[0]) if self.domains else "mixed")

    def sweep_requests(self, concurrency: int) -> int:
        """Measured requests per arm at one sweep concurrency."""
        if self.num_requests_sweep is not None:
            return self.num_requests_sweep
        return max(self.sweep_min_requests, self.sweep_requests_per_user * concurrency)

    def bench_config(self, stage: Stage, url: str, *, arm: str = "baseline", round_number: int = 0) -> BenchConfig:
        """The bench settings of one arm's run of ``stage``: identical for both arms but the URL,
        and, for a stage with ``seeds_per_arm``, the request seeds (each arm and round its own)."""
        sampling_seed = None
        if stage.seeds_per_arm:   # distinct from every other arm's and round's: independent samples
            sampling_seed = (self.seed * 64 + round_number) * len(self.arm_keys) + self.arm_keys.index(arm) + 1
        trace = self.trace if stage.name == TRACE_STAGE else None
        rates = (float(stage.name[len(RATE_PREFIX):]),) if stage.name.startswith(RATE_PREFIX) else ()
        return BenchConfig(url=url, api=self.api, suite=stage.suite,
                           concurrency=() if trace or rates else stage.concurrency, rates=rates,
                           arrival=self.arrival, burstiness=self.burstiness,
                           trace=trace, num_requests=stage.num_requests, warmup=self.warmup, seed=self.seed,
                           max_tokens=stage.max_tokens or self.max_tokens,
                           temperature=self.temperature if stage.temperature is None else stage.temperature,
                           top_p=self.top_p, top_k=self.top_k, sampling_seed=sampling_seed, model=self.model,
                           api_key=self.api_key, headers=self.headers, tokenizer_path=self.tokenizer,
                           insecure=self.insecure,
                           ignore_eos=self.ignore_eos,
                           raw_chat_format=self.raw_chat_format,
                           think_time_ms=self.think_time_ms, think_time_distribution=self.think_time_distribution)
