"""Speculative decoding settings: SGLang's flags, validated once at the edge (frozen)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specgauge.shipped_models import DIRECTORY_DRAFT_DIR
from specgauge.speculation_schedule import Entry

ALGORITHMS = ("NONE", "EAGLE3", "NGRAM")
DEFAULT_DRAFT_DIR = DIRECTORY_DRAFT_DIR   # the specgauge-8m drafter (shipped_models.py)


@dataclass(frozen=True)
class SpeculativeConfig:
    """``--speculative-*`` flags of ``specgauge serve`` (names and meaning as in SGLang).

    * ``num_steps``: draft forward passes per step (the depth of a chain or tree);
    * ``eagle_topk``: branching of the EAGLE-3 tree (1 = chain);
    * ``num_draft_tokens``: tokens verified per request per step, root included (chain:
      ``num_steps + 1``; tree: the best ``num_draft_tokens - 1`` nodes by draft score);
    * ``disable_above``: plain decoding whenever more requests than this are running;
    * ``adaptive``: choose the number of draft tokens each step from measured step times.
    * ``schedule``: draft tokens by the step's batch size (and context length), vLLM's
      ``num_speculative_tokens_per_batch_size`` form, normalised by
      ``specgauge.speculation_schedule.normalize_schedule``; K clamped to ``max_drafts``.
    * ``min_draft_prob``: an EAGLE-3 chain stops growing after a draft token whose draft
      probability is below this (0 = always draft ``num_steps``); ours, not SGLang's.
    * ``accept_bias``: a testing fault (``--testing-fault accept-bias=F``): at temperature > 0 each
      drafted token's acceptance probability is multiplied by F (clamped to 1), a wrong sampler
      that the distribution check of ``compare --samples-per-prompt`` must catch; 1 = correct.
    """

    algorithm: str = "NONE"
    num_steps: int = 4
    eagle_topk: int = 1
    num_draft_tokens: int | None = None
    draft_model_path: str | None = None
    disable_above: int | None = None
    adaptive: bool = False
    schedule: tuple[Entry, ...] | None = None
    min_draft_prob: float = 0.0
    ngram_max_n: int = 3
    ngram_min_n: int = 1
    accept_bias: float = 1.0

    @property
    def enabled(self) -> bool:
        """Whether any speculation is configured (not ``NONE``)."""
        return self.algorithm != "NONE"

    @property
    def draft_tokens(self) -> int:
        """Tokens verified per request (root included)."""
        return self.num_draft_tokens if self.num_draft_tokens is not None else self.num_steps + 1

    @property
    def is_tree(self) -> bool:
        """An EAGLE-3 tree (``topk > 1``) rather than a chain."""
        return self.algorithm == "EAGLE3" and self.eagle_topk > 1

    @property
    def max_drafts(self) -> int:
        """Draft tokens per request per step at most (the verify has one more)."""
        return self.draft_tokens - 1

    @property
    def lookahead(self) -> int:
        """KV slots past the pending token a decoding request needs: the verified draft tokens,
        and for a tree also the draft head's scratch nodes (``(num_steps - 1) * topk``)."""
        if not self.enabled:
            return 0
        if self.is_tree:
            return max(self.max_drafts, (self.num_steps - 1) * self.eagle_topk)
        return self.max_drafts

    @property
    def draft_dir(self) -> Path:
        """The EAGLE-3 head directory: the flag's, else the shipped drafter."""
        return Path(self.draft_model_path) if self.draft_model_path else DEFAULT_DRAFT_DIR

    def validate(self) -> None:
        """Raise ValueError naming the flag that is wrong."""
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"--speculative-algorithm must be one of {', '.join(ALGORITHMS)}; got {self.algorithm!r}")
        if self.num_steps < 1:
            raise ValueError("--speculative-num-steps must be ≥ 1")
        if self.eagle_topk < 1:
            raise ValueError("--speculative-eagle-topk must be ≥ 1")
        if self.disable_above is not None and self.disable_above < 0:
            raise ValueError("--speculative-disable-above must be ≥ 0")
        if self.schedule is not None:
            if not self.enabled:
                raise ValueError("--speculative-schedule needs --speculative-algorithm EAGLE3 or NGRAM")
            if self.adaptive or self.disable_above is not None:
                raise ValueError("--speculative-schedule replaces --speculative-disable-above and "
                                 "--speculative-adaptive: give one of them")
            if self.is_tree and any(0 < k < self.max_drafts for *_, k in self.schedule):
                raise ValueError(f"a tree drafts its {self.max_drafts} tokens or none: --speculative-schedule K "
                                 f"must be 0 or >= {self.max_drafts} with --speculative-eagle-topk > 1")
        if not (self.accept_bias > 0 and math.isfinite(self.accept_bias)):
            raise ValueError(f"--testing-fault accept-bias must be a finite number > 0; got {self.accept_bias}")
        if self.accept_bias != 1.0 and not self.enabled:
            raise ValueError("--testing-fault accept-bias needs --speculative-algorithm EAGLE3 or NGRAM")
        if not 0.0 <= self.min_draft_prob < 1.0:
            raise ValueError(f"--speculative-min-draft-prob must be in [0, 1); got {self.min_draft_prob}")
        if not 1 <= self.ngram_min_n <= self.ngram_max_n:
            raise ValueError("n-gram sizes must satisfy 1 ≤ min ≤ max")
        if self.eagle_topk > 1 and self.algorithm != "EAGLE3":
            raise ValueError("--speculative-eagle-topk > 1 (a tree) needs --speculative-algorithm EAGLE3")
        if self.draft_tokens < 2:
            raise ValueError("--speculative-num-draft-tokens must be ≥ 2 (the root and one draft token)")
        if self.algorithm == "EAGLE3":
            if self.eagle_topk == 1 and self.draft_tokens != self.num_steps + 1:
                raise ValueError(f"a chain (--speculative-eagle-topk 1) verifies --speculative-num-steps + 1 = "
                                 f"{self.num_steps + 1} tokens; got --speculative-num-draft-tokens {self.draft_tokens}")
            candidates = self.eagle_topk + (self.num_steps - 1) * self.eagle_topk ** 2
            if self.is_tree and self.max_drafts > candidates:
                raise ValueError(f"--speculative-num-draft-tokens {self.draft_tokens} exceeds the {candidates + 1} "
                                 f"a tree of depth {self.num_steps} and top-k {self.eagle_topk} can propose")
