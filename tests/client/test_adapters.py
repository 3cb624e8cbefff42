"""Each adapter against the scripted server over real loopback HTTP: timings, counts, acceptance."""

import statistics

import pytest

from specgauge.analysis.definitions import accept_length, icl_ms, itl_ms, ttft_ms
from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.records import TokenCountSource
from specgauge.client.send import send_request
from specgauge.client.session import open_session
from specgauge.suites.model import ChatMessage, SuiteRequest
from specgauge.testing.scripted_server import Script, ScriptedServer

APIS = ["openai-chat", "openai-completions", "sglang"]
CHAT = SuiteRequest(messages=(ChatMessage(role="system", content="Be brief."),
                              ChatMessage(role="user", content="Say hello")), max_tokens=32)
TIMEOUTS = Timeouts(connect_s=2, headers_s=2, read_s=2)


async def send(server: ScriptedServer, api: str, request: SuiteRequest = CHAT, **endpoint_args):
    endpoint = Endpoint(server.url, api=api, **{"model": "m", **endpoint_args})
    async with open_session(TIMEOUTS) as session:
        return await send_request(session, endpoint, request, request_index=3, prompt_index=1,
                                  max_tokens=None, timeouts=TIMEOUTS)


@pytest.mark.parametrize("api", APIS)
async def test_timings_follow_the_schedule_and_the_server_truth(api):
    script = Script(ttft_s=0.08, chunk_delay_s=0.02, num_chunks=10, tokens_per_chunk=2)
    with ScriptedServer(script) as server:
        record = await send(server, api)
    assert record.ok, record.error_message
    (truth,) = server.truth
    # In-process server: one clock. The client sees the first chunk after the server sent it.
    truth_ttft_ms = (truth.chunk_send_ns[0] - truth.t_recv_ns) / 1e6
    assert 0 <= ttft_ms(record) - truth_ttft_ms < 25
    assert 80 <= ttft_ms(record) < 80 + 60
    # Every chunk is stamped after the server wrote it and within a few ms of it.
    lags_ms = [(c - s) / 1e6 for c, s in zip(record.chunk_times_ns, truth.chunk_send_ns)]
    assert min(lags_ms) >= 0 and statistics.median(lags_ms) < 10
    truth_gaps = [(b - a) / 1e6 for a, b in zip(truth.chunk_send_ns, truth.chunk_send_ns[1:])]
    assert abs(statistics.median(icl_ms(record)) - statistics.median(truth_gaps)) < 5
    assert statistics.median(itl_ms(record)) == pytest.approx(statistics.median(icl_ms(record)) / 2)
    assert len(record.chunk_times_ns) == 10 and record.chunk_tokens == [2] * 10
    assert record.output_tokens == 20 and record.output_text == "tok " * 20
    assert record.finish_reason == "length"
    assert record.t_send_ns < record.t_headers_ns <= record.chunk_times_ns[0] <= record.t_end_ns
    assert record.request_index == 3 and record.prompt_index == 1 and record.api == api
    assert record.server_request_id == truth.request_id
    # t_send is the write time (trace): the server read the request after it, within a few ms.
    assert 0 <= truth.t_recv_ns - record.t_send_ns < 20_000_000


