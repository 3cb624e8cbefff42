"""The in-place paged attention kernel (engine/models/paged_kernel.py): it agrees with a float64
reference on ragged batches, odd block counts, GQA and tree masks, and its rows are batch
invariant bit for bit — a sequence alone or among 8 or 64, a verify row or a decode row at the
same position, on one thread or two."""


import pytest
import torch
import torch.nn.functional as F

from specgauge.engine.core.kv_cache import build_group
from specgauge.engine.models import paged_kernel
from specgauge.engine.models.attention import paged_attention

HEAD = 64
BLOCK = 16
POOL_BLOCKS = 2048


@pytest.fixture(scope="module")
def kernel():
    module = paged_kernel.load()
    if module is None:
        pytest.skip(f"the in-place kernel could not be built here: {paged_kernel.attention_path(torch.float32)}")
    return module


def pool(n_kv, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shape = (n_kv, POOL_BLOCKS * BLOCK, HEAD)
    return torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)  # (Hkv, S, D)


def tables_for(lengths, seed=1):
    """Each sequence's blocks, scattered over the pool (never consecutive), without overlap."""
    order = torch.randperm(POOL_BLOCKS, generator=torch.Generator().manual_seed(seed)).tolist()
    tables, used = [], 0
    for length in lengths:
        count = -(-length // BLOCK)
        tables.append(order[used:used + count])
        used += count
    return tables


def run(kernel, q, k_pool, v_pool, contexts, tables, q_len, tree_mask=None):
    """The kernel over one group: ``contexts`` cached tokens per member, then ``q_len`` new ones."""
    group, _, _ = build_group(0, q_len, contexts, tables, BLOCK, torch.device("cpu"), tree_mask=tree_mask)
    return kernel.paged_attention(q, k_pool, v_pool, group.block_table, group.mask[:, 0], BLOCK,
                                  HEAD ** -0.5), group


def reference(q, k_pool, v_pool, group, n_q):
    """float64 SDPA over the gathered blocks: (B*Tq, Hq*D)."""
    b, tq = group.batch, group.q_len
    n_kv = k_pool.shape[0]
    blocks = group.block_table.reshape(-1)
    gather = [t.view(n_kv, POOL_BLOCKS, BLOCK, HEAD).index_select(1, blocks).view(n_kv, b, -1, HEAD).transpose(0, 1)
              for t in (k_pool, v_pool)]  # (B, Hkv, Tk, D)
    qg = q.view(b, tq, n_q, HEAD).transpose(1, 2)  # (B, Hq, Tq, D)
    out = F.scaled_dot_product_attention(qg.double(), gather[0].double(), gather[1].double(),
                                         attn_mask=group.mask.double(), enable_gqa=True)
    return out.transpose(1, 2).reshape(b * tq, n_q * HEAD)


@pytest.mark.parametrize("n_q,n_kv", [(9, 3), (4, 4), (8, 1)])
@pytest.mark.parametrize("q_len", [1, 5])
def test_matches_a_float64_reference_on_ragged_batches(kernel, n_q, n_kv, q_len):
    contexts = [0, 3, 17, 31, 47, 100, 250]  # 1 to 17 blocks: odd counts, partial last blocks
    k_pool, v_pool = pool(n_kv)
    tables = tables_for([c + q_len for c in contexts])
    q = torch.randn(len(contexts) * q_len, n_q, HEAD, generator=torch.Generator().manual_seed(2))
    out, group = run(kernel, q, k_pool, v_pool, contexts, tables, q_len)
    assert out.shape == (len(contexts) * q_len, n_q * HEAD)
    torch.testing.assert_close(out.double(), reference(q, k_pool, v_pool, group, n_q), atol=2e-6, rtol=1e-5)


def test_matches_the_reference_under_a_tree_mask(kernel):
    tree = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]], dtype=torch.bool)
    contexts = [9, 40]
    k_pool, v_pool = pool(3)
    tables = tables_for([c + 4 for c in contexts])
    q = torch.randn(8, 9, HEAD, generator=torch.Generator().manual_seed(3))
    out, group = run(kernel, q, k_pool, v_pool, contexts, tables, 4, tree_mask=tree)
    torch.testing.assert_close(out.double(), reference(q, k_pool, v_pool, group, 9), atol=2e-6, rtol=1e-5)


