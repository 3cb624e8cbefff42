"""Build a suite from a drafter's training data: detokenize, split prompt from response, sample by source.

The pipeline for each source (a subdirectory of the data directory):

1. index its sample files (byte offsets for JSONL, row groups for parquet, ...; nothing is loaded whole);
2. draw sample indices in a seeded random order and read them one at a time;
3. detokenize, split the prompt from the response (the loss mask's last run of 1s is the response;
   without a mask, the last assistant header of a known chat template), and turn the prompt into
   OpenAI ``messages`` when the template's roles can be recovered (else a raw ``prompt``);
4. skip samples outside the held-out bucket (``--holdout``) and duplicates (normalized text hash);
5. stop at the source's target count (the mix found on disk, or ``--weights``, split by largest remainder
   so each source is within one prompt of its exact share).

Hold-out hash: ``sha256(normalized prompt text)``; the bucket is its first 8 bytes as a big-endian
integer divided by 2**64, and a sample is held out when the bucket is below the fraction. The
normalized text is the request rendered as ``role: content`` lines (or the raw prompt), NFKC-normalized,
lower-cased, with runs of whitespace collapsed to one space. A trainer keeps the bucket out of its
training set by calling :func:`is_held_out` on the same text (:func:`request_key_text`).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specgauge.errors import UserError
from specgauge.suites.chat_templates import ChatTemplate, detect_template, messages_from_dicts
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest
from specgauge.suites.sample_files import RawSample, SourceData, discover_sources
from specgauge.suites.tokenizer_file import TokenizerFile, load_tokenizer

# Source-name fragments → domain, first match wins (the source name is lower-cased first).
DOMAIN_HEURISTIC: tuple[tuple[tuple[str, ...], str], ...] = (
    (("code", "swe", "opencode"), "coding"),
    (("glaive", "tool", "agent"), "agentic"),
    (("math", "gsm"), "reasoning"),
    (("wiki", "prose", "docs"), "encyclopedic"),
)
MAX_TOKENS_FLOOR = 16
MAX_TOKENS_CEILING = 1024
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class BuildOptions:
    """What to build: size, mix, hold-out, seed and naming. Validated on construction."""

    size: int
    name: str = "training-data"
    version: int = 1
    weights: dict[str, float] | None = None
    holdout: float | None = None
    seed: int = 0
    max_tokens: int | None = None
    domain_map: dict[str, str] = field(default_factory=dict)
    allow_fewer: bool = False

    def __post_init__(self) -> None:
        if self.size < 1:
            raise UserError(f"--size must be at least 1 (got {self.size})")
        if self.holdout is not None and not 0.0 < self.holdout <= 1.0:
            raise UserError(f"--holdout must be in (0, 1] (got {self.holdout})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UserError(f"--max-tokens must be at least 1 (got {self.max_tokens})")
        if self.weights is not None:
            if any(w < 0 or not math.isfinite(w) for w in self.weights.values()) or sum(self.weights.values()) <= 0:
                raise UserError("--weights must be non-negative numbers with a positive sum")


def request_key_text(request: SuiteRequest) -> str:
    """The normalized text that deduplication and the hold-out hash are computed from."""
    if request.messages is not None:
        raw = "\n".join(f"{m.role}: {m.content}" for m in request.messages)
    else:
        raw = request.prompt or ""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", raw).lower()).strip()


def text_hash(key_text: str) -> str:
    """sha256 hex digest of a normalized key text."""
    return hashlib.sha256(key_text.encode("utf-8")).hexdigest()


def holdout_bucket(key_text: str) -> float:
    """Where ``key_text`` falls in [0, 1): the first 8 bytes of its sha256, big-endian, over 2**64."""
    return int(text_hash(key_text)[:16], 16) / 2.0**64


def is_held_out(key_text: str, fraction: float) -> bool:
    """True when the sample belongs to the held-out bucket of size ``fraction``."""
    return holdout_bucket(key_text) < fraction


def domain_for_source(source: str, domain_map: dict[str, str] | None = None, meta: dict | None = None) -> str:
    """The domain of a source: ``domain_map``, else ``meta.json``'s ``domain``, else the name heuristic."""
    if domain_map and source in domain_map:
        return domain_map[source]
    if meta and isinstance(meta.get("domain"), str) and meta["domain"]:
        return meta["domain"]
    lowered = source.lower()
    for fragments, domain in DOMAIN_HEURISTIC:
        if any(f in lowered for f in fragments):
            return domain
    return source


