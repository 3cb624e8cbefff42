"""The one thin entry point. Each part registers its own commands when one of them is called; nothing
heavy is imported here."""

from __future__ import annotations

import importlib
import sys

import click

from specgauge import __version__
from specgauge.errors import UserError


# Which part's ``register`` adds each command. A command's part is imported when that command is
# looked up (``--help`` lists them all), so ``specgauge bench`` does not import the engine, training
# or comparison code (about 0.2 s of interpreter time a call; tests/test_cli_parts.py checks the table).
PARTS = {
    "bench": "specgauge.load.commands", "runs": "specgauge.load.commands", "show": "specgauge.load.commands",
    "export": "specgauge.load.commands",
    "serve": "specgauge.engine.serving.commands", "models": "specgauge.engine.serving.commands",
    "train": "specgauge.train.commands",
    "suite": "specgauge.suites.commands",
    "report": "specgauge.report.commands",
    "compare": "specgauge.compare.commands", "baseline": "specgauge.compare.commands",
    "demo": "specgauge.compare.commands",
    "tune": "specgauge.tune.commands",
}


class PartsGroup(click.Group):
    """The root group: each part registers its own commands, on first look-up of one of them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(PARTS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in PARTS:
            importlib.import_module(PARTS[name]).register(self)
        return self.commands.get(name)


@click.group(name="specgauge", cls=PartsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specgauge")
def app() -> None:
    """Does speculative decoding pay off on your workload? Measure, compare, decide."""


def _fail(message: str, code: int = 2) -> None:
    one_line = " ".join(str(message).split())
    print(f"specgauge: error: {one_line}", file=sys.stderr)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; misuse and bad input end in one line on stderr and exit code 2."""
    try:
        result = app.main(args=argv, prog_name="specgauge", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare group: show help, like --help
        click.echo(exc.ctx.get_help() if exc.ctx else "")
        sys.exit(0)
    except click.exceptions.UsageError as exc:
        _fail(exc.format_message())
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except UserError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except click.exceptions.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    sys.exit(result if isinstance(result, int) else 0)
