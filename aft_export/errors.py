"""The one exception type for user errors, and the exit statuses of every command.

The CLI turns an :class:`AFTExportError` into one line on stderr,
``error: <what was wrong>; <what to do>``, and exits with the error's ``exit_code``
(2: bad input); anything else is a bug and keeps its traceback. The exit statuses are
one table for every command (``docs/errors.md``):
"""

EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a check failed: parity, accuracy, a TensorRT rule
EXIT_BAD_INPUT = 2  # bad input: one `error:` line on stderr, nothing written
EXIT_UNVERIFIED = 3  # nothing failed, but something was not verified (skipped, or warnings only)
# stopped by a signal: 128 + its number, as a shell reports it (SIGINT 130, SIGTERM 143)
EXIT_SIGNAL_BASE = 128

EXIT_TABLE = (
    ("0", "ok"),
    ("1", "a check failed (parity, accuracy, a TensorRT rule)"),
    ("2", "bad input: one line on stderr, `error: <what was wrong>; <what to do>`, nothing written"),
    ("3", "nothing failed, but something was not verified (skipped, or warnings only)"),
    ("130, 143", "stopped by SIGINT or SIGTERM; nothing left behind"),
)


class AFTExportError(Exception):
    """Something the user can fix: bad input, a missing file, a wrong option."""

    exit_code = EXIT_BAD_INPUT


class CheckFailed(AFTExportError):
    """A check the command exists to make has failed (the export's verification against
    PyTorch, a TensorRT rule every targeted version enforces): exit status 1, not 2."""

    exit_code = EXIT_CHECK_FAILED


class RuntimeMissing(AFTExportError):
    """A backend (TensorRT, a CUDA execution provider) is not available here."""
