"""Is a suite representative of a drafter's training data (or of another suite)?

Measures, over tokens (with a tokenizer) or words (without):

* per-source coverage: each training source's share of the data, and of the suite (by the
  requests' ``source`` tag and by nearest source);
* Jensen–Shannon divergence (base 2, in [0, 1]) between the suite's and the training data's unigram
  and bigram distributions (the training side is the source mixture weighted by the on-disk mix);
* each prompt's nearest source: the highest mean add-½-smoothed unigram log-likelihood among the
  training sources and, as labelled outside references, the built-in domain suites;
* a plain-language warning when the suite's domain mix (by nearest model) is far from the
  data's (total variation distance above :data:`WARN_TOTAL_VARIATION`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


from specgauge.errors import UserError
from specgauge.suites.model import Suite
from specgauge.suites.registry import load_suite
from specgauge.suites.sample_files import RawSample, discover_sources
from specgauge.suites.tokenizer_file import TokenizerFile, load_tokenizer
from specgauge.suites.training_data import domain_for_source, sample_order

WARN_TOTAL_VARIATION = 0.35
SMOOTHING = 0.5
MAX_UNITS_PER_TEXT = 2000
REFERENCE_DOMAINS = ("coding", "agentic", "reasoning", "encyclopedic", "chat")
_WORDS = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class ReferenceSource:
    """Texts standing for one part of a distribution; ``weight`` is its share (0 for outside references)."""

    name: str
    domain: str
    weight: float
    texts: tuple[str, ...]
    request_hashes: frozenset[str] = frozenset()   # for suites used as references: left out per prompt


@dataclass(frozen=True)
class SourceCoverage:
    """One training source: its share of the data and of the suite."""

    name: str
    domain: str
    training_share: float
    suite_share_by_tag: float
    suite_share_by_nearest: float


@dataclass(frozen=True)
class CheckReport:
    """The outcome of :func:`check_suite`; ``warning`` is None when the suite looks representative."""

    suite_ref: str
    against: str
    unit: str
    sources: tuple[SourceCoverage, ...]
    jsd_unigram: float
    jsd_bigram: float
    nearest_source: tuple[str, ...]       # per prompt: the closest training source
    looks_like: tuple[str, ...]           # per prompt: domain of the closest model (training or reference)
    suite_domain_mix: dict[str, float]
    training_domain_mix: dict[str, float]
    total_variation: float
    warning: str | None

    def to_json(self) -> dict:
        """Plain JSON data for ``--json``."""
        return {
            "suite": self.suite_ref, "against": self.against, "unit": self.unit,
            "jsd_unigram": round(self.jsd_unigram, 6), "jsd_bigram": round(self.jsd_bigram, 6),
            "total_variation": round(self.total_variation, 6), "warning": self.warning,
            "suite_domain_mix": self.suite_domain_mix, "training_domain_mix": self.training_domain_mix,
            "sources": [s.__dict__ for s in self.sources],
            "prompts": [{"nearest_source": n, "looks_like": d} for n, d in zip(self.nearest_source, self.looks_like)],
        }


def make_unitizer(tokenizer: TokenizerFile | None) -> tuple[str, Callable[[str], list[str]]]:
    """The counting unit and a function splitting text into it: token ids, or lower-cased words."""
    if tokenizer is not None:
        return "token", lambda text: [str(t) for t in tokenizer.encode_plain(text)[:MAX_UNITS_PER_TEXT]]
    return "word", lambda text: _WORDS.findall(text.lower())[:MAX_UNITS_PER_TEXT]


def references_from_dir(data_dir: str | Path, tokenizer: TokenizerFile | None, per_source: int = 200,
                        seed: int = 0) -> list[ReferenceSource]:
    """Up to ``per_source`` random samples of each source (full text, specials dropped), weighted by count."""
    sources = discover_sources(data_dir)
    total = sum(s.num_samples for s in sources) or 1
    references = []
    for source in sources:
        picks = sample_order(source, seed)[:per_source]
        texts = tuple(_sample_text(source.read(int(i)), tokenizer) for i in picks)
        references.append(ReferenceSource(source.name, domain_for_source(source.name, None, source.meta),
                                          source.num_samples / total, texts))
    return references


def _sample_text(raw: RawSample, tokenizer: TokenizerFile | None) -> str:
    if raw.messages is not None:
        return "\n\n".join(str(m.get("content", m.get("value", ""))) for m in raw.messages)
    if tokenizer is None:
        raise UserError(f"{raw.where}: tokenized training data needs --tokenizer to be checked against")
    assert raw.input_ids is not None
    tokenizer.check_ids(int(raw.input_ids.min(initial=0)), int(raw.input_ids.max(initial=0)), raw.where)
    return tokenizer.decode_plain(raw.input_ids)


def references_from_suite(suite: Suite) -> list[ReferenceSource]:
    """A suite as a distribution: one reference per domain, weighted by its share of requests."""
    by_domain: dict[str, list[str]] = {}
    for request in suite.requests:
        by_domain.setdefault(request.domain, []).append(request.text())
    total = len(suite.requests)
    return [ReferenceSource(d, d, len(t) / total, tuple(t)) for d, t in sorted(by_domain.items())]


def builtin_references() -> list[ReferenceSource]:
    """The built-in domain suites as outside references (weight 0). A prompt that is itself one of a
    reference's requests is scored with that request left out (leave-one-out), so checking a
    built-in suite does not match it against itself."""
    references = []
    for name in REFERENCE_DOMAINS:
        try:
            suite = load_suite(name)
        except UserError:
            continue
        references.append(ReferenceSource(f"builtin:{name}", name, 0.0, tuple(r.text() for r in suite.requests),
                                          frozenset(suite.request_hashes())))
    return references


class UnigramModel:
    """Add-½ smoothed unigram model of a reference's units."""

    def __init__(self, counts: Counter, vocabulary_size: int) -> None:
        self.counts, self.total, self.vocabulary_size = counts, sum(counts.values()), vocabulary_size

    def mean_log_likelihood(self, counts: Counter, leave_out: bool = False) -> float:
        """Mean log-probability of the units in ``counts``; ``leave_out`` first removes them from the model."""
        n = sum(counts.values()) or 1
        denominator = math.log(self.total - (n if leave_out else 0) + SMOOTHING * self.vocabulary_size)
        total = 0.0
        for unit, c in counts.items():
            seen = self.counts.get(unit, 0) - (c if leave_out else 0)
            total += c * (math.log(max(seen, 0) + SMOOTHING) - denominator)
        return total / n


