"""The training corpus: chat conversations from four sources, built from material present on
every machine with Python, deterministic for a seed, split into train/validation by hash.

The target and its tokenizer are trained on ``TARGET_SOURCES``; ``code_questions`` (a user asks
for a function by what it does) and ``code_requests`` (write, port, explain, fix, refactor or test
code in one of several languages, :mod:`specgauge.train.code_requests`) are there for drafter
training only, so that a drafter can learn what the target answers to chat-style coding requests
(``train draft`` regenerates the answers).

Layout of ``DIR`` (what ``specgauge train corpus --output DIR`` writes)::

    DIR/text/<source>/<split>.jsonl       {"id", "source", "messages": [{"role", "content"}, ...]}
    DIR/<split>/<source>/shard-00000.jsonl {"input_ids": [...], "loss_mask": [...]}  (with --tokenizer)
    DIR/<split>/<source>/meta.json         source, split, seed, num_samples, num_tokens, tokenizer_sha256

``<split>`` is ``train`` or ``validation``; ``DIR/train`` and ``DIR/validation`` each hold one
subdirectory per source, the layout drafter training data comes in (and that
``specgauge suite from-training-data`` reads).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Iterator

from specgauge.train.stdlib_material import (SourceFile, askable_functions, docstrings_of, iter_stdlib_files,
                                              pydoc_topics)

from specgauge.train.code_requests import request_samples
from specgauge.train.samples import CorpusConfig, Sample, chunks, paragraph_chunks, summary_line  # noqa: F401
from specgauge.train.long_sources import LONG_SOURCES, code_file_samples, prose_long_samples, session_samples

TARGET_SOURCES = ("code_stdlib", "agentic_tools", "prose_docs")  # what the 512-token target and the tokenizer learn from
LONG_TARGET_SOURCES = TARGET_SOURCES + LONG_SOURCES  # what the 4,096-token target learns from
SOURCES = TARGET_SOURCES + ("code_questions",) + LONG_SOURCES + ("code_requests",)  # everything the corpus holds
SPLITS = ("train", "validation")
# A source split as another: code_requests asks about the functions code_questions asks for, so
# both hold out the same files (a function whose Python answer trained a drafter is not a held-out
# request).
SPLIT_AS = {"code_requests": "code_questions"}
SHARD_SAMPLES = 5000


def split_of(group: str, config: CorpusConfig) -> str:
    """``validation`` for a stable ``validation_fraction`` share of groups, else ``train``."""
    digest = hashlib.sha256(f"{config.seed}:{group}".encode()).digest()
    return "validation" if int.from_bytes(digest[:8], "big") / 2**64 < config.validation_fraction else "train"


CODE_PROMPTS = (
    "Continue this Python module (`{path}`):\n{head}",
    "Here is the start of `{path}` from the standard library. Write the rest:\n{head}",
    "Complete the following code from {module}:\n{head}",
)


def code_samples(files: list[SourceFile], config: CorpusConfig) -> list[Sample]:
    """``code_stdlib``: user gives the first lines of a piece of a module, assistant continues it."""
    rng = random.Random(config.seed * 7919 + 1)
    chosen = files if len(files) <= config.max_code_files else sorted(rng.sample(files, config.max_code_files), key=lambda f: f.relpath)
    samples = []
    for source in chosen:
        for index, chunk in enumerate(chunks(source.text, config.chunk_chars)):
            lines = chunk.split("\n")
            if len(lines) < 6:
                continue
            cut = rng.randint(3, min(16, len(lines) - 2))
            head, rest = "\n".join(lines[:cut]), "\n".join(lines[cut:])
            if not rest.strip():
                continue
            prompt = rng.choice(CODE_PROMPTS).format(path=f"Lib/{source.relpath}", module=source.module, head=head)
            samples.append(Sample(f"code-{source.relpath}-{index}", "code_stdlib", source.relpath,
                                  [{"role": "user", "content": prompt}, {"role": "assistant", "content": rest}]))
    return samples


QUESTION_PROMPTS = (
    "Write a Python function `{name}{sig}` that does this: {summary}",
    "How would I implement `{name}` in Python? It should do the following. {summary}",
    "I need a Python helper: {summary} Can you write it?",
    "Implement `{qualname}` from the {module} module. {summary}",
)


def question_samples(files: list[SourceFile], config: CorpusConfig) -> list[Sample]:
    """``code_questions``: a user asks for a function by what its docstring says it does; the
    answer is the function's source."""
    rng = random.Random(config.seed * 7919 + 4)
    samples = []
    for source, index, fn in askable_functions(files, config.chunk_chars):
        prompt = rng.choice(QUESTION_PROMPTS).format(name=fn.qualname.rsplit(".", 1)[-1], sig=fn.signature,
                                                     qualname=fn.qualname, module=fn.module, summary=summary_line(fn.doc))
        samples.append(Sample(f"question-{fn.module}.{fn.qualname}-{index}", "code_questions", source.relpath,
                              [{"role": "user", "content": prompt}, {"role": "assistant", "content": fn.code}]))
    return samples


DOC_QUESTIONS = {
    "module": ("What is the `{name}` module for?", "Describe the Python module `{name}`."),
    "class": ("What is the class `{name}`?", "Explain what `{name}` represents."),
    "function": ("What does `{name}{sig}` do?", "Explain the function `{name}{sig}`.", "Document `{name}{sig}`."),
}


