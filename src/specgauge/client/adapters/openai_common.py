"""Parts shared by the two OpenAI adapters: event parsing, usage, and the speculation extras
an OpenAI-compatible server may add: our engine sends ``spec_accept_length``/``spec_verify_ct``;
vLLM started with ``--per-request-spec-decode-metrics summary|detailed`` adds
``metrics.speculative_decoding`` (``SpeculativeDecodingMetrics`` in
``vllm/entrypoints/generate/base/protocol.py``: ``mean_acceptance_length``,
``draft_acceptance_rate``, ``acceptance_histogram``, ``num_spec_steps``,
``num_accepted_draft_tokens``, ``num_draft_tokens``, ``num_spec_tokens``) to the last, usage-bearing
chunk of a stream (``chat_completion/serving.py``); SGLang asked with ``return_spec_tokens_details``
adds ``sglext.spec_tokens_details`` (``SglExt``/``SpecTokensDetails`` in
``python/sglang/srt/entrypoints/openai/protocol.py``: ``spec_verify_ct``, ``spec_accept_length``,
``spec_num_correct_drafts``, ``spec_num_proposed_drafts``, ``spec_correct_drafts_histogram``)."""

from __future__ import annotations

import orjson

from specgauge.client.adapters.base import (EventError, bad_event, copy_spec_fields, copy_token_counts,
                                            server_error_message)
from specgauge.client.records import ErrorClass, RequestRecord


def parse_openai_event(data: str, record: RequestRecord) -> tuple[dict | None, int | None]:
    """Parse one streamed chunk; copy id, usage and extras into ``record``.

    Returns ``(first choice or None, cumulative completion tokens this chunk reports or None)``;
    records the finish reason. Raises :class:`EventError` for malformed or error events.
    Hot path: a plain content chunk costs one parse and a few dict look-ups.
    """
    try:
        obj = orjson.loads(data)
        choices = obj.get("choices")
    except (orjson.JSONDecodeError, AttributeError):
        raise bad_event(data) from None
    if record.server_request_id is None:
        record.server_request_id = obj.get("id")
    cumulative = None
    if not choices or obj.get("usage") or obj.get("metrics") or "spec_accept_length" in obj or "sglext" in obj:
        if "error" in obj or obj.get("object") == "error":
            raise EventError(ErrorClass.SERVER_ERROR_EVENT, f"server error event: {server_error_message(obj)}")
        cumulative = read_usage(obj, record)
        if not choices:
            return None, cumulative
    choice = choices[0]
    reason = choice.get("finish_reason")
    if reason:
        record.finish_reason = reason
    return choice, cumulative


def read_usage(obj: dict, record: RequestRecord) -> int | None:
    """Copy ``usage`` (and top-level/usage ``spec_*`` extras) into ``record``; return the
    cumulative completion-token count this chunk carries, if any."""
    usage = obj.get("usage")
    completion = None
    if usage:
        completion = copy_token_counts(usage, record)
        copy_spec_fields(usage, record)
    if "spec_accept_length" in obj or "spec_verify_ct" in obj:
        copy_spec_fields(obj, record)
    metrics = obj.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
        read_vllm_spec_metrics(metrics["speculative_decoding"], record)
    extension = obj.get("sglext")
    if isinstance(extension, dict) and isinstance(extension.get("spec_tokens_details"), dict):
        from specgauge.client.adapters.sglang import read_spec_details

        read_spec_details(extension["spec_tokens_details"], record)
    return completion


def read_vllm_spec_metrics(spec: dict, record: RequestRecord) -> None:
    """vLLM's per-request ``metrics.speculative_decoding`` (module doc) into ``record``: verify steps
    that drafted, accepted and proposed draft tokens, vLLM's own mean acceptance length
    (``1 + accepted / steps``) and the histogram of accepted drafts per step."""
    try:
        steps = int(spec["num_spec_steps"])
        record.spec_verify_ct = steps
        record.spec_correct_drafts = int(spec["num_accepted_draft_tokens"])
        record.spec_proposed_drafts = int(spec["num_draft_tokens"])
    except (KeyError, TypeError, ValueError):
        return
    if spec.get("mean_acceptance_length") is not None:
        record.spec_accept_length = float(spec["mean_acceptance_length"])
    if spec.get("draft_acceptance_rate") is not None:
        record.spec_accept_rate = float(spec["draft_acceptance_rate"])
    histogram = spec.get("acceptance_histogram")
    if isinstance(histogram, list):
        record.spec_accept_histogram = [int(x) for x in histogram]
