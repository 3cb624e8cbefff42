"""Request bodies of the server's routes (OpenAI and SGLang-native), validated strictly at the edge.

Strict mode: a known field of the wrong type (``"max_tokens": "5"``) is an error naming that
field, not a silent coercion. Unknown fields are ignored, as the OpenAI API does.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class StreamOptions(_Body):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class _OpenAISampling(_Body):
    model: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = -1
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    n: int = Field(default=1, ge=1, le=1)             # one choice per request only
    logprobs: bool | int | None = None                 # not supported: only null/false/0 accepted

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value):
        if value not in (None, False, 0):
            raise ValueError("logprobs are not supported by this server")
        return value
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None


class CompletionRequest(_OpenAISampling):
    prompt: str | list[int]


class TextPart(_Body):
    type: Literal["text"]
    text: str


class ChatMessage(_Body):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class ChatCompletionRequest(_OpenAISampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, gt=0)


class GenerateSamplingParams(_Body):
    max_new_tokens: int = Field(default=128, gt=0)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = -1
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    seed: int | None = Field(default=None, alias="sampling_seed")


class GenerateRequest(_Body):
    text: str | None = None
    input_ids: list[int] | None = None
    sampling_params: GenerateSamplingParams = GenerateSamplingParams()
    stream: bool = False
    rid: str | None = None
