"""The one thin entry point. Each part registers its own commands; nothing heavy is imported here."""

from __future__ import annotations

import sys

import click

from specgauge import __version__
from specgauge.errors import UserError


@click.group(name="specgauge", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specgauge")
def app() -> None:
    """Does speculative decoding pay off on your workload? Measure, compare, decide."""


def _register_parts() -> None:
    # Each part's commands module keeps its heavy imports inside the command bodies.
    from specgauge.compare import commands as compare_commands
    from specgauge.engine.serving import commands as engine_commands
    from specgauge.load import commands as load_commands
    from specgauge.report import commands as report_commands
    from specgauge.suites import commands as suite_commands
    from specgauge.train import commands as train_commands
    from specgauge.tune import commands as tune_commands

    for part in (load_commands, engine_commands, train_commands, suite_commands, report_commands, compare_commands,
                 tune_commands):
        part.register(app)


_register_parts()


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
