"""The measured stream's own HTTP/1.1 transport against real loopback servers written here
(asyncio streams speaking raw HTTP): framing, splits across reads, keep-alive, TLS, gzip, proxy,
and the faults that only a raw server can produce."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import shutil
import socket
import ssl
import subprocess
import zlib

import pytest

from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.probe import check_reachable
from specgauge.client.records import ErrorClass
from specgauge.client.send import send_request
from specgauge.client.session import open_session, warm_pool
from specgauge.errors import UserError
from specgauge.suites.model import SuiteRequest

PROMPT = SuiteRequest(prompt="hello", max_tokens=16)
FAST = Timeouts(connect_s=2, headers_s=2, read_s=2)
WORDS = ["alpha ", "beta ", "gamma ", "delta"]


def event(text: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    payload = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


STREAM = b"".join(event(w) for w in WORDS) + event(finish="stop") + b"data: [DONE]\n\n"
SSE_HEAD = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


async def read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes] | None:
    """One request off the connection: its request line, headers (lower-case names), body; None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    line, *rest = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in rest if h)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return line, headers, body


class RawServer:
    """A loopback server whose ``respond(writer, n, request)`` writes raw bytes for the n-th request
    (counted over all connections). ``connections`` counts accepted connections, ``requests`` keeps them."""

    def __init__(self, respond, ssl_context: ssl.SSLContext | None = None) -> None:
        self.respond, self.ssl_context = respond, ssl_context
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []

    async def __aenter__(self) -> "RawServer":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while (request := await read_request(reader)) is not None:
                self.requests.append(request)
                if await self.respond(writer, len(self.requests), request) == "close":
                    break
        except ConnectionError:
            pass
        finally:
            writer.close()


async def pieces(writer: asyncio.StreamWriter, *parts: bytes) -> None:
    """Write ``parts`` as separate TCP segments: each is drained and given a loop turn apart."""
    for part in parts:
        writer.write(part)
        await writer.drain()
        await asyncio.sleep(0.002)   # pacing of the server's writes, not a wait in the test


async def send(url: str, session=None, **endpoint_args):
    endpoint = Endpoint(url, api="openai-chat", model="m", **endpoint_args)
    if session is not None:
        return await send_request(session, endpoint, PROMPT, request_index=0, prompt_index=0,
                                  max_tokens=None, timeouts=FAST)
    async with open_session(FAST) as own:
        return await send_request(own, endpoint, PROMPT, request_index=0, prompt_index=0,
                                  max_tokens=None, timeouts=FAST)


def assert_whole(record) -> None:
    assert record.ok, (record.error_class, record.error_message)
    assert record.output_text == "".join(WORDS) and record.finish_reason == "stop"
    assert record.t_send_ns <= record.t_headers_ns <= record.chunk_times_ns[0] <= record.t_end_ns


# -- framing --------------------------------------------------------------------------------------

