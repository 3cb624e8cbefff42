"""SGLang native ``POST /generate`` (streaming).

Each event's ``text`` is cumulative by default and incremental when the server runs with
``--incremental-streaming-output``; the adapter detects which from the first events (cumulative
when an event's text extends everything received so far) and switches if a later event
contradicts it. ``meta_info`` is read under every historical field name (``DRAFT_COUNT_KEYS``, ``HISTOGRAM_KEYS``).
"""

from __future__ import annotations

import orjson

from specgauge.client.adapters.base import (Adapter, EventError, StreamState, add_chunk, bad_event,
                                            finished_without_text,
                                            copy_spec_fields, copy_token_counts, server_error_message)
from specgauge.client.prompts import prompt_text
from specgauge.client.records import ErrorClass, RequestRecord
from specgauge.client.sampling import Sampling
from specgauge.suites.model import SuiteRequest

# (correct, proposed) count pairs, newest name first; histograms likewise.
DRAFT_COUNT_KEYS = (
    ("spec_accept_token_num", "spec_draft_token_num"),
    ("spec_accepted_drafts", "spec_proposed_drafts"),
    ("spec_num_correct_drafts", "spec_num_proposed_drafts"),
)
HISTOGRAM_KEYS = ("spec_accept_histogram", "spec_correct_drafts_histogram")


def read_meta_info(meta: dict, record: RequestRecord) -> None:
    """Copy SGLang ``meta_info`` (cumulative fields; the last event's values win) into ``record``."""
    copy_token_counts(meta, record)
    if record.server_request_id is None and meta.get("id") is not None:
        record.server_request_id = str(meta["id"])
    read_spec_details(meta, record)
    reason = meta.get("finish_reason")
    if reason:
        kind = reason.get("type") if isinstance(reason, dict) else str(reason)
        if kind == "abort":
            message = reason.get("message") if isinstance(reason, dict) else None
            raise EventError(ErrorClass.SERVER_ERROR_EVENT, f"server aborted the request: {message or reason}")
        record.finish_reason = kind


def read_spec_details(meta: dict, record: RequestRecord) -> None:
    """Copy SGLang's per-request speculation figures (``meta_info``, or the OpenAI routes'
    ``sglext.spec_tokens_details``, which carries the same names) into ``record``.

    SGLang's count of correct drafts is *not* copied into ``spec_correct_drafts``: it does not
    follow the output. A real SGLang (upstream 2f14d6c, CPU, 2026-12-06) reported 35 correct drafts
    over 14 verify steps for 48 completion tokens (1 + 35/14 = 3.5, but 1 + 14 + 35 = 50 > 48: it
    counts drafts a last verify step accepted past ``max_new_tokens``) and for another request 22
    over 25 (exactly the output). So SGLang's acceptance follows one rule,
    ``(completion_tokens − 1) / spec_verify_ct`` (:func:`specgauge.analysis.definitions.accept_length`);
    SGLang's own figures stay on the record: ``spec_accept_length`` (its ``completion_tokens /
    spec_verify_ct``), ``spec_accept_rate``, the proposed drafts and the histogram (whose
    ``Σ i·h[i]`` is its correct count)."""
    copy_spec_fields(meta, record)
    for _correct_key, proposed_key in DRAFT_COUNT_KEYS:
        if meta.get(proposed_key) is not None:
            record.spec_proposed_drafts = int(meta[proposed_key])
            break
    for key in HISTOGRAM_KEYS:
        if meta.get(key) is not None:
            record.spec_accept_histogram = [int(x) for x in meta[key]]
            break


RAW_TEXTS_KEPT = 8  # cumulative-looking events kept verbatim, in case the guess proves wrong
TAIL_CHECKED = 64   # after those, an event must repeat the last characters so far (not all of them)


def _extends(text: str, so_far: str, *, verify_all: bool) -> bool:
    """Whether cumulative ``text`` extends ``so_far``: fully checked for the first events, then by
    length and tail only (a full compare on every event is quadratic over a long output)."""
    if verify_all:
        return text.startswith(so_far)
    n = len(so_far)
    return len(text) >= n and text[max(0, n - TAIL_CHECKED):n] == so_far[-TAIL_CHECKED:]


def text_delta(text: str, record: RequestRecord, state: StreamState) -> str:
    """The new text an event carries, for cumulative and incremental ``text`` alike.

    Cumulative is assumed when the second event's text extends the first; a later event that
    does not extend the text so far switches to incremental, and the output is rebuilt from the
    events kept verbatim (the first ``RAW_TEXTS_KEPT``; an incremental stream whose first eight
    pieces each extend the previous ones is not a case worth holding every event for). In
    cumulative mode ``record.output_text`` is the latest full text; in incremental mode it is
    joined from the chunks at the end (no quadratic concatenation while streaming). After a
    contradiction (mode ``rebuilt``) the text is the rebuilt prefix plus every later piece.
    """
    if state.text_mode == "incremental":
        return text
    if state.text_mode == "rebuilt":
        record.output_text += text
        return text
    so_far = record.output_text
    if state.text_mode is None and so_far:
        if not (text.startswith(so_far) and len(text) > len(so_far)):
            state.text_mode = "incremental"
            record.output_text = ""  # the chunks hold the pieces now
            return text
        state.text_mode = "cumulative"
    if _extends(text, so_far, verify_all=len(state.raw_texts) < RAW_TEXTS_KEPT):
        if len(state.raw_texts) < RAW_TEXTS_KEPT:
            state.raw_texts.append(text)
        record.output_text = text
        return text[len(so_far):]
    # Contradiction: the stream was incremental after all. Rebuild the text from the kept events
    # (beyond them, the best guess so far stands); per-chunk texts keep what was computed.
    state.text_mode = "rebuilt"
    if len(state.raw_texts) < RAW_TEXTS_KEPT:
        so_far = "".join(state.raw_texts)
    record.output_text = so_far + text
    return text


class SGLangAdapter(Adapter):
    """Raw text in ``text``; a chat request is rendered by :func:`prompt_text`."""

    name = "sglang"
    path = "/generate"

    def build_body(self, request: SuiteRequest, *, model: str | None, max_tokens: int,
                   sampling: Sampling = Sampling(), tokenizer_path: str | None = None,
                   ignore_eos: bool = False) -> dict:
        params = {"max_new_tokens": max_tokens, **sampling.fields(seed_name="sampling_seed")}
        if ignore_eos:  # SGLang's sampling_params.ignore_eos (python/sglang/bench_serving.py sends it so)
            params["ignore_eos"] = True
        return {"text": prompt_text(request, tokenizer_path), "stream": True, "sampling_params": params}

    def on_data(self, data: str, t_ns: int, record: RequestRecord, state: StreamState) -> None:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise bad_event(data) from None
        if not isinstance(obj, dict):
            raise bad_event(data)
        if "error" in obj or obj.get("object") == "error":
            raise EventError(ErrorClass.SERVER_ERROR_EVENT, f"server error event: {server_error_message(obj)}")
        meta = obj.get("meta_info")
        if meta:
            read_meta_info(meta, record)
        text = obj.get("text")
        if text:
            delta = text_delta(text, record, state)
            if delta:
                cumulative = meta.get("completion_tokens") if meta else None
                add_chunk(record, state, t_ns, delta, cumulative)
        if record.finish_reason is not None:
            finished_without_text(record, state, t_ns, meta.get("completion_tokens") if meta else None)


ADAPTER = SGLangAdapter()
