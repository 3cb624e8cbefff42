"""What the two real-engine set-ups share (``specgauge.vllm_setup``, ``specgauge.sglang_setup``): a
virtualenv beside ``.venv`` with the engine, copies of a shipped target and drafter laid out for
it, the libraries its CPU build wants preloaded, and the command line that serves one method.

Both CPU builds want tcmalloc (Debian's ``libtcmalloc-minimal4``) and the Intel OpenMP runtime
that their ``intel-openmp`` requirement puts in ``<venv>/lib/libiomp5.so`` preloaded
(``vllm/platforms/cpu.py``; SGLang's docs/platforms/cpu_server.md).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

TCMALLOC_CANDIDATES = ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
                       "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
                       "/usr/lib64/libtcmalloc_minimal.so.4")
SERVED_NAME = "specgauge-target"

Method = Literal["plain", "eagle3", "ngram"]
METHODS: tuple[Method, ...] = ("plain", "eagle3", "ngram")


class SetupError(RuntimeError):
    """The engine's set-up is missing a piece (the venv, tcmalloc, the laid-out models)."""


def tcmalloc() -> str:
    """The tcmalloc library to preload; a :class:`SetupError` naming the package if missing."""
    for path in TCMALLOC_CANDIDATES:
        if Path(path).exists():
            return path
    raise SetupError("libtcmalloc_minimal.so.4 not found: install Debian's libtcmalloc-minimal4 "
                     "(apt-get install libtcmalloc-minimal4)")


@dataclass(frozen=True)
class ServerSetup:
    """Where an engine's virtualenv and the laid-out checkpoints are; subclasses say how it serves."""

    venv: Path
    target: Path
    draft: Path
    make_target: ClassVar[str] = ""     # the make target that builds it, named in errors
    module: ClassVar[str] = ""          # python -m MODULE starts the server
    built_marker: ClassVar[str] = ""    # a file the build leaves in the venv when it finished
    venv_dir: ClassVar[str] = ""        # the virtualenv, under the repository root
    models_dir: ClassVar[str] = ""      # the laid-out copies, under the repository root's .cache/
    extra_last: ClassVar[bool] = False  # extra arguments after the method's (they override its flags)

    @classmethod
    def paths(cls, root: Path, model) -> dict[str, Path]:
        """Where ``make <engine>`` puts the venv and the shipped ``model``'s copies under ``root``
        (``.cache/<models_dir>/<name>/target`` and ``…/draft``)."""
        root = root.resolve()
        models = root / ".cache" / cls.models_dir / model.name
        return {"venv": root / cls.venv_dir, "target": models / "target", "draft": models / "draft"}

    def context_flag(self) -> str:
        """The engine's flag that sets the served context, with its value (printed by prepare)."""
        raise NotImplementedError

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def tcmalloc(self) -> str:
        return tcmalloc()

    def iomp(self) -> Path:
        """The Intel OpenMP runtime installed by the engine's intel-openmp requirement."""
        return self.venv / "lib" / "libiomp5.so"

    def check(self) -> None:
        """Raise :class:`SetupError` naming the first missing piece."""
        make = f"make {self.make_target}"
        for path, what in ((self.python, f"the virtualenv ({make})"), (self.iomp(), f"libiomp5.so ({make})"),
                           (self.target / "config.json", f"the laid-out target ({make})"),
                           (self.draft / "config.json", f"the laid-out drafter ({make})"),
                           *(((self.venv / self.built_marker, f"the finished build ({make})"),)
                             if self.built_marker else ())):
            if not path.exists():
                raise SetupError(f"{path} is missing: {what}")
        tcmalloc()

    def preload(self) -> str:
        return f"{tcmalloc()}:{self.iomp()}"

    def environment(self) -> dict[str, str]:
        raise NotImplementedError

    def server_args(self, port: int | str, *, extra: tuple[str, ...] = ()) -> list[str]:
        raise NotImplementedError

    def method_args(self, method: Method, depth: int | None, override: object) -> list[str]:
        raise NotImplementedError

    def argv(self, method: Method, port: int | str, *, depth: int | None = None, override: object = None,
             extra: tuple[str, ...] = ()) -> list[str]:
        """The full command (``env VAR=… python -m MODULE …``): it runs as it is under a shell and
        after :func:`shlex.split` (a launch-command arm)."""
        env = [f"{k}={v}" for k, v in self.environment().items()]
        if self.extra_last:   # so that an extra flag wins over the method's own (argparse: the last one)
            return ["env", *env, str(self.python), "-m", self.module, *self.server_args(port),
                    *self.method_args(method, depth, override), *extra]
        return ["env", *env, str(self.python), "-m", self.module, *self.server_args(port, extra=extra),
                *self.method_args(method, depth, override)]

    def command_line(self, method: Method, port: int | str = "{port}", **kwargs) -> str:
        """:meth:`argv` as one shell line (``{port}`` left bare for a launch-command arm)."""
        return shlex.join(self.argv(method, port, **kwargs)).replace("'{port}'", "{port}")