async def test_chunked_stream_with_headers_and_chunk_size_lines_split_across_reads():
    body = chunked(*(event(w) for w in WORDS), event(finish="stop"), b"data: [DONE]\n\n")
    head = (SSE_HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode()

    async def respond(writer, n, request):
        # the status line, a header name and the first chunk-size line each cut in two
        cut = body.index(b"\r\n")
        await pieces(writer, head[:7], head[7:30], head[30:], body[:cut - 1], body[cut - 1:cut + 5], body[cut + 5:])

    async with RawServer(respond) as server:
        record = await send(server.url)
    assert_whole(record)
    assert len(record.chunk_times_ns) == len(WORDS)


async def test_content_length_body():
    async def respond(writer, n, request):
        writer.write((SSE_HEAD + f"Content-Length: {len(STREAM)}\r\n\r\n").encode() + STREAM)

    async with RawServer(respond) as server:
        assert_whole(await send(server.url))


async def test_close_delimited_body():
    async def respond(writer, n, request):
        await pieces(writer, (SSE_HEAD + "Connection: close\r\n\r\n").encode(), STREAM[:40], STREAM[40:])
        return "close"

    async with RawServer(respond) as server:
        assert_whole(await send(server.url))


async def test_gzip_chunked_body():
    compressor = zlib.compressobj(wbits=31)
    parts = [compressor.compress(event(w)) + compressor.flush(zlib.Z_SYNC_FLUSH) for w in WORDS]
    parts.append(compressor.compress(event(finish="stop") + b"data: [DONE]\n\n") + compressor.flush())

    async def respond(writer, n, request):
        assert "gzip" in request[1]["accept-encoding"]
        await pieces(writer, (SSE_HEAD + "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n").encode(),
                     *(b"%x\r\n%s\r\n" % (len(p), p) for p in parts), b"0\r\n\r\n")

    async with RawServer(respond) as server:
        record = await send(server.url)
    assert_whole(record)
    assert gzip.decompress(b"".join(parts)) == STREAM


async def test_a_one_megabyte_event_across_many_reads():
    text = "x" * 1_000_000
    big = event(text) + event(finish="stop") + b"data: [DONE]\n\n"

    async def respond(writer, n, request):
        writer.write((SSE_HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode())
        writer.write(chunked(*(big[i:i + 65536] for i in range(0, len(big), 65536))))

    async with RawServer(respond) as server:
        record = await send(server.url)
    assert record.ok, record.error_message
    assert record.output_text == text and len(record.chunk_times_ns) == 1


# -- faults only a raw server can make ------------------------------------------------------------

async def test_server_closing_mid_chunk_is_a_cut_stream_that_keeps_its_chunks():
    async def respond(writer, n, request):
        first = event(WORDS[0])
        await pieces(writer, (SSE_HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode(),
                     b"%x\r\n%s\r\n" % (len(first), first), b"%x\r\n" % 200 + event(WORDS[1])[:20])
        return "close"

    async with RawServer(respond) as server:
        record = await send(server.url)
    assert record.error_class is ErrorClass.STREAM_CUT, record.error_message
    assert record.output_text == WORDS[0] and len(record.chunk_times_ns) == 1


async def test_closed_before_headers_is_connection_lost():
    async def respond(writer, n, request):
        writer.write(b"HTTP/1.1 20")
        return "close"

    async with RawServer(respond) as server:
        record = await send(server.url)
    assert record.error_class is ErrorClass.CONNECTION_LOST and "before response headers" in record.error_message


async def test_a_malformed_status_line_is_one_line_error():
    async def respond(writer, n, request):
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        return "close"

    async with RawServer(respond) as server:
        record = await send(server.url)
    assert record.error_class is ErrorClass.OTHER and record.error_message.startswith("malformed HTTP response")


async def test_an_encoding_not_asked_for_is_refused():
    async def respond(writer, n, request):
        writer.write((SSE_HEAD + "Content-Encoding: br\r\nContent-Length: 4\r\n\r\nxxxx").encode())

    async with RawServer(respond) as server:
        record = await send(server.url)
    assert record.error_class is ErrorClass.OTHER and "'br'" in record.error_message


async def test_http_error_body_is_kept_and_the_connection_reused():
    async def respond(writer, n, request):
        if n == 1:
            body = b'{"error": "busy"}'
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        else:
            writer.write((SSE_HEAD + f"Content-Length: {len(STREAM)}\r\n\r\n").encode() + STREAM)

    async with RawServer(respond) as server, open_session(FAST) as session:
        failed = await send(server.url, session)
        ok = await send(server.url, session)
    assert failed.error_class is ErrorClass.HTTP_5XX and failed.error_message == 'HTTP 503: {"error": "busy"}'
    assert_whole(ok)
    assert server.connections == 1   # the error response was read to its end: the connection kept


async def test_keep_alive_after_a_cut_and_after_the_server_closed_an_idle_connection():
    async def respond(writer, n, request):
        if n == 2:   # cut mid-body
            writer.write((SSE_HEAD + "Content-Length: 9999\r\n\r\n").encode() + STREAM[:30])
            return "close"
        writer.write((SSE_HEAD + f"Content-Length: {len(STREAM)}\r\n\r\n").encode() + STREAM)
        if n == 3:
            return "close"   # closes the idle keep-alive connection after a complete response

    connect_ms: list[float] = []
    async with RawServer(respond) as server, open_session(FAST, connect_ms) as session:
        first = await send(server.url, session)
        cut = await send(server.url, session)
        third = await send(server.url, session)          # a new connection: the cut one was closed
        fourth = await send(server.url, session)         # its idle connection is gone: once more, new one
    assert_whole(first)
    assert cut.error_class is ErrorClass.STREAM_CUT
    assert_whole(third)
    assert_whole(fourth)
    assert server.connections == 3 and len(connect_ms) == 3


async def test_warm_pool_connections_are_the_ones_the_stream_uses():
    async def respond(writer, n, request):
        if request[0].startswith("GET /v1/models"):
            writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"data":[]}')
        else:
            writer.write((SSE_HEAD + f"Content-Length: {len(STREAM)}\r\n\r\n").encode() + STREAM)

    connect_ms: list[float] = []
    async with RawServer(respond) as server, open_session(FAST, connect_ms) as session:
        endpoint = Endpoint(server.url, api="openai-chat", model="m")
        await warm_pool(session, endpoint, 3, FAST)
        records = await asyncio.gather(*(send(server.url, session) for _ in range(3)))
    assert all(r.ok for r in records)
    assert server.connections == 3 and len(connect_ms) == 3


async def test_bearer_token_and_extra_headers_are_sent():
    async def respond(writer, n, request):
        writer.write((SSE_HEAD + f"Content-Length: {len(STREAM)}\r\n\r\n").encode() + STREAM)

    async with RawServer(respond) as server:
        record = await send(server.url, api_key="sk-1", headers=(("X-Tenant", "t9"),))
    assert_whole(record)
    line, headers, body = server.requests[0]
    assert line == "POST /v1/chat/completions HTTP/1.1"
    assert headers["authorization"] == "Bearer sk-1" and headers["x-tenant"] == "t9"
    assert headers["host"] == server.url.removeprefix("http://") and json.loads(body)["stream"] is True


# -- TLS ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("neither the cryptography package nor the openssl command is here to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", folder / "key.pem", "-out", folder / "cert.pem"],
                   check=True, capture_output=True, timeout=120)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return context


async def test_https_with_insecure_and_a_refused_self_signed_certificate(self_signed):
    async def respond(writer, n, request):
        writer.write((SSE_HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode() + chunked(STREAM[:50], STREAM[50:]))

    async with RawServer(respond, self_signed) as server:
        checked = await send(server.url)
        insecure = await send(server.url, insecure=True)
    assert checked.error_class is ErrorClass.TLS and "CERTIFICATE_VERIFY_FAILED" in checked.error_message
    assert_whole(insecure)


# -- proxy ----------------------------------------------------------------------------------------

async def test_http_proxy_gets_the_absolute_form_and_its_credentials(monkeypatch):
    async def respond(writer, n, request):   # answers as the origin behind it would
        writer.write((SSE_HEAD + f"Content-Length: {len(STREAM)}\r\n\r\n").encode() + STREAM)

    async def loopback_only(host, port):   # no DNS here: origin.test is not a name that resolves
        if host != "127.0.0.1":
            raise socket.gaierror(socket.EAI_NONAME, f"Name or service not known: {host}")
        return await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)

    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    async with RawServer(respond) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url.replace("http://", "http://user:p%40ss@"))
        async with open_session(FAST, resolver=loopback_only) as session:
            record = await send("http://origin.test:8000", session)
        monkeypatch.setenv("no_proxy", "origin.test")
        async with open_session(FAST, resolver=loopback_only) as session:
            direct = await send("http://origin.test:8000", session)
    assert_whole(record)
    line, headers, _ = proxy.requests[0]
    assert line == "POST http://origin.test:8000/v1/chat/completions HTTP/1.1"
    assert headers["host"] == "origin.test:8000"
    assert headers["proxy-authorization"] == "Basic " + base64.b64encode(b"user:p@ss").decode()
    assert direct.error_class is ErrorClass.DNS
    assert len(proxy.requests) == 1   # NO_PROXY: not through the proxy


