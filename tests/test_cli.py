"""CLI misuse ends in one line on stderr and exit code 2, never a traceback."""

from cli_testkit import run_cli


def test_unknown_flag_is_one_line_exit_2():
    result = run_cli("--no-such-flag")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--no-such-flag" in lines[0]
    assert "Traceback" not in result.stderr


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and "specgauge" in result.stdout
