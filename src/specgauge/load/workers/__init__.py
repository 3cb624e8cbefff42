"""One load point run by several worker processes (``--workers N``) or Ray actors (``--ray-address``).

- :mod:`.split` — which worker owns which slots, users and warm-up requests of a point;
- :mod:`.worker` — the worker side: warm the pool, wait for the start, measure, stream records;
- :mod:`.local` — worker processes on this machine (multiprocessing, no Ray);
- :mod:`.ray_backend` — the same worker as Ray actors (optional: ``pip install 'specgauge[ray]'``);
- :mod:`.driver` — the driver side: barrier, clock offsets, records to the store, the point's figures.
"""
