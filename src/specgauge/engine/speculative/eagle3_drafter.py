"""Drafting with an EAGLE-3 head (chain and tree): its per-request state, catch-up and KV pool.

The head (:mod:`specgauge.engine.models.eagle3`, published layout, with its cached forward) has
one decoder layer; here it gets a paged KV pool of its own — one layer, addressed through the
*target's* block tables, so a request's draft K/V for position ``t`` lives in the same slot as
its target K/V for ``t``.

Per request (``Request.draft_state``, an :class:`EagleState`):

* ``draft_len`` — positions whose draft K/V is cached: the pair (target feature of position t,
  token t+1) at RoPE position t, for t < ``draft_len``. Rollback is this one number: draft
  K/V written past it while drafting is scratch and gets overwritten.
* ``pending`` — target features (3 aux layers, concatenated) of positions ``draft_len`` ..
  ``num_computed − 1``, recorded after every target forward (prefill chunks, verifies of the
  accepted path, plain decode steps while speculation is switched off).

A step's drafting starts with one *catch-up* forward over the pending pairs of every request
drafting this step (ragged: the previous step's accepted tokens + 1, a whole prompt, or every
token decoded while speculation was off), which leaves ``draft_len == num_computed`` and gives
the first draft distribution. At most ``CATCH_UP_BUDGET`` pairs run per step, smallest backlogs
first: a request with a longer backlog catches up over several steps and drafts once it is
level; one whose backlog *past its prompt* (decoded while speculation was off) is long against the
tokens it has left (over ``CATCH_UP_MIN`` pairs and over ``CATCH_UP_PER_TOKEN_LEFT`` per token
left) is not caught up at all and finishes plain; a prompt is always caught up. A
chain then runs ``k − 1`` one-token steps (the tokens kept on the device until the chain is
done), each attending to the cached pairs and the chain so far: the requests' draft K/V are
gathered from the pool once per chain and each step writes its own K/V into that copy — or, for
one request on consecutive blocks, the chain attends a view of the pool and writes there (past
``draft_len`` the pool's draft K/V is scratch the next catch-up rewrites) — and every step's
positions, cos/sin and mask are made up front. A catch-up of one request is laid out from Python
ints and the drafter's causal-mask table (``lay_out``'s ``causal_rows``).
A tree (``topk > 1``) expands the ``topk`` best nodes per depth (SGLang's scheme: children
scored by cumulative draft log-probability) and recomputes the expanded nodes each step under a
tree mask; the best ``num_draft_tokens − 1`` nodes form the draft tree.
On CPU the head's passes of one row — of up to ``FBGEMM_ROWS_MAX`` where its fp32 weights are
packed for FBGEMM — run in fp32 whatever the target's dtype (see ``build_drafter`` and
``Eagle3Head.prepare_for_inference``); it attends, and keeps its K/V, in the head's
``attention_dtype`` (bf16 where the target attends in bf16: a CPU with AMX).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specgauge.engine.core.batch_layout import Segment, lay_out
from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.models.eagle3 import Eagle3Head
from specgauge.engine.core.kv_cache import KVCache, consecutive_from
from specgauge.engine.models.attention import causal_mask
from specgauge.engine.core.scheduler import Request
from specgauge.engine.speculative.tree import DraftTree, Proposal


CATCH_UP_BUDGET = 1024  # draft pairs caught up per step at most (across requests)
CATCH_UP_PER_TOKEN_LEFT = 4  # a backlog longer than this many pairs per token still to generate is not caught up
CATCH_UP_MIN = 64  # … unless it is at most this long
CAUSAL_TABLE_MAX = 1024  # positions the drafter's causal-mask table covers at most (``causal_rows``)


@dataclass
class EagleState:
    """The draft head's per-request state (see the module docstring)."""

    draft_len: int = 0
    pending: list[torch.Tensor] = field(default_factory=list)  # each (T_i, 3H)

    @property
    def num_pending(self) -> int:
        return sum(int(f.shape[0]) for f in self.pending)


@dataclass
class _Node:
    """A tree candidate: target token id, parent candidate (-1: root), cumulative log-prob."""

    token: int
    parent: int
    score: float
    depth: int


