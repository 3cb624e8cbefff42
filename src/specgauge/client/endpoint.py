"""Where and how to reach the server under test: frozen config, validated at the edge."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache

from specgauge.errors import UserError

API_NAMES = ("openai-chat", "openai-completions", "sglang")


@dataclass(frozen=True)
class Endpoint:
    """The server under test.

    ``api`` names an adapter (see :mod:`specgauge.client.adapters`). ``api_key`` is sent as
    ``Authorization: Bearer``; when it is None, ``OPENAI_API_KEY`` from the environment is used.
    ``model`` None means "auto-detect from ``/v1/models``" (the runner does it once per point).
    ``tokenizer_path`` names a local ``tokenizer.json`` for counting tokens per chunk when the
    server gives no cumulative counts. ``server`` is what the probe showed the server to be
    (``"sglang"``), so that engine-specific request fields go to that engine only.
    ``context_length`` is the server's context in tokens where it reports one: a multi-turn session
    ends when its next turn would not fit (:mod:`specgauge.load.sessions`).
    ``insecure``: an ``https`` server's certificate is not checked (a self-signed test server).
    """

    base_url: str
    api: str
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)               # secrets: never in a repr,
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # a log or an error message
    tokenizer_path: str | None = None
    server: str | None = None   # "sglang" once the probe has shown it (probe.server_of); None: unknown
    context_length: int | None = None
    insecure: bool = False      # https: no certificate or host name checks (--insecure)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise UserError(f"endpoint URL must start with http:// or https://: {self.base_url!r}")
        if self.api not in API_NAMES:
            raise UserError(f"unknown --api {self.api!r} (choose one of: {', '.join(API_NAMES)})")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` on this server (``path`` starts with '/')."""
        return self.base_url + path


@dataclass(frozen=True)
class Timeouts:
    """Per-request limits in seconds: TCP/TLS connect, wait for response headers, stall between reads."""

    connect_s: float = 10
    headers_s: float = 60
    read_s: float = 60


@lru_cache(maxsize=64)
def request_headers(endpoint: Endpoint) -> dict[str, str]:
    """HTTP headers for every request to ``endpoint`` (computed once per endpoint; do not mutate)."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
               "User-Agent": "specgauge"}
    api_key = endpoint.api_key if endpoint.api_key is not None else os.environ.get("OPENAI_API_KEY")
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    for name, value in endpoint.headers:
        headers[name] = value
    return headers
