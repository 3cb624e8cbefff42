"""Keep the suite requests that fit a model's context with the demo's output length.

The shipped target has a short context; a prompt that does not leave room for ``max_tokens`` output
tokens would be refused by the engine (400 ``context_length_exceeded``) and count as an error in
both arms. The demo therefore runs each built-in suite restricted to the requests that fit, as a
derived suite (``coding-fit512``) written next to the report, deterministic, hence comparable
across demo runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from specgauge.suites.model import Suite, SuiteRequest

ENGINE_MAX_CONTEXT = 4096   # `specgauge serve` caps --max-model-len at this


def model_context(model_dir: Path) -> int:
    """The context the engine serves ``model_dir`` with by default."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return min(int(config.get("max_position_embeddings", ENGINE_MAX_CONTEXT)), ENGINE_MAX_CONTEXT)


def render_prompt(tokenizer, request: SuiteRequest) -> str:
    """A request's prompt text as the engine renders it: chat messages through the model's chat
    template (generation prompt added), a raw prompt as it is. ``tokenizer``: an ``EngineTokenizer``."""
    if request.messages is not None:
        return tokenizer.apply_chat_template([m.model_dump() for m in request.messages])
    return request.prompt or ""


def prompt_tokens(suite: Suite, model_dir: Path) -> list[int]:
    """Each request's prompt length in the model's tokens, as the engine renders it (chat template)."""
    from specgauge.engine.models.tokenizer import EngineTokenizer

    tokenizer = EngineTokenizer(model_dir)
    return [len(tokenizer.encode(render_prompt(tokenizer, request))) for request in suite.requests]


def fitting_suite(suite: Suite, model_dir: Path, max_tokens: int) -> Suite:
    """``suite`` less the requests whose prompt plus ``max_tokens`` exceed the model's context.

    Returns ``suite`` itself when every request fits.
    """
    context = model_context(model_dir)
    lengths = prompt_tokens(suite, model_dir)
    keep = tuple(r for r, n in zip(suite.requests, lengths) if n + max_tokens <= context)
    if len(keep) == len(suite.requests):
        return suite
    return Suite(name=f"{suite.name}-fit{context}", version=suite.version, requests=keep,
                 description=f"{suite.ref} restricted to the {len(keep)} of {len(suite.requests)} requests whose "
                             f"prompt plus {max_tokens} output tokens fit a {context}-token context")
