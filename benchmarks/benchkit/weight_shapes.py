"""The matmul shapes of a shipped target and its drafter, for the weight-packing benchmarks."""

from __future__ import annotations

import json

from specgauge.shipped_models import get_shipped

COPIES = 24  # weight copies cycled through: more than the last-level cache holds for the big shapes


def shapes(model: str) -> list[tuple[str, int, int]]:
    """(name, out, in) of the shipped target's fused matmuls and its drafter's."""
    shipped = get_shipped(model)
    t = json.loads((shipped.target_dir / "config.json").read_text())
    d = json.loads((shipped.draft_dir / "config.json").read_text())
    h, heads, kv = t["hidden_size"], t["num_attention_heads"], t["num_key_value_heads"]
    head_dim = t.get("head_dim", h // heads)
    return [("target qkv", (heads + 2 * kv) * head_dim, h), ("target o", h, heads * head_dim),
            ("target gate_up", 2 * t["intermediate_size"], h), ("target down", h, t["intermediate_size"]),
            ("target lm_head", t["vocab_size"], h), ("draft fc", d["hidden_size"], 3 * h),
            ("draft qkv", (heads + 2 * kv) * head_dim, 2 * h), ("draft gate_up", 2 * d["intermediate_size"], h),
            ("draft lm_head", d["draft_vocab_size"], h)]
