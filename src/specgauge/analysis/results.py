"""The result of one comparison: what ``compare``/``demo`` print, write as ``verdict.json`` and store.

The report renders a :class:`CompareResult` and nothing else, so every figure a plot needs is
here. The top-level keys ``single_stream``, ``sweep``, ``crossover_concurrency`` and
``recommended_disable_above`` are the contract of ``verdict.json`` (docs/compare.md).
Ratios are always speculative / baseline; a CI is a 95% bootstrap interval (``method`` says how).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

FORMAT_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Percentiles(_Frozen):
    """One metric's distribution at one point (ms); None when there is no sample."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    count: int = 0


class RatioCI(_Frozen):
    """A speculative/baseline ratio with its 95% bootstrap interval.

    ``method``: ``paired_requests`` (pairs of requests with the same index and prompt resampled
    together), ``within_arm`` (each arm's requests resampled on their own), or ``none`` (too few
    samples for an interval: ``ci_low``/``ci_high`` are None).
    """

    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    method: Literal["paired_requests", "within_arm", "none"] = "none"
    pairs: int = 0


class ArmPoint(_Frozen):
    """One arm's figures at one point (a domain's single stream, or one sweep concurrency)."""

    output_tok_s: float | None = None        # aggregate: output tokens / measured window (all rounds)
    request_tok_s: Percentiles = Percentiles()  # per request: output tokens / E2E seconds
    ttft_ms: Percentiles = Percentiles()
    tpot_ms: Percentiles = Percentiles()
    itl_ms: Percentiles = Percentiles()
    accept_length: float | None = None
    num_ok: int = 0
    num_errors: int = 0
    achieved_concurrency: float | None = None


class SingleStreamDomain(_Frozen):
    """Single-stream (concurrency 1) result of one domain. ``speedup`` = speculative / baseline tok/s."""

    domain: str
    baseline_tok_s: float | None
    speculative_tok_s: float | None
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    accept_length: float | None              # the speculative arm's mean acceptance length
    ci_method: str = "none"                  # how the speedup's interval was resampled (RatioCI.method)
    pairs: int | None = None                 # request pairs behind the speedup (None: not recorded)
    # the speedup over the pairs in which neither output repeats itself (analysis/health.py's
    # degenerate-output rule): looping text is easy to draft, so this is the figure to trust when
    # ``degenerate_pairs`` > 0
    non_degenerate: RatioCI = RatioCI()
    degenerate_pairs: int = 0
    request_tok_s_ratio: RatioCI = RatioCI()
    tpot_ratio: RatioCI = RatioCI()
    ttft_ratio: RatioCI = RatioCI()
    baseline: ArmPoint = ArmPoint()
    speculative: ArmPoint = ArmPoint()
    temperature: float | None = None         # the temperature it was measured at (None: the comparison's)
    accept_length_ci: tuple[float, float] | None = None   # 95% bootstrap interval of accept_length


class TraceWindow(_Frozen):
    """One window of a trace replayed on both arms (analysis/trace_windows.py): trace seconds
    [start_s, end_s), its paired requests, requests in flight per arm, TPOT per arm and their ratio."""

    start_s: float
    end_s: float
    requests: int
    baseline_in_flight: float
    speculative_in_flight: float
    baseline_tpot_p50_ms: float | None = None
    baseline_tpot_p90_ms: float | None = None
    speculative_tpot_p50_ms: float | None = None
    speculative_tpot_p90_ms: float | None = None
    tpot_ratio: RatioCI = RatioCI()   # speculative / baseline TPOT p50: below 1, speculation was faster


class TraceComparison(_Frozen):
    """``compare --trace``: the windows, the in-flight level above which speculation cost (None:
    no clear cost), and the share of the trace's windows at or above it."""

    bin_s: float
    speed: float
    pairs: int
    windows: tuple[TraceWindow, ...]
    cost_in_flight: float | None = None
    share_above: float | None = None
    # each arm's client lag (send − scaled trace time) over its rounds, ms: p50, p99, max
    lag_ms: dict[str, dict[str, float]] = {}


class RatePoint(_Frozen):
    """``compare --rates``: one open-loop point, both arms at the same arrivals (same seed: the same
    send times and prompts), paired by request; ratios are speculative / baseline p50s (below 1:
    speculation faster) with paired bootstrap intervals."""

    rate: float
    pairs: int
    baseline: ArmPoint = ArmPoint()
    speculative: ArmPoint = ArmPoint()
    ttft_ratio: RatioCI = RatioCI()
    tpot_ratio: RatioCI = RatioCI()
    e2e_ratio: RatioCI = RatioCI()


