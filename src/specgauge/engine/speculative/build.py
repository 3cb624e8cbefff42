"""Wire speculation into an engine: the drafter, its runner and the controller."""

from __future__ import annotations

import torch

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.kv_cache import KVCache
from specgauge.engine.models.llama import LlamaForCausalLM
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.engine.speculative.control import SpeculationController
from specgauge.engine.speculative.runner import SpeculativeRunner
from specgauge.errors import UserError


def build_drafter(spec: SpeculativeConfig, model: LlamaForCausalLM, blocks: BlockManager,
                  device: torch.device, dtype: torch.dtype, packing: str = "none"):
    """The drafter ``spec`` names: an EAGLE-3 head loaded for ``model`` (its fp32 matmuls'
    weights held as ``packing`` says, see :mod:`specgauge.engine.models.linear`), or the n-gram drafter."""
    if spec.algorithm == "NGRAM":
        from specgauge.engine.speculative.ngram import NgramDrafter

        return NgramDrafter(spec.ngram_max_n, spec.ngram_min_n)
    from specgauge.engine.models.eagle3 import load_eagle3
    from specgauge.engine.speculative.eagle3_drafter import Eagle3Drafter

    # On CPU the head runs in fp32 whatever the target's dtype: one-row matmuls are faster in
    # fp32 there, and drafts need not be batch-invariant (the target's verify decides).
    head_dtype = torch.float32 if device.type == "cpu" else dtype
    try:
        head = load_eagle3(spec.draft_dir, target=model, device=device, dtype=head_dtype)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        raise UserError(f"--speculative-draft-model-path {spec.draft_dir}: {exc}") from None
    return Eagle3Drafter(head, blocks, device, dtype, spec.num_steps, spec.eagle_topk, spec.draft_tokens,
                         min_draft_prob=spec.min_draft_prob, packing=packing)


def build_speculation(spec: SpeculativeConfig, model: LlamaForCausalLM, cache: KVCache, blocks: BlockManager,
                      device: torch.device, dtype: torch.dtype,
                      packing: str = "none") -> tuple[SpeculativeRunner, SpeculationController]:
    """A speculative runner over the engine's model and pool, and the controller choosing k."""
    drafter = build_drafter(spec, model, blocks, device, dtype, packing)
    runner = SpeculativeRunner(model, cache, blocks, drafter, accept_bias=spec.accept_bias)
    controller = SpeculationController.build(spec.max_drafts, spec.is_tree, spec.disable_above, spec.adaptive,
                                             self_cutting=spec.algorithm == "EAGLE3" and spec.min_draft_prob > 0,
                                             schedule=spec.schedule)
    return runner, controller
