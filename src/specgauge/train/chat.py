"""The fixed chat format of the embedded model, and conversation → (input_ids, loss_mask).

Rendered text of a conversation::

    <|begin_of_text|><|user|>\\n{content}<|end|>\\n<|assistant|>\\n{content}<|end|>\\n

The jinja ``CHAT_TEMPLATE`` (written into ``tokenizer_config.json``) renders exactly this, and
``<|assistant|>\\n`` after the last message with ``add_generation_prompt``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from tokenizers import Tokenizer

BOS = "<|begin_of_text|>"
END_OF_TEXT = "<|end_of_text|>"
END = "<|end|>"
PAD = "<|pad|>"
ROLES = ("system", "user", "assistant", "tool")
SPECIAL_TOKENS = [BOS, END_OF_TEXT, "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", END, PAD]

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def role_token(role: str) -> str:
    """The special token that opens a turn of ``role``."""
    if role not in ROLES:
        raise ValueError(f"unknown chat role {role!r}; expected one of {', '.join(ROLES)}")
    return f"<|{role}|>"


def render(messages: Iterable[dict], add_generation_prompt: bool = False) -> str:
    """The conversation as text, exactly as ``CHAT_TEMPLATE`` renders it."""
    parts = [BOS]
    for message in messages:
        parts.append(f"{role_token(message['role'])}\n{message['content']}{END}\n")
    if add_generation_prompt:
        parts.append(f"{role_token('assistant')}\n")
    return "".join(parts)


def tokenize_conversation(tokenizer: "Tokenizer", messages: list[dict]) -> tuple[list[int], list[int]]:
    """Token ids of the rendered conversation and a loss mask that is 1 exactly on the tokens of
    every assistant turn's content and its closing ``<|end|>``.

    Each turn is encoded as ``role token``, ``"\\n"``, ``content``, ``<|end|>``, ``"\\n"`` — the
    content on its own, so an assistant turn starts right after the ``"\\n"`` token that the
    generation prompt ``<|assistant|>\\n`` ends with, as it does when the engine serves it.
    Decoding ``input_ids`` gives back ``render(messages)`` byte for byte.
    """
    special = {tok: tokenizer.token_to_id(tok) for tok in SPECIAL_TOKENS}
    newline = tokenizer.encode("\n", add_special_tokens=False).ids
    contents = tokenizer.encode_batch([m["content"] for m in messages], add_special_tokens=False)
    ids: list[int] = [special[BOS]]
    mask: list[int] = [0]
    for message, encoded in zip(messages, contents):
        is_response = 1 if message["role"] == "assistant" else 0
        header = [special[role_token(message["role"])], *newline]
        ids += header
        mask += [0] * len(header)
        body = [*encoded.ids, special[END]]
        ids += body
        mask += [is_response] * len(body)
        ids += newline
        mask += [0] * len(newline)
    return ids, mask


def uses_own_format(tokenizer: "Tokenizer") -> bool:
    """Whether ``tokenizer`` has this project's chat tokens (else its model's own template is used)."""
    return all(tokenizer.token_to_id(tok) is not None for tok in SPECIAL_TOKENS)



def tokenize_with_template(tokenizer: "Tokenizer", render_chat, eos_token: str,
                           messages: list[dict]) -> tuple[list[int], list[int]]:
    """Token ids of a conversation rendered by a model's own chat template (``render_chat(messages,
    add_generation_prompt)`` → text, e.g. ChatML), and a loss mask that is 1 exactly on every
    assistant turn's content and the ``eos_token`` that closes it (``<|im_end|>``), the tokens a
    served response consists of.

    The whole text is encoded at once, as the engine encodes a rendered chat request; a token is
    masked when its first character lies in an assistant span. A turn's content starts where
    ``render_chat(messages[:i], True)`` (the generation prompt) ends; a template that does not
    render each such prefix as a prefix of the whole is refused (ValueError)."""
    text = render_chat(messages, False)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prefix = render_chat(messages[:i], True)
        answer = message["content"] + eos_token
        if not text.startswith(prefix + answer):
            raise ValueError("the chat template does not render a turn's prompt as a prefix of the whole")
        spans.append((len(prefix), len(prefix) + len(answer)))
    encoding = tokenizer.encode(text, add_special_tokens=False)
    mask = [int(any(start <= first < end for start, end in spans)) for first, _ in encoding.offsets]
    return encoding.ids, mask
