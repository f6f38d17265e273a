"""The ``aft-export`` command line. Commands are thin: build the options, call the library,
print the text its result renders (its ``lines()``).

Defaults come from the options dataclasses (or the library function's signature), never
written twice. Library modules are imported inside the commands so that ``aft-export
--help`` starts without loading torch.

One error path for every command, decided here (:class:`_Group` and :class:`_Command`):

- every user error, ours (:class:`AFTExportError`) or click's (a bad option value, an
  unknown command, a missing argument, a directory where a file is wanted), is one line
  on stderr, ``error: <what was wrong>; <what to do>``, and the error's exit status (2:
  bad input); anything else is a bug and keeps its traceback;
- a command returns its exit status (:data:`aft_export.errors.EXIT_TABLE`, printed in
  every command's ``--help``): 0 ok, 1 a check failed, 2 bad input, 3 nothing failed but
  something was not verified;
- SIGINT and SIGTERM raise :class:`Interrupted` in the main thread, so every ``finally``
  and every atomic write's clean-up runs; the exit status is 128 + the signal (130,
  143). A second signal exits at once;
- before a command starts, each of its outputs (a parameter named ``output``) is checked
  against every path it reads and locked for the run (:func:`aft_export.fileio.claim_output`):
  no command overwrites its own input, and a second run writing the same output fails at its
  start;
- a command's exit status 1 or 3 is its checks' verdict (:class:`aft_export.errors.Verdict`,
  mapped by :func:`_exit`), never read from rendered text;
- every line of the library's it prints (an error, a log line, a rendered report) is said in
  that command's words: a message that names parameters as data (:class:`aft_export.errors.Said`)
  is rendered with the command's flags, from the declarations (:func:`in_words`); the API's
  progress lines (its log records, :data:`aft_export.api.PROGRESS`) are printed on stdout, or on
  stderr where stdout is the command's JSON (:func:`progress_said`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys

import click

from aft_export.cli.params import InPlace
from aft_export.cli.signals import Interrupted, close_progress_bars, library_log, signalled, signals_handled
from aft_export.cli.words import as_typed, in_words, rename_args, renamed_used, running
from aft_export.errors import (
    EXIT_BAD_INPUT,
    EXIT_FOR,
    EXIT_OK,
    EXIT_SIGNAL_BASE,
    EXIT_TABLE,
    AFTExportError,
    Verdict,
)
from aft_export.readers import one_line
from aft_export.version import __version__

OUTPUT_PARAMS = ("output",)  # parameters that name what a command writes


def _fail(message, code: int = EXIT_BAD_INPUT) -> int:
    close_progress_bars()
    click.echo(f"error: {' '.join(as_typed(in_words(message)).split())}", err=True)
    return code


def _click_message(exc: click.ClickException) -> str:
    """click's error as our one line: what was wrong; where to look."""
    text = " ".join(exc.format_message().split()).rstrip(".")
    text = text[:1].lower() + text[1:]
    ctx = getattr(exc, "ctx", None)
    return f"{text}; see '{ctx.command_path if ctx else 'aft-export'} --help'"


def _interrupted_message(signum: int) -> str:
    name = signal.Signals(signum).name
    return f"stopped by {name}; nothing it was writing was left behind: run the command again to finish"


def _epilog_table(formatter) -> None:
    with formatter.section("Exit status"):
        formatter.write_dl(EXIT_TABLE)


class _Command(click.Command):
    """Every aft-export command: the exit-code table in its ``--help``, and its outputs
    claimed (checked against its inputs, locked) before it starts."""

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        _epilog_table(formatter)

    def parse_args(self, ctx, args):
        running.append(self)  # from here on, library messages are put in this command's flags
        return super().parse_args(ctx, rename_args(self, list(args)))

    def invoke(self, ctx):
        with contextlib.ExitStack() as stack:
            for out, directory, inputs in _outputs(self, ctx.params):
                stack.enter_context(_claim(out, inputs, directory))
            with progress_said(err=bool(ctx.params.get("as_json")) or self.name in PROGRESS_ON_STDERR):
                return super().invoke(ctx)


# the commands whose progress lines go to stderr even without --json (bench --reference: its table is stdout)
PROGRESS_ON_STDERR = ("bench",)


