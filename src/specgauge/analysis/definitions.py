"""The metric definitions everyone uses, written once here and cited by every report and doc.

- TTFT: request sent → first content-bearing chunk received.
- TPOT: (latency − TTFT) / (output_tokens − 1).
- ICL (inter-chunk latency): gap between consecutive content chunks; under speculation one chunk
  carries one verify step, so ICL is the per-step latency.
- ITL (inter-token latency): each chunk gap spread evenly over the tokens that chunk carried.
- Acceptance length: tokens per verify step including the bonus token, in [1, k+1]:
  ``1 + accepted draft tokens / verify steps`` — vLLM's definition (``1 + accepted / drafts`` of its
  ``vllm:spec_decode_*`` counters and of ``mean_acceptance_length`` in its per-request metrics).
  Every API is converted to it: SGLang's own ``completion_tokens / spec_verify_ct`` counts the
  first, prefill-made token as if a verify step had made it, so it becomes
  ``(completion_tokens − 1) / spec_verify_ct`` — per request, and summed over a point
  (``Σ(completion_tokens − 1) / Σ spec_verify_ct``, also from SGLang's Prometheus counters). SGLang's
  correct-draft count is not used: it ran past ``max_new_tokens`` on a real SGLang
  (``client/adapters/sglang.py``).
"""

from __future__ import annotations

from specgauge.client.records import RequestRecord

NS_PER_MS = 1_000_000
# The metrics a goodput SLO may name, in vLLM's spelling (vllm/benchmarks/serve.py, check_goodput_args):
# a request counts toward goodput when it meets every SLO given (milliseconds).
GOODPUT_METRICS = ("ttft", "tpot", "e2el")


def ttft_ms(record: RequestRecord) -> float | None:
    if record.t_send_ns is None or not record.chunk_times_ns:
        return None
    return (record.chunk_times_ns[0] - record.t_send_ns) / NS_PER_MS


def e2e_ms(record: RequestRecord) -> float | None:
    if record.t_send_ns is None or record.t_end_ns is None:
        return None
    return (record.t_end_ns - record.t_send_ns) / NS_PER_MS


def output_token_count(record: RequestRecord) -> int:
    """Output tokens: the server's count when given, else the sum over chunks."""
    if record.output_tokens is not None:
        return record.output_tokens
    return sum(record.chunk_tokens)


def tpot_ms(record: RequestRecord) -> float | None:
    """(latency − TTFT) / (output_tokens − 1); latency ends at the last content chunk's arrival
    when the stream's end comes later only because of a usage/[DONE] tail."""
    first = ttft_ms(record)
    tokens = output_token_count(record)
    if first is None or tokens < 2 or record.t_send_ns is None:
        return None
    last_ns = record.chunk_times_ns[-1]
    latency = (last_ns - record.t_send_ns) / NS_PER_MS
    return (latency - first) / (tokens - 1)


def icl_ms(record: RequestRecord) -> list[float]:
    """Gaps between consecutive content chunks (ms)."""
    times = record.chunk_times_ns
    return [(b - a) / NS_PER_MS for a, b in zip(times, times[1:])]


def itl_ms(record: RequestRecord) -> list[float]:
    """Each chunk gap divided evenly over the tokens that chunk carried (one value per token)."""
    out: list[float] = []
    times, tokens = record.chunk_times_ns, record.chunk_tokens
    for i in range(1, len(times)):
        gap = (times[i] - times[i - 1]) / NS_PER_MS
        n = tokens[i] if i < len(tokens) and tokens[i] > 0 else 1
        out.extend([gap / n] * n)
    return out


def decode_tok_s(record: RequestRecord) -> float | None:
    """Per-request decode rate: tokens after the first over the time after the first chunk."""
    tpot = tpot_ms(record)
    if tpot is None or tpot <= 0:
        return None
    return 1000.0 / tpot


def accept_length(record: RequestRecord) -> float | None:
    """Per-request acceptance length in the one definition above: ``1 + accepted / verify steps``
    from the counts when the server gives them (vLLM ``metrics.speculative_decoding``; SGLang's
    correct-draft count is never read into them), else ``(completion_tokens − 1) / spec_verify_ct``
    (SGLang's figure less the prefill-made token), else the server's own figure as it stands."""
    if record.spec_correct_drafts is not None and record.spec_verify_ct:
        return 1.0 + record.spec_correct_drafts / record.spec_verify_ct
    if record.spec_verify_ct and record.output_tokens:
        return (record.output_tokens - 1) / record.spec_verify_ct
    return record.spec_accept_length


def token_weighted_accept_length(records) -> float | None:
    """``1 + Σ accepted / Σ verify steps`` over the requests that report verify steps (converted
    as :func:`accept_length` does): every verify step weighs the same, so long completions weigh
    more than in the mean over requests."""
    steps = accepted = 0.0
    for record in records:
        if not record.spec_verify_ct:
            continue
        if record.spec_correct_drafts is not None:
            accepted += record.spec_correct_drafts
        elif record.output_tokens:
            accepted += record.output_tokens - 1 - record.spec_verify_ct
        else:
            continue
        steps += record.spec_verify_ct
    return 1.0 + accepted / steps if steps else None
