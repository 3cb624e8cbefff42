"""The ``--workers``, ``--ray-address`` and ``--workers-per-node`` options that ``bench`` and
``compare`` share, and the :class:`~specgauge.load.workers.split.Placement` they make.

They say where the load runs, not what it is: a run started with 4 workers may be resumed with 1.
"""

from __future__ import annotations

import importlib.util
from typing import Callable

import click

from specgauge.errors import UserError


def placement_options(command: Callable) -> Callable:
    """Add the three placement options to a click command."""
    options = [
        click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
                     help="load-generating processes (here; or Ray actors with --ray-address)"),
        click.option("--ray-address", metavar="ADDR",
                     help="run the workers as Ray actors on this cluster ('auto': the one this machine is in); "
                          "needs pip install 'specgauge[ray]'"),
        click.option("--workers-per-node", type=click.IntRange(min=1),
                     help="with --ray-address: this many actors on every alive node (instead of --workers)"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def placement_from(options: dict):
    """The :class:`Placement` of the parsed options; a one-line usage error when Ray is asked for
    but not installed, or --workers-per-node comes without --ray-address."""
    from specgauge.load.workers.split import Placement

    address = options.get("ray_address")
    if address is not None and importlib.util.find_spec("ray") is None:
        raise click.UsageError("--ray-address needs Ray, which is not installed: pip install 'specgauge[ray]'")
    if address is not None:   # a HOST:PORT nobody listens on: one line before any run is created
        from specgauge.load.workers.ray_backend import check_reachable

        check_reachable(address)
    try:
        return Placement(workers=options.get("workers") or 1, ray_address=address,
                         workers_per_node=options.get("workers_per_node"))
    except UserError as exc:
        raise click.UsageError(str(exc)) from None
