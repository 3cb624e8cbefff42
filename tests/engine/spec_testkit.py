"""Helpers for the speculative-decoding tests: random-weight EAGLE-3 heads, engines, generation."""

from __future__ import annotations

import queue
from pathlib import Path

import torch

from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head, build_vocab_map, save_eagle3
from specgauge.engine.models.llama import load_model
from specgauge.engine.core.sampling_params import SamplingParams


def write_random_head(path: Path, target_dir: Path, draft_vocab_size: int = 200, seed: int = 0,
                      std: float = 0.1, dtype: torch.dtype | None = None) -> Path:
    """A random-weight EAGLE-3 head for the target in ``target_dir``, saved in the published
    layout (fp32 unless ``dtype``). Losslessness does not depend on the head's quality."""
    target = load_model(target_dir)
    config = Eagle3Config.for_target(target.config, draft_vocab_size, intermediate_size=96)
    torch.manual_seed(seed)
    head = Eagle3Head(config)
    with torch.no_grad():
        for name, param in head.named_parameters():
            if "norm" not in name and name != "embed_tokens.weight":
                param.normal_(0.0, std)
    counts = torch.arange(config.vocab_size, 0, -1).float()  # favour low ids, like frequent tokens
    head.set_vocab_map(*build_vocab_map(counts, draft_vocab_size, always=[6]))
    save_eagle3(head, path, dtype=dtype)
    return path


def generate_all(engine, prompts: list[list[int]], params: SamplingParams | list[SamplingParams],
                 timeout: float = 60.0) -> tuple[list[list[int]], list]:
    """Submit every prompt at once; return each one's tokens and its last event."""
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    params = params if isinstance(params, list) else [params] * len(prompts)
    for i, (ids, p) in enumerate(zip(prompts, params)):
        engine.submit(f"r{i}", ids, p, inbox.put)
    tokens: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    last: dict[int, object] = {}
    while len(last) < len(prompts):
        event = inbox.get(timeout=timeout)
        index = int(event.request_id[1:])
        tokens[index].extend(event.token_ids)
        if event.finished:
            last[index] = event
    return [tokens[i] for i in range(len(prompts))], [last[i] for i in range(len(prompts))]


DOMAIN_SNIPPETS = {
    "code": ["def {w}(a, b):\n    return a + b\n", "class {W}:\n    def push(self, item):\n        self.items.append(item)\n",
             "for i in range({n}):\n    print(i)\n", "import os\n{w} = os.path.join('a', 'b')\n"],
    "prose": ["The quick brown fox jumps over the lazy dog number {n}.", "Speculative decoding drafts {w} tokens.",
              "In {n} the town of {W} had a library.", "A {w} is a kind of animal that lives in the forest."],
    "json": ['{{"tool": "{w}", "result": [{n}, 2, 3]}}', '{{"name": "{W}", "args": {{"x": {n}}}}}'],
    "multilingual": ["Caf\u00e9 na\u00efve r\u00e9sum\u00e9 {w}", "\u65e5\u672c\u8a9e {n} \u00fcber stra\u00dfe",
                     "\u20ac{n} \u2014 {W}"],
    "repetitive": ["{w} {w} {w} {w}", "{n}, {n}, {n}, {n},", "abc abc abc {w} abc abc"],
}
WORDS = ["add", "stack", "search", "merge", "value", "token", "tree", "queue", "graph", "node"]


def domain_prompts(count: int) -> list[str]:
    """``count`` prompts cycling through code, prose, JSON, multilingual and repetitive text."""
    prompts = []
    domains = list(DOMAIN_SNIPPETS)
    for i in range(count):
        snippets = DOMAIN_SNIPPETS[domains[i % len(domains)]]
        template = snippets[(i // len(domains)) % len(snippets)]
        word = WORDS[(i * 7) % len(WORDS)]
        prompts.append(template.format(w=word, W=word.capitalize(), n=i))
    return prompts


def make_spec_engine(model_dir, speculative=None, **scheduler_overrides):
    """An engine of ``model_dir`` (1 thread) with the given :class:`SpeculativeConfig`."""
    from specgauge.engine.core.engine import Engine, EngineConfig
    from specgauge.engine.core.scheduler import SchedulerConfig
    from specgauge.engine.speculative.config import SpeculativeConfig

    engine_keys = {"num_blocks", "block_size", "max_model_len", "dtype", "weight_packing"}
    engine_kwargs = {k: scheduler_overrides.pop(k) for k in list(scheduler_overrides) if k in engine_keys}
    return Engine(EngineConfig(model_dir=str(model_dir), threads=1, scheduler=SchedulerConfig(**scheduler_overrides),
                               speculative=speculative or SpeculativeConfig(), **engine_kwargs))


class OracleDrafter:
    """A test drafter that knows the plain greedy continuation of every prompt and proposes it,
    with wrong siblings placed *before* the right child (so the accepted path is never a prefix
    of the verify order and the target's KV must be compacted) and every third chain cut by a
    wrong token. It exercises multi-token acceptance, tree compaction and rollback against the
    real target, whatever the quality of a real head."""

    aux_layers: tuple[int, ...] = ()

    def __init__(self, continuations: dict[tuple[int, ...], list[int]], depth: int, tree: bool) -> None:
        self.continuations = continuations
        self.depth, self.is_tree, self.num_steps = depth, tree, depth
        self.calls = 0

    def slots_needed(self, k: int) -> int:
        return 2 * k if self.is_tree else k

    def propose(self, requests, ks):
        from specgauge.engine.speculative.tree import DraftTree, Proposal

        trees = []
        for request, k in zip(requests, ks):
            self.calls += 1
            full = self.continuations[tuple(request.prompt_ids)]
            right = full[len(request.output_ids):len(request.output_ids) + k]
            if self.calls % 3 == 0 and right:
                right = right[:-1] + [(right[-1] + 1) % 300]  # a wrong last draft: partial acceptance
            if not self.is_tree:
                trees.append(DraftTree.chain(right))
                continue
            tokens, parents, parent = [], [], -1
            for token in right:  # a wrong sibling first, then the right child, which the chain continues
                tokens += [(token + 3) % 300, token]
                parents += [parent, parent]
                parent = len(tokens) - 1
            trees.append(DraftTree(tuple(tokens), tuple(parents)))
        return Proposal(tuple(trees))

    def features(self, aux):
        return None

    def observe(self, request, features) -> None:
        pass
