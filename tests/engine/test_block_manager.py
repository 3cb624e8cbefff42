"""Block bookkeeping without torch: allocation, truncation (draft rollback), integrity check."""

import sys

import pytest

from specgauge.engine.core.block_manager import BlockManager, IntegrityError, OutOfBlocks


def test_module_imports_no_torch():
    import importlib
    import subprocess

    code = "import specgauge.engine.core.block_manager, specgauge.engine.core.scheduler, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert importlib.util.find_spec("specgauge.engine.core.block_manager") is not None


def test_grow_covers_positions_and_slots_are_distinct():
    bm = BlockManager(num_blocks=8, block_size=4)
    bm.grow("a", 6)
    bm.grow("b", 3)
    assert len(bm.table("a").blocks) == 2 and len(bm.table("b").blocks) == 1
    slots = bm.slots("a", 0, 6) + bm.slots("b", 0, 3)
    assert len(set(slots)) == 9
    assert bm.slot("a", 5) == bm.table("a").blocks[1] * 4 + 1
    assert bm.num_free_blocks == 5
    bm.check_integrity()


def test_out_of_blocks_changes_nothing():
    bm = BlockManager(num_blocks=2, block_size=4)
    bm.grow("a", 5)
    with pytest.raises(OutOfBlocks):
        bm.grow("b", 1)
    assert "b" not in bm.tables and bm.num_free_blocks == 0
    assert not bm.can_grow("a", 9) and bm.can_grow("a", 8)
    bm.check_integrity()


def test_truncate_rolls_back_and_frees_blocks_past_the_new_length():
    bm = BlockManager(num_blocks=8, block_size=4)
    bm.grow("a", 5)       # 2 blocks
    bm.grow("a", 5 + 5)   # a verify of 5 draft tokens: 3 blocks
    assert len(bm.table("a").blocks) == 3
    kept_first_blocks = bm.table("a").blocks[:2]
    bm.truncate("a", 6)   # one draft accepted
    assert bm.num_tokens("a") == 6 and bm.table("a").blocks == kept_first_blocks
    assert bm.num_free_blocks == 6
    bm.truncate("a", 0)
    assert bm.table("a").blocks == [] and bm.num_free_blocks == 8
    with pytest.raises(ValueError):
        bm.truncate("a", 1)
    bm.check_integrity()


def test_free_returns_everything_and_is_idempotent():
    bm = BlockManager(num_blocks=4, block_size=2)
    bm.grow("a", 7)
    bm.free("a")
    bm.free("a")
    assert bm.num_free_blocks == 4 and not bm.tables
    bm.check_integrity()


def test_integrity_check_catches_corruption():
    bm = BlockManager(num_blocks=4, block_size=2)
    bm.grow("a", 2)
    bm.grow("b", 2)
    bm.table("b").blocks[0] = bm.table("a").blocks[0]  # one block in two tables
    with pytest.raises(IntegrityError):
        bm.check_integrity()
    bm = BlockManager(num_blocks=4, block_size=2)
    bm.grow("a", 2)
    bm.free_blocks.append(bm.table("a").blocks[0])  # owned and free at once
    with pytest.raises(IntegrityError):
        bm.check_integrity()
    bm = BlockManager(num_blocks=4, block_size=2)
    bm.grow("a", 4)
    bm.table("a").num_tokens = 1  # table longer than its length needs
    with pytest.raises(IntegrityError):
        bm.check_integrity()
