"""Every command follows one exit-code table (aft_export.errors.EXIT_TABLE, docs/errors.md):
its ``--help`` shows it, and a bad input is one ``error:`` line with status 2. The
commands are read from the command group, so a command added later is held to it too.
The twelve commands this table was written with also have their crafted bad inputs
and their other statuses (0, 1, 3) in the hostile-input table."""

import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.errors import EXIT_TABLE
from tests.hostile.cases import all_cases

COMMANDS = sorted(main.commands)


def test_the_group_help_shows_the_table():
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0
    assert "Exit status" in res.output
    for code, meaning in EXIT_TABLE:
        assert code in res.output and meaning.split()[0] in res.output


def test_aft_export_alone_prints_the_help():
    res = CliRunner().invoke(main, [])
    assert res.exit_code == 0 and "Commands:" in res.output and "Exit status" in res.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_shows_the_table(command):
    res = CliRunner().invoke(main, [command, "--help"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "Exit status:" in text
    for code, meaning in EXIT_TABLE:
        assert f"{code} {' '.join(meaning.split()[:3])}" in text, (code, text[-600:])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_bad_input_with_one_line_and_2(command):
    res = CliRunner().invoke(main, [command, "--no-such-option"])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        f"error: no such option '--no-such-option'; see 'main {command} --help'"
    ]
    assert "Usage:" not in res.output and "Traceback" not in res.output


def test_the_table_covers_every_status():
    codes = {c.code for c in all_cases()}
    assert {0, 1, 2, 3} <= codes