class SweepPoint(_Frozen):
    """One sweep concurrency. ``ratio`` = speculative / baseline aggregate tok/s with its CI."""

    concurrency: int
    baseline_tok_s: float | None
    speculative_tok_s: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str = "none"
    pairs: int | None = None                 # request pairs behind the ratio (None: not recorded)
    request_tok_s_ratio: RatioCI = RatioCI()
    tpot_ratio: RatioCI = RatioCI()
    ttft_ratio: RatioCI = RatioCI()
    baseline: ArmPoint = ArmPoint()
    speculative: ArmPoint = ArmPoint()


class TurnSpeedup(_Frozen):
    """A multi-turn suite's speedup at one point and turn index: requests paired by (round, session,
    turn), ``throughput`` = Σ tokens / Σ E2E of the speculative turns over the baseline's, and the
    median-TTFT ratio (a later turn's TTFT is mostly the prefix cache's, speculation or not)."""

    point: str                               # "single-stream coding", "concurrency 4"
    turn: int
    pairs: int
    throughput: RatioCI = RatioCI()
    ttft_ratio: RatioCI = RatioCI()
    baseline_ttft_ms_p50: float | None = None
    speculative_ttft_ms_p50: float | None = None


class Crossover(_Frozen):
    """Where the throughput ratio crosses 1, interpolated in log-concurrency.

    ``kind``: ``crosses`` (``concurrency`` set, with an interval from the bootstrap replicates of
    the curve; ``ci_high`` None when some replicates never cross within the tested range),
    ``never`` (speculation pays at every tested concurrency), ``always_below`` (it never pays,
    not even at the lowest), ``insufficient`` (fewer than two usable points).
    """

    kind: Literal["crosses", "never", "always_below", "insufficient"]
    concurrency: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    between: tuple[int, int] | None = None   # the two tested concurrencies it falls between
    supported: bool = True   # False: the point estimates cross 1, but no point is clearly above 1 below it
    #                          and clearly below 1 above it (analysis/verdict.py), so no crossover is claimed


class ServerSetting(_Frozen):
    """How to apply the threshold on one server: the flags or config, and what they mean.

    ``setting`` is what to add to the server's command line; for vLLM it is exactly
    ``--speculative-config '<json>'`` (``shlex.split`` gives the flag and one JSON argument).
    ``config_file``/``config_text``: a file the setting names, and its content (SGLang's
    ``--speculative-adaptive-config`` takes a path to a JSON file).
    """

    server: Literal["sglang", "vllm", "specgauge"]
    setting: str
    note: str
    config_file: str | None = None
    config_text: str | None = None


class SpeculationSetup(_Frozen):
    """What the speculative arm is, as far as the comparison could learn it (its launch command or
    engine arguments, else the server's own ``/server_info``); None where unknown."""

    engine: Literal["vllm", "sglang", "specgauge"] | None = None
    method: str | None = None                  # vLLM method (eagle3, ngram, draft_model, ...) / SGLang algorithm
    num_speculative_tokens: int | None = None  # draft depth: vLLM num_speculative_tokens, SGLang num_steps
    draft_model: str | None = None
    eagle_topk: int | None = None
    max_num_seqs: int | None = None            # vLLM --max-num-seqs / SGLang --max-running-requests
    device: str | None = None                  # SGLang --device (cpu, cuda, ...) where stated
    source: str = "unknown"                    # where it was learned: "launch command", "server_info", ...


class Recommendation(_Frozen):
    """When to switch speculation off, as a draft-depth schedule (``schedule``) and as its simple case,
    a threshold (``disable_above``). ``disable_above`` None: no threshold (no tested concurrency
    showed a clear loss); 0: switch it off (it never pays); N: speculate only while at most N run.

    ``confident`` False: the intervals do not settle it; ``uncertain_because`` says why and
    ``to_settle`` what to run (docs/compare.md, "Verdict rules")."""

    disable_above: int | None
    rule: str
    settings: tuple[ServerSetting, ...] = ()
    confident: bool = True
    uncertain_because: str | None = None
    to_settle: str | None = None
    # the threshold as a draft-depth schedule, vLLM's num_speculative_tokens_per_batch_size entries
    # [bs_lo, bs_hi, K] (K at the levels where speculation pays, 0 above the crossover); None when the
    # verdict is uncertain (analysis/verdict.py ``recommend``)
    schedule: tuple[tuple[int, int, int], ...] | None = None
    measured_at: str | None = None   # the sampling the sweep ran at ("temperature 0.7, top-p 0.9")


