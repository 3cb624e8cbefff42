"""One request never breaks another: out-of-range sampling values are refused at the edge, a
request whose sampling fails in the engine fails alone, request ids cannot be squatted, and the
HTTP edge (non-standard JSON, a client hanging up mid-body, half-sent headers, the auth scheme's
case) answers without a traceback."""

import json
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from engine_testkit import wait_idle
from server_testkit import CHAT, COMPLETIONS, error_of
from spec_testkit import make_spec_engine

from specgauge.engine.core import model_runner, sampling
from specgauge.engine.serving.app import BackgroundServer, ServerSettings
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.testing.sockets import closed_by_peer

POISON_SEED = 666


BAD_SAMPLING = [
    # (route, body, param the error must name) -- each of these crashed the engine step before
    (COMPLETIONS, {"prompt": "x", "seed": 2**64, "temperature": 1, "max_tokens": 4}, "seed"),
    (COMPLETIONS, {"prompt": "x", "seed": -(2**63) - 1, "temperature": 1, "max_tokens": 4}, "seed"),
    ("/generate", {"text": "x", "sampling_params": {"sampling_seed": 2**70, "max_new_tokens": 4}},
     "sampling_params.sampling_seed"),
    (COMPLETIONS, {"prompt": "x", "top_k": 2**63, "temperature": 1, "max_tokens": 4}, "top_k"),
    (COMPLETIONS, {"prompt": "x", "top_k": -2, "max_tokens": 4}, "top_k"),
    (COMPLETIONS, {"prompt": "x", "temperature": 1e-38, "max_tokens": 4}, "temperature"),
    (COMPLETIONS, {"prompt": "x", "temperature": 1e-300, "max_tokens": 4}, "temperature"),
    (COMPLETIONS, {"prompt": "x", "temperature": 3, "max_tokens": 4}, "temperature"),
    ("/generate", {"text": "x", "sampling_params": {"temperature": 1e-30}}, "sampling_params.temperature"),
    ("/generate", {"text": "x", "sampling_params": {"top_k": 2**63}}, "sampling_params.top_k"),
]


@pytest.mark.parametrize("route,body,param", BAD_SAMPLING, ids=[f"{r}:{b}" for r, b, _ in BAD_SAMPLING])
def test_out_of_range_sampling_values_are_refused_naming_the_field(server, route, body, param):
    error = error_of(httpx.post(server.url + route, json=body), 400)
    assert error["param"] == param
    assert param in error["message"]


def test_edge_values_of_the_ranges_are_served(server):
    for extra in ({"seed": 2**63 - 1}, {"seed": -(2**63)}, {"top_k": 1 << 30}, {"temperature": 1e-5},
                  {"temperature": 2}, {"temperature": 0}):
        ok = httpx.post(server.url + COMPLETIONS, json={"prompt": "x", "max_tokens": 2, **extra}, timeout=30)
        assert ok.status_code == 200, (extra, ok.text)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_json_numbers_are_refused(server, constant):
    body = b'{"prompt": "x", "max_tokens": 2, "temperature": ' + constant.encode() + b"}"
    error = error_of(httpx.post(server.url + COMPLETIONS, content=body,
                                headers={"content-type": "application/json"}), 400)
    assert error["code"] == "invalid_json" and constant in error["message"]
    # inside a string the word is text, not a number
    ok = httpx.post(server.url + COMPLETIONS, json={"prompt": "NaN Infinity", "max_tokens": 2}, timeout=30)
    assert ok.status_code == 200


def test_deeply_nested_json_with_nan_is_a_400(server):
    body = b'{"prompt": ' + b"[" * 100_000 + b"NaN" + b"]" * 100_000 + b"}"
    error = error_of(httpx.post(server.url + COMPLETIONS, content=body, headers={"content-type": "application/json"}), 400)
    assert error["code"] == "invalid_json"


def test_a_number_that_overflows_to_infinity_is_refused_naming_the_field(server):
    body = b'{"prompt": "x", "max_tokens": 2, "temperature": 1e400}'
    error = error_of(httpx.post(server.url + COMPLETIONS, content=body,
                                headers={"content-type": "application/json"}), 400)
    assert error["param"] == "temperature" and "finite" in error["message"]


# -- one request's failure inside the engine step -------------------------------------------------

def poisoned_make_generator(real):
    def make(params, device):
        if params.seed == POISON_SEED:
            raise RuntimeError("poisoned generator")
        return real(params, device)
    return make


def poisoned_sorted_probs(real):
    def probs(logits, params):
        if any(p.seed == POISON_SEED for p in params):
            raise RuntimeError("poisoned distribution")
        return real(logits, params)
    return probs


