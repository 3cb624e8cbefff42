"""Sampler (greedy, temperature, top-k, top-p, seeds) and text handling (chat template,
incremental detokenization, stop strings)."""

import torch

from specgauge.engine.core.sampling import greedy_tokens, make_generator, sample
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.models.tokenizer import EngineTokenizer, TextState


def draws(logits, params, n=300, seed=0):
    gen = make_generator(SamplingParams(**params, seed=seed), "cpu")
    return [sample(logits, [SamplingParams(**params)], [gen])[0] for _ in range(n)]


def test_greedy_rows_take_the_argmax_beside_sampled_rows():
    logits = torch.tensor([[0.1, 3.0, 0.2], [5.0, 0.0, 0.0]])
    params = [SamplingParams(temperature=0.0), SamplingParams(temperature=1.0, top_k=1)]
    assert sample(logits, params, [None, None]) == [1, 0]


def test_greedy_tokens_take_the_first_index_on_ties_as_argmax_does():
    torch.manual_seed(0)
    kept = torch.get_num_threads()
    for dtype in (torch.bfloat16, torch.float32):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            ties = torch.randint(0, 3, (64, 4096)).to(dtype)  # every row ties at its maximum many times
            assert torch.equal(greedy_tokens(ties), ties.argmax(-1))
            one = torch.zeros(2, 50, dtype=dtype)
            one[0, [7, 9, 40]] = 1.0
            assert greedy_tokens(one).tolist() == [7, 0]
    torch.set_num_threads(kept)


def test_top_k_and_top_p_restrict_the_support():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert set(draws(logits, {"temperature": 1.0, "top_k": 2})) == {0, 1}
    assert set(draws(logits, {"temperature": 1.0, "top_p": 0.75})) == {0, 1}  # 0.5 < 0.75, 0.8 ≥ 0.75
    assert set(draws(logits, {"temperature": 1.0, "top_p": 0.4})) == {0}
    assert set(draws(logits, {"temperature": 1.0})) == {0, 1, 2, 3}


def test_temperature_sharpens_and_frequencies_follow_the_distribution():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]]))
    plain = draws(logits, {"temperature": 1.0}, n=2000)
    assert abs(plain.count(0) / 2000 - 0.7) < 0.05
    cold = draws(logits, {"temperature": 0.3}, n=500)
    assert cold.count(0) / 500 > 0.9


def test_same_seed_same_tokens_different_seed_differs():
    logits = torch.zeros(1, 50)
    assert draws(logits, {"temperature": 1.0}, n=40, seed=7) == draws(logits, {"temperature": 1.0}, n=40, seed=7)
    assert draws(logits, {"temperature": 1.0}, n=40, seed=7) != draws(logits, {"temperature": 1.0}, n=40, seed=8)


def test_chat_template_renders_the_target_format(tiny_model_dir):
    tok = EngineTokenizer(tiny_model_dir, eos_token_ids=[1])
    text = tok.apply_chat_template([{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}])
    assert text == "<|begin_of_text|><|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n"
    assert tok.eos_token_ids == {1, tok.tokenizer.token_to_id("<|end|>")}
    ids = tok.encode(text)
    assert ids[0] == tok.tokenizer.token_to_id("<|begin_of_text|>")


def stream_text(tok, ids, stop=()):
    state = TextState(tok, stop)
    pieces = [state.push(t) for t in ids]
    if state.stopped_by is None:
        pieces.append(state.flush())
    return pieces, state


def test_incremental_detokenization_never_splits_a_multibyte_character(tiny_model_dir):
    tok = EngineTokenizer(tiny_model_dir)
    text = "na\u00efve \u65e5\u672c\u8a9e \u20ac5 \U0001f600 ok"
    # token by token at the byte level: each multi-byte character spans several tokens
    ids = [tok.tokenizer.token_to_id(piece) for piece in tok.tokenizer.encode(text).tokens]
    assert len(ids) > len(text) - 6  # the rare characters are split into byte tokens
    pieces, _ = stream_text(tok, ids)
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_stop_strings_cut_the_text_and_are_never_sent(tiny_model_dir):
    tok = EngineTokenizer(tiny_model_dir)
    ids = tok.encode("return a + b\n\nclass Stack:")
    pieces, state = stream_text(tok, ids, stop=("\n\nclass", "zzz"))
    assert "".join(pieces) == "return a + b"
    assert state.stopped_by == "\n\nclass"
    assert all("\n\n" not in p for p in pieces)
    pieces, state = stream_text(tok, ids, stop=("Stack", "+"))
    assert "".join(pieces) == "return a " and state.stopped_by == "+"  # the earliest match wins


def test_template_raise_exception_surfaces_as_an_error(tiny_model_dir, tmp_path):
    import json
    import shutil

    import pytest
    from jinja2.exceptions import TemplateError

    shutil.copy(tiny_model_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    config = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = ("{% for m in messages %}{% if m['role'] == 'tool' %}"
                               "{{ raise_exception('tool turns are not supported') }}{% endif %}"
                               "{{ m['content'] }}{% endfor %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok = EngineTokenizer(tmp_path)
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}]) == "hi"
    with pytest.raises(TemplateError, match="tool turns"):
        tok.apply_chat_template([{"role": "tool", "content": "{}"}])


def test_sampling_failures_name_the_rows_at_fault_or_fail_the_batch(monkeypatch):
    import pytest
    import torch

    from specgauge.engine.core import sampling
    from specgauge.engine.core.sampling import SamplingError, SamplingParams, make_generator, sample

    params = [SamplingParams(temperature=1.0, seed=i) for i in range(3)]
    logits = torch.randn(3, 50)
    real = sampling._sorted_probs

    def fails_for_seed_1(rows, row_params):
        if any(p.seed == 1 for p in row_params):
            raise RuntimeError("bad row")
        return real(rows, row_params)

    monkeypatch.setattr(sampling, "_sorted_probs", fails_for_seed_1)
    with pytest.raises(SamplingError) as info:
        sample(logits, params, [make_generator(p, "cpu") for p in params])
    assert info.value.rows == [1] and "bad row" in str(info.value)

    def fails_for_batches(rows, row_params):
        if len(row_params) > 1:
            raise RuntimeError("batch only")
        return real(rows, row_params)

    monkeypatch.setattr(sampling, "_sorted_probs", fails_for_batches)
    with pytest.raises(RuntimeError, match="batch only") as info:  # no request to blame: not a SamplingError
        sample(logits, params, [make_generator(p, "cpu") for p in params])
    assert not isinstance(info.value, SamplingError)
