"""Turning a chat ``SuiteRequest`` into the raw text a completions-style API takes.

Without a tokenizer, messages are rendered as plain text, one block per message::

    System: <content>

    User: <content>

    Assistant:

With a tokenizer (``--tokenizer path/to/tokenizer.json``) whose folder holds a
``tokenizer_config.json`` with a ``chat_template``, that template is applied (Jinja2,
``add_generation_prompt=True``), exactly what the model saw in training.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from specgauge.errors import UserError, require_extra
from specgauge.suites.model import ChatMessage, SuiteRequest

ROLE_LABELS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def render_plain(messages: tuple[ChatMessage, ...]) -> str:
    """Plain-text rendering: ``Role: content`` blocks separated by blank lines, then ``Assistant:``."""
    blocks = [f"{ROLE_LABELS[m.role]}: {m.content}" for m in messages]
    blocks.append("Assistant:")
    return "\n\n".join(blocks)


@lru_cache(maxsize=8)
def chat_template(tokenizer_path: str):
    """The compiled chat template next to ``tokenizer_path`` and its special tokens, or None."""
    config_path = Path(tokenizer_path).with_name("tokenizer_config.json")
    if not config_path.exists():
        return None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read {config_path}: {exc}") from None
    source = config.get("chat_template")
    if isinstance(source, list):  # named templates: take "default"
        source = next((t.get("template") for t in source if t.get("name") == "default"), None)
    if not source:
        return None
    require_extra("engine", "jinja2")
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    env.globals["raise_exception"] = raise_exception

    def token_text(key: str) -> str:
        token = config.get(key)
        return token.get("content", "") if isinstance(token, dict) else (token or "")

    try:
        return env.from_string(source), token_text("bos_token"), token_text("eos_token")
    except jinja2.TemplateError as exc:
        raise UserError(f"bad chat_template in {config_path}: {exc}") from None


def prompt_text(request: SuiteRequest, tokenizer_path: str | None = None) -> str:
    """The raw prompt for ``request``: its ``prompt``, or its messages rendered (see module doc)."""
    if request.prompt is not None:
        return request.prompt
    assert request.messages is not None
    template = chat_template(tokenizer_path) if tokenizer_path else None
    if template is None:
        return render_plain(request.messages)
    compiled, bos, eos = template
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    return compiled.render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)
