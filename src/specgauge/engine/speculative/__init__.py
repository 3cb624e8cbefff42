"""Speculative decoding for the embedded engine: draft cheaply, verify in one target forward.

Vocabulary (used the same way in every file here, vLLM ``rejection_sampler.py`` style):

* **draft tokens** — what a drafter proposes for one request in one step: a chain
  (``topk = 1``) or a tree (:class:`~specgauge.engine.speculative.tree.DraftTree`) hanging off
  the request's *root*, its pending token (the last token produced, whose K/V is not cached yet).
* **verify** — one target forward over root + draft tokens (a tree attention mask when the
  draft is a tree), giving the target's distribution after every node.
* **accepted tokens** — the draft tokens on the path the target agrees with, walked from the
  root: greedy requests accept a child equal to the target's argmax; sampled requests accept
  by rejection sampling (``verify.accept_sampled``).
* **recovered token** — at the first node where every child is rejected, a token sampled from
  the *residual* distribution (the target's, with the rejected drafts' mass removed); for
  greedy requests it is the target's argmax there.
* **bonus token** — when the walk ends at a leaf (every draft on the path accepted), one more
  token sampled from the target's distribution at that leaf: a verify of k drafts emits up to
  k + 1 tokens.
* **accept length** — tokens emitted per verify step (accepted + 1), in [1, k + 1].

Each step emits ``accepted + [recovered | bonus]`` per request — a ragged number of tokens per
request inside one continuous batch — and rolls the KV back to the accepted prefix (target:
``num_computed`` and ``BlockManager.truncate``; draft head: its own ``draft_len``).

Modules: ``config`` (flags), ``tree`` (draft trees), ``verify`` (acceptance), ``ngram``
(prompt lookup), ``eagle`` (EAGLE-3 head's cached path and drafting), ``control`` (disable-above
and adaptive k), ``stats`` (per-request figures), ``runner`` (the step).
"""
