"""The one ragged-batch layout (``core/batch_layout.py``): every segment's tokens, positions, slots
and wanted logits rows are where the returned offsets say, and the one-chain shortcut lays a
segment out exactly as the general path does."""

import torch

from specgauge.engine.core.batch_layout import Segment, lay_out
from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.models.attention import causal_mask


def blocks_for(sizes: dict[str, int]) -> BlockManager:
    blocks = BlockManager(num_blocks=64, block_size=4)
    for request_id, size in sizes.items():
        blocks.grow(request_id, size)
    return blocks


def test_each_segment_lands_where_its_offsets_say():
    blocks = blocks_for({"a": 8, "b": 1, "c": 12, "d": 40, "e": 9})
    segments = [
        Segment("a", 5, [11, 12, 13], [2]),
        Segment("b", 0, [21], [0]),
        Segment("c", 9, [31, 32, 33], [0, 1, 2]),
        Segment("d", 37, [41, 42, 43], []),  # wide table: its own width bucket
        Segment("e", 6, [51, 52, 53], [0, 2], tree_mask=[[True, False, False], [True, True, False], [True, False, True]],
                depths=[0, 1, 1]),
    ]
    given = list(segments)
    layout = lay_out(segments, blocks, torch.device("cpu"))
    batch = layout.batch
    assert segments == given  # values in: nothing is written back into the segments
    assert sorted(range(len(segments)), key=lambda i: layout.offsets[i]) == list(layout.order)
    assert [s.request_id for s in layout.in_layout_order(segments)] == [segments[i].request_id for i in layout.order]
    assert batch.num_tokens == sum(len(s.tokens) for s in segments)
    for seg, offset, first in zip(segments, layout.offsets, layout.logit_offsets):
        rows = slice(offset, offset + len(seg.tokens))
        assert batch.input_ids[rows].tolist() == list(seg.tokens)
        depths = seg.depths if seg.depths is not None else range(len(seg.tokens))
        assert batch.positions[rows].tolist() == [seg.context + d for d in depths]
        assert batch.write_slots[rows].tolist() == blocks.slots(seg.request_id, seg.context, seg.context + len(seg.tokens))
        wanted = batch.logit_indices[first:first + len(seg.logit_rows)].tolist()
        assert wanted == [offset + row for row in seg.logit_rows]
    # logits rows follow the segments' order
    assert list(layout.logit_offsets) == [0, 1, 2, 5, 5]
    # grouped by new tokens and width bucket: b; a (2 blocks); c and e (3 blocks, e a tree); d (10 blocks)
    assert sorted((g.q_len, g.batch) for g in batch.groups) == [(1, 1), (3, 1), (3, 1), (3, 2)]


def test_the_one_chain_shortcut_equals_the_general_layout():
    blocks = blocks_for({"x": 23})
    segment = Segment("x", 17, [5, 6, 7, 8, 9, 10], [5])
    table = causal_mask(64, torch.float32, torch.device("cpu")).view(64, 64)
    calls = []

    def causal_rows(first: int, count: int, keys: int) -> torch.Tensor:
        calls.append((first, count, keys))
        return table[first:first + count, :keys]

    general = lay_out([segment], blocks, torch.device("cpu"))
    short = lay_out([segment], blocks, torch.device("cpu"), causal_rows=causal_rows)
    assert calls == [(17, 6, 24)]  # the shortcut was taken
    assert (short.offsets, short.logit_offsets, short.order) == (general.offsets, general.logit_offsets, general.order)
    for name in ("input_ids", "positions", "write_slots", "logit_indices"):
        assert torch.equal(getattr(short.batch, name), getattr(general.batch, name)), name
    (a,), (b,) = short.batch.groups, general.batch.groups
    assert (a.token_start, a.token_stop, a.batch, a.q_len) == (b.token_start, b.token_stop, b.batch, b.q_len)
    assert torch.equal(a.block_table, b.block_table) and torch.equal(a.mask, b.mask)
    # a fresh segment (no cached context) takes the general path, causal group and all
    fresh = lay_out([Segment("x", 0, [1, 2, 3], [2])], blocks, torch.device("cpu"), causal_rows=causal_rows)
    assert len(calls) == 1 and fresh.batch.groups[0].fresh


def test_groups_say_when_their_keys_are_a_view_of_the_pool_and_keep_prompt_rows_apart():
    blocks = BlockManager(num_blocks=64, block_size=4)
    blocks.grow("a", 8)   # blocks of a, then b, then a again: a's table is not consecutive
    blocks.grow("b", 12)
    blocks.grow("a", 12)
    blocks.grow("c", 9)
    layout = lay_out([Segment("a", 11, [1], [0]), Segment("b", 11, [2], [0]), Segment("c", 8, [3], [0])],
                     blocks, torch.device("cpu"))
    (group,) = layout.batch.groups
    assert group.batch == 3 and group.first_block is None  # several sequences: a gather
    table_c = blocks.table("c").blocks
    assert table_c == list(range(table_c[0], table_c[0] + 3))
    alone = lay_out([Segment("c", 8, [3], [0])], blocks, torch.device("cpu")).batch.groups[0]
    assert alone.first_block == table_c[0]  # consecutive blocks, one sequence: a view
    lone_a = lay_out([Segment("a", 11, [1], [0])], blocks, torch.device("cpu")).batch.groups[0]
    assert lone_a.first_block is None
    # prompt rows group only with segments of the same context (their blocks are aligned to positions)
    prompts = lay_out([Segment("a", 4, [1, 2], [1], prompt_rows=2), Segment("b", 4, [3, 4], [1], prompt_rows=2),
                       Segment("c", 6, [5, 6], [1], prompt_rows=2)], blocks, torch.device("cpu")).batch.groups
    assert sorted((g.batch, g.first_position, g.prompt_rows) for g in prompts) == [(1, 6, 2), (2, 4, 2)]
