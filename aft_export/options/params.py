"""What a parameter takes, declared once for both faces: the kinds of value (:class:`Whole`,
:class:`Number`, :class:`Choice`, :class:`Path`, ...), :class:`Param` (one parameter of one command:
its kind, whether it repeats, its default and its help, and how the command line spells it) and
:class:`Command`. The declarations themselves are :mod:`aft_export.options.commands`.

At a door, Python values are taken as Python values (text is not converted to a number: that
is the command line's job): NumPy integers and floats and ``os.PathLike`` are the numbers and
paths they are; ``True`` is no count; NaN and infinity are refused wherever a number is; a
repeatable keyword takes one value or a list of them (a string is one value, never split into
characters); a path takes ``str`` or ``os.PathLike``, never a list. ``None`` is "not given": the
declared default. A refusal is one :class:`ParamError` naming the keyword, what it takes and what
it got, which carries the command and the keyword as data.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from dataclasses import MISSING, dataclass, field, replace
from typing import Any

from aft_export.errors import AFTExportError, Named, said
from aft_export.readers import LINE_BREAKS, compile_pattern, shown


class ParamError(AFTExportError, ValueError):
    """A value a parameter does not take: one line naming the keyword. ``command`` and ``param``
    say which parameter, as data (each face names it in its own words)."""

    def __init__(self, message: str, command: str, param: str) -> None:
        super().__init__(message)
        self.command, self.param = command, param


class KeywordError(ParamError, TypeError):
    """A call its function's signature does not take: a keyword it does not have (Python's TypeError,
    worded as Python words it, naming the function and the keyword meant), too many arguments, or a
    required one missing. Also a TypeError, so that ``except TypeError`` still catches it."""


class Refused(Exception):
    """What a kind raises for a value it does not take (the door words the message); ``why``: what is
    wrong with it beyond what the kind takes (a NUL in a path, an integer no float holds)."""

    def __init__(self, why: str = "") -> None:
        super().__init__(why)
        self.why = why


# the largest whole number a parameter takes where it declares no bound: what a 64-bit integer holds (a
# count, a size or a seed beyond it fits no array, no C type and no file format we write)
MAX_WHOLE = 2**63 - 1


def _is_bool(value) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy's bool_ is not a bool


def _number(value) -> float | int:
    """A real number (a NumPy one too), never a bool, a string or NaN/infinity."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise Refused
    if isinstance(value, numbers.Integral):
        return int(value)
    value = float(value)
    if not math.isfinite(value):
        raise Refused
    return value


def _bounds(lo, hi, lo_open: bool = False, hi_open: bool = False) -> str:
    lo, hi = (v if v is None or isinstance(v, int) else format(v, "g") for v in (lo, hi))  # 4294967295, not 4.29e+09
    if lo is not None and hi is not None:
        if lo_open or hi_open:
            return f"in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
        return f"from {lo} to {hi}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {hi}"
    return ""


class Kind:
    """What a parameter takes. ``takes`` says it in a message (``a whole number >= 1``);
    :meth:`accept` returns the value as the stages take it, or raises :class:`Refused`."""

    takes = "a value"

    def accept(self, value):
        raise NotImplementedError  # pragma: no cover

    def holds(self, value, keyword: str):
        """``value``, taken, held to a check that words its own refusal naming ``keyword`` (RE2's: :class:`Pattern`)."""
        return value


@dataclass(frozen=True)
class Whole(Kind):
    """A whole number in [lo, hi] (a float that is one, 16.0, is taken as it)."""

    lo: int | None = None
    hi: int | None = None

    @property
    def takes(self) -> str:
        return " ".join(filter(None, ["a whole number", _bounds(self.lo, self.hi)]))

    def accept(self, value) -> int:
        n = _number(value)
        if isinstance(n, float):
            if not n.is_integer():
                raise Refused
            n = int(n)
        if (self.lo is not None and n < self.lo) or (self.hi is not None and n > self.hi):
            raise Refused
        if abs(n) > MAX_WHOLE:
            raise Refused("more than a 64-bit integer holds")
        return n