def prose_samples(files: list[SourceFile], config: CorpusConfig) -> list[Sample]:
    """``prose_docs``: a question about a topic or an object, answered by its documentation text."""
    rng = random.Random(config.seed * 7919 + 2)
    samples = []
    for title, text in pydoc_topics():
        pieces = paragraph_chunks(text, config.chunk_chars)
        for index, piece in enumerate(pieces):
            if index == 0:
                prompt = rng.choice(("What does the Python reference say about {t}?", "Explain {t} in Python.", "Topic: {t}")).format(t=title)
            else:
                tail = pieces[index - 1].split("\n\n")[-1][-400:]
                prompt = f"Continue the documentation of {title} after:\n{tail}"
            samples.append(Sample(f"topic-{title}-{index}", "prose_docs", f"topic:{title}",
                                  [{"role": "user", "content": prompt}, {"role": "assistant", "content": piece}]))
    for source in files:
        for index, doc in enumerate(docstrings_of(source, include_private=True)):
            if len(doc.text) < 60:
                continue
            name = f"{doc.module}.{doc.qualname}" if doc.qualname else doc.module
            prompt = rng.choice(DOC_QUESTIONS[doc.kind]).format(name=name, sig=doc.signature)
            body = paragraph_chunks(doc.text, config.chunk_chars)[0]
            samples.append(Sample(f"doc-{name}-{index}", "prose_docs", f"module:{doc.module}",
                                  [{"role": "user", "content": prompt}, {"role": "assistant", "content": body}]))
    return samples


def agentic_samples(files: list[SourceFile], config: CorpusConfig) -> list[Sample]:
    """``agentic_tools``: synthesized tool-use transcripts (see :mod:`specgauge.train.agentic`)."""
    from specgauge.train.agentic import Material, synthesize

    material = Material.from_files(files)
    return [Sample(sid, "agentic_tools", sid, messages) for sid, messages in synthesize(material, config.agentic_samples, config.seed)]


def build_samples(config: CorpusConfig, files: list[SourceFile] | None = None) -> dict[str, dict[str, list[Sample]]]:
    """All samples as ``{source: {split: [Sample, ...]}}``, in a deterministic order."""
    files = iter_stdlib_files() if files is None else files
    built = {
        "code_stdlib": code_samples(files, config),
        "agentic_tools": agentic_samples(files, config),
        "prose_docs": prose_samples(files, config),
        "code_questions": question_samples(files, config),
        "code_files": code_file_samples(files, config),
        "agentic_sessions": session_samples(files, config),
        "prose_long": prose_long_samples(files, config),
        "code_requests": request_samples(files, config),
    }
    out: dict[str, dict[str, list[Sample]]] = {}
    for source, samples in built.items():
        out[source] = {split: [] for split in SPLITS}
        for sample in samples:
            out[source][split_of(f"{SPLIT_AS.get(source, source)}:{sample.group}", config)].append(sample)
    return out


def write_text(samples: dict[str, dict[str, list[Sample]]], out_dir: Path) -> None:
    """``DIR/text/<source>/<split>.jsonl``: the conversations as text (tokenizer and drafter read these)."""
    for source, splits in samples.items():
        folder = out_dir / "text" / source
        folder.mkdir(parents=True, exist_ok=True)
        for split, items in splits.items():
            with (folder / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
                for sample in items:
                    handle.write(json.dumps(sample.to_json(), ensure_ascii=False) + "\n")


def read_text(corpus_dir: Path, source: str, split: str) -> Iterator[dict]:
    """The conversations of one source and split, as written by :func:`write_text`."""
    path = Path(corpus_dir) / "text" / source / f"{split}.jsonl"
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_tokenized(corpus_dir: Path, tokenizer_dir: Path, config: CorpusConfig) -> dict[str, dict[str, int]]:
    """Tokenize ``DIR/text`` into ``DIR/<split>/<source>/shard-*.jsonl`` + ``meta.json``; returns
    tokens per ``source/split``."""
    from tokenizers import Tokenizer

    from specgauge.train.chat import tokenize_conversation, tokenize_with_template, uses_own_format

    tokenizer_file = Path(tokenizer_dir) / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    if uses_own_format(tokenizer):
        def tokenize(messages: list[dict]) -> tuple[list[int], list[int]]:
            return tokenize_conversation(tokenizer, messages)
    else:  # a model of its own (SmolLM2's ChatML): its chat template, as the engine renders requests
        from specgauge.engine.models.tokenizer import EngineTokenizer

        engine_tokenizer = EngineTokenizer(tokenizer_dir)

        def tokenize(messages: list[dict]) -> tuple[list[int], list[int]]:
            return tokenize_with_template(tokenizer, engine_tokenizer.apply_chat_template,
                                          engine_tokenizer.eos_token or "", messages)
    sha = file_sha256(tokenizer_file)
    totals: dict[str, dict[str, int]] = {}
    for source in SOURCES:
        for split in SPLITS:
            folder = Path(corpus_dir) / split / source
            folder.mkdir(parents=True, exist_ok=True)
            for old in folder.glob("shard-*.jsonl"):
                old.unlink()
            num_samples = num_tokens = 0
            handle = None
            for index, record in enumerate(read_text(corpus_dir, source, split)):
                if index % SHARD_SAMPLES == 0:
                    if handle:
                        handle.close()
                    handle = (folder / f"shard-{index // SHARD_SAMPLES:05d}.jsonl").open("w")
                ids, mask = tokenize(record["messages"])
                handle.write(json.dumps({"input_ids": ids, "loss_mask": mask}, separators=(",", ":")) + "\n")
                num_samples += 1
                num_tokens += len(ids)
            if handle:
                handle.close()
            meta = {"source": source, "split": split, "seed": config.seed, "num_samples": num_samples,
                    "num_tokens": num_tokens, "tokenizer_sha256": sha, "format": "jsonl input_ids+loss_mask",
                    "validation_fraction": config.validation_fraction}
            (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
            totals.setdefault(source, {})[split] = num_tokens
    return totals
