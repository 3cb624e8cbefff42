"""Bad input answers 4xx with an OpenAI-style error naming the field; the pool stays whole.
Also: --api-key, a full queue (503 + Retry-After), and cancellation on client disconnect."""

import json
import socket
import time

import httpx
import pytest
from engine_testkit import wait_idle
from server_testkit import CHAT, COMPLETIONS, error_of

from specgauge.engine.serving.app import BackgroundServer, ServerSettings



BAD_BODIES = [
    # (route, body, param the error must name)
    (COMPLETIONS, {"prompt": "x", "max_tokens": 0}, "max_tokens"),
    (COMPLETIONS, {"prompt": "x", "max_tokens": -3}, "max_tokens"),
    (COMPLETIONS, {"prompt": "x", "max_tokens": 10_000}, "max_tokens"),
    (COMPLETIONS, {"prompt": "x", "temperature": -0.5}, "temperature"),
    (COMPLETIONS, {"prompt": "x", "top_p": 0}, "top_p"),
    (COMPLETIONS, {"prompt": "x", "top_p": 1.5}, "top_p"),
    (COMPLETIONS, {"prompt": "x", "max_tokens": "5"}, "max_tokens"),
    (COMPLETIONS, {"prompt": 42}, "prompt"),
    (COMPLETIONS, {"prompt": "x", "stream": "yes"}, "stream"),
    (COMPLETIONS, {"prompt": "x", "stop": [1, 2]}, "stop"),
    (COMPLETIONS, {"max_tokens": 4}, "prompt"),
    (COMPLETIONS, {"prompt": ""}, "prompt"),
    (COMPLETIONS, {"prompt": [1, 99999]}, "prompt"),
    (COMPLETIONS, {"prompt": "x", "n": 2}, "n"),
    (COMPLETIONS, {"prompt": "x", "logprobs": 3}, "logprobs"),
    (CHAT, {"messages": []}, "messages"),
    (CHAT, {"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
    (CHAT, {"messages": "hi"}, "messages"),
    (CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0}, "max_completion_tokens"),
    ("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 0}}, "sampling_params.max_new_tokens"),
    ("/generate", {"text": "x", "sampling_params": {"temperature": -1}}, "sampling_params.temperature"),
    ("/generate", {"sampling_params": {}}, "text"),
]


@pytest.mark.parametrize("route,body,param", BAD_BODIES, ids=[f"{r}:{p}" for r, _, p in BAD_BODIES])
def test_bad_field_names_the_field(server, route, body, param):
    error = error_of(httpx.post(server.url + route, json=body), 400)
    assert error["param"] == param
    assert param.split(".")[-1] in error["message"] or param in error["message"]


def test_prompt_longer_than_the_context(server):
    long_prompt = [10, 11, 12] * (server.engine.max_model_len // 3 + 2)
    error = error_of(httpx.post(server.url + COMPLETIONS, json={"prompt": long_prompt}), 400)
    assert error["param"] == "prompt" and error["code"] == "context_length_exceeded"
    words = "hello " * server.engine.max_model_len
    error = error_of(httpx.post(server.url + CHAT, json={"messages": [{"role": "user", "content": words}]}), 400)
    assert error["param"] == "messages"


def test_unknown_model_is_404_naming_model(server):
    error = error_of(httpx.post(server.url + CHAT, json={"model": "nope", "messages": [{"role": "user", "content": "x"}]}), 404)
    assert error["param"] == "model" and error["code"] == "model_not_found"


def test_malformed_json_wrong_content_type_and_oversized_body(server):
    error = error_of(httpx.post(server.url + COMPLETIONS, content=b'{"prompt": "x",',
                                headers={"content-type": "application/json"}), 400)
    assert error["code"] == "invalid_json" and "JSON" in error["message"]
    error_of(httpx.post(server.url + COMPLETIONS, content=b"[1, 2]", headers={"content-type": "application/json"}), 400)
    error = error_of(httpx.post(server.url + COMPLETIONS, content=b'{"prompt": "x"}',
                                headers={"content-type": "text/plain"}), 415)
    assert "Content-Type" in error["message"]
    huge = json.dumps({"prompt": "x" * (2 << 20)}).encode()
    error = error_of(httpx.post(server.url + COMPLETIONS, content=huge, headers={"content-type": "application/json"}), 413)
    assert error["code"] == "body_too_large"


def test_unknown_route_and_method(server):
    assert error_of(httpx.get(server.url + "/v1/nothing"), 404)["code"] == "not_found"
    assert error_of(httpx.get(server.url + COMPLETIONS), 405)["code"] == "method_not_allowed"


def test_server_still_serves_after_bad_input(server):
    ok = httpx.post(server.url + COMPLETIONS, json={"prompt": "x", "max_tokens": 2}, timeout=30)
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] >= 1


@pytest.fixture
def keyed_server(engine):
    with BackgroundServer(engine, ServerSettings(api_key="s3cret")) as srv:
        yield srv


def test_api_key_guards_every_route_but_health(keyed_server):
    url = keyed_server.url
    assert httpx.get(url + "/health").status_code == 200
    for method, route in (("GET", "/v1/models"), ("GET", "/metrics"), ("GET", "/server_info"),
                          ("POST", COMPLETIONS), ("POST", "/generate")):
        error = error_of(httpx.request(method, url + route, json={"prompt": "x"}), 401)
        assert error["code"] == "invalid_api_key"
        wrong = httpx.request(method, url + route, headers={"Authorization": "Bearer nope"}, json={"prompt": "x"})
        assert wrong.status_code == 401
    good = httpx.post(url + COMPLETIONS, headers={"Authorization": "Bearer s3cret"},
                      json={"prompt": "x", "max_tokens": 2}, timeout=30)
    assert good.status_code == 200


def abort_count(url):
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith('vllm:request_success_total{finished_reason="abort"}'):
            return float(line.split()[-1])
    return 0.0


def test_client_disconnect_mid_stream_frees_blocks_at_once(server):
    engine = server.engine
    before = abort_count(server.url)
    body = {"prompt": "def add", "max_tokens": 1000, "temperature": 0, "ignore_eos": True, "stream": True}
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", server.url + COMPLETIONS, json=body) as response:
            lines = response.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            assert json.loads(first[6:])["choices"]
            assert engine.snapshot()["kv_blocks_free"] < engine.blocks.num_blocks
    # connection closed: the request must be aborted long before its 1000 tokens
    deadline = time.monotonic() + 5
    while engine.snapshot()["num_running_reqs"] and time.monotonic() < deadline:
        time.sleep(0.01)
    wait_idle(engine)
    assert abort_count(server.url) == before + 1


def test_raw_socket_hangup_before_reading_frees_blocks(server):
    before = abort_count(server.url)
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000,
                       "ignore_eos": True, "stream": True}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert sock.recv(64).startswith(b"HTTP/1.1 200")
    wait_idle(server.engine)
    assert abort_count(server.url) == before + 1


def test_non_streaming_client_that_hangs_up_is_aborted(server):
    before = abort_count(server.url)
    body = {"prompt": "def add", "max_tokens": 1000, "temperature": 0, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + COMPLETIONS, json=body, timeout=httpx.Timeout(30, read=0.3))
    wait_idle(server.engine)
    assert abort_count(server.url) == before + 1


def test_full_queue_answers_503_with_retry_after(engine_factory):
    engine = engine_factory(max_running=1, max_waiting=1)
    body = {"prompt": "x", "max_tokens": 200, "ignore_eos": True, "stream": True}
    with BackgroundServer(engine) as srv, httpx.Client(timeout=30) as client:
        streams = [client.stream("POST", srv.url + COMPLETIONS, json=body) for _ in range(2)]
        responses = [s.__enter__() for s in streams]
        try:
            assert [r.status_code for r in responses] == [200, 200]
            full = httpx.post(srv.url + COMPLETIONS, json={"prompt": "x", "max_tokens": 2})
            error = error_of(full, 503)
            assert full.headers["Retry-After"] == "1" and error["code"] == "queue_full"
        finally:
            for s in streams:
                s.__exit__(None, None, None)
        wait_idle(engine)
        again = httpx.post(srv.url + COMPLETIONS, json={"prompt": "x", "max_tokens": 2}, timeout=30)
        assert again.status_code == 200
