"""What each request asks of the server's sampler: temperature, top-p, top-k and its own seed.

The fields go in the request body under the names each API reads:

- OpenAI routes (chat and completions): ``temperature``, ``top_p``, ``top_k``, ``seed`` at the top
  level. vLLM reads all four (``vllm/entrypoints/openai/chat_completion/protocol.py`` and
  ``completion/protocol.py``: ``seed: int | None`` in [-2^63, 2^63), ``top_k: int | None``, 0 or -1
  = no cut); SGLang's OpenAI routes too (``python/sglang/srt/entrypoints/openai/protocol.py``:
  ``seed``, passed on as ``sampling_seed``; ``top_k`` -1 = no cut); OpenAI itself reads ``seed``
  and ``top_p`` (a strict server that refuses ``top_k`` is given it only when asked for).
- SGLang ``/generate``: inside ``sampling_params`` as ``temperature``, ``top_p``, ``top_k`` and
  ``sampling_seed`` (``python/sglang/srt/sampling/sampling_params.py``).

A field left None is not sent (the server's default applies). A request's seed is derived from
the point's ``sampling_seed`` and the request's index (:func:`request_seed`), so a run repeated
with the same ``--seed`` sends the same seeds, and two requests of one point never share one.
"""

from __future__ import annotations

from dataclasses import dataclass

SEED_SPAN = 1_000_003        # request indices of one point stay below this (distinct seeds per base)
SEED_MODULUS = 2 ** 63       # vLLM's seed is a signed 64-bit integer; SGLang's and the engine's too


def request_seed(base: int, request_index: int) -> int:
    """The seed of request ``request_index`` (warm-ups have negative indices) of a point whose
    seeds derive from ``base``: distinct per (base, index), in [0, 2^63)."""
    return (base * SEED_SPAN + request_index) % SEED_MODULUS


@dataclass(frozen=True)
class Sampling:
    """One request's sampling settings (module doc); the defaults send greedy decoding only."""

    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None

    def fields(self, *, seed_name: str = "seed") -> dict:
        """The body fields: ``temperature`` always, the others when set (``seed_name``: the
        seed's name in this API, ``sampling_seed`` in SGLang's ``sampling_params``)."""
        out: dict = {"temperature": self.temperature}
        if self.top_p is not None:
            out["top_p"] = self.top_p
        if self.top_k is not None:
            out["top_k"] = self.top_k
        if self.seed is not None:
            out[seed_name] = self.seed
        return out


def describe_sampling(temperature: float, top_p: float | None = None, top_k: int | None = None) -> str:
    """``temperature 0 (greedy)``, ``temperature 0.7, top-p 0.9``: the sampling a figure was measured at."""
    parts = [f"temperature {temperature:g}" + (" (greedy)" if temperature == 0 else "")]
    if top_p is not None:
        parts.append(f"top-p {top_p:g}")
    if top_k is not None:
        parts.append(f"top-k {top_k}")
    return ", ".join(parts)
