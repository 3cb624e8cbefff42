"""Load a ``tokenizer.json`` (the ``tokenizers`` library) and detokenize training samples with it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from specgauge.errors import UserError, require_extra


@dataclass(frozen=True)
class TokenizerFile:
    """A loaded tokenizer, where it came from, and its full vocabulary size (added tokens included)."""

    path: Path
    tokenizer: Any  # tokenizers.Tokenizer
    vocab_size: int

    def decode(self, ids: Sequence[int]) -> str:
        """Exact text of ``ids``, special tokens kept (the chat-template markers are needed)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def decode_plain(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` without special tokens (for word statistics)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def count(self, text: str) -> int:
        """Number of tokens ``text`` encodes to (no special tokens added)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode_plain(self, text: str) -> list[int]:
        """Token ids of ``text`` without added special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def check_ids(self, ids_min: int, ids_max: int, where: str) -> None:
        """Raise a :class:`UserError` at ``where`` when an id lies outside this vocabulary."""
        if ids_min < 0:
            raise UserError(f"{where}: negative token id {ids_min}")
        if ids_max >= self.vocab_size:
            raise UserError(f"{where}: token id {ids_max} is beyond the vocabulary of {self.path} "
                            f"({self.vocab_size} ids): wrong tokenizer?")


def load_tokenizer(path: str | Path) -> TokenizerFile:
    """Load ``path``: a ``tokenizer.json`` file or a directory holding one."""
    require_extra("data", "tokenizers")
    from tokenizers import Tokenizer

    path = Path(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"tokenizer not found: {file} (give a tokenizer.json file or a directory holding one)")
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # the library raises a bare Exception on bad JSON
        raise UserError(f"cannot load tokenizer {file}: {' '.join(str(exc).split())}") from None
    return TokenizerFile(path=file, tokenizer=tokenizer, vocab_size=tokenizer.get_vocab_size(with_added_tokens=True))
