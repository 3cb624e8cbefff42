"""docs/cli.md's table of every option is generated from the commands (scripts/cli_reference.py):
it must be current, and it must list the shared options once per command that takes them."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _reference():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_cli_md_lists_every_option_as_the_commands_declare_them():
    reference = _reference()
    text = reference.DOC.read_text(encoding="utf-8")
    assert reference.render(text) == text, "docs/cli.md is not current: python scripts/cli_reference.py --write"


def test_the_shared_options_have_one_spelling_and_one_default_everywhere():
    import click

    from specgauge.cli import app

    shared = ("db", "api_key", "headers", "warmup", "verify", "num_requests")
    seen: dict[str, dict[str, tuple]] = {name: {} for name in shared}
    for command_name, command in _reference()._commands(app):
        for param in command.params:
            # demo keeps its store in its output folder; serve's --api-key is the key the server requires
            if isinstance(param, click.Option) and param.name in shared and command_name not in ("demo", "serve"):
                seen[param.name][command_name] = (tuple(param.opts), tuple(param.secondary_opts), param.default)
    for name, declarations in seen.items():
        assert len(set(declarations.values())) == 1, (name, declarations)
    for name in ("api_key", "headers", "warmup", "num_requests"):
        assert {"bench", "compare", "tune"} <= set(seen[name]), name
    assert {"compare", "tune"} <= set(seen["verify"])
