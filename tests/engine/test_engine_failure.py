"""A failure inside a step fails the requests in flight with an error event; the engine and the
server keep serving, and no KV block leaks."""

import httpx
from engine_testkit import wait_idle

from specgauge.engine.serving.app import BackgroundServer


def test_step_failure_fails_requests_not_the_server(engine_factory):
    engine = engine_factory(max_running=4)
    real_run = engine.runner.run
    calls = {"n": 0}

    def failing_once(batch, k):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated kernel failure")
        return real_run(batch, k)

    engine.runner.run = failing_once
    with BackgroundServer(engine) as srv:
        failed = httpx.post(srv.url + "/v1/completions", json={"prompt": "x", "max_tokens": 4}, timeout=30)
        assert failed.status_code == 500
        assert "simulated kernel failure" in failed.json()["error"]["message"]
        wait_idle(engine)
        ok = httpx.post(srv.url + "/v1/completions", json={"prompt": "x", "max_tokens": 4}, timeout=30)
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] >= 1
        assert httpx.get(srv.url + "/health").status_code == 200
        metrics = httpx.get(srv.url + "/metrics").text
        assert 'vllm:request_success_total{finished_reason="error"} 1.0' in metrics
        wait_idle(engine)