class DriftEstimate(_Frozen):
    """How much the machine's speed moved between repeated measurements of the same arm, and how
    much every interval was widened for it (analysis/drift.py)."""

    sigma: float | None            # RMS of the repeats' log tok/s ratios (None: nothing was repeated)
    repeats: int                   # how many same-arm repeated measurements it rests on
    per_measurement: float | None  # sigma as a relative figure, exp(sigma) - 1
    widened_by: float | None       # the log-scale sigma folded into each interval: sigma / sqrt(rounds)


class VerifyPoint(_Frozen):
    """``--verify``: the thresholded speculative engine against the baseline at one concurrency."""

    concurrency: int
    baseline_tok_s: float | None
    thresholded_tok_s: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    worse_beyond_noise: bool


class Verification(_Frozen):
    disable_above: int
    points: tuple[VerifyPoint, ...]
    never_worse: bool


class HistogramBin(_Frozen):
    tokens: int        # tokens carried by one chunk
    count: int         # chunks that carried that many


class PositionBin(_Frozen):
    """Mean tokens per chunk (≈ acceptance length per verify step) over an output-position range."""

    start: int         # first output token position of the bin (inclusive)
    end: int           # last (exclusive)
    tokens_per_chunk: float
    chunks: int


class MismatchExample(_Frozen):
    stage: str
    prompt_index: int
    request_index: int
    first_difference: int    # character offset of the first difference
    baseline_excerpt: str
    speculative_excerpt: str


class DistributionExample(_Frozen):
    """Where the arms' samples differ: a position of a prompt and the token whose share differs most."""

    prompt_index: int
    position: int                  # 0-based output token position
    token: str                     # the token as text ("<end>": the sample had ended)
    token_id: int | None = None
    baseline_share: float          # share of the baseline's samples with this token there
    speculative_share: float
    p_value: float                 # the position's Holm-adjusted permutation p-value


class DistributionCheck(_Frozen):
    """Above temperature 0: do both arms sample from one distribution (analysis/distribution.py)?"""

    checked: bool
    reason: str | None = None           # why not checked
    differs: bool | None = None         # p_value < alpha
    p_value: float | None = None        # permutation p-value of the summed statistic (one test)
    alpha: float = 0.05
    samples: int = 0                    # samples of both arms together
    samples_per_prompt: int = 0         # per arm and prompt (the fewest)
    prompts: int = 0
    positions_tested: int = 0
    min_detectable_shift: float | None = None   # one token's probability, one cell, 80% power
    position_p_values: tuple[float, ...] = ()   # per position, Holm-adjusted
    temperature: float | None = None
    tokens: str = ""                    # what a position's token is (the tokenizer, or characters)
    requests: int = 0                   # requests the check sent (both arms, warm-ups excluded)
    seconds: float | None = None        # the arms' time on it, summed
    examples: tuple[DistributionExample, ...] = ()


class Losslessness(_Frozen):
    """Baseline vs speculative output: at temperature 0 text-exact per request pair; above 0 (with
    ``--samples-per-prompt``) the two arms' sampled distributions (``distribution``)."""

    checked: bool
    reason: str | None = None     # why not checked (temperature > 0, no pairs)
    compared: int = 0
    mismatches: int = 0
    mismatch_rate: float | None = None
    examples: tuple[MismatchExample, ...] = ()
    distribution: DistributionCheck | None = None


class HealthWarning(_Frozen):
    code: Literal["accept_length_one", "chunks_disagree_with_server", "acceptance_falls_with_position",
                  "degenerate_output", "errors", "no_acceptance_figures", "machine_drift", "incomplete",
                  "outlying_round", "random_prompts", "temperature_not_measured", "drafted_depth_mismatch"]
    message: str
    domain: str | None = None      # the domain it concerns (None: all stages pooled)
    arm: str | None = None         # outlying_round: the arm, and the sweep point's concurrency (None: single stream)
    concurrency: int | None = None


class ArmDescription(_Frozen):
    name: Literal["baseline", "speculative"]
    kind: Literal["url", "command", "engine"]
    description: str               # the URL, the command, or the engine arguments
    url: str | None = None         # where it was measured (a launched arm's URL includes its port)
    model: str | None = None
    server_fingerprint: dict | None = None
    speculation: SpeculationSetup | None = None   # the speculative arm's method and depth, where known


