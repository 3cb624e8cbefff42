"""A bad-input and fault campaign against `specgauge serve` with EAGLE-3 on; prints tried/passed per class.

    PYTHONPATH=src python benchmarks/server_campaign.py                  # the shipped target + drafter
    PYTHONPATH=src python benchmarks/server_campaign.py --connections 200 --only soak

Loopback only; every part is bounded in count and time and the script stops by itself (the
server it started is stopped at the end, whatever happened). Classes:

* ``bad_sampling`` — out-of-range sampling values (seed beyond int64, top_k 2^63, temperature
  1e-38 / 3 ...) sent while four normal streams run: each must be a 400 naming the field, and
  each of the four streams must complete with all its tokens.
* ``rid_squatting`` — streams holding the ids a counter would hand out next (``req-N``) and
  guesses at the server's own namespace; other clients' requests must all succeed, and a
  duplicate rid fails only its sender (409).
* ``nonstandard_json`` — ``NaN``/``Infinity``/``-Infinity``/``1e400`` anywhere in a body: 400.
* ``disconnect_mid_body`` — clients that hang up while sending their body: the server stays
  healthy and its log holds no traceback.
* ``partial_headers`` — connections that send half a request head, or nothing: each is closed by
  the server within ``--header-timeout`` plus a generous margin.
* ``auth_scheme`` — the bearer scheme in any case is accepted; other schemes and keys are 401.
* ``openai_sdk`` — the official SDK's surface: what the engine honours works, what it does not
  (``tools``, ``response_format``, ``echo`` ...) is a 400 naming the field.
* ``malformed_http`` — raw broken HTTP/1.1: a 4xx (uvicorn's plain-text answer) or a close,
  never a 5xx, and the server keeps serving.
* ``soak`` — ``--connections`` connections opened at once, each sending one short request
  (streaming and not, mixed routes); each must end in 200, or 503 with ``Retry-After``; then the
  KV pool must be whole (``GET /debug/kv_blocks``: free + used == total, free == total when idle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai

from specgauge.engine.serving.launch import EngineProcess
from specgauge.testing.sockets import closed_by_peer

API_KEY = "campaign-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@dataclass
class Tally:
    """Tried and passed cases of one class, with the first few failures explained."""

    name: str
    tried: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)

    def record(self, ok: bool, what: str) -> None:
        self.tried += 1
        self.passed += bool(ok)
        if not ok and len(self.failures) < 5:
            self.failures.append(what)


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def wait_idle_pool(url: str, ceiling: float = 300.0) -> dict:
    """Wait until nothing runs or waits, then audit the KV pool."""
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        audit = httpx.get(url + "/debug/kv_blocks", headers=AUTH, timeout=60).json()
        if audit["num_running_reqs"] == 0 and audit["num_waiting_reqs"] == 0:
            return audit
        time.sleep(0.2)
    return httpx.get(url + "/debug/kv_blocks", headers=AUTH, timeout=60).json()


def error_param(response: httpx.Response) -> str | None:
    try:
        return response.json()["error"]["param"]
    except (ValueError, KeyError, TypeError):
        return None


# -- classes -------------------------------------------------------------------------------------

BAD_SAMPLING = [
    ("/v1/completions", {"prompt": "x", "seed": 18446744073709551616, "temperature": 1, "max_tokens": 4}, "seed"),
    ("/v1/completions", {"prompt": "x", "seed": -(2**63) - 1, "temperature": 1, "max_tokens": 4}, "seed"),
    ("/generate", {"text": "x", "sampling_params": {"sampling_seed": 2**70, "max_new_tokens": 4}},
     "sampling_params.sampling_seed"),
    ("/v1/completions", {"prompt": "x", "top_k": 9223372036854775808, "temperature": 1, "max_tokens": 4}, "top_k"),
    ("/v1/completions", {"prompt": "x", "temperature": 1e-38, "max_tokens": 4}, "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": 1e-300, "max_tokens": 4}, "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": 3, "max_tokens": 4}, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 0, "max_tokens": 4}, "top_p"),
    ("/v1/completions", {"prompt": "x", "top_p": 1.01, "max_tokens": 4}, "top_p"),
    ("/v1/completions", {"prompt": "x", "top_k": -5, "max_tokens": 4}, "top_k"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "seed": 2**64, "max_tokens": 4}, "seed"),
    ("/generate", {"text": "x", "sampling_params": {"temperature": 1e-30}}, "sampling_params.temperature"),
    ("/generate", {"text": "x", "sampling_params": {"top_k": 2**63}}, "sampling_params.top_k"),
    ("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2**70}}, "sampling_params.max_new_tokens"),
]


def bad_sampling(url: str, tally: Tally) -> None:
    body = {"prompt": "def fibonacci(n):", "max_tokens": 48, "temperature": 1, "ignore_eos": True}
    with ThreadPoolExecutor(4) as pool, httpx.Client(headers=AUTH, timeout=120) as client:
        streams = [pool.submit(client.post, url + "/v1/completions", json=dict(body, seed=i)) for i in range(4)]
        for route, bad, param in BAD_SAMPLING:
            response = client.post(url + route, json=bad)
            tally.record(response.status_code == 400 and error_param(response) == param,
                         f"{route} {bad}: {response.status_code} {response.text[:120]}")
        for i, stream in enumerate(streams):
            response = stream.result()
            ok = response.status_code == 200 and response.json()["usage"]["completion_tokens"] == 48
            tally.record(ok, f"normal stream {i}: {response.status_code} {response.text[:120]}")


def rid_squatting(url: str, tally: Tally) -> None:
    with httpx.Client(headers=AUTH, timeout=120) as client:
        first = client.post(url + "/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 1}})
        auto_id = first.json()["meta_info"]["id"]
        tally.record(len(auto_id) == 32, f"automatic id looks guessable: {auto_id!r}")
        held = [f"req-{n}" for n in range(1, 11)] + [f"auto:{auto_id}", auto_id, f"rid:{auto_id}"]
        context = client.get(url + "/server_info").json()["internal_states"][0]["max_model_len"]
        hold_body = {"text": "Once upon a time", "stream": True,
                     "sampling_params": {"max_new_tokens": context - 16, "ignore_eos": True}}
        holds = [client.stream("POST", url + "/generate", json=dict(hold_body, rid=rid)) for rid in held]
        try:
            responses = [holds[0].__enter__()]
            # at once, while req-1's long generation runs (it is in flight until it has been read)
            duplicate = client.post(url + "/generate", json={"text": "x", "rid": "req-1"})
            tally.record(duplicate.status_code == 409 and error_param(duplicate) == "rid",
                         f"duplicate rid: {duplicate.status_code} {duplicate.text[:120]}")
            responses += [h.__enter__() for h in holds[1:]]
            tally.record(all(r.status_code == 200 for r in responses),
                         f"a squatting stream was refused: {[r.status_code for r in responses]}")
            for n in range(10):
                other = client.post(url + "/generate",
                                    json={"text": f"other {n}", "sampling_params": {"max_new_tokens": 4}})
                tally.record(other.status_code == 200, f"other client {n}: {other.status_code} {other.text[:120]}")
        finally:
            for h in holds:
                h.__exit__(None, None, None)


NONSTANDARD = [
    b'{"prompt": "x", "max_tokens": 2, "temperature": NaN}',
    b'{"prompt": "x", "max_tokens": 2, "temperature": Infinity}',
    b'{"prompt": "x", "max_tokens": 2, "temperature": -Infinity}',
    b'{"prompt": "x", "max_tokens": 2, "top_p": NaN}',
    b'{"prompt": "x", "max_tokens": 2, "temperature": 1e400}',
    b'{"prompt": [1, NaN], "max_tokens": 2}',
    b'{"prompt": "x", "max_tokens": 2, "not_a_field": Infinity}',
    b'{"prompt": "x", "max_tokens": 2, "seed": 1e400}',
]


def nonstandard_json(url: str, tally: Tally) -> None:
    headers = dict(AUTH, **{"content-type": "application/json"})
    for body in NONSTANDARD:
        response = httpx.post(url + "/v1/completions", content=body, headers=headers, timeout=60)
        tally.record(response.status_code == 400, f"{body!r}: {response.status_code} {response.text[:120]}")
    generate = b'{"text": "x", "sampling_params": {"temperature": NaN}}'
    response = httpx.post(url + "/generate", content=generate, headers=headers, timeout=60)
    tally.record(response.status_code == 400, f"{generate!r}: {response.status_code}")


def disconnect_mid_body(url: str, tally: Tally, log_path: str, count: int = 20) -> None:
    address = host_port(url)
    for n in range(count):
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: 4000\r\n\r\n"
                         + b'{"prompt": "' + b"a" * (n * 50))
        tally.record(healthy(url), f"unhealthy after hang-up {n}")
    time.sleep(0)  # the log is read as it stands: uvicorn writes synchronously
    text = Path(log_path).read_text(errors="replace")
    tally.record("Traceback" not in text and "unexpected error" not in text,
                 "the server log has a traceback: " + text[text.find("Traceback"):][:200])


PARTIAL_HEADS = [
    b"",
    b"POST /v1/completions HTTP/1.1\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Ty",
    b"GET /health HTTP/1.1\r\nHo",
    b"G",
]


def partial_headers(url: str, tally: Tally, header_timeout: float, count: int = 50) -> None:
    address = host_port(url)
    socks = []
    for n in range(count):
        sock = socket.create_connection(address, timeout=30)
        sock.sendall(PARTIAL_HEADS[n % len(PARTIAL_HEADS)])
        socks.append(sock)
    ceiling = header_timeout + 30
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda s: closed_by_peer(s, ceiling), socks))
    for n, (sock, closed) in enumerate(zip(socks, results)):
        head = PARTIAL_HEADS[n % len(PARTIAL_HEADS)]
        tally.record(closed, f"connection {n} ({head!r}) still open after {ceiling:.0f}s")
        sock.close()
    # a keep-alive connection that sends half of its second request's head
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = sock.recv(4096)
        sock.sendall(b"GET /health HTTP/1.1\r\nHo")
        tally.record(first.startswith(b"HTTP/1.1 200") and closed_by_peer(sock, ceiling),
                     "keep-alive half head not closed")


AUTH_CASES = [
    ("Bearer " + API_KEY, 200), ("bearer " + API_KEY, 200), ("BEARER " + API_KEY, 200), ("BeArEr " + API_KEY, 200),
    ("Bearer  " + API_KEY, 200), ("Basic " + API_KEY, 401), (API_KEY, 401), ("Bearer wrong", 401),
    ("Bearer", 401), ("", 401), ("Bearer " + API_KEY + "x", 401),
]


def auth_scheme(url: str, tally: Tally) -> None:
    for header, expected in AUTH_CASES:
        headers = {"Authorization": header} if header else {}
        status = httpx.get(url + "/v1/models", headers=headers, timeout=30).status_code
        tally.record(status == expected, f"Authorization {header!r}: {status}, expected {expected}")
    tally.record(httpx.get(url + "/health", timeout=30).status_code == 200, "/health needs no key")


def openai_sdk(url: str, tally: Tally, model: str) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)
    messages = [{"role": "user", "content": "Write a haiku."}]

    def works(what, call, check=lambda r: True):
        try:
            tally.record(check(call()), what)
        except openai.OpenAIError as exc:
            tally.record(False, f"{what}: {exc}")

    works("models.list", lambda: client.models.list(), lambda r: [m.id for m in r.data] == [model])
    works("models.retrieve", lambda: client.models.retrieve(model), lambda r: r.id == model)
    works("chat", lambda: client.chat.completions.create(model=model, messages=messages, max_tokens=8, seed=1),
          lambda r: r.usage.completion_tokens >= 1)
    works("chat developer role", lambda: client.chat.completions.create(
        model=model, messages=[{"role": "developer", "content": "Be brief."}, *messages], max_tokens=4),
        lambda r: r.choices[0].message.role == "assistant")
    works("chat max_completion_tokens + stop", lambda: client.chat.completions.create(
        model=model, messages=messages, max_completion_tokens=6, stop=["\n\n"]),
        lambda r: r.usage.completion_tokens <= 6)
    works("chat stream with usage", lambda: list(client.chat.completions.create(
        model=model, messages=messages, max_tokens=6, stream=True, stream_options={"include_usage": True})),
        lambda chunks: chunks[-1].usage is not None)
    works("completions stream", lambda: list(client.completions.create(
        model=model, prompt="def add(a, b):", max_tokens=6, stream=True)), lambda chunks: len(chunks) >= 1)
    works("off values accepted", lambda: client.completions.create(
        model=model, prompt="x", max_tokens=2, n=1, best_of=1, echo=False, presence_penalty=0, frequency_penalty=0))
    try:
        client.models.retrieve("no-such-model")
        tally.record(False, "models.retrieve of an unknown model answered")
    except openai.NotFoundError:
        tally.record(True, "")
    refused_chat = {
        "tools": {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                  "tool_choice": "required"},
        "tool_choice": {"tool_choice": "auto"},
        "response_format": {"response_format": {"type": "json_object"}},
        "presence_penalty": {"presence_penalty": 0.5},
        "frequency_penalty": {"frequency_penalty": 0.5},
        "top_logprobs": {"top_logprobs": 2},
        "logprobs": {"logprobs": True},
        "logit_bias": {"logit_bias": {"1": 5}},
        "n": {"n": 2},
        "temperature": {"temperature": 3},
    }
    for param, extra in refused_chat.items():
        try:
            client.chat.completions.create(model=model, messages=messages, max_tokens=2, **extra)
            tally.record(False, f"chat {param} {extra}: accepted")
        except openai.BadRequestError as exc:
            tally.record(exc.body.get("param") == param, f"chat {param}: param {exc.body.get('param')!r}")
    refused_completion = {"echo": {"echo": True}, "suffix": {"suffix": "x"}, "best_of": {"best_of": 2},
                          "logprobs": {"logprobs": 1}, "presence_penalty": {"presence_penalty": 1}}
    for param, extra in refused_completion.items():
        try:
            client.completions.create(model=model, prompt="x", max_tokens=2, **extra)
            tally.record(False, f"completion {param}: accepted")
        except openai.BadRequestError as exc:
            tally.record(exc.body.get("param") == param, f"completion {param}: param {exc.body.get('param')!r}")
    client.close()


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost x\r\n\r\n",                                        # header without a colon
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n",
    b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",                                        # an HTTP/2 preface
    b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 200_000 + b"\r\n\r\n",     # 431 past 64 KiB
]


def malformed_http(url: str, tally: Tally) -> None:
    address = host_port(url)
    for raw in MALFORMED:
        with socket.create_connection(address, timeout=30) as sock:
            try:
                sock.sendall(raw)
                answer = sock.recv(200)
            except OSError:
                answer = b""
        status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/") else b""
        ok = (not answer or status.startswith(b"4")) and healthy(url)
        tally.record(ok, f"{raw[:40]!r}: {answer[:60]!r}")


def dechunk(raw: bytes) -> bytes:
    """The payload of an HTTP/1.1 chunked body."""
    out, rest = bytearray(), raw
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


def answered_whole(content: bytes, stream: bool) -> bool:
    """A complete answer with no error object: a JSON body, or SSE events ending in [DONE]."""
    try:
        if not stream:
            return "error" not in json.loads(content)
        events = [line[6:] for line in content.split(b"\n") if line.startswith(b"data: ")]
        return bool(events) and events[-1] == b"[DONE]" and all("error" not in json.loads(e) for e in events[:-1])
    except ValueError:
        return False


async def _one_connection(host: str, port: int, n: int, deadline: float) -> tuple[bool, str]:
    route, body = [("/v1/completions", {"prompt": f"def f{n}(x):", "max_tokens": 8, "stream": n % 2 == 0}),
                   ("/v1/chat/completions", {"messages": [{"role": "user", "content": f"hi {n}"}], "max_tokens": 8,
                                             "stream": n % 3 == 0}),
                   ("/generate", {"text": f"x = {n}", "sampling_params": {"max_new_tokens": 8}})][n % 3]
    payload = json.dumps(body).encode()
    request = (f"POST {route} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
               f"Authorization: Bearer {API_KEY}\r\nConnection: close\r\nContent-Length: {len(payload)}\r\n\r\n"
               ).encode() + payload
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), deadline - time.monotonic())
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), max(1.0, deadline - time.monotonic()))
        writer.close()
    except (OSError, asyncio.TimeoutError) as exc:
        return False, f"connection {n}: {type(exc).__name__}"
    head, _, raw_body = answer.partition(b"\r\n\r\n")
    if head.startswith(b"HTTP/1.1 200"):
        content = dechunk(raw_body) if b"transfer-encoding: chunked" in head.lower() else raw_body
        return answered_whole(content, bool(body.get("stream"))), f"connection {n}: 200 but {content[-160:]!r}"
    if head.startswith(b"HTTP/1.1 503") and b"retry-after" in head.lower():
        return True, "503"
    return False, f"connection {n}: {head[:80]!r}"


async def _soak(url: str, connections: int, seconds: float) -> list[tuple[bool, str]]:
    host, port = host_port(url)
    deadline = time.monotonic() + seconds
    return await asyncio.gather(*(_one_connection(host, port, n, deadline) for n in range(connections)))


def soak(url: str, tally: Tally, connections: int, seconds: float) -> dict:
    started = time.monotonic()
    results = asyncio.run(_soak(url, connections, seconds))
    elapsed = time.monotonic() - started
    for ok, what in results:
        tally.record(ok, what)
    answered_503 = sum(1 for ok, what in results if ok and what == "503")
    audit = wait_idle_pool(url)
    whole = audit["whole"] and audit["kv_blocks_free"] + audit["kv_blocks_used"] == audit["kv_blocks_total"] \
        and audit["kv_blocks_free"] == audit["kv_blocks_total"]
    tally.record(whole, f"KV pool after the soak: {audit}")
    tally.record(healthy(url), "unhealthy after the soak")
    return {"connections": connections, "answered_200": sum(ok for ok, _ in results) - answered_503,
            "answered_503_retry_after": answered_503, "elapsed_s": round(elapsed, 1), "audit": audit}


CLASSES = ["bad_sampling", "rid_squatting", "nonstandard_json", "disconnect_mid_body", "partial_headers",
           "auth_scheme", "openai_sdk", "malformed_http", "soak"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="target directory (default: the shipped one)")
    parser.add_argument("--speculative-algorithm", default="EAGLE3")
    parser.add_argument("--connections", type=int, default=1000, help="connections the soak opens at once")
    parser.add_argument("--soak-seconds", type=float, default=900.0, help="the soak's time bound")
    parser.add_argument("--header-timeout", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--only", default=None, help="comma-separated classes to run")
    args = parser.parse_args()
    only = args.only.split(",") if args.only else CLASSES
    unknown = [name for name in only if name not in CLASSES]
    if unknown:
        parser.error(f"--only: unknown class {', '.join(unknown)} (one of: {', '.join(CLASSES)})")
    serve_args = ["--speculative-algorithm", args.speculative_algorithm, "--served-model-name", "campaign",
                  "--max-running-requests", "64", "--max-waiting-requests", str(max(256, args.connections)),
                  "--header-timeout", str(args.header_timeout)]
    if args.model:
        serve_args += ["--model", args.model]
    if args.threads:
        serve_args += ["--threads", str(args.threads)]
    env = dict(os.environ, SPECGAUGE_API_KEY=API_KEY)
    tallies: list[Tally] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with EngineProcess(serve_args, env=env, start_timeout=600) as server:
        url = server.url
        info = httpx.get(url + "/server_info", headers=AUTH, timeout=30).json()
        print(f"server {url}: speculative_algorithm={info['speculative_algorithm']}, "
              f"max_running={info['max_running_requests']}, started {started}", flush=True)
        runs = {
            "bad_sampling": lambda t: bad_sampling(url, t),
            "rid_squatting": lambda t: rid_squatting(url, t),
            "nonstandard_json": lambda t: nonstandard_json(url, t),
            "disconnect_mid_body": lambda t: disconnect_mid_body(url, t, server.log_file.name),
            "partial_headers": lambda t: partial_headers(url, t, args.header_timeout),
            "auth_scheme": lambda t: auth_scheme(url, t),
            "openai_sdk": lambda t: openai_sdk(url, t, "campaign"),
            "malformed_http": lambda t: malformed_http(url, t),
            "soak": lambda t: print(f"  soak: {soak(url, t, args.connections, args.soak_seconds)}", flush=True),
        }
        for name in only:
            tally = Tally(name)
            began = time.monotonic()
            try:
                runs[name](tally)
            except Exception as exc:  # noqa: BLE001 -- a class that breaks is a failed case, not the end
                tally.record(False, f"the class itself failed: {type(exc).__name__}: {exc}")
            tallies.append(tally)
            print(f"{name:<22} tried {tally.tried:>5}  passed {tally.passed:>5}  ({time.monotonic() - began:.1f}s)",
                  flush=True)
            for failure in tally.failures:
                print(f"    FAIL {failure}", flush=True)
        audit = wait_idle_pool(url)
        print(f"KV pool at the end: whole={audit['whole']} free={audit['kv_blocks_free']} "
              f"used={audit['kv_blocks_used']} total={audit['kv_blocks_total']}", flush=True)
    tried, passed = sum(t.tried for t in tallies), sum(t.passed for t in tallies)
    print(f"{'total':<22} tried {tried:>5}  passed {passed:>5}")
    return 0 if tried == passed else 1


if __name__ == "__main__":
    sys.exit(main())