@pytest.mark.parametrize("api", APIS)
async def test_request_body_headers_and_key(api, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    with ScriptedServer(Script(num_chunks=2)) as server:
        await send(server, api, headers=(("X-Team", "perf"),))
        await send(server, api, api_key="explicit")
    body = server.requests_seen[0]
    assert [h["Authorization"] for h in server.headers_seen] == ["Bearer from-env", "Bearer explicit"]
    assert server.headers_seen[0]["X-Team"] == "perf"
    if api == "sglang":
        assert body["stream"] is True
        assert body["sampling_params"] == {"max_new_tokens": 32, "temperature": 0.0}
        assert body["text"] == "System: Be brief.\n\nUser: Say hello\n\nAssistant:"
    else:
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert body["model"] == "m" and body["max_tokens"] == 32
        if api == "openai-chat":
            assert body["messages"][1] == {"role": "user", "content": "Say hello"}
        else:
            assert body["prompt"].endswith("User: Say hello\n\nAssistant:")


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions"])
async def test_openai_per_chunk_usage_gives_server_counts(api):
    with ScriptedServer(Script(num_chunks=4, tokens_per_chunk=(1, 3, 2))) as server:
        spread = await send(server, api)
        server.script = Script(num_chunks=4, tokens_per_chunk=(1, 3, 2), usage_per_chunk=True)
        counted = await send(server, api)
    assert spread.token_count_source is TokenCountSource.SPREAD
    assert spread.chunk_tokens == [2, 2, 2, 1] and spread.output_tokens == 7
    assert counted.token_count_source is TokenCountSource.SERVER
    assert counted.chunk_tokens == [1, 3, 2, 1] and counted.output_tokens == 7


async def test_chat_tool_call_arguments_are_content():
    with ScriptedServer(Script(num_chunks=3, token_text='{"a": 1} ', tool_calls=True)) as server:
        record = await send(server, "openai-chat")
    assert record.ok and record.output_text == '{"a": 1} ' * 3 and len(record.chunk_times_ns) == 3


async def test_openai_spec_accept_length_extra_field():
    script = Script(num_chunks=3, openai_extra={"spec_accept_length": 2.5, "spec_verify_ct": 4})
    with ScriptedServer(script) as server:
        record = await send(server, "openai-chat")
    assert record.spec_accept_length == 2.5 and record.spec_verify_ct == 4
    # one definition: (completion_tokens - 1) / verify steps, whatever figure the server computed
    assert accept_length(record) == pytest.approx((record.output_tokens - 1) / 4)


async def test_vllm_per_request_spec_metrics():
    """vLLM --per-request-spec-decode-metrics: metrics.speculative_decoding on the last chunk
    (vllm/entrypoints/generate/base/protocol.py); acceptance is 1 + accepted / steps."""
    spec = {"mean_acceptance_length": 2.75, "draft_acceptance_rate": 0.583, "acceptance_histogram": [1, 0, 2, 1],
            "num_spec_steps": 4, "num_accepted_draft_tokens": 7, "num_draft_tokens": 12, "num_spec_tokens": 3}
    script = Script(num_chunks=3, openai_extra={"metrics": {"time_to_first_token_ms": 12.0,
                                                            "speculative_decoding": spec}})
    with ScriptedServer(script) as server:
        record = await send(server, "openai-chat")
    assert record.ok and record.spec_verify_ct == 4
    assert (record.spec_correct_drafts, record.spec_proposed_drafts) == (7, 12)
    assert record.spec_accept_histogram == [1, 0, 2, 1] and record.spec_accept_rate == 0.583
    assert accept_length(record) == pytest.approx(1 + 7 / 4) == spec["mean_acceptance_length"]


@pytest.mark.parametrize("mode", ["cumulative", "incremental"])
async def test_sglang_cumulative_and_incremental_text(mode):
    script = Script(num_chunks=41, tokens_per_chunk=(1, 2), token_text="ab ", sglang_text=mode)
    with ScriptedServer(script) as server:
        record = await send(server, "sglang")
    assert record.ok, record.error_message
    assert record.output_text == "ab " * 61
    assert record.chunk_tokens == [1, 2] * 20 + [1] and record.token_count_source is TokenCountSource.SERVER


async def test_sglang_incremental_text_that_looks_cumulative_at_first():
    # Incremental chunks "a", "ab", "x": the second extends the first, so cumulative is guessed;
    # the third contradicts it and the text is rebuilt from the raw events.
    script = Script(num_chunks=3, tokens_per_chunk=(1, 2, 1), token_text="a", sglang_text="incremental")
    with ScriptedServer(script) as server:
        record = await send(server, "sglang")
    assert record.output_text == "a" + "aa" + "a"


# One definition (analysis/definitions.py): 1 + correct / verify_ct from the counts, else
# (completion_tokens - 1) / verify_ct — SGLang's completion_tokens / spec_verify_ct less the
# prefill-made first token. 12 completion tokens here.
SGLANG_VARIANTS = [
    ({"spec_verify_ct": 5}, 11 / 5, {}),
    ({"spec_verify_ct": 5, "spec_accept_length": 2.25, "spec_accept_rate": 0.4}, 11 / 5,
     {"spec_accept_rate": 0.4, "spec_accept_length": 2.25}),
    # SGLang's correct-draft count does not follow the output (a real SGLang counted drafts accepted
    # past max_new_tokens): acceptance is (12 - 1) / verify steps whatever it says; the proposed count is kept.
    ({"spec_verify_ct": 4, "spec_accept_token_num": 9, "spec_draft_token_num": 12}, 11 / 4,
     {"spec_correct_drafts": None, "spec_proposed_drafts": 12}),
    ({"spec_verify_ct": 4, "spec_accepted_drafts": 7, "spec_proposed_drafts": 9}, 11 / 4,
     {"spec_correct_drafts": None, "spec_proposed_drafts": 9}),
    ({"spec_verify_ct": 6, "spec_num_correct_drafts": 6, "spec_num_proposed_drafts": 18}, 11 / 6,
     {"spec_correct_drafts": None, "spec_proposed_drafts": 18}),
    ({"spec_verify_ct": 4, "spec_accept_histogram": [1, 0, 3]}, 11 / 4, {"spec_accept_histogram": [1, 0, 3]}),
    ({"spec_verify_ct": 4, "spec_correct_drafts_histogram": [0, 4]}, 11 / 4, {"spec_accept_histogram": [0, 4]}),
]


@pytest.mark.parametrize("meta, expected_length, fields", SGLANG_VARIANTS)
async def test_sglang_acceptance_from_every_meta_info_name(meta, expected_length, fields):
    script = Script(num_chunks=4, tokens_per_chunk=3, sglang_meta=meta)
    with ScriptedServer(script) as server:
        record = await send(server, "sglang")
    assert record.ok and record.output_tokens == 12
    assert record.spec_verify_ct == meta["spec_verify_ct"]
    assert accept_length(record) == pytest.approx(expected_length)
    for name, value in fields.items():
        assert getattr(record, name) == value


async def test_local_tokenizer_counts_tokens_per_chunk(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "tok": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    with ScriptedServer(Script(num_chunks=4, tokens_per_chunk=(3, 1))) as server:
        record = await send(server, "openai-completions", tokenizer_path=str(path))
    assert record.token_count_source is TokenCountSource.TOKENIZER
    assert record.chunk_tokens == [3, 1, 3, 1] and record.output_tokens == 8


WIRE_VARIANTS = {
    "crlf": Script(num_chunks=6, framing="crlf"),
    "lone_cr": Script(num_chunks=6, framing="cr"),
    "single_newline": Script(num_chunks=6, framing="single"),
    "comments": Script(num_chunks=6, comments=True),
    "gzip": Script(num_chunks=6, gzip=True, chunk_delay_s=0.002),
    "split_utf8": Script(num_chunks=6, token_text="é ", split_utf8=True),
    "batched_writes": Script(num_chunks=6, events_per_write=4),
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("variant", sorted(WIRE_VARIANTS))
async def test_wire_variants_parse_the_same(api, variant):
    script = WIRE_VARIANTS[variant]
    with ScriptedServer(script) as server:
        record = await send(server, api)
    assert record.ok, record.error_message
    assert record.output_text == script.token_text * 6
    assert len(record.chunk_times_ns) == 6 and record.output_tokens == 6


async def test_one_megabyte_event():
    with ScriptedServer(Script(num_chunks=3, big_event_bytes=1 << 20)) as server:
        record = await send(server, "openai-chat")
    assert record.ok, record.error_message
    assert len(record.output_text) == (1 << 20) + 2 * len("tok ")


@pytest.mark.parametrize("api", APIS)
def test_ignore_eos_is_sent_where_each_engine_reads_it(api):
    from specgauge.client.adapters import get_adapter

    request = SuiteRequest(prompt="hi", max_tokens=8)
    plain = get_adapter(api).build_body(request, model="m", max_tokens=8)
    forced = get_adapter(api).build_body(request, model="m", max_tokens=8, ignore_eos=True)
    assert "ignore_eos" not in plain and "ignore_eos" not in plain.get("sampling_params", {})
    if api == "sglang":   # SGLang /generate: sampling_params.ignore_eos
        assert forced["sampling_params"]["ignore_eos"] is True
    else:                 # OpenAI APIs: vLLM's and SGLang's top-level extra
        assert forced["ignore_eos"] is True


@pytest.mark.parametrize("api", APIS)
def test_sampling_fields_are_sent_where_each_engine_reads_them(api):
    from specgauge.client.adapters import get_adapter
    from specgauge.client.sampling import Sampling

    request = SuiteRequest(prompt="hi", max_tokens=8)
    greedy = get_adapter(api).build_body(request, model="m", max_tokens=8)
    sampled = get_adapter(api).build_body(request, model="m", max_tokens=8,
                                          sampling=Sampling(temperature=0.7, top_p=0.9, top_k=40, seed=123))
    if api == "sglang":   # /generate: sampling_params, the seed as sampling_seed
        assert greedy["sampling_params"] == {"max_new_tokens": 8, "temperature": 0.0}
        assert sampled["sampling_params"] == {"max_new_tokens": 8, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
                                              "sampling_seed": 123}
    else:                 # OpenAI routes: top-level temperature, top_p, top_k (vLLM / SGLang extra), seed
        assert greedy["temperature"] == 0.0 and not {"top_p", "top_k", "seed"} & set(greedy)
        assert (sampled["temperature"], sampled["top_p"], sampled["top_k"], sampled["seed"]) == (0.7, 0.9, 40, 123)


def test_each_request_of_a_sampled_point_gets_its_own_repeatable_seed():
    from specgauge.load.plan import PointSpec

    point = PointSpec(mode="closed", concurrency=1, num_requests=4, temperature=0.8, sampling_seed=7)
    seeds = [point.sampling(i).seed for i in range(-2, 4)]   # warm-ups have negative indices
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2 ** 63 for s in seeds)
    assert seeds == [PointSpec(mode="closed", concurrency=1, num_requests=4, temperature=0.8,
                               sampling_seed=7).sampling(i).seed for i in range(-2, 4)]
    other = PointSpec(mode="closed", concurrency=1, num_requests=4, temperature=0.8, sampling_seed=8)
    assert not set(seeds) & {other.sampling(i).seed for i in range(-2, 4)}
    greedy = PointSpec(mode="closed", concurrency=1, num_requests=4, sampling_seed=7)
    assert greedy.sampling(0).seed is None   # greedy: no seed sent