def allocate(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Split ``total`` over ``weights`` by largest remainder: each count within 1 of its exact share."""
    weight_sum = sum(weights.values())
    exact = {k: total * w / weight_sum for k, w in weights.items()}
    counts = {k: math.floor(v) for k, v in exact.items()}
    leftover = total - sum(counts.values())
    for key in sorted(exact, key=lambda k: (-(exact[k] - counts[k]), k))[:leftover]:
        counts[key] += 1
    return counts


@dataclass(frozen=True)
class SplitSample:
    """A sample turned into a benchmark request, with the response length it had in training."""

    request: SuiteRequest
    response_tokens: int
    key_text: str


class SampleConverter:
    """Turns :class:`RawSample` records into requests: detokenize, split, recover roles."""

    def __init__(self, tokenizer: TokenizerFile | None, source: str, domain: str, max_tokens: int | None) -> None:
        self.tokenizer, self.source, self.domain, self.max_tokens = tokenizer, source, domain, max_tokens

    def convert(self, raw: RawSample) -> SplitSample:
        """The request of ``raw``; bad samples raise :class:`UserError` naming file and line."""
        if raw.messages is not None:
            messages, response = self._split_messages(raw)
            response_tokens = self._count(response)
            request = self._request(messages=messages, prompt=None, response_tokens=response_tokens)
        else:
            prompt_text, response_tokens = self._split_tokens(raw)
            template = detect_template(prompt_text)
            messages = template.parse(prompt_text) if template is not None else None
            if messages is not None and not any(m.content.strip() for m in messages):
                raise UserError(f"{raw.where}: the sample has no prompt part (only empty messages before the response)")
            request = self._request(messages=messages, prompt=None if messages else prompt_text,
                                    response_tokens=response_tokens)
        return SplitSample(request=request, response_tokens=response_tokens, key_text=request_key_text(request))

    def _request(self, messages: list[ChatMessage] | None, prompt: str | None, response_tokens: int) -> SuiteRequest:
        if self.max_tokens is not None:
            max_tokens = self.max_tokens
        else:
            max_tokens = min(max(response_tokens, MAX_TOKENS_FLOOR), MAX_TOKENS_CEILING)
        return SuiteRequest(messages=tuple(messages) if messages else None, prompt=prompt, max_tokens=max_tokens,
                            domain=self.domain, source=self.source)

    def _count(self, text: str) -> int:
        if not text:
            return 0
        return self.tokenizer.count(text) if self.tokenizer is not None else max(1, len(text) // 4)

    def _split_messages(self, raw: RawSample) -> tuple[list[ChatMessage], str]:
        messages = messages_from_dicts(raw.messages, raw.where)
        last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=None)
        if last_assistant is None:
            prompt, response = messages, ""
        else:
            prompt, response = messages[:last_assistant], messages[last_assistant].content
        if not any(m.role != "assistant" and m.content.strip() for m in prompt):
            raise UserError(f"{raw.where}: the sample has no prompt part (no user/system/tool message before "
                            f"the last assistant reply)")
        return prompt, response

    def _split_tokens(self, raw: RawSample) -> tuple[str, int]:
        if self.tokenizer is None:
            raise UserError(f"{raw.where}: tokenized samples need --tokenizer")
        ids = raw.input_ids
        assert ids is not None
        if ids.size == 0:
            raise UserError(f"{raw.where}: the sample has no tokens")
        self.tokenizer.check_ids(int(ids.min()), int(ids.max()), raw.where)
        mask = raw.loss_mask
        if mask is not None and mask.any():
            response_positions = np.flatnonzero(mask)
            end = int(response_positions[-1]) + 1
            # The last run of 1s: walk back from its end while the mask stays 1.
            gaps = np.flatnonzero(mask[:end] == 0)
            start = int(gaps[-1]) + 1 if gaps.size else 0
            prompt_text = self.tokenizer.decode(ids[:start])
            response_tokens = end - start
        else:
            text = self.tokenizer.decode(ids)
            template = detect_template(text)
            split = template.split_last_assistant(text) if template is not None else None
            if split is None:
                raise UserError(f"{raw.where}: cannot split prompt from response: no loss_mask and no known "
                                f"chat-template assistant marker (ours, Llama-3 or ChatML)")
            prompt_text, response_text = split
            response_tokens = self.tokenizer.count(response_text)
        if not _has_prompt_content(prompt_text, detect_template(prompt_text)):
            raise UserError(f"{raw.where}: the sample has no prompt part (the response starts at its first token)")
        return prompt_text, response_tokens


def _has_prompt_content(prompt_text: str, template: ChatTemplate | None) -> bool:
    if template is None:
        return bool(prompt_text.strip())
    rest = prompt_text
    for marker in (*template.framing, template.assistant_header):
        rest = rest.replace(marker, "")
    return bool(rest.strip())


@dataclass
class SourceReport:
    """What happened in one source: samples found, the target, what was taken and skipped."""

    name: str
    domain: str
    found: int
    target: int = 0
    sampled: int = 0
    read: int = 0
    duplicates: int = 0
    outside_holdout: int = 0


def parse_weights(text: str | None) -> dict[str, float] | None:
    """``src=w,src2=w2`` → a dict; bad syntax raises :class:`UserError`."""
    return {k: _float(v, k) for k, v in _pairs(text, "--weights").items()} if text else None


def parse_domain_map(text: str | None) -> dict[str, str]:
    """``src=domain,...`` → a dict."""
    return _pairs(text, "--domain-map") if text else {}


def _pairs(text: str, flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserError(f"{flag}: expected name=value pairs separated by commas, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _float(value: str, key: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UserError(f"--weights: weight for {key!r} is not a number: {value!r}") from None


def build_suite_from_training_data(data_dir: str | Path, tokenizer_path: str | Path | None,
                                   options: BuildOptions) -> tuple[Suite, list[SourceReport]]:
    """Sample ``options.size`` requests from the training data in ``data_dir`` (see the module docstring).

    Returns the suite and a per-source report. Fewer eligible samples than a source's target raise
    :class:`UserError` unless ``options.allow_fewer``.
    """
    sources = discover_sources(data_dir)
    tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path is not None else None
    return _build(sources, tokenizer, options, Path(data_dir))


def _build(sources: list[SourceData], tokenizer: TokenizerFile | None, options: BuildOptions,
           data_dir: Path) -> tuple[Suite, list[SourceReport]]:
    reports = {s.name: SourceReport(s.name, domain_for_source(s.name, options.domain_map, s.meta), s.num_samples)
               for s in sources}
    unknown = sorted(set(options.weights or {}) - set(reports))
    if unknown:
        raise UserError(f"--weights names unknown sources: {', '.join(unknown)} (found: {', '.join(reports)})")
    weights = options.weights or {name: float(r.found) for name, r in reports.items()}
    weights = {name: weights.get(name, 0.0) for name in reports}
    if sum(weights.values()) <= 0:
        raise UserError(f"{data_dir}: no samples in any source")
    for name, count in allocate(options.size, weights).items():
        reports[name].target = count
    seen: set[str] = set()
    picked: dict[str, list[SuiteRequest]] = {}
    for source in sources:
        report = reports[source.name]
        converter = SampleConverter(tokenizer, source.name, report.domain, options.max_tokens)
        picked[source.name] = _sample_source(source, converter, report, options, seen)
    short = [r for r in reports.values() if r.sampled < r.target]
    if short and not options.allow_fewer:
        detail = "; ".join(f"{r.name}: {r.sampled} of {r.target} (of {r.found} samples, "
                           f"{r.outside_holdout} outside the hold-out, {r.duplicates} duplicates)" for r in short)
        raise UserError(f"not enough eligible samples: {detail}; lower --size, widen --holdout, "
                        f"or pass --allow-fewer")
    requests = _interleave(picked)
    if not requests:
        raise UserError(f"{data_dir}: no eligible samples at all")
    total = len(requests)
    suite = Suite(
        name=options.name, version=options.version,
        description=f"{total} prompts sampled from the training data in {data_dir.name}/ "
                    f"({len(sources)} sources, stratified by source).",
        requests=tuple(requests),
        source_mix={name: round(len(p) / total, 6) for name, p in picked.items()},
        build_info={
            "builder": "from-training-data",
            "data_dir": str(data_dir),
            "tokenizer": str(tokenizer.path) if tokenizer is not None else None,
            "found": {name: r.found for name, r in reports.items()},
            "found_mix": _mix({name: r.found for name, r in reports.items()}),
            "target": {name: r.target for name, r in reports.items()},
            "sampled": {name: r.sampled for name, r in reports.items()},
            "domains": {name: r.domain for name, r in reports.items()},
            "weights": options.weights,
            "holdout": options.holdout,
            "holdout_hash": "sha256(normalized prompt text)[:8] / 2**64 < holdout",
            "seed": options.seed,
            "max_tokens": options.max_tokens
            or f"response length clamped to [{MAX_TOKENS_FLOOR}, {MAX_TOKENS_CEILING}]",
            "duplicates_skipped": sum(r.duplicates for r in reports.values()),
        },
    )
    return suite, list(reports.values())


def _mix(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values()) or 1
    return {k: round(v / total, 6) for k, v in counts.items()}


def sample_order(source: SourceData, seed: int) -> np.ndarray:
    """A seeded random permutation of the source's sample indices (PCG64 seeded by sha256 of seed:name)."""
    seed_material = hashlib.sha256(f"{seed}:{source.name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(seed_material[:8], "big")).permutation(source.num_samples)


def _sample_source(source: SourceData, converter: SampleConverter, report: SourceReport,
                   options: BuildOptions, seen: set[str]) -> list[SuiteRequest]:
    """Read samples of ``source`` in a seeded random order until its target is met (or it runs out)."""
    if report.target == 0:
        return []
    kind: str | None = None
    taken: list[SuiteRequest] = []
    for index in sample_order(source, options.seed):
        raw = source.read(int(index))
        if kind is None:
            kind = raw.kind
        elif raw.kind != kind:
            raise UserError(f"{raw.where}: mixed sample formats in source {source.name} "
                            f"(this sample holds {raw.kind}, earlier ones {kind})")
        report.read += 1
        split = converter.convert(raw)
        if options.holdout is not None and not is_held_out(split.key_text, options.holdout):
            report.outside_holdout += 1
            continue
        digest = text_hash(split.key_text)
        if digest in seen:
            report.duplicates += 1
            continue
        seen.add(digest)
        taken.append(split.request)
        if len(taken) == report.target:
            break
    report.sampled = len(taken)
    return taken


def _interleave(picked: dict[str, list[SuiteRequest]]) -> list[SuiteRequest]:
    """Spread the sources evenly through the suite (ordered by position / count within each source)."""
    keyed = [((i + 0.5) / len(reqs), name, i, r) for name, reqs in picked.items() for i, r in enumerate(reqs)]
    return [r for *_, r in sorted(keyed, key=lambda t: t[:3])]
