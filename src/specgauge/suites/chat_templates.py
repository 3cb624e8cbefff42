"""Recognise the chat templates found in tokenized training data and turn their text back into messages.

Three templates are known: the embedded engine's own (``<|user|>\\n...<|end|>\\n``), Llama-3
(``<|start_header_id|>user<|end_header_id|>\\n\\n...<|eot_id|>``) and ChatML
(``<|im_start|>user\\n...<|im_end|>\\n``). Each is described once as data in :data:`TEMPLATES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from specgauge.errors import UserError
from specgauge.suites.model import ChatMessage

# Roles the suite model accepts, and the other names templates use for them.
ROLE_ALIASES = {
    "system": "system", "developer": "system",
    "user": "user", "human": "user",
    "assistant": "assistant", "gpt": "assistant", "model": "assistant", "chatgpt": "assistant", "bard": "assistant",
    "tool": "tool", "ipython": "tool", "function": "tool", "observation": "tool", "tool_response": "tool",
}


def messages_from_dicts(raw: Any, where: str) -> list[ChatMessage]:
    """OpenAI (``role``/``content``) or ShareGPT (``from``/``value``) message dicts → :class:`ChatMessage`;
    role names are mapped with :data:`ROLE_ALIASES`, OpenAI content parts joined. Bad input names ``where``."""
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{where}: messages must be a non-empty list")
    messages = []
    for position, item in enumerate(raw):
        if not isinstance(item, dict):
            raise UserError(f"{where}: message {position} is not an object")
        role_name = item.get("role", item.get("from"))
        role = ROLE_ALIASES.get(str(role_name).lower())
        if role is None:
            raise UserError(f"{where}: message {position} has an unknown role {role_name!r}")
        content = item.get("content", item.get("value"))
        if isinstance(content, list):  # OpenAI content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise UserError(f"{where}: message {position} has no text content")
        messages.append(ChatMessage(role=role, content=content))
    return messages


@dataclass(frozen=True)
class ChatTemplate:
    """One chat template: how a message is framed, and which tokens are only framing."""

    name: str
    message: re.Pattern[str]          # groups: role, content
    assistant_header: str             # the generation prompt that opens an assistant turn
    end_of_message: str               # what closes a message
    framing: tuple[str, ...]          # tokens that may surround messages (BOS, EOS, padding)

    def parse(self, text: str) -> list[ChatMessage] | None:
        """All messages of ``text``, or None when ``text`` is not entirely in this template.

        A trailing generation prompt (an assistant header with nothing after it) is dropped.
        """
        rest = _strip_framing(text, self.framing).rstrip()
        header = self.assistant_header.rstrip()
        if rest.endswith(header):
            rest = rest[: -len(header)]
        messages: list[ChatMessage] = []
        position = 0
        for match in self.message.finditer(rest):
            if rest[position:match.start()].strip():
                return None
            role = ROLE_ALIASES.get(match.group("role").strip().lower())
            if role is None:
                return None
            messages.append(ChatMessage(role=role, content=match.group("content")))
            position = match.end()
        if rest[position:].strip() or not messages:
            return None
        return messages

    def split_last_assistant(self, text: str) -> tuple[str, str] | None:
        """Split ``text`` at its last assistant header: (prompt including the header, response).

        The response ends at the first end-of-message after the header (or the end of the text).
        None when the text has no assistant header.
        """
        cut = text.rfind(self.assistant_header)
        if cut < 0:
            return None
        prompt = text[: cut + len(self.assistant_header)]
        response = text[cut + len(self.assistant_header):]
        end = response.find(self.end_of_message)
        if end >= 0:
            response = response[:end]
        return prompt, response


def _strip_framing(text: str, framing: tuple[str, ...]) -> str:
    changed = True
    while changed:
        changed = False
        for token in framing:
            if text.startswith(token):
                text, changed = text[len(token):], True
            if text.endswith(token):
                text, changed = text[: -len(token)], True
        stripped = text.strip()
        if stripped != text:
            text, changed = stripped, True
    return text


TEMPLATES: tuple[ChatTemplate, ...] = (
    ChatTemplate(
        name="specgauge",
        message=re.compile(r"<\|(?P<role>system|user|assistant|tool)\|>\n(?P<content>.*?)<\|end\|>\n?", re.S),
        assistant_header="<|assistant|>\n",
        end_of_message="<|end|>",
        framing=("<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"),
    ),
    ChatTemplate(
        name="llama3",
        message=re.compile(
            r"<\|start_header_id\|>(?P<role>[a-z_]+)<\|end_header_id\|>\n\n(?P<content>.*?)<\|eot_id\|>", re.S),
        assistant_header="<|start_header_id|>assistant<|end_header_id|>\n\n",
        end_of_message="<|eot_id|>",
        framing=("<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"),
    ),
    ChatTemplate(
        name="chatml",
        message=re.compile(r"<\|im_start\|>(?P<role>[a-z_]+)\n(?P<content>.*?)<\|im_end\|>\n?", re.S),
        assistant_header="<|im_start|>assistant\n",
        end_of_message="<|im_end|>",
        framing=("<|endoftext|>", "<s>", "</s>"),
    ),
)


def detect_template(text: str) -> ChatTemplate | None:
    """The template whose assistant header or message framing occurs in ``text``, if any."""
    for template in TEMPLATES:
        if template.assistant_header in text or template.end_of_message in text:
            return template
    return None

