"""Tokenizer, chat template and incremental detokenization with stop strings.

The chat template is the jinja ``chat_template`` of ``tokenizer_config.json``, rendered the way
``transformers`` renders it (``messages``, ``add_generation_prompt``, ``bos_token``,
``eos_token``, a ``raise_exception`` helper), so a real Hugging Face checkpoint's template works.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from specgauge.errors import UserError


def _token_text(value) -> str | None:
    if isinstance(value, dict):  # AddedToken serialized by transformers
        return value.get("content")
    return value


class EngineTokenizer:
    """A ``tokenizers`` tokenizer plus the special tokens and chat template of a model directory."""

    def __init__(self, model_dir: str | Path, eos_token_ids: list[int] | None = None) -> None:
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise UserError(f"no tokenizer.json in {model_dir}")
        self.tokenizer = Tokenizer.from_file(str(path))
        config_path = model_dir / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        self.chat_template: str | None = config.get("chat_template")
        if isinstance(self.chat_template, list):  # named templates: take the default one
            named = {t.get("name"): t.get("template") for t in self.chat_template}
            self.chat_template = named.get("default") or next(iter(named.values()), None)
        ids = set(eos_token_ids or [])
        if self.eos_token is not None and self.tokenizer.token_to_id(self.eos_token) is not None:
            ids.add(self.tokenizer.token_to_id(self.eos_token))
        self.eos_token_ids: frozenset[int] = frozenset(ids)
        self._template = None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens written in the text are recognized, none are added."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """Render ``messages`` with the model's jinja chat template."""
        if not self.chat_template:
            raise UserError("the model's tokenizer_config.json has no chat_template")
        if self._template is None:
            from jinja2.exceptions import TemplateError
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            def raise_exception(message: str):
                raise TemplateError(message)

            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            env.globals["raise_exception"] = raise_exception
            self._template = env.from_string(self.chat_template)
        return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                     bos_token=self.bos_token or "", eos_token=self.eos_token or "")


@dataclass
class TextState:
    """Detokenizes one request's output incrementally and applies its stop strings.

    ``push`` returns the text that may be sent now. A multi-byte character split across tokens
    is held back until it is complete (the decoder shows it as U+FFFD meanwhile), and so are the
    last ``len(longest stop) - 1`` characters, which could still begin a stop string; the stop
    string itself is never returned (OpenAI semantics).
    """

    tokenizer: EngineTokenizer
    stop: tuple[str, ...] = ()
    context_ids: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0
    stopped_by: str | None = None

    def __post_init__(self) -> None:
        self._ids = list(self.context_ids[-4:])  # prompt tail: decoders that strip a leading space
        self._prefix_offset = 0
        self._read_offset = len(self._ids)
        self._hold = max((len(s) for s in self.stop), default=1) - 1

    def push(self, token_id: int) -> str:
        """Add one generated token; returns the newly sendable text (possibly empty)."""
        if self.stopped_by is not None:
            return ""  # nothing after a stop string is ever sent
        self._ids.append(token_id)
        prefix = self.tokenizer.decode(self._ids[self._prefix_offset:self._read_offset])
        full = self.tokenizer.decode(self._ids[self._prefix_offset:])
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            searched_from = max(0, len(self.text) - self._hold)
            self.text += full[len(prefix):]
            self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
            for stop in self.stop:
                at = self.text.find(stop, searched_from)
                if at != -1:  # text was cut at any earlier match, so a later find is earlier still
                    self.text = self.text[:at]
                    self.stopped_by = stop
            if self.stopped_by is not None:
                return self.flush()
        sendable = len(self.text) - self._hold
        if sendable <= self.emitted:
            return ""
        delta = self.text[self.emitted:sendable]
        self.emitted = sendable
        return delta

    def flush(self) -> str:
        """The text still held back (call when the request finishes)."""
        delta = self.text[self.emitted:]
        self.emitted = len(self.text)
        return delta
