"""Copies of a shipped target and drafter that SGLang's CPU path serves.

SGLang's default CPU attention (``intel_amx``) refuses head_dim 40 ("invalid head_size 40"), the
first target's; the copies are the ones ``make vllm`` lays out (:mod:`specgauge.vllm_setup.layout`:
re-laid to head_dim 64, the same function). SGLang's Llama reads ``partial_rotary_factor``
(``rotary_dim = int(partial_rotary_factor * head_dim)``) and scales q·k by ``head_dim**-0.5``
(``LlamaAttention`` in ``python/sglang/srt/models/llama.py``), as vLLM does, so the same copy
holds; its EAGLE-3 drafter's decoder layer is that ``LlamaDecoderLayer``
(``python/sglang/srt/models/llama_eagle3.py``).

The drafter's ``eagle_aux_hidden_state_layer_ids`` are rewritten in SGLang's meaning: SGLang
captures the input of layer id + 1 (``set_eagle3_layers_to_capture`` in llama.py: ``[val + 1 for
val in layer_ids]``), vLLM and specgauge the input of layer id, so SGLang's copy says one less
(:func:`specgauge.engine.models.eagle3.config_for_engine`, as ``train export-draft --engine sglang``).
"""
from __future__ import annotations

import json
from pathlib import Path

from specgauge.engine.models.eagle3 import config_for_engine
from specgauge.shipped_models import ShippedModel
from specgauge.vllm_setup.layout import lay_out_draft, lay_out_target


def lay_out(model: ShippedModel, target: Path, draft: Path) -> None:
    """Write ``model``'s SGLang-servable target into ``target`` and its drafter into ``draft``."""
    lay_out_target(model.target_dir, target)
    lay_out_draft(model.draft_dir, draft)
    config_path = draft / "config.json"
    config = config_for_engine(json.loads(config_path.read_text()), "sglang")
    config_path.write_text(json.dumps(config, indent=2) + "\n")
