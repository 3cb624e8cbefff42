"""Parts shared by the two OpenAI adapters: event parsing, usage, and the speculation extras
an OpenAI-compatible server may add (our engine sends ``spec_accept_length``)."""

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
    if not choices or obj.get("usage") or "spec_accept_length" in obj:  # rarer events (usage is null on most)
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
    return completion
