"""Helpers for the suite tests (and the benchmark): a tiny real tokenizer (BPE trained here on a few KB),
synthetic multi-source training data, and a CLI runner. Named uniquely so it never clashes on sys.path."""

from __future__ import annotations

import json
import random
from pathlib import Path
from cli_testkit import run_cli  # noqa: F401 (the suites' tests import it from here)

SOURCE_COUNTS = {"code_stdlib": 30, "agentic_tools": 20, "prose_docs": 10}
DUPLICATES_PER_SOURCE = 3


SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>",
                  "<|end|>", "<|pad|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                  "<|im_start|>", "<|im_end|>"]

CODE_WORDS = ("def return import class self value index list dict parse error raise yield lambda async await "
              "function variable loop buffer socket thread compile module package test assert").split()
AGENT_WORDS = ("tool call observation status result search read_file write_file run_tests patch repository "
               "action thought plan json arguments success failure directory grep").split()
PROSE_WORDS = ("history empire river mountain economy photosynthesis gravity planet century treaty culture "
               "language species climate revolution trade migration ocean philosophy").split()
SOURCE_WORDS = {"code_stdlib": CODE_WORDS, "agentic_tools": AGENT_WORDS, "prose_docs": PROSE_WORDS}


def corpus_text() -> str:
    """A few KB of text covering every word the synthetic samples use."""
    rng = random.Random(7)
    lines = []
    for words in SOURCE_WORDS.values():
        for _ in range(60):
            lines.append(" ".join(rng.choice(words) for _ in range(12)) + ".")
    lines.append("Please write explain fix the following. Sure, here is the answer: {\"ok\": true} 0123456789")
    return "\n".join(lines)


def train_tiny_tokenizer(path: Path) -> Path:
    """Train a byte-level BPE (vocab ~600) with the chat special tokens and save it as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator([corpus_text()], trainer=trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def conversation(source: str, index: int) -> list[dict]:
    """A deterministic, distinct conversation for sample ``index`` of ``source``."""
    rng = random.Random(f"{source}-{index}")
    words = SOURCE_WORDS[source]
    user = f"Please explain {index}: " + " ".join(rng.choice(words) for _ in range(rng.randint(5, 40)))
    answer = "Sure, " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 30)))
    messages = [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    if source == "agentic_tools":
        messages = [{"role": "system", "content": "You can call tools: " + " ".join(words[:6])},
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": '{"tool": "search", "arguments": {"q": "%d"}}' % index},
                    {"role": "tool", "content": '{"status": "ok", "result": %d}' % (index * 7)},
                    {"role": "assistant", "content": answer}]
    return messages


def tokenize_conversation(tokenizer, messages: list[dict]) -> tuple[list[int], list[int]]:
    """Our chat format, token by token: ids and a loss mask that is 1 on assistant content + <|end|>."""
    def enc(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False).ids

    ids, mask = enc("<|begin_of_text|>"), [0]
    for message in messages:
        header = enc(f"<|{message['role']}|>\n")
        body = enc(message["content"]) + enc("<|end|>")
        trailer = enc("\n")
        ids += header + body + trailer
        is_response = 1 if message["role"] == "assistant" else 0
        mask += [0] * len(header) + [is_response] * len(body) + [0] * len(trailer)
    return ids, mask


def write_token_jsonl_dir(root: Path, tokenizer_path: Path, counts: dict[str, int],
                          duplicates: int = 0, with_mask: bool = True) -> Path:
    """DIR/<source>/shard-00000.jsonl with tokenized samples; ``duplicates`` extra copies of sample 0 per source."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    for source, count in counts.items():
        directory = root / source
        directory.mkdir(parents=True, exist_ok=True)
        with (directory / "shard-00000.jsonl").open("w") as out:
            for index in [*range(count), *([0] * duplicates)]:
                ids, mask = tokenize_conversation(tokenizer, conversation(source, index))
                record = {"input_ids": ids, "loss_mask": mask} if with_mask else {"input_ids": ids}
                out.write(json.dumps(record) + "\n")
        (directory / "meta.json").write_text(json.dumps({"source": source, "samples": count}))
    return root