class _Progress(logging.Handler):
    """The API's progress lines (records marked :data:`aft_export.api.PROGRESS`), said in the
    command's flags where the command printed them."""

    def __init__(self, err: bool) -> None:
        from aft_export.api import PROGRESS

        super().__init__(logging.INFO)
        self.err = err
        self.addFilter(lambda record: getattr(record, PROGRESS, False))

    def emit(self, record: logging.LogRecord) -> None:
        say(record.msg if not record.args else record.getMessage(), err=self.err)


@contextlib.contextmanager
def progress_said(err: bool):
    """For a command's run: the API's progress lines (INFO and its warnings) on stdout, or stderr."""
    logger = logging.getLogger("aft_export")
    handler, level = _Progress(err), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _claim(out, inputs, directory):
    from aft_export.fileio import claim_output

    return claim_output(out, inputs, directory)


def _paths_in(value) -> list[str]:
    """The strings of a parameter value that name something on disk (a ``FILE.py:FACTORY``
    names its file)."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    found = []
    for v in values:
        if not isinstance(v, str) or not v:
            continue
        if os.path.lexists(v):
            found.append(v)
        elif ":" in v and os.path.isfile(v.rpartition(":")[0]):
            found.append(v.rpartition(":")[0])
    return found


def _outputs(command: click.Command, params: dict):
    """(output, is a directory, the paths the command reads) for each output parameter."""
    by_name = {p.name: p for p in command.params}
    inputs = [p for name, value in params.items() if name not in OUTPUT_PARAMS
              and not isinstance(getattr(by_name.get(name), "type", None), InPlace) for p in _paths_in(value)]
    for name in OUTPUT_PARAMS:
        value = params.get(name)
        if isinstance(value, str) and value:
            kind = getattr(by_name.get(name), "type", None)
            if isinstance(kind, click.Path) and kind.file_okay != kind.dir_okay:
                directory = kind.dir_okay  # the parameter says (click has checked what exists)
            else:  # a plain string, or either: what is there says
                directory = os.path.isdir(value)
            yield value, directory, inputs


class _Group(click.Group):
    command_class = _Command

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        _epilog_table(formatter)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run a command; every outcome becomes an exit status here (see the module doc)."""
        renamed_used.clear()
        running.clear()
        with signals_handled(), library_log():
            try:
                rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
                code = rv if isinstance(rv, int) else EXIT_OK
            except click.exceptions.NoArgsIsHelpError as exc:  # `aft-export` alone: the help
                click.echo(exc.ctx.get_help())
                code = EXIT_OK
            except click.ClickException as exc:
                code = _fail(_click_message(exc), EXIT_BAD_INPUT)
            except Interrupted as exc:
                code = _fail(_interrupted_message(exc.signum), EXIT_SIGNAL_BASE + exc.signum)
            except (click.exceptions.Abort, KeyboardInterrupt):  # SIGINT outside our handler's reach
                code = _fail(_interrupted_message(signal.SIGINT), EXIT_SIGNAL_BASE + signal.SIGINT)
            except AFTExportError as exc:
                if signalled:  # an interrupt a library turned into an error (an import it caught)
                    code = _fail(_interrupted_message(signalled[0]), EXIT_SIGNAL_BASE + signalled[0])
                else:
                    code = _fail(exc.message, exc.exit_code)
            except Exception:
                if not signalled:
                    raise  # a bug: its traceback, so that it can be reported
                code = _fail(_interrupted_message(signalled[0]), EXIT_SIGNAL_BASE + signalled[0])
        if standalone_mode:
            sys.exit(code)
        return code


def say(text="", err: bool = False) -> None:
    """Print a line of the library's (a log line, a rendered report) in this command's flags, one line: a line
    break in what it quotes (a file named with one) is shown as its escape, so no name forges a line of ours."""
    click.echo(in_words(one_line(text)), err=err)


def echo(lines: list[str]) -> None:
    """A result's text, each of ``lines`` one line (:func:`say`'s)."""
    click.echo("\n".join(in_words(one_line(line)) for line in lines))


def print_json(data) -> None:
    click.echo(json.dumps(data, indent=2))


def exit_status(verdict: Verdict) -> int:
    """The exit status of a command whose checks concluded ``verdict`` (the exit-code table)."""
    return EXIT_FOR[verdict.status]


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="aft-export")
def main() -> None:
    """Export Attention Free Transformer classifiers to ONNX and TensorRT, verified.

    A user error is one line on stderr, `error: <what was wrong>; <what to do>`, with exit
    status 2; no command writes over its own inputs (docs/errors.md).
    """
