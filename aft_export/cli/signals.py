"""SIGINT and SIGTERM as an exception that unwinds (every clean-up runs), and the library's
log records said in the running command's flags."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading

import click

from aft_export.cli.words import in_words
from aft_export.errors import EXIT_SIGNAL_BASE
from aft_export.readers import one_line


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: unwinds like KeyboardInterrupt (every clean-up runs) and
    is caught by nothing but the command line's top level."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


signalled: list[int] = []  # the signals received during this run


def _on_signal(signum, _frame) -> None:
    if signalled:  # a second signal while the first one's clean-up runs: stop now
        os._exit(EXIT_SIGNAL_BASE + signum)
    signalled.append(signum)
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_handled():
    """SIGINT and SIGTERM raise Interrupted for the block (main thread only), then the
    handlers before it come back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signalled.clear()
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class _SayHandler(logging.Handler):
    """The library's log records (``logging.getLogger("aft_export")``) on stderr, in the
    running command's flags, one line each (as :func:`aft_export.cli.base.say` says them)."""

    def emit(self, record: logging.LogRecord) -> None:
        from aft_export.api import PROGRESS

        if not getattr(record, PROGRESS, False):  # a command's progress line: said where the command says it
            click.echo(in_words(one_line(record.msg if not record.args else record.getMessage())), err=True)


@contextlib.contextmanager
def library_log():
    logger = logging.getLogger("aft_export")
    handler, propagate = _SayHandler(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # said here once, not again by Python's last-resort handler
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def close_progress_bars() -> None:
    """An error must not be printed glued to an unfinished progress bar (tqdm's bars end
    their line when closed)."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        with contextlib.suppress(Exception):
            bar.close()
