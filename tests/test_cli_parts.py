"""The root group's table of which part adds which command is what the parts register."""

import importlib

import click


def test_every_part_registers_exactly_the_commands_the_table_gives_it():
    from specgauge.cli import PARTS

    for module in sorted(set(PARTS.values())):
        group = click.Group()
        importlib.import_module(module).register(group)
        assert set(group.commands) == {name for name, part in PARTS.items() if part == module}, module


def test_a_command_loads_only_its_own_part():
    import subprocess
    import sys

    code = ("import sys; from specgauge.cli import app; import click; "
            "app.get_command(click.Context(app), 'suite'); "
            "print(sorted(m for m in ('specgauge.train.commands', 'specgauge.suites.commands', "
            "'specgauge.engine.serving.commands', 'specgauge.compare.commands') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['specgauge.suites.commands']"
