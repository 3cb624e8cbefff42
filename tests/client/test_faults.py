"""Every fault becomes a classified error on the record; send_request never raises."""

import socket

import pytest

from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.probe import check_reachable
from specgauge.client.records import ErrorClass
from specgauge.client.send import send_request
from specgauge.client.session import StreamSession, open_session
from specgauge.errors import UserError
from specgauge.suites.model import SuiteRequest
from specgauge.testing.scripted_server import Script, ScriptedServer, refused_url

PROMPT = SuiteRequest(prompt="hello", max_tokens=16)
FAST = Timeouts(connect_s=0.5, headers_s=0.4, read_s=0.4)


async def send_to(url: str, api: str = "openai-chat", session: StreamSession | None = None):
    endpoint = Endpoint(url, api=api, model="m")
    own = session is None
    session = session or await open_session(FAST).__aenter__()
    try:
        return await send_request(session, endpoint, PROMPT, request_index=0, prompt_index=0,
                                  max_tokens=None, timeouts=FAST)
    finally:
        if own:
            await session.close()


SCRIPTED_FAULTS = [
    (Script(fault="hang"), ErrorClass.HEADER_TIMEOUT, "header"),
    (Script(fault="http_error", status=503, error_body='{"error": "overloaded, try later"}'),
     ErrorClass.HTTP_5XX, "HTTP 503: {\"error\": \"overloaded, try later\"}"),
    (Script(fault="http_error", status=400, error_body='{"error": {"message": "max_tokens too large"}}'),
     ErrorClass.HTTP_4XX, "max_tokens too large"),
    (Script(fault="not_sse"), ErrorClass.NOT_SSE, "a plain JSON body"),
    (Script(fault="malformed_json"), ErrorClass.BAD_JSON, "broken"),
    (Script(fault="error_event"), ErrorClass.SERVER_ERROR_EVENT, "scripted in-stream failure"),
    (Script(fault="typed_error_event"), ErrorClass.SERVER_ERROR_EVENT, "upstream overloaded"),
    (Script(fault="cut"), ErrorClass.STREAM_CUT, ""),
    (Script(fault="stall"), ErrorClass.READ_TIMEOUT, "stalled"),
    (Script(fault="empty"), ErrorClass.EMPTY_RESPONSE, "no"),
    (Script(fault="no_done"), ErrorClass.STREAM_CUT, "without [DONE]"),
]


@pytest.mark.parametrize("api", ["openai-chat", "sglang"])
@pytest.mark.parametrize("script, error_class, message", SCRIPTED_FAULTS,
                         ids=[f[0].fault + (str(f[0].status) if f[0].fault == "http_error" else "")
                              for f in SCRIPTED_FAULTS])
async def test_scripted_fault_is_classified(api, script, error_class, message):
    with ScriptedServer(script) as server:
        record = await send_to(server.url, api)
    assert record.error_class is error_class, record.error_message
    assert message in record.error_message
    assert record.t_end_ns is not None and record.t_end_ns >= record.t_send_ns
    if script.fault in ("malformed_json", "cut", "stall", "error_event", "typed_error_event"):
        assert len(record.chunk_times_ns) == script.fault_after_chunks  # the partial stream is kept


async def test_error_body_is_kept_but_truncated():
    with ScriptedServer(Script(fault="http_error", status=502, error_body="E" * 50_000)) as server:
        record = await send_to(server.url)
    assert record.error_class is ErrorClass.HTTP_5XX and record.status_code == 502
    assert record.error_message.startswith("HTTP 502: EEEE") and len(record.error_message) <= 2000


async def test_sglang_abort_finish_reason_is_a_server_error():
    with ScriptedServer(Script(fault="abort")) as server:
        record = await send_to(server.url, "sglang")
    assert record.error_class is ErrorClass.SERVER_ERROR_EVENT and "scripted abort" in record.error_message


async def test_connection_refused():
    record = await send_to(refused_url())
    assert record.error_class is ErrorClass.CONNECT_REFUSED


async def test_tls_to_a_plain_http_server():
    with ScriptedServer() as server:
        record = await send_to(server.url.replace("http://", "https://"))
    assert record.error_class is ErrorClass.TLS and "SSL" in record.error_message


async def no_such_host(host, port):
    """A resolver that answers like a DNS server that has no record (no network touched)."""
    raise socket.gaierror(socket.EAI_NONAME, f"Name or service not known: {host}")


async def test_dns_failure():
    async with open_session(FAST, resolver=no_such_host) as session:
        record = await send_to("http://no-such-host.invalid", session=session)
    assert record.error_class is ErrorClass.DNS


async def test_connect_timeout_on_a_full_accept_queue():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # fill the accept queue: later SYNs are dropped, connect() hangs
            filler = socket.socket()
            filler.setblocking(False)
            try:
                filler.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(filler)
        record = await send_to(f"http://127.0.0.1:{port}")
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
    assert record.error_class is ErrorClass.CONNECT_TIMEOUT


async def test_check_reachable_names_the_url_and_reason():
    url = refused_url()
    with pytest.raises(UserError, match=f"cannot reach {url}: connection refused"):
        await check_reachable(Endpoint(url, api="openai-chat"))
    with ScriptedServer() as server:
        await check_reachable(Endpoint(server.url, api="sglang"))  # answers: no error
        tls_url = server.url.replace("http://", "https://")
        with pytest.raises(UserError, match=f"cannot reach {tls_url}: TLS handshake failed"):
            await check_reachable(Endpoint(tls_url, api="sglang"))



@pytest.mark.parametrize("api", ["openai-chat", "openai-completions", "sglang"])
async def test_an_immediate_stop_is_a_valid_one_token_completion(api):
    # The first event finishes with "stop" and carries no text (the one token was EOS): a valid
    # short completion with a TTFT, as vLLM's and SGLang's clients count it — not empty_response.
    with ScriptedServer(Script(fault="immediate_stop")) as server:
        record = await send_to(server.url, api)
    assert record.ok, record.error_message
    assert record.finish_reason == "stop" and record.output_tokens == 1
    assert len(record.chunk_times_ns) == 1 and record.chunk_times_ns[0] >= record.t_send_ns
    assert record.chunk_tokens == [1]
