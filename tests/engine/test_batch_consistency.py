"""Greedy output of a request alone equals its output inside a busy batch, with chunked prefill
mixed into decode steps and preemption (recompute) when the KV pool runs short."""

import queue

from specgauge.engine.core.sampling_params import SamplingParams

from engine_testkit import wait_idle


def generate_all(engine, prompts, max_tokens):
    """Submit every prompt at once; return each one's generated token ids and finish reason."""
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    for i, ids in enumerate(prompts):
        engine.submit(f"r{i}", ids, params, inbox.put)
    tokens = {i: [] for i in range(len(prompts))}
    done = {}
    while len(done) < len(prompts):
        event = inbox.get(timeout=60)
        index = int(event.request_id[1:])
        tokens[index].extend(event.token_ids)
        if event.finished:
            done[index] = event.finish_reason
    return [tokens[i] for i in range(len(prompts))], done


def test_alone_equals_inside_a_busy_batch(engine_factory):
    # small step budget (chunked prefill mixed with decodes) and a pool too small for everyone
    engine = engine_factory(max_running=16, max_tokens_per_step=24, block_size=4, num_blocks=70,
                            max_model_len=192)
    engine.start()
    tok = engine.tokenizer
    texts = ["def add(a, b):", "The quick brown fox jumps over the lazy dog. " * 3, "x",
             "class Stack:\n    def push(self, item):", "Caf\u00e9 na\u00efve", "{\"tool\": \"search\"}",
             "Speculative decoding drafts tokens and verifies them " * 2, "r\u00e9sum\u00e9"]
    prompts = [tok.encode(t) for t in texts]
    alone = [generate_all(engine, [p], 40)[0][0] for p in prompts[:3]]
    busy, reasons = generate_all(engine, prompts, 40)
    assert set(reasons.values()) == {"length"}
    assert busy[:3] == alone
    assert all(len(t) == 40 for t in busy)
    assert engine.scheduler.num_preemptions > 0, "the test meant to exercise preemption"
    wait_idle(engine)


def test_alone_equals_inside_a_batch_of_64(engine_factory):
    """64 requests decoding together (the widest decode attention over the pool) give each the
    tokens it gets alone."""
    engine = engine_factory(max_running=64, max_tokens_per_step=512, block_size=4, num_blocks=1200,
                            max_model_len=192)
    engine.start()
    tok = engine.tokenizer
    texts = ["def add(a, b):", "The quick brown fox jumps over the lazy dog.", "x", "class Stack:",
             "Speculative decoding drafts tokens and verifies them", "{\"tool\": \"search\"}", "r\u00e9sum\u00e9"]
    prompts = [tok.encode(f"{texts[i % len(texts)]} {i}") for i in range(64)]
    alone = [generate_all(engine, [p], 24)[0][0] for p in prompts[:4]]
    busy, reasons = generate_all(engine, prompts, 24)
    assert set(reasons.values()) == {"length"}
    assert busy[:4] == alone
    wait_idle(engine)
