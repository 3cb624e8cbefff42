"""``BenchConfig``: one benchmark run's settings, validated once at the edge (CLI or caller).

The config, less its secrets, is stored with the run, so ``bench --resume`` re-reads exactly
what the run was started with.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specgauge.analysis.aggregate import DEFAULT_MAX_ERROR_RATE
from specgauge.client.endpoint import API_NAMES
from specgauge.load.plan import PointSpec

# Header names whose values are never written to the store (give them again on --resume).
SECRET_HEADER_NAMES = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"})
REDACTED = "<redacted>"
DEFAULT_OPEN_LOOP_REQUESTS = 64


class BenchConfig(BaseModel):
    """Settings of one ``specgauge bench`` run: the server, the suite and the load points.

    Points run in order: one closed-loop point per ``concurrency`` entry, then one open-loop point
    per ``rates`` entry. With neither, the single-stream point (concurrency 1) runs.
    Without ``num_requests`` or ``duration_s``, a closed-loop point sends max(16, 4 x concurrency)
    requests and an open-loop point 64.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    api: str
    suite: str = "smoke"
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    num_requests: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    warmup: int = Field(default=0, ge=0)
    seed: int = 0
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    model: str | None = None
    api_key: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    tokenizer_path: str | None = None
    max_error_rate: float = Field(default=DEFAULT_MAX_ERROR_RATE, ge=0, le=1)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {url!r})")
        return url.rstrip("/")

    @field_validator("api")
    @classmethod
    def _known_api(cls, api: str) -> str:
        if api not in API_NAMES:
            raise ValueError(f"unknown API {api!r} (one of: {', '.join(API_NAMES)})")
        return api

    @field_validator("concurrency")
    @classmethod
    def _positive_concurrency(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        bad = [v for v in values if v < 1]
        if bad:
            raise ValueError(f"concurrency must be >= 1 (got {bad[0]})")
        return values

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        bad = [v for v in values if not (v > 0 and math.isfinite(v))]
        if bad:
            raise ValueError(f"rate must be > 0 requests/s (got {bad[0]})")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> "BenchConfig":
        if self.max_concurrency is not None and not self.rates:
            raise ValueError("--max-concurrency caps open-loop points; give --rate too")
        if self.arrival == "poisson" and self.burstiness != 1.0:
            raise ValueError("--burstiness needs --arrival gamma (Poisson arrivals have burstiness 1)")
        return self

    def point_specs(self) -> list[PointSpec]:
        """The run's load points, in the order they run."""
        common = dict(duration_s=self.duration_s, warmup_requests=self.warmup, seed=self.seed,
                      max_tokens=self.max_tokens, temperature=self.temperature)
        closed = self.concurrency or (() if self.rates else (1,))
        specs = [PointSpec(mode="closed", concurrency=c, num_requests=self._count(max(16, 4 * c)), **common)
                 for c in closed]
        specs += [PointSpec(mode="open", rate=r, arrival=self.arrival, burstiness=self.burstiness,
                            max_concurrency=self.max_concurrency,
                            num_requests=self._count(DEFAULT_OPEN_LOOP_REQUESTS), **common)
                  for r in self.rates]
        return specs

    def _count(self, default: int) -> int | None:
        if self.num_requests is not None:
            return self.num_requests
        return None if self.duration_s is not None else default

    def stored(self) -> dict:
        """The config as stored with the run: no API key, secret header values redacted."""
        data = self.model_dump(mode="json", exclude={"api_key"})
        data["headers"] = [[k, REDACTED if k.lower() in SECRET_HEADER_NAMES else v] for k, v in self.headers]
        return data
