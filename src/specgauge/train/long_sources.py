"""Long corpus sources, for a target with a 4,096-token context: each sample runs to thousands
of tokens, so packed training windows hold whole files, whole agent sessions and whole
reference chapters rather than many short pieces.

* ``code_files`` — a user gives the opening lines of a standard-library module; the assistant
  writes the rest of it, up to ``long_chunk_chars`` characters per piece (about 3,500 tokens).
* ``agentic_sessions`` — one agent session: a system turn listing every tool it may call, then
  several tasks in a row (the short scenarios of :mod:`specgauge.train.agentic`) whose tool
  results include longer file reads, so later turns refer back to earlier observations.
* ``prose_long`` — a question about a language-reference topic answered by the topic's whole
  text (up to ``long_chunk_chars``), or a module's docstrings gathered into one answer.

Splits follow :func:`specgauge.train.corpus.split_of` with the same groups as the short sources
(a file, a topic, a module), so a file held out of one source is held out of all of them.
"""

from __future__ import annotations

import json
import random

from specgauge.train.agentic import SCENARIO_TOOLS, SCENARIOS, TOOL_SPECS, Material, _call
from specgauge.train.samples import CorpusConfig, Sample, chunks, paragraph_chunks
from specgauge.train.stdlib_material import SourceFile, docstrings_of, pydoc_topics

LONG_SOURCES = ("code_files", "agentic_sessions", "prose_long")

FILE_PROMPTS = (
    "Write the rest of `{path}`. It begins:\n{head}",
    "Continue this Python module (`{path}`) to its end:\n{head}",
    "Here is the top of {module} from the standard library. Finish the file:\n{head}",
)


def code_file_samples(files: list[SourceFile], config: CorpusConfig) -> list[Sample]:
    """``code_files``: whole modules (long ones in pieces), opening lines in the user turn."""
    rng = random.Random(config.seed * 7919 + 11)
    samples = []
    for source in files:
        for index, piece in enumerate(chunks(source.text, config.long_chunk_chars)):
            lines = piece.split("\n")
            if len(lines) < 24:
                continue
            cut = rng.randint(8, min(40, len(lines) // 3))
            head, rest = "\n".join(lines[:cut]), "\n".join(lines[cut:])
            prompt = rng.choice(FILE_PROMPTS).format(path=f"Lib/{source.relpath}", module=source.module, head=head)
            samples.append(Sample(f"file-{source.relpath}-{index}", "code_files", source.relpath,
                                  [{"role": "user", "content": prompt}, {"role": "assistant", "content": rest}]))
    return samples


def _long_read(rng: random.Random, material: Material) -> list[dict]:
    """A task that reads a long stretch of one file and answers about what it read."""
    source = rng.choice(material.files)
    lines = source.text.split("\n")
    path = f"Lib/{source.relpath}"
    start = rng.randint(1, max(1, len(lines) - 40))
    end = min(len(lines), start + rng.randint(40, 140))
    chunk = lines[start - 1:end]
    defs = [ln.strip().split("(")[0] for ln in chunk if ln.lstrip().startswith(("def ", "class "))]
    summary = (f"Lines {start}–{end} of {path} define {len(defs)} functions or classes"
               + (f", from `{defs[0]}` to `{defs[-1]}`." if defs else "; there is no definition in that range."))
    return [
        {"role": "user", "content": f"Read lines {start} to {end} of {path} and tell me what is defined there."},
        {"role": "assistant", "content": _call("I'll read that range.", "read_file", {"path": path, "start_line": start, "end_line": end})},
        {"role": "tool", "content": json.dumps({"path": path, "content": "\n".join(chunk)})},
        {"role": "assistant", "content": summary},
    ]


def session_samples(files: list[SourceFile], config: CorpusConfig) -> list[Sample]:
    """``agentic_sessions``: ``session_samples`` sessions of 3 to 12 tasks each."""
    material = Material.from_files(files)
    rng = random.Random(config.seed * 7919 + 12)
    samples = []
    for index in range(config.session_samples):
        tasks = [rng.choice(SCENARIOS + (_long_read, _long_read)) for _ in range(rng.randint(3, 12))]
        tools = sorted({"read_file", *(t for task in tasks for t in SCENARIO_TOOLS.get(task, []))})
        spec = [{"name": name, **TOOL_SPECS[name]} for name in tools]
        system = ("You are a careful agent working through a user's requests in one session. Call one tool at a "
                  'time by answering with a short reason and a JSON {"name": ..., "arguments": ...} object; answer '
                  "plainly once you know.\nTools:\n" + json.dumps(spec))
        messages = [{"role": "system", "content": system}]
        for task in tasks:
            messages += task(rng, material)
        sid = f"session-{index:06d}"
        samples.append(Sample(sid, "agentic_sessions", sid, messages))
    return samples


def prose_long_samples(files: list[SourceFile], config: CorpusConfig) -> list[Sample]:
    """``prose_long``: whole reference topics, and each module's docstrings as one answer."""
    rng = random.Random(config.seed * 7919 + 13)
    samples = []
    for title, text in pydoc_topics():
        for index, piece in enumerate(paragraph_chunks(text, config.long_chunk_chars)):
            prompt = (rng.choice(("Explain {t} in Python, in full.", "What does the Python reference say about {t}?"))
                      if index == 0 else "Go on with the reference text on {t}.").format(t=title)
            samples.append(Sample(f"topic-long-{title}-{index}", "prose_long", f"topic:{title}",
                                  [{"role": "user", "content": prompt}, {"role": "assistant", "content": piece}]))
    for source in files:
        docs = [d for d in docstrings_of(source) if len(d.text) >= 60]
        if len(docs) < 3:
            continue
        parts = []
        for doc in docs:
            name = f"{doc.module}.{doc.qualname}" if doc.qualname else doc.module
            parts.append(f"`{name}{doc.signature}`\n\n{doc.text}")
        for index, piece in enumerate(paragraph_chunks("\n\n".join(parts), config.long_chunk_chars)):
            prompt = f"Document the public API of the `{source.module}` module." if index == 0 else \
                f"Continue the API documentation of `{source.module}`."
            samples.append(Sample(f"apidoc-{source.module}-{index}", "prose_long", f"module:{source.module}",
                                  [{"role": "user", "content": prompt}, {"role": "assistant", "content": piece}]))
    return samples
