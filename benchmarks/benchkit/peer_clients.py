"""The field's own streaming clients, driven as their benchmarks drive them, for a CPU-per-chunk
figure beside specgauge's (``client_overhead.py`` runs this file as a child process).

- ``vllm``: ``async_request_openai_completions`` from ``vllm/benchmarks/lib/endpoint_request_func.py``
  (imported from the installed vLLM, e.g. ``.venv-vllm``), on one shared ``aiohttp.ClientSession``
  with a ``TCPConnector(limit=concurrency)`` and a semaphore, under ``asyncio.run`` — as
  ``benchmark()`` in ``vllm/benchmarks/serve.py`` does.
- ``sglang``: ``async_request_openai_completions`` from ``python/sglang/benchmark/serving.py`` (SGLang's
  ``bench_serving``), read from the SGLang sources (a checkout, or the ``sglang-python-*.tar.xz``
  tarball) and run as written: the package itself imports a GPU runtime, so only that function and
  the few module-level helpers it calls (``_create_bench_client_session``, ``get_request_headers``,
  ``RequestFuncInput``/``RequestFuncOutput``, ``remove_prefix`` from ``benchmark/utils.py``) are
  taken out with ``ast`` and executed; it opens a session per request, as upstream does, and the
  semaphore and ``asyncio.run`` are ``benchmark()``'s.

Prints one JSON line: CPU seconds of this process for the run (and the kernel's share), the content
chunks the client saw (its TTFT plus its inter-token gaps), failures, and which file the client came from.

    python benchmarks/benchkit/peer_clients.py --peer vllm --url http://127.0.0.1:PORT --streams 128 --requests 512
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import lzma
import os
import sys
import tarfile
import time
from pathlib import Path

SGLANG_NAMES = ("_ROUTING_KEY_HEADER", "_create_bench_client_session", "RequestFuncInput", "RequestFuncOutput",
                "get_auth_headers", "get_request_headers", "_extract_cache_from_sglext",
                "async_request_openai_completions")


def _sglang_sources(where: Path) -> tuple[str, str, str]:
    """(serving.py text, benchmark/utils.py text, where they came from): a checkout's ``python/``
    (or its root) or a folder holding ``sglang-python-*.tar.xz``."""
    for base in (where, where / "python"):
        serving = base / "sglang" / "benchmark" / "serving.py"
        if serving.is_file():
            return serving.read_text(), (serving.parent / "utils.py").read_text(), str(serving)
    for tarball in sorted(where.glob("sglang-python-*.tar.xz")):
        with lzma.open(tarball) as raw, tarfile.open(fileobj=raw) as archive:
            texts = {}
            for member in archive:
                if member.name.endswith(("sglang/benchmark/serving.py", "sglang/benchmark/utils.py")):
                    texts[member.name.rsplit("/", 1)[1]] = archive.extractfile(member).read().decode()
                if len(texts) == 2:
                    return texts["serving.py"], texts["utils.py"], f"{tarball}:python/sglang/benchmark/serving.py"
    raise SystemExit(f"no SGLang sources (sglang/benchmark/serving.py) under {where}")


def _pick(source: str, names: tuple[str, ...]) -> str:
    """The top-level definitions and assignments of ``names`` in ``source``, in file order."""
    tree = ast.parse(source)
    lines = source.splitlines()
    parts = []
    for node in tree.body:
        name = getattr(node, "name", None)
        if name is None and isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        if name in names:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            parts.append("\n".join(lines[start - 1:node.end_lineno]))
    return "\n\n".join(parts)


def sglang_client(where: Path):
    """SGLang's completion request function and its input class, executed from its source."""
    import dataclasses
    import traceback
    import types
    import typing

    import aiohttp

    serving, utils, origin = _sglang_sources(where)
    module = types.ModuleType("sglang_bench_serving_extract")   # dataclasses look their module up
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    namespace.update({"aiohttp": aiohttp, "json": json, "time": time,
                 "sys": sys, "os": os, "traceback": traceback, "dataclass": dataclasses.dataclass,
                 "field": dataclasses.field, "tqdm": typing.Any,
                 # bench_serving's parsed arguments, at their defaults for a streamed completion
                 "args": argparse.Namespace(disable_stream=False, disable_ignore_eos=False, return_logprob=False,
                                            top_logprobs_num=0, cache_report=False, header=None),
                 **{name: getattr(typing, name) for name in ("Any", "Dict", "List", "Optional", "Union")}})
    exec(compile(_pick(utils, ("remove_prefix",)), origin.replace("serving.py", "utils.py"), "exec"), namespace)
    exec(compile(_pick(serving, SGLANG_NAMES), origin, "exec"), namespace)
    missing = [name for name in SGLANG_NAMES if name not in namespace]
    if missing:
        raise SystemExit(f"SGLang's serving.py no longer defines {', '.join(missing)} ({origin})")
    return namespace["async_request_openai_completions"], namespace["RequestFuncInput"], origin


async def run_vllm(url: str, streams: int, requests: int) -> tuple[list, str]:
    import aiohttp
    from vllm.benchmarks.lib import endpoint_request_func as vllm_client

    connector = aiohttp.TCPConnector(limit=streams, limit_per_host=streams, keepalive_timeout=60)
    semaphore = asyncio.Semaphore(streams)
    async with aiohttp.ClientSession(connector=connector, trust_env=True,
                                     timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)) as session:
        async def one(i: int):
            request = vllm_client.RequestFuncInput(prompt=f"benchmark prompt {i}", api_url=url + "/v1/completions",
                                                   prompt_len=4, output_len=64, model="scripted-model")
            async with semaphore:
                return await vllm_client.async_request_openai_completions(request, session)

        outputs = await asyncio.gather(*(one(i) for i in range(requests)))
    return outputs, vllm_client.__file__


async def run_sglang(url: str, streams: int, requests: int, where: Path) -> tuple[list, str]:
    request_func, request_input, origin = sglang_client(where)
    semaphore = asyncio.Semaphore(streams)

    async def one(i: int):
        request = request_input(prompt=f"benchmark prompt {i}", api_url=url + "/v1/completions", prompt_len=4,
                                output_len=64, model="scripted-model", lora_name="", image_data=None,
                                extra_request_body={})
        async with semaphore:
            return await request_func(request)

    return await asyncio.gather(*(one(i) for i in range(requests))), origin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", choices=("vllm", "sglang"), required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--streams", type=int, default=128)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--sglang-sources", type=Path, default=Path(os.environ.get(
        "SGLANG_CPU_SOURCES", Path(__file__).resolve().parents[3] / "shared" / "sglang-cpu")))
    args = parser.parse_args()
    if args.peer == "sglang":   # read, compiled and imported before the clock starts
        sglang_client(args.sglang_sources)
    else:
        import vllm.benchmarks.lib.endpoint_request_func  # noqa: F401
    start, cpu_start = os.times(), time.process_time()
    if args.peer == "vllm":
        outputs, origin = asyncio.run(run_vllm(args.url, args.streams, args.requests))
    else:
        outputs, origin = asyncio.run(run_sglang(args.url, args.streams, args.requests, args.sglang_sources))
    cpu_s = time.process_time() - cpu_start
    ok = [o for o in outputs if o.success]
    print(json.dumps({"cpu_s": cpu_s, "sys_s": os.times().system - start.system,
                      "chunks": sum(len(o.itl) + 1 for o in ok), "failed": len(outputs) - len(ok),
                      "error": next((o.error.strip().splitlines()[-1] for o in outputs if not o.success), ""),
                      "client": origin}))


if __name__ == "__main__":
    main()
