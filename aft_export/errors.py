"""The one exception type for user errors, the exit statuses of every command, and the
verdict every check hands back as data.

The CLI turns an :class:`AFTExportError` into one line on stderr,
``error: <what was wrong>; <what to do>``, and exits with the error's ``exit_code``
(2: bad input); anything else is a bug and keeps its traceback. A check's outcome is a
:class:`Verdict`, which the CLI maps to an exit status (:data:`EXIT_FOR`). The exit statuses
are one table for every command (``docs/errors.md``):
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a check failed: parity, accuracy, a TensorRT rule
EXIT_BAD_INPUT = 2  # bad input: one `error:` line on stderr, nothing written
EXIT_UNVERIFIED = 3  # nothing failed, but something was not verified (skipped, or warnings only)
# stopped by a signal: 128 + its number, as a shell reports it (SIGINT 130, SIGTERM 143)
EXIT_SIGNAL_BASE = 128

# a verdict's status (:class:`Verdict`) -> the exit status of the command that reached it
EXIT_FOR = {"ok": EXIT_OK, "failed": EXIT_CHECK_FAILED, "unverified": EXIT_UNVERIFIED}

EXIT_TABLE = (
    ("0", "ok"),
    ("1", "a check failed (parity, accuracy, a TensorRT rule)"),
    ("2", "bad input: one line on stderr, `error: <what was wrong>; <what to do>`, nothing written"),
    ("3", "nothing failed, but something was not verified (skipped, or warnings only)"),
    ("130, 143", "stopped by SIGINT or SIGTERM; nothing left behind"),
)


@dataclass(frozen=True)
class Verdict:
    """What a stage concluded, as data: ``ok``; ``failed``, a check it exists to make failed;
    or ``unverified``, nothing failed but something was not checked (skipped, or warnings
    only), with the reasons, in the library's words. The command line maps it to the exit
    status (:data:`EXIT_FOR`), the pipeline combines the stages' (:meth:`combine`), and a
    report renders it; nothing decides one from rendered text."""

    status: str = "ok"  # ok | failed | unverified
    reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in EXIT_FOR:
            raise ValueError(f"a verdict is one of {', '.join(EXIT_FOR)}, not {self.status!r}")
        object.__setattr__(self, "reasons", tuple(self.reasons))

    @classmethod
    def of(cls, failed=(), unverified=()) -> Verdict:
        """failed when there is a reason to fail, else unverified when there is a reason not
        to be sure, else ok; the reasons of both, failures first."""
        failed, unverified = tuple(failed), tuple(unverified)
        return cls("failed" if failed else "unverified" if unverified else "ok", failed + unverified)

    @classmethod
    def combine(cls, *verdicts: Verdict) -> Verdict:
        """The worst status of ``verdicts``, with every reason (those of failures first)."""
        return cls.of([r for v in verdicts if v.status == "failed" for r in v.reasons],
                      [r for v in verdicts if v.status == "unverified" for r in v.reasons])

    def at_most_unverified(self) -> Verdict:
        """This verdict where a failure only means not verified (a check another stage owns:
        a TensorRT version some of the targeted ones refuse, in an export)."""
        return Verdict("unverified", self.reasons) if self.status == "failed" else self

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def passed(self) -> bool:
        """Nothing failed (ok, or not verified): the one rule for every result's ``passed`` (:class:`Judged`)."""
        return self.status != "failed"

    def to_dict(self) -> dict:
        return {"status": self.status, "reasons": list(self.reasons)}

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        return cls(data["status"], tuple(data.get("reasons", ())))


class Judged:
    """A result that carries its :class:`Verdict` as ``verdict``: its ``passed`` is the verdict's (every
    command's result, from the stage that decides it to the Python API's)."""

    verdict: Verdict

    @property
    def passed(self) -> bool:
        """Nothing failed (the verdict is ok or not verified)."""
        return self.verdict.passed


class AFTExportError(Exception):
    """Something the user can fix: bad input, a missing file, a wrong option."""

    exit_code = EXIT_BAD_INPUT


class CheckFailed(AFTExportError):
    """A check the command exists to make has failed (the export's verification against
    PyTorch, a TensorRT rule every targeted version enforces): exit status 1, not 2."""

    exit_code = EXIT_CHECK_FAILED


class RuntimeMissing(AFTExportError):
    """A backend (TensorRT, a CUDA execution provider) is not available here."""


class NotForThisCPU(RuntimeMissing):
    """The runtime is here but computes this file wrongly on this CPU (OpenVINO's int8 kernels
    with 8-bit weights on an x86 CPU without VNNI): refused before it runs, and reported as a
    missing runtime is, skipped with the reason, never as passed and never recommended."""
