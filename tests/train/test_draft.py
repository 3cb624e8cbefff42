"""Training the EAGLE-3 head: training-time test, the trainer's checkpoints, and the vocabulary of the mix."""

import pytest
import torch

from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head, build_vocab_map, target_features
from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM
from specgauge.errors import UserError
from specgauge.train.draft import Conversations, DraftTrainConfig, DraftTrainer, MixBatches, pad_batch, token_counts
from specgauge.train.ttt import unrolled_loss

VOCAB = 64


@pytest.fixture(scope="module")
def target():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval().requires_grad_(False)


@pytest.fixture()
def head(target):
    torch.manual_seed(1)
    head = Eagle3Head(Eagle3Config.for_target(target.config, 48))
    head.share_embeddings(target)
    head.set_vocab_map(*build_vocab_map(torch.arange(VOCAB, dtype=torch.float64), 48))
    return head


def _batch(target, seed=0, batch=3, length=24):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, length), generator=generator)
    mask = torch.zeros(batch, length, dtype=torch.bool)
    mask[:, length // 3:] = True  # the last two thirds are "response"
    with torch.no_grad():
        logits, aux = target_features(target, ids, (1, 2, 3))
    return ids, aux, logits, mask


def test_unrolled_steps_read_the_heads_own_features_and_tokens(target, head):
    ids, aux, logits, mask = _batch(target)
    _, stats = unrolled_loss(head, ids, aux, logits, mask, steps=3, feed="draft", trace=True)
    first, second, third = stats.trace
    assert torch.equal(second["features_in"], first["features_out"])
    assert torch.equal(second["tokens"], head.draft_to_target(first["logits"].argmax(-1)))
    assert torch.equal(third["features_in"], second["features_out"])
    assert torch.equal(third["tokens"], head.draft_to_target(second["logits"].argmax(-1)))
    # The first step is the head's plain causal pass over (target feature t, token t+1).
    dense = head.step(ids[:, 1:], head.fuse(aux[:, :-1]), torch.arange(ids.shape[1] - 1))
    rows = dense.features.reshape(-1, dense.features.shape[-1])
    assert torch.allclose(rows[first["rows"]], first["features_out"], atol=1e-6)

def test_later_steps_on_the_scored_rows_equal_the_dense_steps(target, head):
    """Steps after the first run from the scored rows' slots only; on those rows they compute what
    the head's dense step (every row, chain attention over the whole grid) does."""
    ids, aux, logits, mask = _batch(target, batch=3, length=24)
    mask[1, :20] = False  # sequences with different numbers of scored rows: empty slots in the grid
    _, stats = unrolled_loss(head, ids, aux, logits, mask, steps=3, feed="draft", trace=True)
    b, r = ids.shape[0], ids.shape[1] - 1
    positions = torch.arange(r)
    first = head.step(ids[:, 1:], head.fuse(aux[:, :-1]), positions)
    features, chain = first.features, []
    for step, record in enumerate(stats.trace[1:], start=1):
        tokens = torch.zeros(b * r, dtype=torch.long).index_copy(0, record["rows"], record["tokens"]).view(b, r)
        dense = head.step(tokens, features, positions + step, base=first.kv, chain=chain)
        rows = dense.features.reshape(b * r, -1)[record["rows"]]
        assert torch.allclose(rows, record["features_out"], atol=1e-5), step
        features, chain = dense.features, [*chain, dense.kv]


def test_feed_target_reads_the_sequence_tokens_but_still_its_own_features(target, head):
    ids, aux, logits, mask = _batch(target)
    _, stats = unrolled_loss(head, ids, aux, logits, mask, steps=3, feed="target", trace=True)
    first, second, _ = stats.trace
    assert torch.equal(second["features_in"], first["features_out"])
    # row t of the second step reads x_{t+2}: the token the first step was scored on
    next_tokens = torch.cat([ids[:, 2:], torch.zeros(3, 1, dtype=torch.long)], 1).reshape(-1)  # (B*R,)
    assert torch.equal(second["tokens"], next_tokens[second["rows"]])

def test_step_losses_are_weighted_by_decay(target, head):
    ids, aux, logits, mask = _batch(target)
    loss, stats = unrolled_loss(head, ids, aux, logits, mask, steps=3, decay=0.8)
    assert loss.item() == pytest.approx(sum(0.8 ** i * l for i, l in enumerate(stats.losses)), rel=1e-5)
    assert stats.counts[0] == mask[:, 2:].sum()


def test_a_few_ttt_steps_reduce_the_loss(target, head):
    ids, aux, logits, mask = _batch(target, batch=4, length=32)
    optimizer = torch.optim.AdamW(head.trainable_parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        loss, _ = unrolled_loss(head, ids, aux, logits, mask, steps=3)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    assert head.embed_tokens.weight.grad is None  # the target's embeddings stay frozen


def _conversations(name: str, count: int, seed: int) -> Conversations:
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(count):
        length = int(torch.randint(12, 30, (1,), generator=generator))
        ids = torch.randint(8, VOCAB, (length,), generator=generator)
        mask = torch.zeros(length, dtype=torch.bool)
        mask[length // 2:] = True
        samples.append((ids, mask))
    return Conversations(name, samples)


def test_pad_batch_right_pads_with_no_loss_on_padding():
    ids, mask = pad_batch([(torch.tensor([5, 6, 7]), torch.tensor([False, True, True])),
                           (torch.tensor([9]), torch.tensor([True]))], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [9, 0, 0]] and mask.tolist() == [[False, True, True], [True, False, False]]


def test_mix_follows_the_weights():
    sources = {"a": _conversations("a", 5, 0), "b": _conversations("b", 5, 1)}
    batches = MixBatches(sources, batch_size=400, seed=0, weights={"a": 0.9, "b": 0.1}, pad_id=0)
    ids, _ = batches.next()
    from_a = sum(any(torch.equal(row[:s.numel()], s) for s, _ in sources["a"].samples) for row in ids)
    assert 320 < from_a < 400


def test_token_counts_weigh_each_source_by_its_share_of_the_mix():
    a = Conversations("a", [(torch.tensor([1, 2, 2]), torch.tensor([False, True, True]))])
    b = Conversations("b", [(torch.tensor([3, 3, 3, 4]), torch.tensor([True, True, True, True]))])
    counts = token_counts({"a": a, "b": b}, 6, {"a": 0.5, "b": 0.5})
    assert counts.tolist() == pytest.approx([0, 0, 0.5, 0.375, 0.125, 0])


def _trainer(target, run_dir, **overrides):
    settings = dict(batch_size=4, ttt_steps=3, draft_vocab_size=48, eval_every=1000, eval_samples=4, threads=1,
                    bf16=False, warmup_steps=2)
    config = DraftTrainConfig(**{**settings, **overrides})
    train = {"code_stdlib": _conversations("code_stdlib", 12, 0), "prose_docs": _conversations("prose_docs", 12, 1)}
    val = {"code_stdlib": _conversations("code_stdlib", 4, 2), "prose_docs": _conversations("prose_docs", 4, 3)}
    return DraftTrainer(target, train, val, run_dir, config, aux_layers=(1, 2, 3), eos_ids=(1,))


def test_trainer_resumes_where_it_stopped(tmp_path, target):
    straight = _trainer(target, tmp_path / "straight")
    losses = [straight.train_step() for _ in range(3)]
    interrupted = _trainer(target, tmp_path / "resumed")
    interrupted.train_step()
    interrupted.train_step()
    interrupted.save_checkpoint()
    resumed = _trainer(target, tmp_path / "resumed")
    resumed.load_checkpoint()
    assert resumed.state.step == 2
    assert resumed.train_step() == pytest.approx(losses[2], rel=1e-5)
    assert len(resumed.last_step_accuracy) == 3


def test_resuming_with_another_head_shape_names_what_differs(tmp_path, target):
    first = _trainer(target, tmp_path)
    first.train_step()
    first.save_checkpoint()
    other = _trainer(target, tmp_path, draft_vocab_size=40)
    with pytest.raises(UserError, match=r"draft_vocab_size 48 there, 40 here") as caught:
        other.load_checkpoint()
    assert "\n" not in str(caught.value) and "another --run-dir" in str(caught.value)
    assert other.state.step == 0   # nothing restored


def test_trainer_reports_per_step_accuracy_per_source(tmp_path, target):
    trainer = _trainer(target, tmp_path, weights={"code_stdlib": 1.0, "prose_docs": 0.0})
    assert set(trainer.train_sources) == {"code_stdlib"}  # a zero weight leaves a source out of training
    assert trainer.head.t2d[1]  # EOS is always in the draft vocabulary
    report = trainer.evaluate()
    assert set(report) == {"code_stdlib", "prose_docs"}  # but validation covers every source
    for row in report.values():
        assert len(row["step_accuracy"]) == 3 and len(row["prefix_accuracy"]) == 3
        assert all(p <= a + 1e-9 for p, a in zip(row["prefix_accuracy"], row["step_accuracy"]))
        assert 1.0 <= row["expected_accept_length"] <= 4.0
        assert row["scored_tokens"] > 0


def test_target_outputs_computed_once_give_the_online_loss(tmp_path, target):
    online = _trainer(target, tmp_path / "online")
    cached = _trainer(target, tmp_path / "cached", teacher_top_k=48)   # the whole draft vocabulary: no truncation
    done = []
    kept = cached.compute_target_outputs(done.append)
    assert sum(done) == cached.samples_to_compute() == 12 + 12 + 4 + 4 and kept > 0
    picks = [("code_stdlib", 3), ("prose_docs", 0), ("code_stdlib", 11)]
    online_loss, online_stats = online.batch_loss("train", picks)
    cached_loss, cached_stats = cached.batch_loss("train", picks)
    assert cached_loss.item() == pytest.approx(online_loss.item(), rel=1e-5)
    assert torch.equal(cached_stats.correct, online_stats.correct)
    assert [online.train_step() for _ in range(2)] == pytest.approx([cached.train_step() for _ in range(2)], rel=1e-4)
    assert cached.evaluate()["prose_docs"]["step_accuracy"] == online.evaluate()["prose_docs"]["step_accuracy"]


def test_target_outputs_kept_in_a_folder_are_read_back_only_for_the_same_target_head_and_samples(tmp_path, target):
    kept_in = tmp_path / "target_outputs"
    first = _trainer(target, tmp_path / "first")
    assert first.samples_to_compute(kept_in, "digest-a") == 32
    first.compute_target_outputs(keep_in=kept_in, target_digest="digest-a")
    assert sorted(p.name for p in kept_in.iterdir()) == sorted(
        f"{split}.{source}.{ext}" for split in ("train", "validation") for source in ("code_stdlib", "prose_docs")
        for ext in ("json", "pt"))
    again = _trainer(target, tmp_path / "again")
    assert again.samples_to_compute(kept_in, "digest-a") == 0
    computed = []
    again.compute_target_outputs(computed.append, kept_in, "digest-a")
    assert computed == []  # nothing went through the target
    for key, outputs in first.target_outputs.items():
        for mine, read in zip(outputs, again.target_outputs[key], strict=True):
            assert all(torch.equal(getattr(mine, f), getattr(read, f)) for f in ("aux", "top_values", "top_ids", "greedy"))
    picks = [("code_stdlib", 2), ("prose_docs", 1)]
    assert again.batch_loss("train", picks)[0].item() == first.batch_loss("train", picks)[0].item()
    # another target, another teacher size: computed again (and the folder rewritten for it)
    assert _trainer(target, tmp_path / "other").samples_to_compute(kept_in, "digest-b") == 32
    assert _trainer(target, tmp_path / "top8", teacher_top_k=8).samples_to_compute(kept_in, "digest-a") == 32


def test_a_truncated_teacher_keeps_less_and_scores_the_same_greedy_tokens(tmp_path, target):
    whole = _trainer(target, tmp_path / "whole", teacher_top_k=48)
    top8 = _trainer(target, tmp_path / "top8", teacher_top_k=8)
    assert top8.compute_target_outputs() < whole.compute_target_outputs()
    picks = [("prose_docs", 5), ("code_stdlib", 1)]
    (loss8, stats8), (loss, stats) = top8.batch_loss("train", picks), whole.batch_loss("train", picks)
    assert torch.equal(stats8.correct, stats.correct) and torch.isfinite(loss8)
    assert loss8.item() == pytest.approx(loss.item(), rel=0.2)   # the mass outside the top 8 is small, not none
