"""Prometheus metrics of the engine, under vLLM's names where vLLM has one (so scrapers that know
vLLM read them), in a registry of their own per engine."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

disable_created_metrics()  # no *_created samples: scrapers diff the counters themselves

STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.5)


class EngineMetrics:
    """Counters updated by the engine thread; ``render`` is safe from any thread."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("vllm:request_success", "Finished requests, by finish reason.",
                                ["finished_reason"], registry=r)
        self.arrivals = Counter("specgauge:requests_received", "Requests handed to the engine.", registry=r)
        self.running = Gauge("vllm:num_requests_running", "Requests in the running batch.", registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.", registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens of received requests.", registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generated tokens.", registry=r)
        self.step_time = Histogram("specgauge:step_time_seconds", "Wall time of one engine step.",
                                   buckets=STEP_BUCKETS, registry=r)
        self.step_tokens = Counter("specgauge:step_tokens", "Tokens run through the model in steps.", registry=r)
        # Speculative decoding (issue 4) registers its counters here, under vLLM's names
        # (vllm:spec_decode_num_drafts_total, ..._draft_tokens_total, ..._accepted_tokens_total,
        # ..._accepted_tokens_per_pos_total{position}) and SGLang's (sglang:spec_accept_length).
        self.steps = 0
        self.last_step_time: float | None = None

    def on_arrival(self, prompt_tokens: int) -> None:
        self.arrivals.inc()
        self.prompt_tokens.inc(prompt_tokens)

    def on_finish(self, reason: str) -> None:
        self.requests.labels(finished_reason=reason).inc()

    def observe_step(self, seconds: float, batch, updates) -> None:
        self.steps += 1
        self.last_step_time = seconds
        self.step_time.observe(seconds)
        self.step_tokens.inc(batch.num_tokens)
        self.generation_tokens.inc(sum(len(u.new_token_ids) for u in updates))

    def set_queues(self, running: int, waiting: int) -> None:
        self.running.set(running)
        self.waiting.set(waiting)

    def render(self) -> bytes:
        return generate_latest(self.registry)
