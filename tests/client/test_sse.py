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
