"""Tree verification (several draft branches in one forward) and KV compaction of the accepted
path: what the speculative runner builds on."""

import torch
from engine_testkit import make_model, runner_for

from specgauge.engine.core.kv_cache import ForwardBatch, build_group
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.core.scheduler import Request, ScheduledSeq


def prefill(runner, blocks, request, n):
    blocks.grow(request.request_id, n)
    batch = runner.lay_out([ScheduledSeq(request, 0, n)]).batch
    with torch.inference_mode():
        runner.model.forward_cached(batch, runner.cache)


def test_tree_logits_equal_each_branch_run_alone_and_the_accepted_path_compacts(tmp_path):
    reference, model = make_model(tmp_path)
    runner, blocks = runner_for(model, block_size=4)
    torch.manual_seed(3)
    context = torch.randint(0, 101, (10,)).tolist()
    root, a, b, a1 = 5, 17, 42, 63
    request = Request("t", context, SamplingParams())
    prefill(runner, blocks, request, len(context))
    # tree in storage order [root, a, b, a1]: a and b are children of root, a1 a child of a
    tree_mask = [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    depths = [0, 1, 1, 2]
    blocks.grow("t", len(context) + 4)
    group, positions, slots = build_group(0, 4, [len(context)], [blocks.table("t").blocks], 4, torch.device("cpu"),
                                          tree_mask=[[bool(x) for x in row] for row in tree_mask],
                                          tree_depths=depths)
    batch = ForwardBatch(torch.tensor([root, a, b, a1]), positions, slots, [group], torch.arange(4))
    with torch.inference_mode():
        tree_logits, _ = model.forward_cached(batch, runner.cache)
        chain_a = reference(torch.tensor([context + [root, a, a1]]))[0][0, -3:]
        chain_b = reference(torch.tensor([context + [root, b]]))[0][0, -2:]
    torch.testing.assert_close(tree_logits[[0, 1, 3]], chain_a, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(tree_logits[2], chain_b[1], atol=2e-5, rtol=1e-4)

    # accept root + b: move b's K/V from storage index 2 to 1, keep context + 2 tokens, decode on
    c = len(context)
    runner.cache.copy_slots(torch.tensor(blocks.slots("t", c + 2, c + 3)), torch.tensor(blocks.slots("t", c + 1, c + 2)))
    blocks.truncate("t", c + 2)
    request.output_ids = [root, b, 77]  # the bonus token sampled after b is the next input
    request.prompt_ids = context
    blocks.grow("t", c + 3)
    step = runner.lay_out([ScheduledSeq(request, c + 2, 1)]).batch
    with torch.inference_mode():
        next_logits, _ = model.forward_cached(step, runner.cache)
        expected = reference(torch.tensor([context + [root, b, 77]]))[0][0, -1]
    torch.testing.assert_close(next_logits[0], expected, atol=2e-5, rtol=1e-4)
    blocks.free("t")
    blocks.check_integrity()