def test_a_sequence_gets_the_same_bits_alone_and_among_8_or_64(kernel):
    k_pool, v_pool = pool(3)
    generator = torch.Generator().manual_seed(4)
    mine_context, mine_q = 77, torch.randn(1, 9, HEAD, generator=generator)
    mine_k, mine_v = (torch.randn(3, mine_context + 1, HEAD, generator=generator) for _ in range(2))
    alone = None
    for batch in (1, 8, 64):
        # the others' contexts (some far longer: wider padding) and their place before ours vary
        others = [int(c) for c in torch.randint(0, 400, (batch - 1,), generator=generator)]
        place = batch // 2
        contexts = others[:place] + [mine_context] + others[place:]
        tables = tables_for([c + 1 for c in contexts], seed=batch)
        q = torch.randn(batch, 9, HEAD, generator=generator)
        q[place] = mine_q[0]
        # our sequence's keys and values are the same whatever block numbers it was given
        slots = torch.tensor([b * BLOCK + i for b in tables[place] for i in range(BLOCK)][:mine_context + 1])
        k_pool[:, slots], v_pool[:, slots] = mine_k, mine_v
        out, _ = run(kernel, q, k_pool, v_pool, contexts, tables, 1)
        row = out[place]
        if alone is None:
            alone = row.clone()
        assert torch.equal(row, alone), f"batch of {batch}: the row's bits changed"


def test_a_verify_row_gets_the_bits_of_a_decode_row(kernel):
    k_pool, v_pool = pool(3)
    context, q_len = 45, 5
    tables = tables_for([context + q_len])
    q = torch.randn(q_len, 9, HEAD, generator=torch.Generator().manual_seed(5))
    verify, _ = run(kernel, q, k_pool, v_pool, [context], tables, q_len)
    for j in range(q_len):  # row j of the verify is the decode at position context + j
        decode, _ = run(kernel, q[j:j + 1], k_pool, v_pool, [context + j], tables, 1)
        assert torch.equal(verify[j], decode[0]), f"verify row {j} differs from its decode"


def test_the_bits_do_not_depend_on_the_thread_count(kernel):
    k_pool, v_pool = pool(3)
    contexts = [5, 60, 130, 300]
    tables = tables_for([c + 3 for c in contexts])
    q = torch.randn(12, 9, HEAD, generator=torch.Generator().manual_seed(6))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one, _ = run(kernel, q, k_pool, v_pool, contexts, tables, 3)
        torch.set_num_threads(2)
        two, _ = run(kernel, q, k_pool, v_pool, contexts, tables, 3)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)


def test_paged_attention_in_place_agrees_with_the_gather_path(kernel):
    """The engine's entry point: a decode group and a prefill chunk group, both paths."""
    n_q, n_kv = 9, 3
    k_pool, v_pool = pool(n_kv)
    contexts = [10, 33, 90]
    tables = tables_for([c + 1 for c in contexts])
    decode, _, slots = build_group(0, 1, contexts, tables, BLOCK, torch.device("cpu"))
    chunk, _, chunk_slots = build_group(3, 20, [16], tables_for([36], seed=5), BLOCK, torch.device("cpu"))
    from specgauge.engine.core.kv_cache import ForwardBatch

    batch = ForwardBatch(torch.zeros(23, dtype=torch.long), torch.zeros(23, dtype=torch.long),
                         torch.cat([slots, chunk_slots]), [decode, chunk], torch.arange(23))
    generator = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(23, heads, HEAD, generator=generator) for heads in (n_q, n_kv, n_kv))
    results = {}
    try:
        for path in ("gather", "inplace"):
            paged_kernel.select_path(path)
            kp, vp = k_pool.clone(), v_pool.clone()
            for g in batch.groups:
                g.inplace_mask = None
            results[path] = paged_attention(q, k, v, kp, vp, batch, BLOCK, torch.float32)
    finally:
        paged_kernel.select_path("inplace")
    torch.testing.assert_close(results["inplace"], results["gather"], atol=2e-5, rtol=1e-4)
    assert paged_kernel.attention_path(torch.float32) == "in-place paged"
    assert paged_kernel.attention_path(torch.bfloat16).startswith("gather")