@dataclass(frozen=True)
class Opset(Whole):
    """An ONNX opset from ``lo`` to the newest the installed onnx package knows (asked when a value other than
    the default is checked: the options import no onnx)."""

    @property
    def takes(self) -> str:
        return f"an ONNX opset >= {self.lo} that the installed onnx package knows"

    def accept(self, value) -> int:
        import onnx

        n, newest = super().accept(value), onnx.defs.onnx_opset_version()
        if n > newest:
            raise Refused(f"newer than this onnx package knows ({newest})")
        return n


@dataclass(frozen=True)
class Number(Kind):
    """A finite number in its range (open at either end where said)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    @property
    def takes(self) -> str:
        return " ".join(filter(None, ["a finite number", _bounds(self.lo, self.hi, self.lo_open, self.hi_open)]))

    def accept(self, value) -> float:
        x = _number(value)  # an int is compared as an int: exact, whatever its size
        if self.lo is not None and (x < self.lo or (self.lo_open and x == self.lo)):
            raise Refused
        if self.hi is not None and (x > self.hi or (self.hi_open and x == self.hi)):
            raise Refused
        return _float(x)


def _float(x) -> float:
    try:
        return float(x)
    except OverflowError:  # an int beyond a float's range (10**400)
        raise Refused("beyond the range of a float") from None


def _text(value: str, lines: bool = False) -> str:
    """``value`` if no NUL is in it (no path, no C string and no config file holds one) and, unless
    ``lines``, no line break (which would end a line of a file or a command line it lands in)."""
    if "\x00" in value:
        raise Refused("a NUL character, which no path or text we pass on can hold")
    if not lines and not LINE_BREAKS.isdisjoint(value):
        raise Refused("a line break, which would end the line of the file or command it lands in")
    return value


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``values`` (text, or whole numbers)."""

    values: tuple

    @property
    def takes(self) -> str:
        return "one of " + ", ".join(map(str, self.values))

    def accept(self, value):
        if all(isinstance(v, str) for v in self.values):
            if not isinstance(value, str) or value not in self.values:
                raise Refused
            return value
        n = Whole().accept(value)
        if n not in self.values:
            raise Refused
        return n


@dataclass(frozen=True)
class Text(Kind):
    """Text (a name, a pattern, a profile such as 1,8,32)."""

    empty: bool = False  # "" taken (it says something: an empty pattern matches every name)

    @property
    def takes(self) -> str:
        return "text" if self.empty else "non-empty text"

    def accept(self, value) -> str:
        if not isinstance(value, str) or (not value and not self.empty):
            raise Refused
        return _text(value)


@dataclass(frozen=True)
class Form(Text):
    """Text of one form, ``pattern`` matched whole: ``what`` says it in a message, ``example`` is one."""

    pattern: str = ""
    what: str = ""
    example: str = ""

    @property
    def takes(self) -> str:
        return self.what

    def accept(self, value) -> str:
        text = super().accept(value)
        if not re.fullmatch(self.pattern, text):
            raise Refused
        return text


@dataclass(frozen=True)
class Batch(Text):
    """A graph's batch dimension, as text: "dynamic", or a fixed batch size from 1 to ``hi`` ("8")."""

    hi: int = 1

    @property
    def takes(self) -> str:
        return f"'dynamic' or a batch size from 1 to {self.hi} (text)"

    def accept(self, value) -> str:
        text = super().accept(value)
        size = text.strip().lower()
        if size != "dynamic" and not (re.fullmatch("[0-9]{1,20}", size) and 1 <= int(size) <= self.hi):
            raise Refused
        return text


@dataclass(frozen=True)
class Pattern(Text):
    """A regular expression over node names in RE2's syntax, held to :func:`~aft_export.readers.compile_pattern`
    (which words its refusals, naming the parameter); "" is its to refuse too (it would match every name)."""

    empty: bool = True

    def holds(self, value, keyword: str):
        compile_pattern(value, keyword)
        return value


