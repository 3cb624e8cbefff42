"""A scripted server whose step time grows with the requests in flight (a test double of a GPU
server under batching): each request's chunk delay is ``chunk_delay_s + per_request_s × in_flight``
at its arrival. Two of them, one with a slower step but more tokens per step, cross over."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from specgauge.testing.scripted_server import Script, ScriptedServer


class LoadedServer(ScriptedServer):
    """:class:`ScriptedServer` with a load-dependent chunk delay."""

    def __init__(self, script: Script, *, per_request_s: float, **kwargs) -> None:
        super().__init__(script, **kwargs)
        self.per_request_s = per_request_s
        self.in_flight = 0

    def _script_for(self, prompt: str) -> Script:
        script = super()._script_for(prompt)
        return dataclasses.replace(script, chunk_delay_s=script.chunk_delay_s + self.per_request_s * self.in_flight)

    async def _serve(self, request: web.Request, api: str) -> web.StreamResponse:
        self.in_flight += 1
        try:
            return await super()._serve(request, api)
        finally:
            self.in_flight -= 1


def crossing_pair() -> tuple[LoadedServer, LoadedServer]:
    """A baseline (1 token per step, fast step) and a 'speculative' server (about 2.7 tokens per
    step, a step whose cost grows 12x faster with load): speculation wins alone, loses from ~4-8 on."""
    baseline = LoadedServer(Script(ttft_s=0.004, chunk_delay_s=0.003, num_chunks=24, num_chunks_jitter=6),
                            per_request_s=0.0001)
    speculative = LoadedServer(Script(ttft_s=0.005, chunk_delay_s=0.004, num_chunks=9, num_chunks_jitter=2,
                                      tokens_per_chunk=(3, 2, 3), sglang_meta={"spec_accept_length": 2.67}),
                               per_request_s=0.0012)
    return baseline, speculative
