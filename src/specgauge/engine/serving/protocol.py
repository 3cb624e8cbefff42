"""Request bodies of the server's routes (OpenAI and SGLang-native), validated strictly at the edge.

Strict mode: a known field of the wrong type (``"max_tokens": "5"``) is an error naming that
field, not a silent coercion. Every number must be finite (``NaN``/``Infinity`` are not JSON;
``1e400`` overflows to infinity and is refused too).

Every field is either honoured or refused: an unknown field is a 400 naming it (as the OpenAI API
answers "Unrecognized request argument supplied"), and a known field this engine does not
implement (``tools``, ``response_format``, ``presence_penalty`` ...) is accepted only with the
value that means "off" (``presence_penalty: 0``, ``n: 1``, ``best_of: 1`` ...) and refused with a
400 naming it otherwise. Ignoring such a field would silently change the workload being measured.

Ranges (docs/engine.md): ``temperature`` 0 (greedy) or in [``MIN_TEMPERATURE``, 2] on the OpenAI
routes as OpenAI documents, [``MIN_TEMPERATURE``, ``MAX_TEMPERATURE``] on /generate; ``top_p`` in
(0, 1]; ``top_k`` -1 or 0 (no cut) up to ``MAX_TOP_K`` (SGLang's "whole vocabulary", 1 << 30);
``seed`` a signed 64-bit integer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

MIN_TEMPERATURE = 1e-5        # below it (but above 0) logits / T overflow: refused, 0 means greedy
MAX_OPENAI_TEMPERATURE = 2.0  # OpenAI API reference: "between 0 and 2"
MAX_TEMPERATURE = 100.0       # /generate (SGLang has no upper bound; past 100 the distribution is flat anyway)
MAX_TOP_K = 1 << 30           # SGLang's TOP_K_ALL (python/sglang/srt/sampling/sampling_params.py)
SEED_MIN, SEED_MAX = -(1 << 63), (1 << 63) - 1


def _same(value: Any, accepted: Any) -> bool:
    """``value == accepted`` without Python's ``True == 1`` and ``0 == False``."""
    if accepted is None or value is None:
        return value is accepted
    if isinstance(accepted, bool) or isinstance(value, bool):
        return type(value) is type(accepted) and value == accepted
    if isinstance(accepted, (int, float)):
        return isinstance(value, (int, float)) and value == accepted
    return value == accepted


def only(*accepted: Any) -> Any:
    """A field this engine does not implement: accepted only with one of the values that mean
    "off" (its default), refused otherwise with an error naming it."""
    shown = " or ".join("null" if a is None else repr(a).lower() if isinstance(a, bool) else repr(a)
                        for a in accepted)

    def check(value: Any) -> Any:
        if not any(_same(value, a) for a in accepted):
            raise ValueError(f"not supported by this server (only {shown} is accepted)")
        return value

    return Annotated[Any, AfterValidator(check)]


def _temperature(maximum: float):
    def check(value: float) -> float:
        if value != 0.0 and not MIN_TEMPERATURE <= value <= maximum:
            raise ValueError(f"must be 0 (greedy) or between {MIN_TEMPERATURE:g} and {maximum:g}")
        return value

    return Annotated[float, AfterValidator(check)]


Seed = Annotated[int, Field(ge=SEED_MIN, le=SEED_MAX)]
TopK = Annotated[int, Field(ge=-1, le=MAX_TOP_K)]
TopP = Annotated[float, Field(gt=0.0, le=1.0)]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class StreamOptions(_Body):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class _OpenAISampling(_Body):
    """Fields common to /v1/completions and /v1/chat/completions (OpenAI API reference)."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: _temperature(MAX_OPENAI_TEMPERATURE) = 1.0
    top_p: TopP = 1.0
    top_k: TopK = -1                                   # vLLM/SGLang extension
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None            # vLLM extension
    ignore_eos: bool = False                           # vLLM extension
    n: only(None, 1) = 1                               # one choice per request only
    logprobs: only(None, False, 0) = None              # log-probabilities are not returned
    frequency_penalty: only(None, 0) = None
    presence_penalty: only(None, 0) = None
    logit_bias: only(None, {}) = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    # informational: they do not change what is generated
    user: str | None = None
    metadata: dict[str, str] | None = None


class CompletionRequest(_OpenAISampling):
    prompt: str | list[int]
    best_of: only(None, 1) = None
    echo: only(None, False) = None
    suffix: only(None, "") = None


class TextPart(_Body):
    type: Literal["text"]
    text: str


class ChatMessage(_Body):
    # "developer" is OpenAI's newer name for "system" (o1 and later); rendered as "system"
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: only(None) = None
    tool_calls: only(None, []) = None
    tool_call_id: str | None = None                    # links a tool result to its call; not rendered
    # what an SDK's assistant message carries back when a reply is appended to the conversation
    refusal: only(None) = None
    annotations: only(None, []) = None
    audio: only(None) = None
    function_call: only(None) = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""

    @property
    def template_role(self) -> str:
        """The role the chat template sees."""
        return "system" if self.role == "developer" else self.role


class ChatCompletionRequest(_OpenAISampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, gt=0)
    top_logprobs: only(None, 0) = None
    tools: only(None, []) = None
    tool_choice: only(None, "none") = None
    parallel_tool_calls: only(None, True) = None
    functions: only(None, []) = None
    function_call: only(None, "none") = None
    response_format: only(None, {"type": "text"}) = None
    reasoning_effort: only(None) = None
    modalities: only(None, ["text"]) = None
    audio: only(None) = None
    prediction: only(None) = None
    web_search_options: only(None) = None
    verbosity: only(None) = None
    # informational: they do not change what is generated
    store: bool | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None


class GenerateSamplingParams(_Body):
    """SGLang's ``sampling_params`` (python/sglang/srt/sampling/sampling_params.py)."""

    max_new_tokens: int = Field(default=128, gt=0)
    temperature: _temperature(MAX_TEMPERATURE) = 1.0
    top_p: TopP = 1.0
    top_k: TopK = -1
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    seed: Seed | None = Field(default=None, alias="sampling_seed")
    min_p: only(None, 0) = None
    frequency_penalty: only(None, 0) = None
    presence_penalty: only(None, 0) = None
    repetition_penalty: only(None, 1) = None
    min_new_tokens: only(None, 0) = None
    n: only(None, 1) = None
    json_schema: only(None) = None
    regex: only(None) = None
    ebnf: only(None) = None
    structural_tag: only(None) = None
    stop_regex: only(None) = None
    logit_bias: only(None, {}) = None
    custom_params: only(None) = None
    skip_special_tokens: only(None, True) = None
    spaces_between_special_tokens: only(None, True) = None
    no_stop_trim: only(None, False) = None


class GenerateRequest(_Body):
    """SGLang's ``GenerateReqInput`` (python/sglang/srt/managers/io_struct.py), one prompt."""

    text: str | None = None
    input_ids: list[int] | None = None
    sampling_params: GenerateSamplingParams = GenerateSamplingParams()
    stream: bool = False
    rid: str | None = Field(default=None, min_length=1, max_length=256)
    return_logprob: only(None, False) = None
    logprob_start_len: int | None = None               # read only when return_logprob is true
    top_logprobs_num: only(None, 0) = None
    return_text_in_logprobs: bool | None = None        # read only when return_logprob is true
    lora_path: only(None) = None
    custom_logit_processor: only(None) = None
    return_hidden_states: only(None, False) = None

    @field_validator("rid")
    @classmethod
    def _printable_rid(cls, value: str | None) -> str | None:
        if value is not None and not value.isprintable():
            raise ValueError("must be printable text")
        return value
