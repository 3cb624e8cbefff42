"""Prometheus metrics of the engine, under vLLM's names where vLLM has one (so scrapers that know
vLLM read them), in a registry of their own per engine."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

from specgauge.speculation_schedule import compact_form

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
        self.steps = 0
        self.last_step_time: float | None = None
        self.spec_enabled = False

    # -- speculative decoding ------------------------------------------------------------------
    def enable_speculation(self, max_drafts: int) -> None:
        """Register the speculation series: vLLM's counter names, SGLang's gauge, and ours for
        the controller's state and the draft/verify split of each step."""
        r = self.registry
        self.spec_enabled = True
        self.spec_drafts = Counter("vllm:spec_decode_num_drafts", "Verifies with at least one draft token.", registry=r)
        self.spec_draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Draft tokens verified.", registry=r)
        self.spec_accepted_tokens = Counter("vllm:spec_decode_num_accepted_tokens",
                                            "Draft tokens accepted (and emitted).", registry=r)
        self.spec_accepted_per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                                             "Accepted draft tokens by position in the draft.", ["position"], registry=r)
        for position in range(max_drafts):
            self.spec_accepted_per_pos.labels(position=str(position))
        # newer vLLM's drafts by their length (client/server_metrics.py reads it): the depth that ran
        self.spec_drafts_by_length = Counter("vllm:spec_decode_num_drafts_by_draft_length",
                                             "Verifies by the number of draft tokens they verified.", ["draft_length"],
                                             registry=r)
        self.spec_accept_length = Gauge("sglang:spec_accept_length",
                                        "Tokens emitted per verify since start (accepted + 1).", registry=r)
        self.spec_accept_rate = Gauge("sglang:spec_accept_rate",
                                      "Accepted / proposed draft tokens since start.", registry=r)
        self.spec_mode = Gauge("specgauge:spec_enabled", "1 when the last step drafted, 0 for plain decoding.",
                               registry=r)
        self.spec_k = Gauge("specgauge:spec_num_draft_tokens", "Draft tokens per request chosen for the last step.",
                            registry=r)
        self.spec_draft_time = Histogram("specgauge:spec_draft_time_seconds", "Drafting time of one step.",
                                         buckets=STEP_BUCKETS, registry=r)
        self.spec_verify_time = Histogram("specgauge:spec_verify_time_seconds",
                                          "Verify time of one step (target forward + acceptance).",
                                          buckets=STEP_BUCKETS, registry=r)
        self.spec_verifies = 0
        self.spec_verify_tokens = 0
        self.spec_proposed = 0
        self.spec_correct = 0
        self.last_draft_time: float | None = None
        self.last_verify_time: float | None = None
        self.draft_time_total = 0.0
        self.verify_time_total = 0.0
        self.spec_steps_by_batch_and_k: dict[tuple[int, int], int] = {}  # (decoding requests, k) → steps

    def observe_spec(self, report, counted: list[tuple[int, int, int]]) -> None:
        """One speculative step: ``report`` (the runner's ``StepReport``) and, per verify counted,
        (proposed, accepted-and-emitted, accepted)."""
        for proposed, correct, _ in counted:
            self.spec_verifies += 1
            self.spec_verify_tokens += correct + 1
            self.spec_proposed += proposed
            self.spec_correct += correct
            if proposed:
                self.spec_drafts.inc()
                self.spec_drafts_by_length.labels(draft_length=str(proposed)).inc()
                self.spec_draft_tokens.inc(proposed)
                self.spec_accepted_tokens.inc(correct)
                for position in range(correct):
                    self.spec_accepted_per_pos.labels(position=str(position)).inc()
        if self.spec_verifies:
            self.spec_accept_length.set(self.spec_verify_tokens / self.spec_verifies)
        if self.spec_proposed:
            self.spec_accept_rate.set(self.spec_correct / self.spec_proposed)
        self.spec_mode.set(1 if report.k > 0 else 0)
        self.spec_k.set(report.k)
        if report.decoding:
            key = (report.decoding, report.k)
            self.spec_steps_by_batch_and_k[key] = self.spec_steps_by_batch_and_k.get(key, 0) + 1
        self.last_draft_time, self.last_verify_time = report.draft_seconds, report.verify_seconds
        self.draft_time_total += report.draft_seconds
        self.verify_time_total += report.verify_seconds
        self.spec_draft_time.observe(report.draft_seconds)
        self.spec_verify_time.observe(report.verify_seconds)

    def avg_spec_accept_length(self) -> float | None:
        """Tokens per verify since the server started (SGLang's ``avg_spec_accept_length``)."""
        return self.spec_verify_tokens / self.spec_verifies if self.spec_enabled and self.spec_verifies else None

    def spec_snapshot(self, controller) -> dict:
        """Speculation state for ``/server_info``'s ``internal_states``."""
        return {
            "speculative_mode": controller.mode,
            "speculative_num_draft_tokens": controller.current_k,
            "speculative_adaptive": controller.adaptive,
            "speculative_disable_above": controller.disable_above,
            "speculative_schedule": compact_form(list(controller.schedule)) if controller.schedule else None,
            "spec_steps_by_batch_and_k": [[b, k, n] for (b, k), n in sorted(self.spec_steps_by_batch_and_k.items())],
            "spec_num_verifies": self.spec_verifies,
            "last_draft_time_s": self.last_draft_time,
            "last_verify_time_s": self.last_verify_time,
            "draft_time_total_s": self.draft_time_total,
            "verify_time_total_s": self.verify_time_total,
        }

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
