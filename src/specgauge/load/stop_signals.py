"""SIGINT and SIGTERM stop a running benchmark the same way: the run is marked ``interrupted``.

Both signals get an event-loop handler of their own for the whole run, whatever the process
inherited. Relying on asyncio's Ctrl-C handling lost SIGINT whenever the process started with
SIGINT ignored: a shell without job control (a script, CI, ``cmd &``) starts background commands
that way, Python then keeps SIG_IGN, ``asyncio.Runner`` installs its handler only over Python's
default one, and the run went on to finish with exit 0.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Coroutine, TypeVar

from specgauge.errors import UserError

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StoppedBySignal(UserError):
    """The work was cancelled by SIGINT or SIGTERM; the exit code is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__("interrupted (Ctrl-C)" if signum == signal.SIGINT else f"terminated ({name})")
        self.signum = signum
        self.exit_code = 128 + signum


def run_stoppable(coro: Coroutine[object, object, T]) -> T:
    """Run ``coro`` on the runner's event loop; SIGINT or SIGTERM cancels it.

    The coroutine sees :class:`asyncio.CancelledError` (the bench marks the run interrupted and
    re-raises); then :class:`StoppedBySignal` is raised here. A second signal stops at once
    (KeyboardInterrupt).
    """
    from specgauge.load.runner import run_async

    received: list[int] = []

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def stop(signum: int) -> None:
            if received:
                raise KeyboardInterrupt
            received.append(signum)
            if task is not None:
                task.cancel()

        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, stop, signum)
        try:
            return await coro
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)

    try:
        return run_async(guarded())
    except asyncio.CancelledError:
        if received:
            raise StoppedBySignal(received[0]) from None
        raise
