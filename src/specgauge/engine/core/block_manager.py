"""KV block bookkeeping: which physical cache blocks each request owns. Pure Python, no torch.

The KV pool (:mod:`specgauge.engine.core.kv_cache`) is ``num_blocks`` blocks of ``block_size`` token
slots each. A request's *block table* lists its blocks in order; token position ``p`` of the
request lives in slot ``table[p // block_size] * block_size + p % block_size``.

Per request the manager keeps ``num_tokens``: how many token positions the table covers (the
request's reserved KV length). Rolling back rejected draft tokens is ``truncate(request_id,
new_len)``: one assignment plus freeing the blocks past the new length.

Blocks are reference counted (a block is free exactly when its count is zero); today no block is
shared between requests, so every used block has count 1, and :meth:`check_integrity` asserts
that the counts equal the number of tables naming each block.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


class OutOfBlocks(Exception):
    """The pool has fewer free blocks than an allocation needs (the scheduler preempts or waits)."""


class IntegrityError(AssertionError):
    """The bookkeeping is inconsistent: a leaked, doubly owned or miscounted block."""


@dataclass
class BlockTable:
    """The blocks of one request and the token length they are reserved for."""

    blocks: list[int] = field(default_factory=list)
    num_tokens: int = 0


class BlockManager:
    """Allocates fixed-size KV blocks to requests from a preallocated pool."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref_counts: list[int] = [0] * num_blocks
        self.free_blocks: deque[int] = deque(range(num_blocks))
        self.tables: dict[str, BlockTable] = {}

    # -- queries -------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_blocks)

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold ``num_tokens`` token positions."""
        return -(-num_tokens // self.block_size)

    def extra_blocks_needed(self, request_id: str, new_num_tokens: int) -> int:
        """Blocks that growing ``request_id`` to ``new_num_tokens`` would take from the pool."""
        table = self.tables.get(request_id)
        have = len(table.blocks) if table else 0
        return max(0, self.blocks_for(new_num_tokens) - have)

    def can_grow(self, request_id: str, new_num_tokens: int) -> bool:
        return self.extra_blocks_needed(request_id, new_num_tokens) <= len(self.free_blocks)

    def table(self, request_id: str) -> BlockTable:
        return self.tables[request_id]

    def num_tokens(self, request_id: str) -> int:
        table = self.tables.get(request_id)
        return table.num_tokens if table else 0

    def slot(self, request_id: str, position: int) -> int:
        """Physical slot index of token ``position`` of ``request_id``."""
        block = self.tables[request_id].blocks[position // self.block_size]
        return block * self.block_size + position % self.block_size

    def slots(self, request_id: str, start: int, stop: int) -> list[int]:
        """Physical slot indices of positions ``start .. stop-1``."""
        blocks, size = self.tables[request_id].blocks, self.block_size
        return [blocks[p // size] * size + p % size for p in range(start, stop)]

    # -- mutations -----------------------------------------------------------------------
    def grow(self, request_id: str, new_num_tokens: int) -> None:
        """Reserve positions up to ``new_num_tokens`` for ``request_id`` (creating its table).

        Raises :class:`OutOfBlocks` and changes nothing when the pool cannot cover it.
        """
        table = self.tables.get(request_id)
        need = self.extra_blocks_needed(request_id, new_num_tokens)
        if need > len(self.free_blocks):
            raise OutOfBlocks(f"need {need} blocks, {len(self.free_blocks)} free")
        if table is None:
            table = self.tables[request_id] = BlockTable()
        for _ in range(need):
            block = self.free_blocks.popleft()
            self.ref_counts[block] += 1
            table.blocks.append(block)
        table.num_tokens = max(table.num_tokens, new_num_tokens)

    def truncate(self, request_id: str, new_num_tokens: int) -> None:
        """Shrink ``request_id`` to ``new_num_tokens`` positions, freeing blocks past it at once."""
        table = self.tables[request_id]
        if new_num_tokens < 0 or new_num_tokens > table.num_tokens:
            raise ValueError(f"cannot truncate {table.num_tokens} tokens to {new_num_tokens}")
        keep = self.blocks_for(new_num_tokens)
        for block in reversed(table.blocks[keep:]):
            self._release(block)
        del table.blocks[keep:]
        table.num_tokens = new_num_tokens

    def free(self, request_id: str) -> None:
        """Release every block of ``request_id`` and forget its table (no-op when it has none)."""
        table = self.tables.pop(request_id, None)
        if table is None:
            return
        for block in reversed(table.blocks):
            self._release(block)

    def _release(self, block: int) -> None:
        """A freed block goes to the front of the free list (released last block first, so a
        table's blocks return in order): the next allocation takes it again, and a request whose
        draft slots are reserved and rolled back every step keeps consecutive blocks — which lets
        attention read its keys as a view of the pool instead of gathering them
        (:attr:`~specgauge.engine.core.kv_cache.AttentionGroup.first_block`)."""
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self.free_blocks.appendleft(block)

    # -- checks --------------------------------------------------------------------------
    def check_integrity(self) -> None:
        """Raise :class:`IntegrityError` unless free + used == total and every count is exact."""
        owners = [0] * self.num_blocks
        for request_id, table in self.tables.items():
            if len(table.blocks) != self.blocks_for(table.num_tokens):
                raise IntegrityError(
                    f"{request_id}: {len(table.blocks)} blocks for {table.num_tokens} tokens"
                )
            for block in table.blocks:
                owners[block] += 1
        free = set(self.free_blocks)
        if len(free) != len(self.free_blocks):
            raise IntegrityError("a block is on the free list twice")
        used = sum(1 for count in owners if count)
        if len(free) + used != self.num_blocks:
            raise IntegrityError(f"free {len(free)} + used {used} != total {self.num_blocks}")
        for block in range(self.num_blocks):
            if owners[block] != self.ref_counts[block]:
                raise IntegrityError(f"block {block}: ref count {self.ref_counts[block]}, owners {owners[block]}")
            if owners[block] > 1:
                raise IntegrityError(f"block {block} is in {owners[block]} tables")
            if (block in free) != (owners[block] == 0):
                raise IntegrityError(f"block {block}: free-list state disagrees with its owners")