@dataclass(frozen=True)
class Path(Kind):
    """A path (``str`` or ``os.PathLike``), given as text to the stages; ``what``: file, directory,
    or either; ``named``: a data set's name (cifar10:test) is taken too."""

    what: str = "file"
    named: bool = False
    empty: str = ""  # what "" says, where it is taken (QuantizeOptions.cache_dir's "": no cache)

    @property
    def takes(self) -> str:
        noun = {"file": "a file's path", "directory": "a directory's path", "either": "a path"}[self.what]
        empty = f", or \"\" for {self.empty}" if self.empty else ""
        return f"{noun}{' or a data set name' if self.named else ''} (str or os.PathLike){empty}"

    def accept(self, value) -> str:
        if isinstance(value, (bytes, bytearray)) or not isinstance(value, (str, os.PathLike)):
            raise Refused
        text = os.fspath(value)
        if isinstance(text, str) and not text and self.empty:
            return text
        if not isinstance(text, str) or not text:
            raise Refused
        return _text(text, lines=True)  # a file may be named with a line break: escaped where shown


@dataclass(frozen=True)
class Flag(Kind):
    takes = "True or False"

    def accept(self, value) -> bool:
        if not _is_bool(value):
            raise Refused
        return bool(value)


@dataclass(frozen=True)
class Triple(Kind):
    """Three finite numbers: a list of them, or "r,g,b" text (what the command line gives)."""

    positive: bool = False

    @property
    def takes(self) -> str:
        return f"three finite numbers{' > 0' if self.positive else ''} (a list, or r,g,b text)"

    def accept(self, value) -> tuple[float, float, float]:
        parts = value.split(",") if isinstance(value, str) else value
        if isinstance(parts, (str, bytes, dict)) or not hasattr(parts, "__iter__"):
            raise Refused
        try:
            out = tuple(float(p) if isinstance(p, str) else _float(_number(p)) for p in parts)
        except (ValueError, TypeError):
            raise Refused from None
        if len(out) != 3 or not all(math.isfinite(v) for v in out) or (self.positive and min(out) <= 0):
            raise Refused
        return out


@dataclass(frozen=True)
class Classes(Kind):
    """Class names: a file of them, one per line, or a list of names."""

    takes = "a file of class names (str or os.PathLike) or a list of names"

    def accept(self, value):
        if isinstance(value, (list, tuple)):
            if not value or not all(isinstance(v, str) and v for v in value):
                raise Refused
            return tuple(_text(v) for v in value)  # a name is a line of a labels file
        return Path().accept(value)


@dataclass(frozen=True)
class Model(Kind):
    """A model to load (a checkpoint, weights or a model spec: a path), or, where ``module`` says so,
    an ``nn.Module`` already in memory."""

    module: bool = False

    @property
    def takes(self) -> str:
        return "a checkpoint's path (str or os.PathLike)" + (" or an nn.Module" if self.module else "")

    def accept(self, value):
        if self.module and _is_module(value):
            return value
        return Path().accept(value)


def _is_module(value) -> bool:
    import sys

    torch = sys.modules.get("torch")  # an nn.Module exists only where torch is imported
    return torch is not None and isinstance(value, torch.nn.Module)


REQUIRED = object()  # the default of a parameter that must be given


