"""Server-side speculation counters, scraped around a load point and diffed.

- vLLM ``/metrics`` (Prometheus text) counters ``vllm:spec_decode_num_drafts_total``,
  ``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total`` and
  ``..._num_accepted_tokens_per_pos_total{position="i"}``: the difference after − before gives
  the point's own acceptance length ``1 + accepted / drafts``, rate ``accepted / draft_tokens`` and
  per-position rates ``accepted_at_i / drafts`` (scope ``point``).
- SGLang Prometheus counters, updated once per finished request (``observe_one_finished_request``
  in ``python/sglang/srt/observability/metrics_collector.py``): ``sglang:spec_verify_calls_total``
  (the request's ``spec_verify_ct``), ``sglang:generation_tokens_total`` (its completion tokens)
  and ``sglang:num_requests_total``. Differenced around a point they give the point's acceptance
  in the one definition, ``Σ(completion_tokens − 1) / Σ spec_verify_ct`` = (Δgeneration − Δrequests)
  / Δverify (a request that made one token adds 0 to both): scope ``point``, source
  ``sglang_metrics``. It is the point's own figure when nothing else used the server meanwhile.
  This is how acceptance is known over SGLang's OpenAI routes when it sends no per-request details.
- SGLang Prometheus gauges ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate`` hold the
  most recent logging interval's value, never a count: never differenced. Read at the end of the
  point, they are kept as ``gauges_at_end`` beside the counters' figure, or, without those
  counters, are the figure itself (scope ``gauge_at_end``).
- SGLang ``/get_server_info`` (newer ``/server_info``) ``internal_states[0].avg_spec_accept_length``
  is cumulative since the server started (scope ``cumulative_since_start``): it is the point's
  own value only if the server served nothing else, which the tool cannot know. A server whose
  ``/metrics`` shows ``vllm:`` metrics is vLLM: those SGLang-only routes are not asked for (vLLM
  answers 404 on both).
- vLLM's newer ``vllm:spec_decode_num_drafts_by_draft_length{draft_length="L"}`` (drafts that
  scheduled L draft tokens; ``SpecDecodingProm`` in ``vllm/v1/spec_decode/metrics.py``; absent in
  0.32.0) is differenced like the others: ``drafts_by_length``.
- vLLM's prefix cache, ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total``
  (prompt tokens looked up / found cached; ``vllm/v1/metrics/loggers.py``): the point's
  ``prefix_cache_hit_rate``. Cached prompts make TTFT short; a point with a high rate was shaped
  by the cache (repeated prompts), which ``--no-enable-prefix-caching`` on the server or distinct
  prompts per phase avoid.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import aiohttp

VLLM_PREFIX = "vllm:spec_decode_"
VLLM_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
VLLM_PER_POSITION = "num_accepted_tokens_per_pos"
VLLM_BY_DRAFT_LENGTH = "num_drafts_by_draft_length"
VLLM_PREFIX_CACHE = {"vllm:prefix_cache_queries_total": "queries", "vllm:prefix_cache_hits_total": "hits"}
SERVER_INFO_PATHS = ("/get_server_info", "/server_info")
# SGLang's per-finished-request counters (module doc) → snapshot keys.
SGLANG_COUNTERS = {"sglang:spec_verify_calls_total": "verify", "sglang:generation_tokens_total": "generation",
                   "sglang:num_requests_total": "requests"}

_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class SpecCounters:
    """Speculation as the server counted it, for one point (see the module doc for ``scope``)."""

    accept_length: float | None
    accept_rate: float | None
    source: str                      # "vllm_metrics" | "sglang_metrics" | "sglang_server_info"
    scope: str                       # "point" | "gauge_at_end" | "cumulative_since_start"
    num_drafts: float | None = None
    num_draft_tokens: float | None = None
    num_accepted_tokens: float | None = None
    per_position: list[float] = field(default_factory=list)  # acceptance rate at draft position i
    drafts_by_length: dict[str, float] = field(default_factory=dict)  # draft length -> drafts (newer vLLM)
    prefix_cache_queries: float | None = None   # prompt tokens looked up in vLLM's prefix cache
    prefix_cache_hits: float | None = None      # of them, found cached
    gauges_at_end: dict[str, float] = field(default_factory=dict)  # SGLang's gauges when the point ended

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Share of the point's prompt tokens that vLLM's prefix cache served."""
        if not self.prefix_cache_queries:
            return None
        return (self.prefix_cache_hits or 0.0) / self.prefix_cache_queries

    def to_dict(self) -> dict:
        return {"accept_length": self.accept_length, "accept_rate": self.accept_rate, "source": self.source,
                "scope": self.scope, "num_drafts": self.num_drafts, "num_draft_tokens": self.num_draft_tokens,
                "num_accepted_tokens": self.num_accepted_tokens, "per_position": list(self.per_position),
                "drafts_by_length": dict(self.drafts_by_length), "prefix_cache_queries": self.prefix_cache_queries,
                "prefix_cache_hits": self.prefix_cache_hits, "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
                "gauges_at_end": dict(self.gauges_at_end)}


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples ``(name, labels, value)`` of a Prometheus text exposition; bad lines are skipped."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, label_text, value_text = match.groups()
        try:
            value = float(value_text)
        except ValueError:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(label_text or "")}
        samples.append((name, labels, value))
    return samples


