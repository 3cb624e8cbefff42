"""A conversation tokenized with a model's own chat template (ChatML here): the mask covers exactly
each assistant answer and the token that closes it, and the prompt before an answer is what the
engine encodes for the same chat request."""

import pytest

from specgauge.train.chat import tokenize_with_template

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.fixture(scope="module")
def chatml(tmp_path_factory):
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from specgauge.engine.models.tokenizer import EngineTokenizer

    folder = tmp_path_factory.mktemp("chatml")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["def add(a, b):\n    return a + b\n", "The capital of France is Paris."] * 20, trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML, "eos_token": "<|im_end|>"}))
    return EngineTokenizer(folder)


MESSAGES = [{"role": "user", "content": "Write add"}, {"role": "assistant", "content": "def add(a, b):\n    return a + b"},
            {"role": "tool", "content": "ok"}, {"role": "assistant", "content": "Paris."}]


def test_the_mask_covers_each_answer_and_its_closing_token(chatml):
    ids, mask = tokenize_with_template(chatml.tokenizer, chatml.apply_chat_template, "<|im_end|>", MESSAGES)
    assert len(ids) == len(mask)
    masked = chatml.tokenizer.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=False)
    assert masked == "def add(a, b):\n    return a + b<|im_end|>Paris.<|im_end|>"
    assert chatml.tokenizer.decode(ids, skip_special_tokens=False) == chatml.apply_chat_template(MESSAGES, False)


def test_the_prompt_before_an_answer_is_the_served_prompt(chatml):
    ids, mask = tokenize_with_template(chatml.tokenizer, chatml.apply_chat_template, "<|im_end|>", MESSAGES)
    first = mask.index(1)
    assert ids[:first] == chatml.encode(chatml.apply_chat_template(MESSAGES[:1], add_generation_prompt=True))


def test_a_template_that_rewrites_earlier_turns_is_refused(chatml):
    def rewriting(messages, add_generation_prompt):
        return f"{len(messages)}|" + chatml.apply_chat_template(messages, add_generation_prompt)

    with pytest.raises(ValueError, match="prefix"):
        tokenize_with_template(chatml.tokenizer, rewriting, "<|im_end|>", MESSAGES)