@dataclass
class _Chain:
    """A chain's attention context (see :meth:`Eagle3Drafter._chain_context`), one row per live chain."""

    keys: torch.Tensor       # (B, Tk, Hkv, D) attention dtype: the request's draft K/V, then the chain's own
    values: torch.Tensor     # (B, Tk, Hkv, D)
    positions: torch.Tensor  # (B, S) position of step s's token
    cos: torch.Tensor        # (B, S, 1, D)
    sin: torch.Tensor        # (B, S, 1, D), signed (``apply_rope_signed``)
    masks: torch.Tensor      # (B, S, 1, 1, Tk) additive
    rows: torch.Tensor       # (B,) 0 … B−1

    def select(self, keep: torch.Tensor) -> "_Chain":
        """The chains ``keep`` (indices into this one's rows) only."""
        return _Chain(*(t.index_select(0, keep) for t in (self.keys, self.values, self.positions, self.cos,
                                                          self.sin, self.masks)), self.rows[:keep.shape[0]])


class Eagle3Drafter:
    """Drafts with an EAGLE-3 head over the target's features; owns the head's KV pool."""

    def __init__(self, head: Eagle3Head, blocks: BlockManager, device: torch.device, dtype: torch.dtype,
                 num_steps: int, topk: int = 1, num_draft_tokens: int | None = None,
                 min_draft_prob: float = 0.0, packing: str = "none") -> None:
        self.head = head
        self.min_draft_prob = min_draft_prob
        self.blocks = blocks
        self.device = device
        self.num_steps, self.topk = num_steps, topk
        self.max_drafts = (num_draft_tokens or num_steps + 1) - 1
        self.is_tree = topk > 1
        self.catch_up_budget = CATCH_UP_BUDGET
        cfg = head.config
        self.aux_layers = tuple(sorted(set(cfg.aux_layers)))  # what the target forward returns
        self._aux_order = [self.aux_layers.index(i) for i in cfg.aux_layers]
        num_positions = blocks.num_blocks * blocks.block_size  # a request's positions each have a slot
        head.prepare_for_inference(num_positions, dtype, packing)
        self.cache = KVCache(1, blocks.num_blocks, blocks.block_size, cfg.num_key_value_heads, cfg.head_size,
                             head.attention_dtype, device)
        # target id of every draft id (``draft_to_target`` as one lookup)
        self._target_ids = head.draft_to_target(torch.arange(cfg.draft_vocab_size, device=device))
        self._positions = torch.arange(num_positions, device=device)
        self._causal = torch.zeros(0, 0, device=device)  # ``causal_rows``' table, grown on demand

    @property
    def attention_dtype(self) -> torch.dtype:
        """The dtype of the head's K/V pool, masks and attention (set by the head's ``prepare_for_inference``)."""
        return self.head.attention_dtype

    def causal_rows(self, first: int, count: int, keys: int) -> torch.Tensor:
        """Additive causal mask rows (count, keys) for query positions ``first``… of one sequence
        whose keys are its positions 0…keys−1: a view of a table grown on demand up to
        ``CAUSAL_TABLE_MAX`` positions (4 MB), made on the spot past that."""
        size = max(first + count, keys)
        if size > CAUSAL_TABLE_MAX:
            return self._mask_past(self._positions[first:first + count], keys)
        if size > self._causal.shape[0]:
            size = min(max(size, 2 * self._causal.shape[0], 64), CAUSAL_TABLE_MAX)
            self._causal = causal_mask(size, self.attention_dtype, self.device).view(size, size)
        return self._causal[first:first + count, :keys]

    def _mask_past(self, positions: torch.Tensor, keys: int) -> torch.Tensor:
        """Additive mask (*positions.shape, keys): -inf where the key comes after the query's position."""
        return torch.zeros(*positions.shape, keys, dtype=self.attention_dtype, device=self.device).masked_fill_(
            self._positions[:keys] > positions.unsqueeze(-1), float("-inf"))

    def slots_needed(self, k: int) -> int:
        """KV slots past the pending token for ``k`` drafts (a tree also needs scratch nodes)."""
        if k <= 0:
            return 0
        return max(self.max_drafts, (self.num_steps - 1) * self.topk) if self.is_tree else k

    # -- target features -----------------------------------------------------------------
    def features(self, aux: list[torch.Tensor]) -> torch.Tensor:
        """The target forward's aux outputs (each (N, H), for ``aux_layers``) → (N, 3H) in the head's order."""
        return torch.cat([aux[j] for j in self._aux_order], dim=-1)

    def observe(self, request: Request, features: torch.Tensor) -> None:
        """Record target features (T, 3H) of the next positions whose K/V the target kept."""
        state = request.draft_state
        if not isinstance(state, EagleState):
            state = request.draft_state = EagleState()
        state.pending.append(features)

    # -- drafting --------------------------------------------------------------------------
    def propose(self, requests: list[Request], ks: list[int]) -> Proposal:
        """Draft trees for decoding requests (``ks``: drafts wanted per request, 0 = none), with
        the draft pairs caught up first and the requests whose backlog was not worth it."""
        trees = [DraftTree.chain(())] * len(requests)
        active = [i for i, k in enumerate(ks) if k > 0 and self._worth_catching_up(requests[i])]
        chosen = set(active)
        skipped = frozenset(requests[i].request_id for i, k in enumerate(ks) if k > 0 and i not in chosen)
        # Catch-up forward over the pending pairs of the requests drafting now; one not drafting
        # this step keeps its backlog for a later one.
        caught, catch_up = self._catch_up([requests[i] for i in active])
        roots = {active[j]: root for j, root in caught.items()}
        active = [i for i in active if i in roots]
        if active and self.is_tree:
            for i, tree in zip(active, self._tree([requests[i] for i in active], [roots[i] for i in active])):
                trees[i] = tree
        elif active:
            for i, tree in zip(active, self._chain([requests[i] for i in active], [roots[i] for i in active],
                                                   [ks[i] for i in active])):
                trees[i] = tree
        return Proposal(tuple(trees), catch_up, skipped)

    @staticmethod
    def _worth_catching_up(request: Request) -> bool:
        """Whether drafting can still pay for the request's backlog: a long one decoded while
        speculation was off is not caught up when few tokens are left to gain from it. The prompt's
        pairs never count against it: every engine runs its EAGLE-3 head over the whole prompt
        (vLLM's ``EagleProposer.propose`` takes the target hidden states of every scheduled token,
        prefill included: vllm/v1/spec_decode/eagle.py), so a long prompt is caught up over as many
        steps as ``CATCH_UP_BUDGET`` needs, not skipped."""
        state = request.draft_state
        if not isinstance(state, EagleState):
            return True
        computed = state.draft_len + state.num_pending
        decoded_backlog = computed - max(state.draft_len, len(request.prompt_ids))
        left = request.params.max_tokens - len(request.output_ids)
        return decoded_backlog <= max(CATCH_UP_MIN, CATCH_UP_PER_TOKEN_LEFT * left)

    def _catch_up(self, requests: list[Request]) -> tuple[dict[int, tuple[torch.Tensor, torch.Tensor]], int]:
        """Run pending pairs, at most ``catch_up_budget`` of them per step (smallest backlogs
        first, so a long backlog — a prompt, or an off period under load — is spread over steps
        instead of stalling one). Returns, for each request caught up completely, its last pair's
        (feature (h,), logits (Vd,)) — a request still behind drafts nothing this step — and the
        number of pairs run."""
        segments, feats, index, complete = [], [], [], []
        budget = self.catch_up_budget
        candidates = [(i, r) for i, r in enumerate(requests) if isinstance(r.draft_state, EagleState)
                      and r.draft_state.pending]
        for i, request in sorted(candidates, key=lambda item: item[1].draft_state.num_pending):
            if budget <= 0:
                break
            state = request.draft_state
            pending = torch.cat(state.pending) if len(state.pending) > 1 else state.pending[0]  # (P, 3H)
            take = min(int(pending.shape[0]), budget)
            tokens = request.token_ids(state.draft_len + 1, state.draft_len + 1 + take)
            if len(tokens) < take:  # cannot happen while the invariant holds; skip drafting then
                continue
            budget -= take
            segments.append(Segment(request.request_id, state.draft_len, tokens, [take - 1]))
            feats.append(pending[:take])
            state.pending = [pending[take:]] if take < pending.shape[0] else []
            index.append(i)
            complete.append(take == pending.shape[0])
        caught_up = sum(len(seg.tokens) for seg in segments)
        if not segments:
            return {}, 0
        layout = lay_out(segments, self.blocks, self.device, self.attention_dtype, causal_rows=self.causal_rows)
        flat = feats[0] if len(feats) == 1 else torch.cat(layout.in_layout_order(feats))  # (N, 3H)
        hidden, logits = self.head.forward_cached(layout.batch, self.cache, flat, fused=False)
        out = {}
        for seg, i, done, offset, row in zip(segments, index, complete, layout.offsets, layout.logit_offsets):
            requests[i].draft_state.draft_len += len(seg.tokens)
            if done:
                out[i] = (hidden[offset + len(seg.tokens) - 1], logits[row])
        return out, caught_up

    def stop_unsure(self, ks: list[int], live, logits: torch.Tensor, length: int) -> list[int]:
        """Cut at ``length`` the chains (``live``: their indices, rows of ``logits``) whose newest
        draft token has a draft probability below ``min_draft_prob``: the target would likely
        reject the next tokens, and each costs a head forward (EAGLE-2's observation that draft
        confidence tracks acceptance)."""
        if self.min_draft_prob <= 0:
            return ks
        sure = torch.softmax(logits.float(), dim=-1).amax(-1).tolist()
        for i, p in zip(live, sure):
            if p < self.min_draft_prob:
                ks[i] = min(ks[i], length)
        return ks

    def _d2t_map(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids → target ids."""
        return self._target_ids.index_select(0, draft_ids)

    def _chain(self, requests: list[Request], roots: list, ks: list[int]) -> list[DraftTree]:
        """k − 1 one-token steps after the catch-up: greedy draft tokens, kept as tensors (one
        host sync at the end, not one per step)."""
        first = torch.stack([logits for _, logits in roots])  # (B, Vd)
        columns = [self._d2t_map(first.argmax(-1))]  # each (B,)
        features = torch.stack([feature for feature, _ in roots])  # (B, h) of the live chains
        ks = self.stop_unsure(list(ks), range(len(ks)), first, 1)
        if max(ks) > 1:
            chain = self._chain_context(requests, max(ks) - 1)
            live = list(range(len(requests)))
            rows = None  # index of the live chains among all (None: every chain is live)
            for step in range(1, max(ks)):
                still = [j for j, i in enumerate(live) if ks[i] > step]
                if not still:
                    break
                if len(still) < len(live):  # some chains are done: run the rest only
                    keep = torch.tensor(still, dtype=torch.long, device=self.device)
                    chain, features = chain.select(keep), features.index_select(0, keep)
                    live = [live[j] for j in still]
                    rows = torch.tensor(live, dtype=torch.long, device=self.device)
                tokens = columns[-1] if rows is None else columns[-1].index_select(0, rows)
                features, logits = self._chain_step(chain, step - 1, tokens, features)
                picked = self._d2t_map(logits.argmax(-1))  # (live,)
                ks = self.stop_unsure(ks, live, logits, step + 1)
                if rows is not None:
                    picked = torch.zeros_like(columns[0]).index_copy_(0, rows, picked)
                columns.append(picked)
        drafts = torch.stack(columns, dim=1).tolist()  # (B, max k)
        return [DraftTree.chain(tuple(d[:k])) for d, k in zip(drafts, ks)]

    def _chain_context(self, requests: list[Request], steps: int) -> "_Chain":
        """What a chain's ``steps`` one-token steps attend with, made once: the requests' draft
        K/V (gathered from the pool, or a view of it for one request on consecutive blocks), and
        every step's positions, cos/sin and mask."""
        tables = [self.blocks.table(r.request_id).blocks for r in requests]
        width = max(len(t) for t in tables)
        cfg = self.head.config
        n_kv, d = cfg.num_key_value_heads, cfg.head_size
        block = self.blocks.block_size
        first = consecutive_from(tables)
        if first is not None:  # one request on consecutive blocks: views of the pool (B=1, Tk, Hkv, D)
            span = slice(first * block, (first + width) * block)
            keys, values = (pool[0][:, span].unsqueeze(0).transpose(1, 2) for pool in (self.cache.k, self.cache.v))
        else:  # gathered copies (B, Tk, Hkv, D): the chain writes its own K/V into them, not into the pool
            table = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.long, device=self.device)
            pool_k = self.cache.k[0].view(n_kv, -1, block, d)  # (Hkv, blocks, bs, D)
            pool_v = self.cache.v[0].view(n_kv, -1, block, d)
            keys = pool_k.index_select(1, table.view(-1)).view(n_kv, len(requests), width * block, d).permute(1, 2, 0, 3)
            values = pool_v.index_select(1, table.view(-1)).view(n_kv, len(requests), width * block, d).permute(1, 2, 0, 3)
        if len(requests) == 1:  # one stream: views of the tables
            base = requests[0].draft_state.draft_len
            positions = self._positions[base:base + steps].unsqueeze(0)  # (1, S): step s at draft_len + s
            cos, sin = (rope.unsqueeze(0) for rope in self.head.rope_span(base, steps))  # (1, S, 1, D)
            masks = self.causal_rows(base, steps, width * block).unsqueeze(0)  # (1, S, Tk)
        else:
            base = torch.tensor([r.draft_state.draft_len for r in requests], dtype=torch.long, device=self.device)
            positions = base.unsqueeze(1) + self._positions[:steps]  # (B, S): step s at draft_len + s
            cos, sin = self.head.rope_cached(positions)  # (B, S, 1, D)
            masks = self._mask_past(positions, width * block)  # (B, S, Tk)
        return _Chain(keys, values, positions, cos, sin,
                      masks.unsqueeze(2).unsqueeze(2), self._positions[:len(requests)])

    def _chain_step(self, chain: "_Chain", step: int, tokens: torch.Tensor,
                    features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One chain step (0-based ``step``) of every live chain: a pass of the head over one token
        each, attending to the chain's K/V, into which it writes its own (a gathered copy, or for one
        request on consecutive blocks the pool itself: past ``draft_len`` its draft K/V is scratch,
        and the next catch-up rewrites it)."""
        return self.head.forward_gathered(tokens, features, chain.cos[:, step], chain.sin[:, step], chain.keys,
                                          chain.values, (chain.rows, chain.positions[:, step]), chain.masks[:, step])

    def _tree(self, requests: list[Request], roots: list) -> list[DraftTree]:
        """Top-k expansion for ``num_steps`` depths, then the best ``max_drafts`` nodes."""
        k = self.topk
        nodes: list[list[_Node]] = [[] for _ in requests]
        expanded: list[list[int]] = [[] for _ in requests]  # candidate ids whose outputs are computed
        frontier_logits = [logits.unsqueeze(0) for _, logits in roots]  # per request (F, Vd)
        frontier_ids: list[list[int]] = [[-1] for _ in requests]
        parent_feature: dict[tuple[int, int], torch.Tensor] = {(r, -1): roots[r][0] for r in range(len(requests))}
        for step in range(self.num_steps):
            for r in range(len(requests)):
                logp = torch.log_softmax(frontier_logits[r].float(), dim=-1)  # (F, Vd)
                top_p, top_i = logp.topk(k, dim=-1)  # (F, k)
                children = []
                for f, parent in enumerate(frontier_ids[r]):
                    base = nodes[r][parent].score if parent >= 0 else 0.0
                    depth = nodes[r][parent].depth + 1 if parent >= 0 else 1
                    tokens = self._d2t_map(top_i[f]).tolist()
                    for token, lp in zip(tokens, top_p[f].tolist()):
                        nodes[r].append(_Node(token, parent, base + lp, depth))
                        children.append(len(nodes[r]) - 1)
                best = sorted(children, key=lambda c: -nodes[r][c].score)[:k]
                frontier_ids[r] = best
                expanded[r].extend(best)
            if step == self.num_steps - 1:
                break
            # Recompute every expanded node (tree mask over them) to get the new frontier's outputs.
            segments, feats = [], []
            for r, request in enumerate(requests):
                ids = expanded[r]
                pos = {c: j for j, c in enumerate(ids)}
                mask = [[False] * len(ids) for _ in ids]
                for j, c in enumerate(ids):
                    a = c
                    while a >= 0:
                        mask[j][pos[a]] = True
                        a = nodes[r][a].parent
                segments.append(Segment(request.request_id, request.draft_state.draft_len,
                                        [nodes[r][c].token for c in ids],
                                        [pos[c] for c in frontier_ids[r]], mask,
                                        [nodes[r][c].depth - 1 for c in ids]))
                feats.append(torch.stack([parent_feature[(r, nodes[r][c].parent)] for c in ids]))
            layout = lay_out(segments, self.blocks, self.device, self.attention_dtype)
            hidden, logits = self.head.forward_cached(layout.batch, self.cache, torch.cat(layout.in_layout_order(feats)),
                                                      fused=True)
            for r, seg in enumerate(segments):
                rows, offset, first = seg.logit_rows, layout.offsets[r], layout.logit_offsets[r]
                frontier_logits[r] = logits[first:first + len(rows)]
                for c, row in zip(frontier_ids[r], rows):
                    parent_feature[(r, c)] = hidden[offset + row]
        return [self._select(n) for n in nodes]

    def _select(self, nodes: list[_Node]) -> DraftTree:
        """The best ``max_drafts`` candidates by score whose parents are chosen too, in
        topological order (depth, then score)."""
        chosen: set[int] = set()
        for c in sorted(range(len(nodes)), key=lambda c: (-nodes[c].score, nodes[c].depth)):
            if len(chosen) == self.max_drafts:
                break
            if nodes[c].parent == -1 or nodes[c].parent in chosen:
                chosen.add(c)
        ordered = sorted(chosen, key=lambda c: (nodes[c].depth, -nodes[c].score))
        where = {c: j for j, c in enumerate(ordered)}
        return DraftTree(tuple(nodes[c].token for c in ordered),
                         tuple(where[nodes[c].parent] if nodes[c].parent >= 0 else -1 for c in ordered))