def _base_name(name: str) -> str:
    return name[:-6] if name.endswith("_total") else name


def spec_metrics(text: str) -> dict:
    """The speculation figures in a ``/metrics`` page: vLLM counters (summed over label sets,
    per position kept apart) and SGLang gauges (averaged over label sets)."""
    vllm: dict[str, float] = {}
    per_position: dict[int, float] = {}
    by_length: dict[str, float] = {}
    prefix_cache: dict[str, float] = {}
    gauges: dict[str, list[float]] = {}
    sglang: dict[str, float] = {}
    is_vllm = False
    for name, labels, value in parse_prometheus(text):
        is_vllm = is_vllm or name.startswith("vllm:")
        if name.startswith(VLLM_PREFIX):
            key = _base_name(name[len(VLLM_PREFIX):])
            if key == VLLM_PER_POSITION and "position" in labels:
                position = int(labels["position"])
                per_position[position] = per_position.get(position, 0.0) + value
            elif key == VLLM_BY_DRAFT_LENGTH and "draft_length" in labels:
                by_length[labels["draft_length"]] = by_length.get(labels["draft_length"], 0.0) + value
            elif key in VLLM_COUNTERS:
                vllm[key] = vllm.get(key, 0.0) + value
        elif name in VLLM_PREFIX_CACHE:
            prefix_cache[VLLM_PREFIX_CACHE[name]] = prefix_cache.get(VLLM_PREFIX_CACHE[name], 0.0) + value
        elif name in SGLANG_COUNTERS:
            sglang[SGLANG_COUNTERS[name]] = sglang.get(SGLANG_COUNTERS[name], 0.0) + value
        elif name in ("sglang:spec_accept_length", "sglang:spec_accept_rate") and math.isfinite(value):
            gauges.setdefault(name.split(":", 1)[1], []).append(value)
    out: dict = {}
    if is_vllm:
        out["server"] = "vllm"
    if vllm:
        out["vllm"] = vllm
        if per_position:
            out["vllm_per_position"] = {str(k): v for k, v in sorted(per_position.items())}
        if by_length:
            out["vllm_drafts_by_length"] = dict(sorted(by_length.items(), key=lambda kv: int(kv[0])))
    if prefix_cache:
        out["vllm_prefix_cache"] = prefix_cache
    if gauges:
        out["sglang_gauges"] = {k: sum(v) / len(v) for k, v in gauges.items()}
    if sglang:
        out["sglang_counters"] = sglang
    return out


def server_info_spec(info: dict) -> dict:
    """``avg_spec_accept_length`` from SGLang server info (``internal_states[0]``, or top level)."""
    states = info.get("internal_states")
    candidates = ([states[0]] if isinstance(states, list) and states and isinstance(states[0], dict) else [])
    candidates.append(info)
    for source in candidates:
        value = source.get("avg_spec_accept_length")
        if isinstance(value, (int, float)):
            return {"avg_spec_accept_length": float(value)}
    return {}