class SuiteInfo(_Frozen):
    name: str
    version: int
    content_hash: str


class StageRuns(_Frozen):
    """The bench runs behind one stage (a domain's single stream or the sweep), one per round."""

    stage: str                     # "single:<domain>", "single" (a suite file split by domain) or "sweep:c=<n>"
    suite: SuiteInfo               # ("@t=0.7" after a single-stream name: that stage ran at another temperature)
    baseline_run_ids: tuple[int, ...]
    speculative_run_ids: tuple[int, ...]
    temperature: float | None = None   # the temperature its requests sampled at (None: the comparison's)


class ArmGoodput(_Frozen):
    """One arm's requests per second at one stage, rounds pooled (Σ figure × window / Σ window)."""

    request_throughput: float | None   # completed requests/s
    request_goodput: float | None      # requests/s meeting every SLO


class GoodputStage(_Frozen):
    stage: str
    baseline: ArmGoodput
    speculative: ArmGoodput
    goodput_ratio: float | None        # speculative / baseline goodput (None: the baseline's is 0); no interval


class Goodput(_Frozen):
    """``compare --goodput``: the SLOs given (ms per metric: ttft, tpot, e2el) and each stage's
    goodput per arm, as vLLM ``bench serve`` counts it (a successful request meeting every SLO)."""

    slo_ms: dict[str, float]
    stages: tuple[GoodputStage, ...]


class CompareSettings(_Frozen):
    api: str
    domains: tuple[str, ...]
    concurrency: tuple[int, ...]
    num_requests_single: int
    num_requests_sweep: int | None
    max_tokens: int | None
    seed: int
    temperature: float
    warmup: int
    temperatures: tuple[float, ...] = ()   # --temperatures: the single-stream temperatures (empty: temperature)
    top_p: float | None = None
    top_k: int | None = None
    rounds: int
    schedule: Literal["abba_by_point", "sequential_rounds"]
    bootstrap_resamples: int
    suite_layout: Literal["specbench", "mtbench"] | None = None   # --suite imported from one: the field's table
    trace_bin_s: float | None = None     # compare --trace: its window, trace seconds
    trace_speed: float | None = None


class CompareResult(_Frozen):
    """One whole comparison. ``model_dump(mode="json")`` is ``verdict.json``."""

    format_version: int = FORMAT_VERSION
    comparison_id: int | None = None
    created_at: str
    tool_version: str
    arms: tuple[ArmDescription, ArmDescription]
    speculative_label: str = "speculation"   # e.g. "EAGLE-3", used in verdict lines
    settings: CompareSettings
    suites: tuple[SuiteInfo, ...]
    stages: tuple[StageRuns, ...]
    single_stream: tuple[SingleStreamDomain, ...]
    sweep: tuple[SweepPoint, ...]
    crossover_concurrency: float | None
    crossover: Crossover
    recommended_disable_above: int | None
    recommendation: Recommendation
    drift: DriftEstimate | None = None
    verification: Verification | None = None
    verdict_lines: tuple[str, ...]
    losslessness: Losslessness
    health: tuple[HealthWarning, ...]
    tokens_per_chunk: dict[str, tuple[HistogramBin, ...]]      # per arm name
    acceptance_by_position: tuple[PositionBin, ...]            # the speculative arm
    acceptance_by_domain: dict[str, float | None]              # speculative arm, single stream
    # --temperatures: single stream per domain x temperature (``single_stream``: the comparison's temperature)
    by_temperature: tuple[SingleStreamDomain, ...] = ()
    goodput: Goodput | None = None                             # with --goodput (stored, so report keeps it)
    per_turn: tuple[TurnSpeedup, ...] = ()                     # a suite with multi-turn sessions
    # --suite from Spec-Bench / MT-bench: single-stream rows pooled over several domains, paired as
    # the domains' are ("overall"; Spec-Bench's "multi-turn conversation": MT-bench's eight categories)
    single_stream_pooled: tuple[SingleStreamDomain, ...] = ()
    trace: TraceComparison | None = None   # compare --trace: the speedup along the trace
    rate_points: tuple[RatePoint, ...] = ()   # compare --rates: open-loop points

    def arm(self, name: str) -> ArmDescription:
        """The arm called ``name`` (``baseline`` or ``speculative``)."""
        return next(a for a in self.arms if a.name == name)
