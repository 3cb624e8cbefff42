"""Worker processes on this machine (``--workers N``): multiprocessing with the spawn method, one
pipe each. No Ray needed.

The worker process ignores SIGINT (a Ctrl-C reaches the whole process group; the driver decides
and stops the workers), runs its own event loop (uvloop when installed), and hands every message
to a sender thread so that pickling and pipe writes never block its loop for long. The driver
reads each pipe from its event loop (``add_reader``); a closed pipe is a dead worker.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any

from specgauge.load.workers.protocol import BATCH_INTERVAL_S, BATCH_MAX_RECORDS, WorkerLost
from specgauge.load.workers.worker import PointWorker, WorkerFailure, WorkerTask

STOP_GRACE_S = 10.0  # a worker asked to stop that has not exited by then is killed


def worker_main(conn: Connection, task: WorkerTask) -> None:
    """Entry of a worker process: prepare, wait for go, measure, stream records, report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from specgauge.load.runner import run_async

    outbox: queue.SimpleQueue = queue.SimpleQueue()
    sender = threading.Thread(target=_send_all, args=(conn, outbox), daemon=True)
    sender.start()
    try:
        run_async(_serve(conn, task, outbox))
    finally:
        outbox.put(None)
        sender.join()
        conn.close()


def _send_all(conn: Connection, outbox: queue.SimpleQueue) -> None:
    while (message := outbox.get()) is not None:
        try:
            conn.send(message)
        except (BrokenPipeError, OSError):  # the driver is gone: nothing left to tell
            return


async def _receive(conn: Connection) -> Any:
    """The next object on ``conn``, awaited on the event loop (EOFError once the other end closed)."""
    if not conn.poll():
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: readable.done() or readable.set_result(None))
        try:
            await readable
        finally:
            loop.remove_reader(conn.fileno())
    return conn.recv()


async def _serve(conn: Connection, task: WorkerTask, outbox: queue.SimpleQueue) -> None:
    worker = PointWorker(task)
    index = task.share.worker
    try:
        outbox.put(("ready", await worker.prepare()))
        if (await _receive(conn))[0] != "go":
            outbox.put(("stopped", None))
            return
        measuring = asyncio.ensure_future(worker.measure())
        stop_asked = asyncio.ensure_future(_receive(conn))
        while not measuring.done():
            try:
                await asyncio.wait_for(worker.new_records.wait(), BATCH_INTERVAL_S)
                if len(worker.buffer) < BATCH_MAX_RECORDS:
                    await asyncio.wait([measuring, stop_asked], timeout=BATCH_INTERVAL_S,
                                       return_when=asyncio.FIRST_COMPLETED)
            except asyncio.TimeoutError:
                pass
            if worker.buffer:
                outbox.put(("records", worker.take()))
            if stop_asked.done() and not measuring.done():
                measuring.cancel()
                await asyncio.gather(measuring, return_exceptions=True)
                if worker.buffer:
                    outbox.put(("records", worker.take()))
                outbox.put(("stopped", None))
                return
        stop_asked.cancel()
        if worker.buffer:
            outbox.put(("records", worker.take()))
        outbox.put(("done", measuring.result()))
    except (EOFError, OSError):  # the driver went away
        return
    except BaseException as exc:  # noqa: BLE001 — every failure goes to the driver as one message
        if worker.buffer:
            outbox.put(("records", worker.take()))
        outbox.put(("failed", WorkerFailure.of(index, exc)))
    finally:
        await worker.close()


class LocalWorker:
    """The driver's end of one worker process (:class:`~specgauge.load.workers.protocol.WorkerHandle`)."""

    def __init__(self, task: WorkerTask, workers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe(duplex=True)
        self.name = f"worker {task.share.worker + 1}/{workers}"
        self.process = context.Process(target=worker_main, args=(child, task), daemon=True,
                                       name=f"specgauge-{self.name.replace(' ', '-').replace('/', '-of-')}")
        self.process.start()
        child.close()
        self.name = f"{self.name} (pid {self.process.pid})"

    async def receive(self) -> tuple[str, Any]:
        try:
            return await _receive(self._conn)
        except (EOFError, OSError):
            await asyncio.get_running_loop().run_in_executor(None, self.process.join, 5.0)
            code = self.process.exitcode
            detail = "killed by signal %d" % -code if code is not None and code < 0 else f"exit code {code}"
            raise WorkerLost(self.name, detail) from None

    async def go(self) -> None:
        self._conn.send(("go",))

    async def stop(self) -> None:
        try:
            self._conn.send(("stop",))
        except (BrokenPipeError, OSError):
            pass

    async def close(self, *, kill: bool) -> None:
        loop = asyncio.get_running_loop()
        if not kill:
            await loop.run_in_executor(None, self.process.join, STOP_GRACE_S)
        if self.process.is_alive():
            self.process.kill()
            await loop.run_in_executor(None, self.process.join, STOP_GRACE_S)
        self._conn.close()


def local_workers(tasks: list[WorkerTask]) -> list[LocalWorker]:
    """Start one worker process per task."""
    handles: list[LocalWorker] = []
    try:
        for task in tasks:
            handles.append(LocalWorker(task, len(tasks)))
    except BaseException:
        for handle in handles:
            handle.process.kill()
        raise
    return handles