async def test_https_through_a_proxy_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    record = await send("https://origin.test")
    assert record.error_class is ErrorClass.OTHER and "does not tunnel https" in record.error_message
    with pytest.raises(UserError, match="does not tunnel https through a proxy"):
        await check_reachable(Endpoint("https://origin.test", api="openai-chat"))


def test_bench_insecure_reaches_a_self_signed_https_server(self_signed, tmp_path):
    import threading

    from cli_testkit import one_line_error, run_cli

    async def respond(writer, n, request):
        if request[0].startswith("GET "):
            models = b'{"data":[{"id":"m"}]}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(models), models))
        else:
            writer.write((SSE_HEAD + f"Content-Length: {len(STREAM)}\r\n\r\n").encode() + STREAM)

    loop = asyncio.new_event_loop()
    server = RawServer(respond, self_signed)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.__aenter__())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(30), "the https test server did not start"
    try:
        args = ("bench", server.url, "--api", "openai-chat", "--model", "m", "--num-requests", "2", "--warmup", "0",
                "--raw-chat-format", "--output-json", "-", "--db", tmp_path / "r.db")
        refused = run_cli(*args)
        done = run_cli(*args, "--insecure")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.run_until_complete(server.__aexit__())
        loop.close()
    one_line_error(refused, "cannot reach", "TLS")
    assert done.returncode == 0, done.stderr
    point = json.loads(done.stdout)["points"][0]
    assert point["num_ok"] == 2 and point["num_errors"] == 0


def test_proxy_rules_from_the_environment(monkeypatch):
    from specgauge.client.proxy import proxy_refusal, route_for

    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", "socks5://127.0.0.1:1080")
    assert "must be an http:// proxy URL" in proxy_refusal("http://origin.test")
    monkeypatch.setenv("http_proxy", "127.0.0.1:3128")   # no scheme: http, as curl reads it
    route = route_for("http://origin.test/v1")
    assert (route.host, route.port, route.authorization) == ("127.0.0.1", 3128, None)
    monkeypatch.setenv("no_proxy", ".test")
    assert route_for("http://origin.test/v1") is None and proxy_refusal("http://origin.test") is None