def counters_between(before: dict | None, after: dict | None) -> SpecCounters | None:
    """The point's :class:`SpecCounters` from two snapshots (see :func:`scrape_spec_snapshot`)."""
    if not after:
        return None
    before = before or {}
    if "vllm" in after and "vllm" in before:
        diff = {k: after["vllm"].get(k, 0.0) - before["vllm"].get(k, 0.0) for k in VLLM_COUNTERS}
        drafts, draft_tokens, accepted = diff["num_drafts"], diff["num_draft_tokens"], diff["num_accepted_tokens"]
        if drafts > 0:
            pos_after, pos_before = after.get("vllm_per_position", {}), before.get("vllm_per_position", {})
            per_position = [(pos_after[k] - pos_before.get(k, 0.0)) / drafts
                            for k in sorted(pos_after, key=int)]
            len_after, len_before = after.get("vllm_drafts_by_length", {}), before.get("vllm_drafts_by_length", {})
            cache_after, cache_before = after.get("vllm_prefix_cache", {}), before.get("vllm_prefix_cache", {})
            return SpecCounters(accept_length=1.0 + accepted / drafts,
                                accept_rate=accepted / draft_tokens if draft_tokens > 0 else None,
                                source="vllm_metrics", scope="point", num_drafts=drafts,
                                num_draft_tokens=draft_tokens, num_accepted_tokens=accepted,
                                per_position=per_position,
                                drafts_by_length={k: v - len_before.get(k, 0.0) for k, v in len_after.items()},
                                **_prefix_cache_diff(cache_before, cache_after))
    cache = prefix_cache_between(before, after)
    if cache and after.get("server") == "vllm" and "sglang_gauges" not in after:   # vLLM without drafting
        return SpecCounters(accept_length=None, accept_rate=None, source="vllm_metrics", scope="point", **cache)
    sglang = _sglang_counters_between(before.get("sglang_counters"), after.get("sglang_counters"),
                                      after.get("sglang_gauges", {}))
    if sglang is not None:
        return sglang
    if "sglang_gauges" in after:
        gauges = after["sglang_gauges"]
        return SpecCounters(accept_length=gauges.get("spec_accept_length"),
                            accept_rate=gauges.get("spec_accept_rate"),
                            source="sglang_metrics", scope="gauge_at_end")
    if "sglang_server_info" in after:
        return SpecCounters(accept_length=after["sglang_server_info"]["avg_spec_accept_length"],
                            accept_rate=None, source="sglang_server_info", scope="cumulative_since_start")
    return None


def _sglang_counters_between(before: dict | None, after: dict | None, gauges: dict) -> SpecCounters | None:
    """The point's acceptance from SGLang's per-request counters (module doc), or None when the
    server has none or verified nothing during the point."""
    if not before or not after or "verify" not in after:
        return None
    diff = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in ("verify", "generation", "requests")}
    if diff["verify"] <= 0:
        return None
    accepted = diff["generation"] - diff["requests"] - diff["verify"]
    return SpecCounters(accept_length=1.0 + accepted / diff["verify"], accept_rate=None, source="sglang_metrics",
                        scope="point", num_drafts=diff["verify"], num_accepted_tokens=accepted,
                        gauges_at_end=dict(gauges))


def _prefix_cache_diff(before: dict, after: dict) -> dict:
    if "queries" not in after:
        return {}
    return {"prefix_cache_queries": after["queries"] - before.get("queries", 0.0),
            "prefix_cache_hits": after.get("hits", 0.0) - before.get("hits", 0.0)}


def prefix_cache_between(before: dict | None, after: dict | None) -> dict:
    """The point's vLLM prefix-cache ``{"prefix_cache_queries", "prefix_cache_hits"}`` (empty when
    the server has no such counters); also for a server without speculation."""
    return _prefix_cache_diff((before or {}).get("vllm_prefix_cache", {}), (after or {}).get("vllm_prefix_cache", {}))


async def _get(session: aiohttp.ClientSession, url: str, headers: dict, timeout_s: float):
    try:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return None
            return await resp.read()
    except Exception:  # scraping is best effort: a server without the endpoint just has no figure
        return None


async def scrape_spec_snapshot(session: aiohttp.ClientSession, base_url: str, headers: dict,
                               *, timeout_s: float = 5.0) -> dict:
    """One snapshot of the server's speculation figures (``/metrics`` and server info); never raises.

    Keys present only when found: ``vllm``, ``vllm_per_position``, ``sglang_gauges``,
    ``sglang_server_info``.
    """
    import orjson

    snapshot: dict = {}
    page = await _get(session, base_url + "/metrics", headers, timeout_s)
    if page:
        snapshot.update(spec_metrics(page.decode("utf-8", "replace")))
    if snapshot.get("server") == "vllm":   # vLLM has neither SGLang route (404): not asked
        return snapshot
    for path in SERVER_INFO_PATHS:
        body = await _get(session, base_url + path, headers, timeout_s)
        if body is None:
            continue
        try:
            info = orjson.loads(body)
        except orjson.JSONDecodeError:
            continue
        if isinstance(info, dict):
            found = server_info_spec(info)
            if found:
                snapshot["sglang_server_info"] = found
            break
    return snapshot
