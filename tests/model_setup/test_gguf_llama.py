"""The GGUF → Hugging Face conversion's pieces that do not need the real file."""

import numpy as np

from specgauge.model_setup.gguf_llama import unpermute


def llama_cpp_permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py ``LlamaModel.permute`` (its Q/K row order for interleaved RoPE)."""
    grouped = weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
    return grouped.swapaxes(1, 2).reshape(weights.shape)


def test_unpermute_inverts_llama_cpp_permute():
    rng = np.random.default_rng(0)
    for heads, head_dim in ((9, 64), (3, 64), (4, 8)):
        weights = rng.standard_normal((heads * head_dim, 12)).astype(np.float32)
        assert np.array_equal(unpermute(llama_cpp_permute(weights, heads), heads), weights)
        assert not np.array_equal(llama_cpp_permute(weights, heads), weights)
