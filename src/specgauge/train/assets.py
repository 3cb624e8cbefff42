"""Where the shipped target lives, and a check that its files are the ones trained."""

from __future__ import annotations

from pathlib import Path

from specgauge.errors import UserError

TARGET_DIR = Path(__file__).resolve().parents[1] / "assets" / "target"


def shipped_target_dir() -> Path:
    """The directory of the shipped target model (HF layout); a :class:`UserError` if it is missing."""
    if not (TARGET_DIR / "model.safetensors").is_file():
        raise UserError(f"the shipped target model is missing from {TARGET_DIR}; rebuild it as docs/train.md says")
    return TARGET_DIR


def verify_checksums(model_dir: Path) -> list[str]:
    """Names of the files in ``model_dir`` whose sha256 differs from ``SHA256SUMS`` (empty: all match)."""
    from specgauge.train.corpus import file_sha256
    from specgauge.train.report import read_sha256sums

    return [name for name, digest in read_sha256sums(model_dir).items()
            if not (Path(model_dir) / name).is_file() or file_sha256(Path(model_dir) / name) != digest]
