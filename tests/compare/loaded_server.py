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


class Machine:
    """A machine whose speed drifts: every request either server of it has served so far makes
    the next ones ``slowdown_per_request`` slower (a monotone drift shared by both arms)."""

    def __init__(self, slowdown_per_request: float) -> None:
        self.slowdown_per_request = slowdown_per_request
        self.served = 0

    def factor(self) -> float:
        self.served += 1
        return 1.0 + self.slowdown_per_request * self.served


class NoisyMachine(Machine):
    """A machine that is ``amplitude`` slower for ``period`` requests out of every 2 x ``period``
    (other jobs coming and going): no lasting change, but two moments differ."""

    def __init__(self, amplitude: float, period: int) -> None:
        super().__init__(0.0)
        self.amplitude, self.period = amplitude, period

    def factor(self) -> float:
        self.served += 1
        return 1.0 + self.amplitude * ((self.served // self.period) % 2)


class DriftingServer(ScriptedServer):
    """:class:`ScriptedServer` whose chunk delay follows its :class:`Machine`'s drift."""

    def __init__(self, script: Script, *, machine: Machine, **kwargs) -> None:
        super().__init__(script, **kwargs)
        self.machine = machine

    def _script_for(self, prompt: str) -> Script:
        script = super()._script_for(prompt)
        return dataclasses.replace(script, chunk_delay_s=script.chunk_delay_s * self.machine.factor())


def identical_drifting_pair(slowdown_per_request: float = 0.01) -> tuple[DriftingServer, DriftingServer]:
    """Two servers of identical speed on one machine that slows down as it serves."""
    machine = Machine(slowdown_per_request)
    script = Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=12)
    return DriftingServer(script, machine=machine), DriftingServer(script, machine=machine)
