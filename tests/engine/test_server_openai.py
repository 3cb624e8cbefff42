"""The OpenAI Python SDK, as a real client over loopback HTTP, against the running server."""

import openai
import pytest


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=30) as c:
        yield c


def test_models_lists_the_served_model(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["specgauge-target"]


def test_completion_non_streaming_and_streaming_agree(client):
    args = dict(model="specgauge-target", prompt="def add(a, b):", max_tokens=12, temperature=0,
                extra_body={"ignore_eos": True})
    full = client.completions.create(**args)
    assert full.choices[0].finish_reason == "length"
    assert full.usage.completion_tokens == 12 and full.usage.prompt_tokens > 0
    assert full.usage.total_tokens == full.usage.prompt_tokens + 12
    chunks = list(client.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == full.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["length"]
    counts = [c.model_extra["completion_tokens"] for c in chunks if c.choices]
    assert counts == sorted(counts) and counts[-1] == 12  # the documented cumulative extra field


def test_chat_non_streaming_and_streaming_agree(client):
    args = dict(model="specgauge-target", messages=[{"role": "system", "content": "Be brief."},
                                                    {"role": "user", "content": "Hello there"}],
                max_tokens=10, temperature=0, seed=3, extra_body={"ignore_eos": True})
    full = client.chat.completions.create(**args)
    assert full.object == "chat.completion"
    assert full.choices[0].message.role == "assistant" and full.usage.completion_tokens == 10
    stream = client.chat.completions.create(**args, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == full.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "length"


def test_sampling_with_a_seed_is_reproducible(client):
    args = dict(model="specgauge-target", prompt="The quick", max_tokens=16, temperature=1.0, top_p=0.9,
                seed=1234, extra_body={"ignore_eos": True, "top_k": 50})
    first = client.completions.create(**args).choices[0].text
    assert client.completions.create(**args).choices[0].text == first


def test_stop_string_ends_with_stop_and_is_not_returned(client):
    base = dict(model="specgauge-target", prompt="class Stack:", max_tokens=30, temperature=0,
                extra_body={"ignore_eos": True})
    text = client.completions.create(**base).choices[0].text
    assert len(text) > 4
    stop = text[2:4]
    cut = client.completions.create(**base, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == text[:text.index(stop)]
    streamed = "".join(c.choices[0].text for c in client.completions.create(**base, stop=stop, stream=True))
    assert streamed == cut.choices[0].text


def test_sdk_sees_openai_errors(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="specgauge-target", prompt="x", max_tokens=5, temperature=-1)
    assert info.value.body["param"] == "temperature"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-9", prompt="x", max_tokens=5)


def test_models_retrieve_finds_the_served_model_and_404s_others(client):
    assert client.models.retrieve("specgauge-target").id == "specgauge-target"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_the_developer_role_is_read_as_system(client):
    def reply(role):
        return client.chat.completions.create(
            model="specgauge-target", messages=[{"role": role, "content": "Answer in one word."},
                                                {"role": "user", "content": "hi"}],
            max_tokens=8, temperature=0).choices[0].message.content
    assert reply("developer") == reply("system")


CHAT_UNSUPPORTED = [
    ("tools", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}),
    ("tools", {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required"}),
    ("tool_choice", {"tool_choice": "required"}),
    ("response_format", {"response_format": {"type": "json_object"}}),
    ("presence_penalty", {"presence_penalty": 0.5}),
    ("frequency_penalty", {"frequency_penalty": -1}),
    ("top_logprobs", {"top_logprobs": 3}),
    ("logprobs", {"logprobs": True}),
    ("logit_bias", {"logit_bias": {"5": 10}}),
    ("n", {"n": 2}),
    ("temperature", {"temperature": 3}),
]


@pytest.mark.parametrize("field,extra", CHAT_UNSUPPORTED, ids=[f for f, _ in CHAT_UNSUPPORTED])
def test_chat_fields_the_engine_does_not_honour_are_refused_naming_them(client, field, extra):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="specgauge-target", messages=[{"role": "user", "content": "hi"}],
                                       max_tokens=2, **extra)
    assert info.value.status_code == 400 and info.value.body["param"] == field
    assert field in info.value.body["message"]


COMPLETION_UNSUPPORTED = [
    ("echo", {"echo": True}),
    ("suffix", {"suffix": "end"}),
    ("best_of", {"best_of": 3}),
    ("presence_penalty", {"presence_penalty": 1.0}),
    ("logprobs", {"logprobs": 2}),
    ("temperature", {"temperature": 2.5}),
    ("not_a_field", {"extra_body": {"not_a_field": 1}}),
    ("repetition_penalty", {"extra_body": {"repetition_penalty": 1.2}}),
]


@pytest.mark.parametrize("field,extra", COMPLETION_UNSUPPORTED, ids=[f for f, _ in COMPLETION_UNSUPPORTED])
def test_completion_fields_the_engine_does_not_honour_are_refused_naming_them(client, field, extra):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="specgauge-target", prompt="hi", max_tokens=2, **extra)
    assert info.value.body["param"] == field and field in info.value.body["message"]


def test_fields_at_their_off_value_are_accepted(client):
    chat = client.chat.completions.create(
        model="specgauge-target", messages=[{"role": "user", "content": "hi"}], max_tokens=2, n=1,
        presence_penalty=0, frequency_penalty=0.0, logprobs=False, top_logprobs=0, tool_choice="none",
        response_format={"type": "text"}, user="u1", metadata={"k": "v"}, store=False, seed=7)
    assert chat.usage.completion_tokens >= 1
    done = client.completions.create(model="specgauge-target", prompt="hi", max_tokens=2, n=1, best_of=1,
                                     echo=False, presence_penalty=0, logprobs=0, suffix="")
    assert done.usage.completion_tokens >= 1


def test_an_sdk_reply_appended_to_the_conversation_is_accepted(client):
    messages = [{"role": "user", "content": "hi"}]
    reply = client.chat.completions.create(model="specgauge-target", messages=messages, max_tokens=4)
    messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "again"}]
    again = client.chat.completions.create(model="specgauge-target", messages=messages, max_tokens=4)
    assert again.usage.completion_tokens >= 1