def jensen_shannon(p: dict, q: dict) -> float:
    """Jensen–Shannon divergence (base 2) of two distributions given as unit → probability."""
    divergence = 0.0
    for unit in set(p) | set(q):
        pu, qu = p.get(unit, 0.0), q.get(unit, 0.0)
        m = 0.5 * (pu + qu)
        if pu > 0:
            divergence += 0.5 * pu * math.log2(pu / m)
        if qu > 0:
            divergence += 0.5 * qu * math.log2(qu / m)
    return max(0.0, min(1.0, divergence))


def _distribution(unit_lists: list[list[str]], order: int) -> dict:
    counts: Counter = Counter()
    for units in unit_lists:
        counts.update(zip(*(units[i:] for i in range(order))) if order > 1 else units)
    total = sum(counts.values()) or 1
    return {k: v / total for k, v in counts.items()}


def _mixture(distributions: list[tuple[float, dict]]) -> dict:
    weight_sum = sum(w for w, _ in distributions) or 1.0
    mixed: dict = {}
    for weight, distribution in distributions:
        for unit, p in distribution.items():
            mixed[unit] = mixed.get(unit, 0.0) + weight / weight_sum * p
    return mixed


def check_suite(suite: Suite, training: list[ReferenceSource], against: str,
                tokenizer: TokenizerFile | None = None) -> CheckReport:
    """Compare ``suite`` with the ``training`` references (see the module docstring)."""
    if not training or all(not r.texts for r in training):
        raise UserError(f"{against}: nothing to compare against (no samples)")
    unit, unitize = make_unitizer(tokenizer)
    prompts = [unitize(r.text()) for r in suite.requests]
    outside = builtin_references()
    training_units = {r.name: [unitize(t) for t in r.texts] for r in training}
    outside_units = {r.name: [unitize(t) for t in r.texts] for r in outside}
    vocabulary = {u for lists in (*training_units.values(), *outside_units.values(), prompts)
                  for us in lists for u in us}
    models = {name: UnigramModel(Counter(u for us in lists for u in us), len(vocabulary) + 1)
              for name, lists in {**training_units, **outside_units}.items()}
    domain_of = {r.name: r.domain for r in (*training, *outside)}
    contains = {r.name: r.request_hashes for r in (*training, *outside)}
    nearest_source, looks_like = [], []
    for units, request_hash in zip(prompts, suite.request_hashes()):
        counts = Counter(units)
        scores = {name: model.mean_log_likelihood(counts, leave_out=request_hash in contains[name])
                  for name, model in models.items()}
        nearest_source.append(max(training_units, key=lambda n: scores[n]))
        looks_like.append(domain_of[max(scores, key=lambda n: scores[n])])
    weights = {r.name: r.weight for r in training}
    weight_sum = sum(weights.values()) or 1.0
    suite_mix = _shares(looks_like)
    training_mix: dict[str, float] = {}
    for r in training:
        training_mix[r.domain] = training_mix.get(r.domain, 0.0) + r.weight / weight_sum
    total_variation = 0.5 * sum(abs(suite_mix.get(d, 0.0) - training_mix.get(d, 0.0))
                                for d in set(suite_mix) | set(training_mix))
    jsd = [jensen_shannon(_distribution(prompts, order),
                          _mixture([(weights[n], _distribution(lists, order)) for n, lists in training_units.items()]))
           for order in (1, 2)]
    tag_shares, nearest_shares = _shares([r.source for r in suite.requests]), _shares(nearest_source)
    coverage = tuple(SourceCoverage(r.name, r.domain, round(r.weight / weight_sum, 6),
                                    round(tag_shares.get(r.name, 0.0), 6), round(nearest_shares.get(r.name, 0.0), 6))
                     for r in training)
    warning = _warning(suite_mix, training_mix) if total_variation > WARN_TOTAL_VARIATION else None
    return CheckReport(suite.ref, against, unit, coverage, jsd[0], jsd[1], tuple(nearest_source), tuple(looks_like),
                       suite_mix, {k: round(v, 6) for k, v in training_mix.items()}, total_variation, warning)


