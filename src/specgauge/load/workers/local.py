"""Worker processes on this machine (``--workers N``): multiprocessing with the spawn method, one
pipe each. No Ray needed.

The worker process ignores SIGINT (a Ctrl-C reaches the whole process group; the driver decides
and stops the workers), runs its own event loop (uvloop when installed), and hands every message
to a sender thread so that pickling and pipe writes never block its loop for long. Each end reads
its pipe on a thread of its own (:class:`PipeReader`); a closed pipe is a dead worker.
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


class PipeReader:
    """Messages from ``conn`` read by a daemon thread and handed to the event loop.

    The pipe is never given to the loop (``add_reader``): uvloop would make its descriptor
    non-blocking, and a message larger than the pipe's buffer would then fail half-read."""

    def __init__(self, conn: Connection) -> None:
        self._loop = asyncio.get_running_loop()
        self._inbox: asyncio.Queue = asyncio.Queue()
        threading.Thread(target=self._read_all, args=(conn,), daemon=True).start()

    def _read_all(self, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = EOFError
            try:
                self._loop.call_soon_threadsafe(self._inbox.put_nowait, message)
            except RuntimeError:  # the loop is closed: nobody listens any more
                return
            if message is EOFError:
                return

    async def receive(self) -> Any:
        """The next message; :class:`EOFError` once the other end is closed."""
        message = await self._inbox.get()
        if message is EOFError:
            self._inbox.put_nowait(EOFError)   # every later call sees the end too
            raise EOFError
        return message


async def _order(orders: PipeReader) -> str:
    """The driver's next order (``go`` or ``stop``); ``stop`` when the driver is gone."""
    try:
        return (await orders.receive())[0]
    except EOFError:
        return "stop"


async def _serve(conn: Connection, task: WorkerTask, outbox: queue.SimpleQueue) -> None:
    worker = PointWorker(task)
    index = task.share.worker
    orders = PipeReader(conn)
    try:
        outbox.put(("ready", await worker.prepare()))
        if await _order(orders) != "go":
            outbox.put(("stopped", None))
            return
        measuring = asyncio.ensure_future(worker.measure())
        stop_asked = asyncio.ensure_future(_order(orders))
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
        self._reader: PipeReader | None = None   # made on the first receive (it needs the running loop)
        self.name = f"{self.name} (pid {self.process.pid})"

    async def receive(self) -> tuple[str, Any]:
        if self._reader is None:
            self._reader = PipeReader(self._conn)
        try:
            return await self._reader.receive()
        except EOFError:
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