def run_beside_a_poisoned_request(server, engine, tokens=24):
    """Four sampled requests and a poisoned one, admitted in the same step (the engine is held
    between steps until all five are queued). Returns (the four responses, the poisoned one)."""
    gate = threading.Event()
    holder = threading.Thread(target=engine.call, args=(lambda e: gate.wait(60),), kwargs={"timeout": 90})
    holder.start()
    client = server.app.state.client
    body = {"prompt": "the cat sat on the mat, the cat sat on the", "max_tokens": tokens,
            "temperature": 1, "ignore_eos": True}
    try:
        with ThreadPoolExecutor(5) as pool:
            normal = [pool.submit(httpx.post, server.url + COMPLETIONS, json=dict(body, seed=i), timeout=120)
                      for i in range(4)]
            deadline = time.monotonic() + 60
            while len(client.in_flight) < 4:
                assert time.monotonic() < deadline, "the four requests never reached the server"
                time.sleep(0.01)
            poisoned = pool.submit(httpx.post, server.url + COMPLETIONS, json=dict(body, seed=POISON_SEED),
                                   timeout=120)
            while len(client.in_flight) < 5:
                assert time.monotonic() < deadline, "the poisoned request never reached the server"
                time.sleep(0.01)
            gate.set()
            return [f.result() for f in normal], poisoned.result()
    finally:
        gate.set()
        holder.join()


@pytest.mark.parametrize("poison", ["generator", "distribution"])
@pytest.mark.parametrize("algorithm", ["NONE", "NGRAM"])
def test_a_request_whose_sampling_fails_fails_alone(tiny_model_dir, monkeypatch, poison, algorithm):
    if poison == "generator":
        monkeypatch.setattr(model_runner, "make_generator", poisoned_make_generator(model_runner.make_generator))
    else:
        monkeypatch.setattr(sampling, "_sorted_probs", poisoned_sorted_probs(sampling._sorted_probs))
    engine = make_spec_engine(tiny_model_dir, max_running=8, max_tokens_per_step=256,
                              speculative=SpeculativeConfig(algorithm=algorithm, num_steps=3))
    engine.start()
    try:
        with BackgroundServer(engine) as server:
            normal, poisoned = run_beside_a_poisoned_request(server, engine)
            error = error_of(poisoned, 500)
            assert f"poisoned {poison}" in error["message"]
            for response in normal:
                assert response.status_code == 200, response.text
                out = response.json()
                assert out["usage"]["completion_tokens"] == 24 and out["choices"][0]["finish_reason"] == "length"
            wait_idle(engine)
    finally:
        engine.stop()


# -- request ids --------------------------------------------------------------------------------

def engine_held(engine):
    """A context: the engine waits between steps until it ends (requests queue, none runs)."""
    class Held:
        def __enter__(self):
            self.gate = threading.Event()
            self.thread = threading.Thread(target=engine.call, args=(lambda e: self.gate.wait(60),),
                                           kwargs={"timeout": 90})
            self.thread.start()
            return self

        def __exit__(self, *exc):
            self.gate.set()
            self.thread.join()
    return Held()


def wait_in_flight(server, count):
    client, deadline = server.app.state.client, time.monotonic() + 60
    while len(client.in_flight) < count:
        assert time.monotonic() < deadline, f"{len(client.in_flight)} of {count} requests reached the server"
        time.sleep(0.01)


def test_automatic_ids_cannot_be_squatted_by_caller_rids(server):
    ids = [httpx.post(server.url + "/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 2}},
                      timeout=30).json()["meta_info"]["id"] for _ in range(2)]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids) and ids[0] != ids[1]  # uuid4s, not a counter
    squatted = ["req-1", "req-2", "req-3", f"auto:{ids[1]}", ids[1], "rid:x"]
    generate = {"text": "x", "sampling_params": {"max_new_tokens": 4}}
    chat = {"messages": [{"role": "user", "content": "y"}], "max_tokens": 4}
    with ThreadPoolExecutor(12) as pool:
        with engine_held(server.engine):
            holds = [pool.submit(httpx.post, server.url + "/generate", json=dict(generate, rid=rid), timeout=120)
                     for rid in squatted]
            wait_in_flight(server, len(squatted))
            others = [pool.submit(httpx.post, server.url + route, json=body, timeout=120)
                      for route, body in [("/generate", generate), (CHAT, chat)] * 3]
            wait_in_flight(server, len(squatted) + len(others))
            duplicate = httpx.post(server.url + "/generate", json=dict(generate, rid="req-1"), timeout=30)
            error = error_of(duplicate, 409)
            assert error["param"] == "rid" and "req-1" in error["message"]
        for future in holds + others:
            assert future.result().status_code == 200, future.result().text
        assert [f.result().json()["meta_info"]["id"] for f in holds] == squatted


def test_a_request_echoes_its_own_rid(server):
    out = httpx.post(server.url + "/generate", json={"text": "x", "rid": "mine-1", "sampling_params": {"max_new_tokens": 2}},
                     timeout=30).json()
    assert out["meta_info"]["id"] == "mine-1"


