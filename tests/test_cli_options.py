"""The command-line vocabulary every command shares (src/specgauge/cli_options.py)."""

import click
from click.testing import CliRunner
import pytest
from pydantic import BaseModel, Field, ValidationError

from specgauge.cli_options import CommaList, comma_list, console, one_line_validation_error, parse_headers, write_text
from specgauge.errors import UserError


@pytest.mark.parametrize("text, kind, rules, expected", [
    ("1,8, 64", int, {"low": 0, "low_open": True}, (1, 8, 64)),
    ("5,0,3,3", int, {"low": 0, "unique_sorted": True}, (0, 3, 5)),
    ("2.5,inf", float, {"low": 0, "low_open": True, "finite": False}, (2.5, float("inf"))),
    ("ttft, itl", str, {"choices": ("ttft", "tpot", "itl")}, ("ttft", "itl")),
    ("", str, {"allow_empty": True}, ()),
])
def test_comma_lists(text, kind, rules, expected):
    assert comma_list(text, kind, **rules) == expected


@pytest.mark.parametrize("text, kind, rules, message", [
    ("1,x,8", int, {}, "'x' is not an integer"),
    ("4,-2", int, {"low": 0, "low_open": True}, "every value must be > 0 (got -2)"),
    ("0,99", float, {"low": 0, "low_open": True}, "> 0"),
    ("50,101", float, {"high": 100}, "<= 100 (got 101)"),
    ("2,inf", float, {}, "'inf' is not a finite number"),
    ("nan", float, {"finite": False}, "'nan' is not a finite number"),
    ("ttft,speed", str, {"choices": ("ttft", "tpot")}, "'speed' is not one of ttft, tpot"),
    (" , ", int, {}, "give at least one value"),
])
def test_bad_comma_lists_name_the_item(text, kind, rules, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        comma_list(text, kind, **rules)


def test_the_comma_list_option_fails_as_a_usage_error():
    @click.command()
    @click.option("--levels", type=CommaList(int, low=1))
    def command(levels):
        click.echo(repr(levels))

    assert CliRunner().invoke(command, ["--levels", "1,4"]).output == "(1, 4)\n"
    bad = CliRunner().invoke(command, ["--levels", "1,0"])
    assert bad.exit_code == 2 and "--levels" in bad.output and ">= 1 (got 0)" in bad.output


def test_headers_are_name_value_pairs():
    assert parse_headers(("X-A: 1", "Authorization:Bearer t:u")) == (("X-A", "1"), ("Authorization", "Bearer t:u"))
    with pytest.raises(click.BadParameter, match="NAME:VALUE"):
        parse_headers(("no-colon",))


def test_the_console_is_160_columns_off_a_terminal(capsys):
    out = console()
    assert not out.is_terminal and out.width == 160
    out.print("x" * 150)
    assert capsys.readouterr().out == "x" * 150 + "\n"   # one line, not wrapped at 80


def test_validation_errors_are_one_line_naming_the_option():
    class Plan(BaseModel):
        url: str = Field(pattern="^http")
        num_requests: int = Field(ge=1)

    with pytest.raises(ValidationError) as info:
        Plan(url="ftp://x", num_requests=0)
    message = str(one_line_validation_error(info.value))
    assert "\n" not in message and message.startswith("URL: ") and "--num-requests: " in message


def test_text_goes_to_a_file_or_stdout_and_a_failed_write_is_one_line(tmp_path, capsys):
    write_text(str(tmp_path / "a.json"), "{}\n")
    write_text("-", "[]\n")
    assert (tmp_path / "a.json").read_text() == "{}\n" and capsys.readouterr().out == "[]\n"
    with pytest.raises(UserError, match="cannot write"):
        write_text(str(tmp_path / "missing" / "a.json"), "{}")
