"""Server-sent events, decoded in layers: bytes -> text -> lines -> events.

Built to survive real servers:

- LF, CRLF or lone CR line ends (a CR at the end of one read may pair with an LF in the next);
- single-newline framing: a ``data:`` line right after a ``data:`` line whose payload is already
  complete JSON (or ``[DONE]``) starts a new event instead of being joined to it;
- ``:`` comment / keep-alive lines, ``event:``/``id:``/``retry:`` fields, multi-line ``data:``;
- a final event with no trailing blank line (flushed by :meth:`SSEDecoder.close`);
- UTF-8 sequences split across reads (an incremental decoder holds the partial bytes);
- events of any size (no line-length limit; the caller feeds raw chunks, not ``readline``).

Decompression (``Content-Encoding: gzip``) happens one layer below, in the transport
(:mod:`specgauge.client.http_connection`), so this module only ever sees the identity-encoded bytes.
"""

from __future__ import annotations

import codecs

import orjson

DONE = "[DONE]"


class SSEEvent:
    """One dispatched event: its ``data`` (lines joined by '\\n'), ``event`` type and ``id``."""

    __slots__ = ("data", "event", "id")

    def __init__(self, data: str, event: str | None = None, id: str | None = None) -> None:
        self.data = data
        self.event = event
        self.id = id

    def __repr__(self) -> str:
        return f"SSEEvent(data={self.data[:60]!r}, event={self.event!r}, id={self.id!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SSEEvent) and self.data == other.data and self.event == other.event
                and self.id == other.id)


class TextDecoder:
    """bytes -> str, holding a UTF-8 sequence split across reads until its last byte arrives.

    Fast path: while no partial sequence is held, a read that is whole valid UTF-8 is decoded
    directly; otherwise (a split character, invalid bytes) the incremental decoder takes over.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._holding = False  # the incremental decoder holds the start of a split character

    def decode(self, data: bytes) -> str:
        if not self._holding:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                pass
        text = self._decoder.decode(data)
        self._holding = bool(self._decoder.getstate()[0])
        return text

    def flush(self) -> str:
        self._holding = False
        return self._decoder.decode(b"", final=True)


class LineDecoder:
    """str -> complete lines, for LF, CRLF and lone-CR line ends; the unfinished tail is kept."""

    def __init__(self) -> None:
        self._pending: list[str] = []  # parts of the unfinished line (a list: no quadratic joins)
        self._trailing_cr = False

    def decode(self, text: str) -> list[str]:
        if self._trailing_cr:  # a CR ended the last read: an LF starting this one belongs to it
            self._trailing_cr = False
            if text.startswith("\n"):
                text = text[1:]
        if "\r" in text:
            if text.endswith("\r"):
                self._trailing_cr = True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            if text:
                self._pending.append(text)
            return []
        if self._pending:
            self._pending.append(text)
            text = "".join(self._pending)
            self._pending = []
        lines = text.split("\n")
        rest = lines.pop()
        if rest:
            self._pending.append(rest)
        return lines

    def flush(self) -> list[str]:
        """The unterminated last line, if any (stream end)."""
        rest, self._pending = "".join(self._pending), []
        return [rest] if rest else []


def _is_complete(data: str) -> bool:
    """Whether ``data`` is already a whole payload (``[DONE]`` or parseable JSON)."""
    if data == DONE:
        return True
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


class SSEDecoder:
    """Raw byte chunks in, :class:`SSEEvent` lists out. ``junk_lines`` counts non-SSE lines
    (a plain JSON or HTML body shows up there), ``junk_sample`` keeps the first of them."""

    def __init__(self) -> None:
        self._text = TextDecoder()
        self._lines = LineDecoder()
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self.junk_lines = 0
        self.junk_sample = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode one read; returns the events it completed (often none, often several)."""
        lines = self._lines.decode(self._text.decode(chunk))
        return self._on_lines(lines) if lines else []

    def simple_payloads(self, chunk: bytes) -> list[str] | None:
        """The fast path for the common read: whole events that are each one ``data: `` line.

        When nothing is held from earlier reads and ``chunk`` is valid UTF-8, has no CR, and is a
        run of ``data: PAYLOAD`` lines each followed by a blank line, returns the payloads — the
        same ``data`` :meth:`feed` would give its events, without building them. Anything else
        (a partial event, comments, ``event:`` fields, multi-line data, CRs, a split character)
        returns None and the caller uses :meth:`feed`, which then sees exactly this read.
        """
        if (self._data or self._event is not None or self._lines._pending or self._lines._trailing_cr
                or self._text._holding):
            return None
        if not chunk.endswith(b"\n\n") or not chunk.startswith(b"data: "):
            return None
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if "\r" in text:
            return None
        payloads = []
        for part in text[:-2].split("\n\n"):
            if not part.startswith("data: ") or "\n" in part:
                return None
            payloads.append(part[6:])
        return payloads

    def close(self) -> list[SSEEvent]:
        """Stream end: flush a split character, the last line and an event with no blank line."""
        lines = self._lines.decode(self._text.flush()) + self._lines.flush()
        events = self._on_lines(lines)
        if self._data:
            events.append(self._dispatch())
        return events

    def _dispatch(self) -> SSEEvent:
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        event = SSEEvent(data, self._event, self._id)
        self._data = []
        self._event = None
        return event

    def _on_lines(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._dispatch())
                else:
                    self._event = None
                continue
            if line.startswith("data:"):
                value = line[6:] if line[5:6] == " " else line[5:]
                if self._data and _is_complete("\n".join(self._data)):  # single-newline framing
                    events.append(self._dispatch())
                self._data.append(value)
                continue
            if line[0] == ":":  # comment / keep-alive
                continue
            name, sep, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if sep and name == "event":
                self._event = value
            elif sep and name == "id":
                self._id = value
            elif sep and name == "retry":
                pass
            else:
                self.junk_lines += 1
                if not self.junk_sample:
                    self.junk_sample = line[:500]
        return events