def _shares(labels: list[str]) -> dict[str, float]:
    counts = Counter(labels)
    total = sum(counts.values()) or 1
    return {k: round(v / total, 6) for k, v in counts.most_common()}


def _warning(suite_mix: dict[str, float], training_mix: dict[str, float]) -> str:
    """E.g. "93% of these prompts look encyclopedic; the drafter's data is 67% agentic and coding (only 33%
    encyclopedic)": the suite's main domain, then the data's domains the suite under-represents."""
    top_domain, top_share = max(suite_mix.items(), key=lambda kv: kv[1])
    under = sorted(((d, share) for d, share in training_mix.items() if share > suite_mix.get(d, 0.0)),
                   key=lambda kv: -kv[1])[:3]
    message = f"{top_share:.0%} of these prompts look {top_domain}"
    if under:
        message += (f"; the drafter's data is {sum(share for _, share in under):.0%} "
                    f"{_and_join([d for d, _ in under])}")
    if top_share > training_mix.get(top_domain, 0.0):
        message += f" (only {training_mix.get(top_domain, 0.0):.0%} {top_domain})"
    return message + " — this suite is off the training distribution"


def _and_join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def check_against(suite_ref: str, against: str, tokenizer_path: str | None = None,
                  per_source: int = 200) -> CheckReport:
    """Load ``suite_ref`` and compare it with ``against``: a training-data directory or another suite."""
    suite = load_suite(suite_ref)
    tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path else None
    if Path(against).is_dir():
        training = references_from_dir(against, tokenizer, per_source=per_source)
    else:
        training = references_from_suite(load_suite(against))
    return check_suite(suite, training, against, tokenizer)