# -- the HTTP edge ------------------------------------------------------------------------------

def host_port(url):
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def test_client_gone_mid_body_is_logged_quietly(server, caplog):
    caplog.set_level(logging.INFO, logger="specgauge.engine.serving")
    with socket.create_connection(host_port(server.url)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"prompt\": \"abc")
    deadline = time.monotonic() + 30
    while not any("disconnected while sending" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "the hang-up was never noticed"
        time.sleep(0.02)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert not any(r.exc_info for r in caplog.records)
    assert httpx.post(server.url + COMPLETIONS, json={"prompt": "x", "max_tokens": 2}, timeout=30).status_code == 200


@pytest.fixture
def quick_timeout_server(engine):
    with BackgroundServer(engine, ServerSettings(header_timeout_s=0.5, keep_alive_timeout_s=1)) as srv:
        yield srv


def test_a_half_sent_header_is_closed_by_the_server(quick_timeout_server):
    with socket.create_connection(host_port(quick_timeout_server.url)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Ty")
        assert closed_by_peer(sock, 30.0)
    with socket.create_connection(host_port(quick_timeout_server.url)) as silent:
        assert closed_by_peer(silent, 30.0)


def test_a_keep_alive_connection_that_then_sends_half_a_header_is_closed(quick_timeout_server):
    with socket.create_connection(host_port(quick_timeout_server.url)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(30)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\nHo")
        assert closed_by_peer(sock, 30.0)


def test_a_slow_request_is_not_cut_by_the_header_timeout(quick_timeout_server):
    body = {"prompt": "x", "max_tokens": 300, "ignore_eos": True}
    with httpx.Client(timeout=60) as client:
        out = client.post(quick_timeout_server.url + COMPLETIONS, json=body)
        assert out.status_code == 200 and out.json()["usage"]["completion_tokens"] == 300
        assert client.get(quick_timeout_server.url + "/health").status_code == 200  # same connection, reused


@pytest.fixture
def keyed_server(engine):
    with BackgroundServer(engine, ServerSettings(api_key="s3cret")) as srv:
        yield srv


@pytest.mark.parametrize("header", ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer  s3cret"])
def test_the_bearer_scheme_is_case_insensitive(keyed_server, header):
    assert httpx.get(keyed_server.url + "/v1/models", headers={"Authorization": header}).status_code == 200


@pytest.mark.parametrize("header", ["Basic s3cret", "s3cret", "Bearer s3cre", "Bearers3cret", "Bearer"])
def test_other_schemes_and_keys_are_refused(keyed_server, header):
    error = error_of(httpx.get(keyed_server.url + "/v1/models", headers={"Authorization": header}), 401)
    assert error["code"] == "invalid_api_key"


def test_openapi_document_describes_the_request_bodies(server):
    document = httpx.get(server.url + "/openapi.json").json()
    for path in (COMPLETIONS, CHAT, "/generate"):
        schema = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert schema["properties"], path
    assert "ChatMessage" in document["components"]["schemas"]
    json.dumps(document)


def test_the_kv_pool_audit_route(server):
    httpx.post(server.url + COMPLETIONS, json={"prompt": "x", "max_tokens": 2}, timeout=30)
    wait_idle(server.engine)
    audit = httpx.get(server.url + "/debug/kv_blocks").json()
    assert audit["whole"] and audit["error"] is None
    assert audit["kv_blocks_free"] + audit["kv_blocks_used"] == audit["kv_blocks_total"] == server.engine.blocks.num_blocks


def test_the_kv_pool_audit_route_reports_a_broken_pool(engine_factory):
    engine = engine_factory(max_running=2)
    with BackgroundServer(engine) as srv:
        engine.call(lambda e: e.blocks.free_blocks.append(e.blocks.free_blocks[0]))  # a block freed twice
        try:
            broken = httpx.get(srv.url + "/debug/kv_blocks")
            assert broken.status_code == 500 and not broken.json()["whole"]
            assert "free list twice" in broken.json()["error"]
        finally:
            engine.call(lambda e: e.blocks.free_blocks.pop())


def test_a_request_head_over_the_limit_is_431(server):
    from specgauge.engine.serving.transport import MAX_HEAD_BYTES

    with socket.create_connection(host_port(server.url)) as sock:
        # just past the limit and unfinished: the server has read all of it when it answers (no RST)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * MAX_HEAD_BYTES)
        sock.settimeout(30)
        answer = sock.recv(200)
    assert answer.startswith(b"HTTP/1.1 431")
    # a body of any size is not a head: it gets the application's own limit (413), not 431
    big = httpx.post(server.url + COMPLETIONS, content=b"x" * (3 * MAX_HEAD_BYTES),
                     headers={"content-type": "application/json"})
    assert big.status_code == 400