def serve_main(args: list[str], *, prog: str, doc: str, setup_for, prepare, override_flag: str | None = None,
               parse_override=None) -> int:
    """The ``python -m specgauge.<engine>_setup`` command line, shared by both engines:
    no sub-command runs ``prepare(root)``; ``serve METHOD --port N [--model NAME] [--depth K]
    [OVERRIDE_FLAG VALUE] [-- more engine args]`` replaces this process with the server (so a
    process-group stop reaches it). ``setup_for(root, model)`` gives the :class:`ServerSetup`;
    ``parse_override(text)`` turns the override flag's value into ``argv``'s ``override`` (a
    ``ValueError`` becomes a one-line error)."""
    import argparse
    import os
    import sys

    from specgauge.shipped_models import FIRST_MODEL, get_shipped

    parser = argparse.ArgumentParser(prog=prog, description=doc)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: here)")
    sub = parser.add_subparsers(dest="command")
    serve_parser = sub.add_parser("serve", help="start one server")
    serve_parser.add_argument("method", choices=METHODS)
    serve_parser.add_argument("--port", type=int, required=True)
    serve_parser.add_argument("--model", default=FIRST_MODEL, help=f"a shipped model (default {FIRST_MODEL})")
    serve_parser.add_argument("--depth", type=int, help="draft tokens per step")
    if override_flag:
        serve_parser.add_argument(override_flag, dest="override", help="replaces METHOD's speculation setting")
    extra = args[args.index("--") + 1:] if "--" in args else []   # more engine arguments after --
    ns = parser.parse_args(args[:args.index("--")] if "--" in args else args)
    if ns.command != "serve":
        return prepare(ns.root)
    try:
        setup = setup_for(ns.root, get_shipped(ns.model))
        setup.check()
        override = parse_override(ns.override) if getattr(ns, "override", None) else None
    except (SetupError, KeyError, ValueError) as exc:
        print(f"{prog.split('.')[-1]}: {exc.args[0]}", file=sys.stderr)
        return 2
    argv = setup.argv(ns.method, ns.port, depth=ns.depth, override=override, extra=tuple(extra))
    os.execvp(argv[0], argv)
    return 0  # not reached


def prepare(root: Path, *, setup_for, lay_out, prog: str, ready: str, start_time: str, port: int,
            compare_args: str = "") -> int:
    """``python -m specgauge.<engine>_setup`` without a sub-command: ``lay_out(model, setup)`` for
    every shipped model with a drafter, then check the default model's set-up and print how to
    serve it (``ready``: what the venv holds; ``start_time``: how long a server takes to start)."""
    import sys

    from specgauge.shipped_models import FIRST, SHIPPED, shipped_names

    for name in shipped_names():
        model = SHIPPED[name]
        if model.draft_dir is None:
            continue
        laid = setup_for(root, model)
        lay_out(model, laid)
        print(f"laid out {name}: target {laid.target}, drafter {laid.draft} ({laid.context_flag()})")
    setup = setup_for(root, FIRST)
    tool = prog.split()[-1]
    try:
        setup.check()
    except SetupError as exc:
        print(f"{tool.split('.')[-1]}: {exc}", file=sys.stderr)
        return 1
    print(f"{ready}: {setup.venv}; serving {FIRST.name} by default")
    print(f"Serve (replace {{port}}; each takes {start_time} to start on 2 cores):")
    for method in METHODS:
        print(f"\n# {method}\n{setup.command_line(method)}")
    print(f"\nOr: .venv/bin/{prog} serve plain|eagle3|ngram --port {port} [--model NAME]")
    print(f"Compare, for example:\n  .venv/bin/specgauge compare {compare_args}"
          f"--baseline-cmd '.venv/bin/{prog} serve plain --port {{port}}' "
          f"--speculative-cmd '.venv/bin/{prog} serve eagle3 --port {{port}}' --start-timeout 900")
    return 0