def test_a_wrong_path_name_is_refused():
    with pytest.raises(ValueError, match="inplace, gather"):
        paged_kernel.select_path("fast")


def test_a_failed_build_falls_back_to_the_gather_path(monkeypatch, tmp_path):
    """No kernel (here: its source is missing): attention gathers, and the path says why."""
    monkeypatch.setattr(paged_kernel, "_state", {"path": None, "module": None, "error": None, "loaded": False})
    monkeypatch.setattr(paged_kernel, "SOURCE", tmp_path / "missing.cpp")
    monkeypatch.delenv(paged_kernel.ENV, raising=False)
    assert paged_kernel.load() is None
    assert paged_kernel.kernel() is None
    line = paged_kernel.attention_path(torch.float32)
    assert line.startswith("gather (in-place kernel unavailable: ") and "missing.cpp" in line
    n_kv, n_q = 2, 4
    k_pool, v_pool = pool(n_kv)
    group, _, slots = build_group(0, 1, [20, 7], tables_for([21, 8]), BLOCK, torch.device("cpu"))
    from specgauge.engine.core.kv_cache import ForwardBatch

    batch = ForwardBatch(torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long), slots, [group],
                         torch.arange(2))
    generator = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(2, heads, HEAD, generator=generator) for heads in (n_q, n_kv, n_kv))
    out = paged_attention(q, k, v, k_pool, v_pool, batch, BLOCK, torch.float32)
    assert out.shape == (2, n_q * HEAD) and group.inplace_mask is None  # the kernel's mask was never built


def _fresh_build_dir(monkeypatch, tmp_path, kernel):
    """A build folder holding a copy of the built kernel, used by the next load()."""
    import shutil

    build = tmp_path / "kernel"
    build.mkdir()
    shutil.copyfile(kernel.__file__, build / f"{paged_kernel.MODULE}.so")
    monkeypatch.setattr(paged_kernel, "_build_dir", lambda: build)
    monkeypatch.setattr(paged_kernel, "_state", {"path": None, "module": None, "error": None, "loaded": False})
    monkeypatch.delenv(paged_kernel.ENV, raising=False)
    return build


def test_a_lock_left_by_a_killed_build_does_not_hang_the_next_start(kernel, monkeypatch, tmp_path):
    """torch's own loader waits for ever on a build lock a killed build left; ours removes a stale one."""
    import os
    import time

    build = _fresh_build_dir(monkeypatch, tmp_path, kernel)
    lock = build / "lock"
    lock.touch()
    stale = time.time() - paged_kernel.STALE_LOCK_S - 60
    os.utime(lock, (stale, stale))
    module = paged_kernel.load()
    assert module is not None and not lock.exists() and paged_kernel.kernel() is module


def test_a_build_in_another_process_is_waited_for(kernel, monkeypatch, tmp_path):
    import threading

    build = _fresh_build_dir(monkeypatch, tmp_path, kernel)
    lock = build / "lock"
    lock.touch()   # another process's build, under way
    done = threading.Event()
    threading.Thread(target=lambda: (done.wait(30), lock.unlink()), daemon=True).start()
    waiter = threading.Thread(target=paged_kernel.load)
    waiter.start()
    assert not paged_kernel._state["module"]   # still waiting: the lock is there
    done.set()
    waiter.join(60)
    assert not waiter.is_alive() and paged_kernel._state["module"] is not None and not lock.exists()


def test_the_environment_selects_the_gather_path(monkeypatch):
    monkeypatch.setattr(paged_kernel, "_state", {"path": None, "module": None, "error": None, "loaded": False})
    monkeypatch.setenv(paged_kernel.ENV, "gather")
    assert paged_kernel.kernel() is None
    assert paged_kernel.attention_path(torch.float32) == f"gather (selected by {paged_kernel.ENV})"
