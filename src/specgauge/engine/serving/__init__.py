"""The embedded engine's HTTP front end (FastAPI + uvicorn), one module per concern.

* ``app`` — :func:`~specgauge.engine.serving.app.create_app` assembles the routers, error
  handlers and middleware; :func:`serve_forever` and :class:`BackgroundServer` run it;
* ``context`` — :class:`ServerSettings` and the :class:`ServerContext` every route reads;
* ``openai_routes`` / ``sglang_routes`` / ``admin_routes`` — the routes of each API;
* ``payloads`` — pure builders: request → engine parameters, engine events → response JSON;
* ``request_body`` — reading and validating a JSON body; ``errors`` — OpenAI-style errors;
* ``engine_client`` — admission and the per-request event queue between asyncio and the engine;
* ``transport`` — sockets, the API-key middleware and uvicorn's header-timeout protocol.
"""