@dataclass(frozen=True)
class Param:
    """One parameter of one command: its keyword (``name``), what it takes, whether it repeats,
    its default and its help; and how the command line spells it (derived where not said)."""

    name: str
    kind: Kind
    default: Any = None
    help: str = ""
    repeat: bool = False  # one value or a list of them (the command line: the flag repeated)
    nonempty: bool = False  # a repeatable one refuses an empty list
    flag: str = ""  # the long flag: default --NAME with - for _ (a repeatable one's singular, given here)
    off: str = ""  # a switch's flag that turns it off (simplify's, no-simplify)
    short: str = ""  # -o
    positional: bool = False  # an argument on the command line, not a flag
    show_default: bool = True  # --help shows the default (False where the help says it itself)
    metavar: str | None = None
    # required on the command line, where the user says which, though Python has a default (quantize's
    # precision: int8)
    cli_required: bool = False
    in_place: bool = False  # a file the command may rewrite in place though it is read (train's resume)
    # the keywords of the stages it runs that this parameter gives its value to, (stage, keyword): the
    # pipeline's calib_images is quantize's images; a message of that stage names it by this flag
    gives: tuple[tuple[str, str], ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def long(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def takes(self) -> str:
        return f"{self.kind.takes}, or a list of them" if self.repeat else self.kind.takes

    def spelled(self, value=None) -> str:
        """How the command line says this parameter, alone or set to ``value``: a switch set on is its
        flag, set off its flag that turns it off; a repeatable one's list, the flag once per value."""
        flag = self.name.upper() if self.positional else self.long
        if value is None:
            return flag
        if isinstance(self.kind, Flag):
            return flag if value else (self.off or f"no {flag}")
        if self.repeat and isinstance(value, (list, tuple)):
            return " ".join(f"{flag} {v}" for v in value)
        return f"{flag} {value}"

    def check(self, value, command: str):
        """``value`` as the stages take it (None: the default), or one :class:`ParamError`."""
        if value is None:
            if self.required:
                raise ParamError(said("{param} must be given: it takes {takes}", command, param=Named(self.name),
                                      takes=self.takes()), command, self.name)  # fmt: skip
            return self.default
        taken = []
        for item in _items(value) if self.repeat else [value]:
            try:
                taken.append(self.kind.holds(self.kind.accept(item), self.name))
            except Refused as refused:  # a list's item that is wrong is shown alone (a compute capability 86 among several: '86')
                raise self.refusal(item, command, f", {refused.why}" if refused.why else "") from None
        if self.nonempty and not taken:
            raise self.refusal(value, command, ", no value")
        return tuple(taken) if self.repeat else taken[0]

    def refusal(self, got, command: str, why: str = "") -> ParamError:
        """The one line for ``got``, a value this parameter does not take."""
        return ParamError(said("{param} takes {takes}, got {got} ({type}){why}; give {example}", command,
                               param=Named(self.name), takes=self.takes(), got=shown(got, as_json=False),
                               type=type(got).__name__, why=why, example=_example(self)), command, self.name)  # fmt: skip


def _items(value) -> list:
    """A repeatable parameter's values: one value (text and paths are one, never their characters),
    or each of a list, tuple, set or other iterable."""
    if isinstance(value, (str, bytes, os.PathLike, dict)) or not hasattr(value, "__iter__") or _is_module(value):
        return [value]
    return list(value)


def _example(p: Param) -> str:
    """What to give instead, in the keyword's own words."""
    if p.default not in (None, REQUIRED, ()):
        value = p.default if not isinstance(p.default, tuple) else list(p.default)
        return f"e.g. {value!r}, its default"
    kind = p.kind
    if isinstance(kind, Path):
        example = "cifar10:test" if kind.named else {"file": "model.onnx", "directory": "out",
                                                     "either": "images"}[kind.what]  # fmt: skip
    elif isinstance(kind, Choice):
        example = kind.values[0]
    elif isinstance(kind, Whole):  # an opset too
        example = max(1, kind.lo or 0)
    elif isinstance(kind, Form):
        example = kind.example
    else:  # text, a pattern, a batch dimension: "text"
        example = {Number: 1.0, Flag: True, Triple: [0.485, 0.456, 0.406], Classes: "classes.txt",
                   Model: "model.pt"}.get(type(kind), "text")  # fmt: skip
    return f"e.g. {[example] if p.repeat else example!r}"


PARAM = "aft_export.param"  # the key of a declared field's metadata (:func:`declare`)


def declare(kind: Kind, default: Any = None, help: str = "", **how) -> Any:
    """A field of an options dataclass that is a parameter of its command, declared in this one place: what
    it takes (``kind``), its default, its help and how the command line spells it (``how``: the other fields
    of :class:`Param`). The command's declaration reads it (:func:`params_of`), and through it the door, the
    click option, ``--help`` and docs/cli.md; the dataclass checks its own values by it
    (:func:`check_declared`), and a recipe's values are checked by it too."""
    given = {} if default is REQUIRED else {"default": default}  # REQUIRED: no default, in the dataclass too
    return field(**given, metadata={PARAM: (kind, help, how)})


def params_of(options: type, *names: str, **override) -> tuple[Param, ...]:
    """The :class:`Param` of each declared field ``names`` of the dataclass ``options`` (every declared
    field, in order, where none is named); ``override``: a field of :class:`Param` set for all of them."""
    found = options.__dataclass_fields__
    names = names or tuple(n for n, f in found.items() if PARAM in f.metadata)
    out = []
    for name in names:
        kind, help_, how = found[name].metadata[PARAM]
        default = found[name].default
        out.append(replace(Param(name, kind, REQUIRED if default is MISSING else default, help_, **how), **override))
    return tuple(out)


def check_declared(options, command: str) -> None:
    """Each declared field of the dataclass instance ``options`` held to its declaration (the door's
    check, for a dataclass made in Python): the first value its field does not take is one
    :class:`ParamError`. The default is taken as it is, and None where the field's type takes it."""
    fields = type(options).__dataclass_fields__
    for p in params_of(type(options)):
        value = getattr(options, p.name)
        if value is None and p.default is not None and "None" not in str(fields[p.name].type):
            raise p.refusal(value, command)  # None is "not given" at a door; a field holds what it is given
        if value is not None and not (type(value) is type(p.default) and value == p.default):
            taken = p.check(value, command)
            if p.repeat:  # one value or a list of them, held as the tuple the door makes (a str is one value)
                object.__setattr__(options, p.name, taken)


def options_of(command: str):
    """Make the class an options dataclass of ``command`` (frozen): each declared field is held to its
    declaration when one is made (:func:`check_declared`), then to the class's own ``__post_init__``, where
    it has one (the rules that span fields: what no one field's declaration can say)."""

    def make(cls):
        rules = cls.__dict__.get("__post_init__")

        def __post_init__(self) -> None:
            check_declared(self, command)
            if rules is not None:
                rules(self)

        cls.__post_init__ = __post_init__
        return dataclass(frozen=True)(cls)

    return make


@dataclass(frozen=True)
class Command:
    """A command's declared parameters, in the order its ``--help`` lists them."""

    name: str  # the command line's name (triton-repo)
    params: tuple[Param, ...]
    function: str = ""  # the API function's name (evaluate for eval; default: the name with _ for -)
    options: type | None = None  # the options dataclass whose fields its parameters of the same names fill

    def fills(self, param: str) -> bool:
        """Whether the parameter ``param`` fills the field of that name of :attr:`options`."""
        return self.options is not None and param in getattr(self.options, "__dataclass_fields__", {})

    def options_of(self, values: dict, **given):
        """:attr:`options` made from the API function's ``values`` (its keywords: those that fill a field),
        and ``given`` (fields set otherwise)."""
        return self.options(**{k: v for k, v in values.items() if self.fills(k)}, **given)

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(names) != len(set(names)):
            raise TypeError(f"{self.name}: a parameter declared twice")

    def __getitem__(self, name: str) -> Param:
        found = next((p for p in self.params if p.name == name), None)
        if found is None:
            raise KeyError(f"{self.name} declares no parameter {name!r}")
        return found

    def __contains__(self, name: str) -> bool:
        return any(p.name == name for p in self.params)

    def giving(self, stage: str | None, keyword: str) -> Param | None:
        """The parameter that gives ``stage``'s ``keyword`` its value (:attr:`Param.gives`), if one does."""
        return next((p for p in self.params if (stage, keyword) in p.gives), None)

    def keyword(self, stage: str | None, keyword: str) -> str:
        """Its keyword that gives ``stage``'s ``keyword`` its value (the pipeline's calib_images is quantize's
        images), else ``keyword``: how its API function names a stage's keyword (:data:`~aft_export.errors.RUNNING`)."""
        return getattr(self.giving(stage, keyword), "name", keyword)
