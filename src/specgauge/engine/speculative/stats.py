"""Per-request speculation figures, as SGLang's ``meta_info`` names them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass
class SpecStats:
    """Counted from the tokens a request was actually given (a run cut by EOS, a stop string or
    ``max_tokens`` counts only the tokens emitted), so the figures agree with the stream:
    ``completion_tokens = first token(s) from prefill + verify_ct + num_correct_drafts``
    except that a verify whose run was cut short emits no recovered/bonus token."""

    verify_ct: int = 0              # decode steps of this request (plain steps count, 0 drafts)
    num_proposed_drafts: int = 0    # draft tokens verified
    num_correct_drafts: int = 0     # of them, accepted and emitted
    tokens_from_verify: int = 0     # tokens emitted by those steps
    correct_drafts_histogram: list[int] = field(default_factory=list)  # [i]: verifies with i accepted

    def record(self, proposed: int, accepted: int, emitted: int) -> int:
        """One verify of ``proposed`` drafts, ``accepted`` of them by the target, ``emitted``
        tokens given to the request; returns the accepted drafts that count (emitted ones)."""
        correct = min(accepted, emitted)
        self.verify_ct += 1
        self.num_proposed_drafts += proposed
        self.num_correct_drafts += correct
        self.tokens_from_verify += emitted
        while len(self.correct_drafts_histogram) <= correct:
            self.correct_drafts_histogram.append(0)
        self.correct_drafts_histogram[correct] += 1
        return correct

    def meta_info(self, completion_tokens: int) -> dict:
        """SGLang's fields; ``spec_accept_length`` is completion tokens per verify, as SGLang computes it."""
        verify = self.verify_ct
        return {
            "spec_verify_ct": verify,
            "spec_accept_length": completion_tokens / verify if verify else None,
            "spec_accept_rate": (self.num_correct_drafts / self.num_proposed_drafts
                                 if self.num_proposed_drafts else None),
            "spec_num_correct_drafts": self.num_correct_drafts,
            "spec_num_proposed_drafts": self.num_proposed_drafts,
            "spec_correct_drafts_histogram": list(self.correct_drafts_histogram),
        }


def record_verifies(verdicts: Mapping[str, tuple[int, int]], updates: Iterable) -> list[tuple[int, int, int]]:
    """After ``postprocess``: count each verify of a step (``verdicts``: request id → (proposed,
    accepted)) in its request's :class:`SpecStats`, against the tokens its update gave it.

    Returns (proposed, accepted-and-emitted, accepted by the target) per verify counted, for the
    server's counters."""
    by_id = {u.request.request_id: u for u in updates}
    counted = []
    for request_id, (proposed, accepted) in verdicts.items():
        update = by_id.get(request_id)
        if update is None:
            continue
        request = update.request
        if request.spec_stats is None:
            request.spec_stats = SpecStats()
        correct = request.spec_stats.record(proposed, accepted, len(update.new_token_ids))
        counted.append((proposed, correct, accepted))
    return counted
