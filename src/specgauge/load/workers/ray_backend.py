"""Workers as Ray actors (``--ray-address``): placed on the cluster's alive nodes, records pulled
back to the driver. Ray is optional (``pip install 'specgauge[ray]'``); it is imported here only.

Placement: with ``--workers-per-node K`` every alive node gets K actors; else ``--workers N``
actors go round the alive nodes in node-id order. Each actor is pinned to its node with a hard
``NodeAffinitySchedulingStrategy`` and asks for no CPU of Ray's accounting (``num_cpus=0``), so a
node busy with other Ray work still takes it — the load generator's own CPU use shows in its
send and event-loop lag. specgauge (the same version) must be installed on every node.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

from specgauge.errors import UserError
from specgauge.load.workers.protocol import WorkerLost
from specgauge.load.workers.ray_actor import ActorWorker
from specgauge.load.workers.split import Placement
from specgauge.load.workers.worker import WorkerTask

ACTOR_NAME_PREFIX = "specgauge-worker"
CLOSE_TIMEOUT_S = 10.0
REACH_TIMEOUT_S = 5.0


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--ray-address needs Ray, which is not installed: pip install 'specgauge[ray]'") from None
    return ray


def connect(address: str):
    """The ``ray`` module, connected to the cluster at ``address`` (``auto``: the one this machine
    is in) unless this process is connected already."""
    ray = _ray()
    if not ray.is_initialized():
        check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level="warning")
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UserError(f"cannot connect to the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    return ray


def check_reachable(address: str) -> None:
    """One line when a ``HOST:PORT`` address does not accept a connection (Ray itself would retry
    for minutes); ``auto`` and ``ray://`` addresses are left to Ray."""
    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise UserError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def alive_nodes(ray) -> list[str]:
    """Node ids of the cluster's alive nodes, in a fixed order."""
    return sorted(node["NodeID"] for node in ray.nodes() if node.get("Alive"))


def planned_actor_count(placement: Placement) -> int:
    """How many actors ``placement`` asks for on the cluster as it is now."""
    ray = connect(str(placement.ray_address))
    if placement.workers_per_node is not None:
        return placement.workers_per_node * len(alive_nodes(ray))
    return placement.workers


class RayWorker:
    """The driver's end of one actor (:class:`~specgauge.load.workers.protocol.WorkerHandle`)."""

    def __init__(self, ray, task: WorkerTask, node_id: str, workers: int) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._ray = ray
        self.name = f"worker {task.share.worker + 1}/{workers}"
        self.actor_name = f"{ACTOR_NAME_PREFIX}-{task.share.worker + 1}-of-{workers}-{uuid.uuid4().hex[:8]}"
        remote = ray.remote(num_cpus=0, max_restarts=0)(ActorWorker)
        self.actor = remote.options(
            name=self.actor_name, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(task)
        self._ready = self.actor.prepare.remote()  # warming starts now, on every actor at once

    async def _call(self, ref) -> Any:
        try:
            return await ref
        except self._ray.exceptions.RayError as exc:
            detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise WorkerLost(self.name, f"{type(exc).__name__}: {detail}") from None

    async def receive(self) -> tuple[str, Any]:
        if self._ready is not None:
            ready, self._ready = self._ready, None
            return await self._call(ready)
        return await self._call(self.actor.next.remote())

    async def read_clock(self) -> int:
        return await self._call(self.actor.clock.remote())

    async def go(self) -> None:
        await self._call(self.actor.go.remote())

    async def stop(self) -> None:
        try:
            await self.actor.stop.remote()
        except self._ray.exceptions.RayError:
            pass

    async def close(self, *, kill: bool) -> None:
        if not kill:
            try:
                await asyncio.wait_for(self._call(self.actor.close.remote()), CLOSE_TIMEOUT_S)
            except (WorkerLost, asyncio.TimeoutError):
                pass
        self._ray.kill(self.actor)


def ray_workers(tasks: list[WorkerTask], placement: Placement) -> list[RayWorker]:
    """One actor per task, placed on the alive nodes as :mod:`this module <.ray_backend>` says."""
    ray = connect(str(placement.ray_address))
    nodes = alive_nodes(ray)
    if not nodes:
        raise UserError(f"the Ray cluster at {placement.ray_address} has no alive node")
    per_node = placement.workers_per_node
    handles: list[RayWorker] = []
    try:
        for task in tasks:
            w = task.share.worker
            node = nodes[(w // per_node) % len(nodes)] if per_node else nodes[w % len(nodes)]
            handles.append(RayWorker(ray, task, node, len(tasks)))
    except BaseException:
        for handle in handles:
            ray.kill(handle.actor)
        raise
    return handles
