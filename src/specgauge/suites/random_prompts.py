"""Length-exact synthetic prompts from a real tokenizer: ``--dataset-name random``.

The same semantics as vLLM's random dataset (``vllm/benchmarks/datasets/random.py``,
``RandomDataset.get_sampling_params`` and ``generate_token_sequence``):

- input lengths are drawn uniformly from the integers ``[floor(L·(1−r)), ceil(L·(1+r))]`` and
  output lengths from ``[max(1, floor(O·(1−r))), ceil(O·(1+r))]`` with ``r`` =
  ``--random-range-ratio`` in [0, 1), from ``numpy.random.default_rng(seed)``; ``L`` excludes the
  special tokens the tokenizer adds itself;
- request ``i``'s tokens are ``allowed[(offset_i + i + k) mod |allowed|]`` for k < its length, where
  ``allowed`` is the vocabulary less the special tokens and ``offset_i`` is drawn from the same rng;
- the token sequence is decoded to text, re-encoded and cut (by twice the excess) or padded with
  random allowed tokens until it re-encodes to exactly the drawn length (vLLM's ``gen_prompt_decode_to_target_len``
  gives up after 10 rounds; here up to ``MAX_ROUNDS``, and a prompt that still misses is kept
  with its true length in the request's notes).

Each request's ``max_tokens`` is its drawn output length.
"""

from __future__ import annotations

import math

from specgauge.errors import UserError
from specgauge.suites.model import Suite, SuiteRequest

MAX_ROUNDS = 64


def sampled_lengths(rng, num_prompts: int, input_len: int, output_len: int, range_ratio: float,
                    num_special: int) -> tuple[list[int], list[int]]:
    """Per-request (input, output) lengths, vLLM's bounds (module doc)."""
    if not 0.0 <= range_ratio < 1.0:
        raise UserError(f"--random-range-ratio must be in [0, 1) (got {range_ratio})")
    real_input = max(0, input_len - num_special)
    input_low, input_high = math.floor(real_input * (1 - range_ratio)), math.ceil(real_input * (1 + range_ratio))
    output_low = max(1, math.floor(output_len * (1 - range_ratio)))
    output_high = max(1, math.ceil(output_len * (1 + range_ratio)))
    if input_low < 1:
        raise UserError(f"--random-input-len {input_len} is too small: with {num_special} special token(s) and "
                        f"--random-range-ratio {range_ratio} a prompt could have no token")
    inputs = rng.integers(input_low, input_high + 1, size=num_prompts)
    outputs = rng.integers(output_low, output_high + 1, size=num_prompts)
    return [int(v) for v in inputs], [int(v) for v in outputs]


def _exact_text(tokenizer, ids: list[int], target: int, allowed, rng) -> tuple[str, int]:
    """Decode → re-encode → cut or pad until the text re-encodes to ``target`` tokens."""
    for _ in range(MAX_ROUNDS):
        text = tokenizer.decode(ids, skip_special_tokens=False)
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) == target:
            return text, target
        if len(ids) > target:  # cut as many tokens again as are over (a cut can re-split the same
            ids = ids[:max(1, 2 * target - len(ids))]  # way): the next round pads with new tokens
        else:
            ids = ids + [int(t) for t in rng.choice(allowed, size=target - len(ids))]
    text = tokenizer.decode(ids, skip_special_tokens=False)
    return text, len(tokenizer.encode(text, add_special_tokens=False).ids)


def random_suite(tokenizer, *, num_prompts: int, input_len: int, output_len: int, range_ratio: float,
                 seed: int, name: str) -> Suite:
    """``num_prompts`` synthetic raw-text requests (module doc); ``tokenizer``: a ``tokenizers.Tokenizer``."""
    import numpy as np

    if num_prompts < 1:
        raise UserError("--num-prompts must be >= 1")
    special = {token_id for token_id, token in tokenizer.get_added_tokens_decoder().items() if token.special}
    num_special = len(tokenizer.encode("", add_special_tokens=True).ids)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    allowed = np.array([t for t in range(vocab_size) if t not in special])
    if len(allowed) == 0:
        raise UserError("the tokenizer has no ordinary tokens to build random prompts from")
    rng = np.random.default_rng(seed)
    inputs, outputs = sampled_lengths(rng, num_prompts, input_len, output_len, range_ratio, num_special)
    offsets = rng.integers(0, vocab_size, size=num_prompts)
    requests = []
    for i in range(num_prompts):
        ids = allowed[(int(offsets[i]) + i + np.arange(inputs[i])) % len(allowed)].tolist()
        text, length = _exact_text(tokenizer, ids, inputs[i], allowed, rng)
        note = None if length == inputs[i] else f"{length} prompt tokens (asked {inputs[i]})"
        requests.append(SuiteRequest(prompt=text, max_tokens=outputs[i], domain="random", source="random",
                                     notes=note))
    return Suite(name=name, requests=tuple(requests),
                 description=f"{num_prompts} random prompts of {input_len} tokens (range ratio {range_ratio}), "
                             f"{output_len} output tokens, seed {seed}: vLLM's random dataset semantics")
