"""The one exception type for user errors, the exit statuses of every command, and the
verdict every check hands back as data.

The CLI turns an :class:`AFTExportError` into one line on stderr,
``error: <what was wrong>; <what to do>``, and exits with the error's ``exit_code``
(2: bad input); anything else is a bug and keeps its traceback. A check's outcome is a
:class:`Verdict`, which the CLI maps to an exit status (:data:`EXIT_FOR`). The exit statuses
are one table for every command (``docs/errors.md``):
"""

from __future__ import annotations

import contextvars
import string
from dataclasses import dataclass
from typing import Callable

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

    def lines(self) -> list[str]:
        """Its line in a result's text, where it is not ok (a reason may name parameters as data)."""
        return [] if self.ok else [f"result: {'FAILED' if self.status == 'failed' else 'not verified'}: "
                                   + joined("; ", self.reasons)]  # fmt: skip

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


# ---------------------------------------------------------------- messages that name parameters


@dataclass(frozen=True)
class Named:
    """A parameter named in a message by a value's place (its keyword decided at run time), alone
    (`images`) or set to ``value`` (`images=0`)."""

    keyword: str
    value: object = None


# a parameter's name on one face: (the command whose keyword it is, the keyword, its value or None) -> text
Namer = Callable[["str | None", str, object], str]


# the command whose API function is running (its options.params.Command), set at its door
# (aft_export.options.commands.declared): a stage's keyword is named as its keyword that gives it its value
RUNNING: contextvars.ContextVar = contextvars.ContextVar("aft_export_running", default=None)


def keyword_name(stage: str | None, keyword: str, value: object = None) -> str:
    """The Python face's name of a parameter: the keyword of the API function running that gives the
    stage's keyword its value (else the keyword itself), in backquotes (`images`, `calib_images=0`)."""
    running = RUNNING.get()
    keyword = running.keyword(stage, keyword) if running is not None else keyword
    return f"`{keyword}`" if value is None else f"`{keyword}={value}`"


class Said(str):
    """A message that names parameters as data, not as text to be rewritten: its template's fields
    (:meth:`string.Formatter.parse`) are ``stage``'s keywords, or the values it was given (a
    :class:`Named` is a keyword, alone or with its value). As a ``str`` it reads in the Python face's words
    (:func:`keyword_name`); :meth:`render` reads it in another face's (the command line names each
    from the declarations: :mod:`aft_export.cli.words`)."""

    template: str
    stage: str | None
    values: dict

    def __new__(cls, template: str, stage: str | None, values: dict) -> Said:
        text = super().__new__(cls, _render(template, stage, values, keyword_name))
        text.template, text.stage, text.values = template, stage, values
        return text

    def render(self, name: Namer) -> str:
        return _render(self.template, self.stage, self.values, name)

    def __reduce__(self):  # a copy (a pickle: an error crossing processes) keeps the parameters
        return Said, (self.template, self.stage, self.values)

    def __add__(self, other):  # text + text: each part keeps its parameters (an f-string would not)
        return Said("{a}{b}", None, {"a": self, "b": other}) if isinstance(other, str) else NotImplemented

    def __radd__(self, other):
        return Said("{a}{b}", None, {"a": other, "b": self}) if isinstance(other, str) else NotImplemented


def _render(template: str, stage: str | None, values: dict, name: Namer) -> str:
    out = []
    for text, field, spec, conversion in string.Formatter().parse(template):
        out.append(text)
        if field is None:
            continue
        if field not in values:
            out.append(name(stage, field, None))
            continue
        value = values[field]
        if isinstance(value, Named):
            out.append(name(stage, value.keyword, value.value))
            continue
        if isinstance(value, Said):  # a part said by itself: in the same face's words
            out.append(value.render(name))
            continue
        value = {"r": repr, "a": ascii, "s": str}[conversion](value) if conversion else value
        out.append(format(value, spec or ""))
    return "".join(out)


def said(template: str, stage: str | None, **values) -> Said:
    """A message of ``stage`` (the command whose keywords it names; None: a stage of several
    commands, whose keywords each running command names as its own): each ``{field}`` of ``template``
    not in ``values`` is a keyword of ``stage``, named in each face's words; ``{field}`` in
    ``values`` is that value (``{field!r}`` its repr), a :class:`Named` a keyword (with its value).
    ``said("give {eg} or {allow_fewer}", "quantize", eg=Named("images", 90))``. A user's text is
    always a value, never put in the template."""
    return Said(template, stage, values)


def listed(keywords, stage: str | None = None) -> Said:
    """Keywords named one after another (`weights`, `mean`), each in each face's words."""
    values = {f"k{i}": Named(k) for i, k in enumerate(keywords)}
    return Said(", ".join("{" + k + "}" for k in values), stage, values)


def joined(separator: str, parts) -> str:
    """``separator.join(parts)``, keeping the parameters each :class:`Said` part names (str.join would not)."""
    parts = list(parts)
    if not any(isinstance(p, Said) for p in parts):
        return separator.join(parts)
    values = {f"p{i}": p for i, p in enumerate(parts)}
    return Said(separator.replace("{", "{{").replace("}", "}}").join("{" + k + "}" for k in values), None, values)


class AFTExportError(Exception):
    """Something the user can fix: bad input, a missing file, a wrong option. Its message may be
    :class:`Said` (``said``: the parameters it names are data, each face names them)."""

    exit_code = EXIT_BAD_INPUT

    @property
    def message(self):
        """The message as it was given (a :class:`Said` keeps its parameters)."""
        return self.args[0] if len(self.args) == 1 and isinstance(self.args[0], str) else str(self)


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
