"""The SSE decoder on every framing real servers produce, fed in awkward read sizes."""

import json

import pytest

from specgauge.client.sse import DONE, LineDecoder, SSEDecoder, SSEEvent, TextDecoder


def decode_all(chunks: list[bytes]) -> list[SSEEvent]:
    """A whole stream given as a list of reads, through the decoder's public feed/close."""
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + list(decoder.close())

STREAM = b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n'


def datas(events):
    return [e.data for e in events]


def test_lf_framing():
    assert datas(decode_all([STREAM])) == ['{"n": 1}', '{"n": 2}', DONE]


def test_crlf_framing_split_between_cr_and_lf():
    crlf = STREAM.replace(b"\n", b"\r\n")
    cut = crlf.index(b"\r\n") + 1  # the read ends after CR, the LF comes with the next read
    assert datas(decode_all([crlf[:cut], crlf[cut:]])) == ['{"n": 1}', '{"n": 2}', DONE]


def test_lone_cr_framing():
    assert datas(decode_all([STREAM.replace(b"\n", b"\r")])) == ['{"n": 1}', '{"n": 2}', DONE]


def test_single_newline_framing_splits_complete_json_payloads():
    stream = b'data: {"n": 1}\ndata: {"n": 2}\ndata: [DONE]\n'
    assert datas(decode_all([stream])) == ['{"n": 1}', '{"n": 2}', DONE]


def test_multi_line_data_is_joined_with_newlines():
    stream = b'data: {"text":\ndata:  "two lines"}\n\n'
    (event,) = decode_all([stream])
    assert event.data == '{"text":\n "two lines"}'
    assert json.loads(event.data) == {"text": "two lines"}


def test_comments_keepalives_and_fields():
    stream = b': connected\n\n: keep-alive\nevent: message\nid: 7\nretry: 100\ndata: {"n": 1}\n\n:ping\n\n'
    (event,) = decode_all([stream])
    assert event == SSEEvent('{"n": 1}', event="message", id="7")


def test_final_event_without_blank_line_is_flushed_at_close():
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"n": 1}\n\ndata: {"last": true}') == [SSEEvent('{"n": 1}')]
    assert datas(decoder.close()) == ['{"last": true}']


def test_utf8_split_across_reads():
    raw = 'data: {"text": "é€𝄞"}\n\n'.encode()
    for cut in range(len(raw)):
        events = decode_all([raw[:cut], raw[cut:]])
        assert datas(events) == ['{"text": "é€𝄞"}'], cut


def test_text_decoder_holds_partial_sequence():
    decoder = TextDecoder()
    euro = "€".encode()
    assert decoder.decode(euro[:1]) == ""
    assert decoder.decode(euro[1:]) == "€"


def test_event_over_one_megabyte_in_small_reads():
    payload = json.dumps({"text": "x" * (1 << 20)})
    raw = f"data: {payload}\n\n".encode()
    reads = [raw[i:i + 4096] for i in range(0, len(raw), 4096)]
    (event,) = decode_all(reads)
    assert event.data == payload


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_any_read_size_gives_the_same_events(size):
    stream = (b': hi\r\ndata: {"a": 1}\r\n\r\ndata: {"b":\ndata: 2}\n\nevent: x\ndata: {"c": "\xc3\xa9"}\r\r'
              b'data: [DONE]')
    whole = decode_all([stream])
    assert datas(whole) == ['{"a": 1}', '{"b":\n2}', '{"c": "é"}', DONE]
    assert decode_all([stream[i:i + size] for i in range(0, len(stream), size)]) == whole


def test_a_plain_json_body_shows_up_as_junk_lines():
    decoder = SSEDecoder()
    assert decoder.feed(b'{"error": "not a stream"}\n') == []
    assert decoder.close() == []
    assert decoder.junk_lines == 1 and decoder.junk_sample.startswith('{"error"')


def test_line_decoder_keeps_unfinished_tail():
    lines = LineDecoder()
    assert lines.decode("abc") == []
    assert lines.decode("def\ngh") == ["abcdef"]
    assert lines.flush() == ["gh"]


# -- the fast path for whole one-line ``data:`` events ------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def decode_with_fast_path(chunks: list[bytes]) -> list[tuple[str, str | None]]:
    """What the client's stream sink sees: ``simple_payloads`` where it answers, ``feed`` otherwise."""
    decoder = SSEDecoder()
    out: list[tuple[str, str | None]] = []
    for chunk in chunks:
        payloads = decoder.simple_payloads(chunk)
        if payloads is None:
            out += [(e.data, e.event) for e in decoder.feed(chunk)]
        else:
            out += [(p, None) for p in payloads]
    return out + [(e.data, e.event) for e in decoder.close()]


def test_fast_path_takes_whole_data_events_and_nothing_else():
    decoder = SSEDecoder()
    assert decoder.simple_payloads(b'data: {"a": 1}\n\ndata: [DONE]\n\n') == ['{"a": 1}', DONE]
    for refused in (b'data: {"a": 1}\n', b'data: {"a"', b": keep-alive\n\n", b"event: error\ndata: x\n\n",
                    b"data: a\ndata: b\n\n", b'data: {"a": 1}\r\n\r\n', b"data: \xe2\x82\n\n", b"data:x\n\n"):
        assert decoder.simple_payloads(refused) is None, refused
    decoder.feed(b"data: partial")   # an unfinished line is held: the next read must go through feed
    assert decoder.simple_payloads(b"data: next\n\n") is None
    typed = SSEDecoder()
    typed.feed(b"event: error\n")      # a field of the event the next read completes
    assert typed.simple_payloads(b"data: next\n\n") is None


EVENT_PARTS = st.sampled_from([b'data: {"n": 1}\n\n', b"data: [DONE]\n\n", b": ping\n\n", b"event: error\n",
                               b"data: one\ndata: two\n\n", b'data: {"t": "\xc3\xa9"}\n\n', b"id: 7\n",
                               b'data: {"n": 2}\r\n\r\n', b'data:{"n": 3}\n\n', b"\n"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(EVENT_PARTS, max_size=12), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_fast_path_gives_what_feed_gives_on_any_stream_and_read_split(parts, cuts):
    stream = b"".join(parts)
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)])]
    assert decode_with_fast_path(chunks) == [(e.data, e.event) for e in decode_all(chunks)]
