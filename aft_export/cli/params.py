"""The values every command parses, checked where they are parsed, and the option groups
several commands share (another tool's preprocessing, the backend); defaults read from the
options dataclasses (:func:`bound`)."""

from __future__ import annotations

import dataclasses
import math
import types
import typing

import click

from aft_export.cli.words import RENAMED_UNTIL
from aft_export.options import BACKENDS, DEFAULT_BACKEND, MAX_SEED, MAX_THREADS, PROVIDER_BACKENDS, backend_of
from aft_export.readers import MAX_SIDE

BACKEND_LIST = ", ".join(f"{b.name} ({b.summary})" for b in BACKENDS.values())
BACKEND_HELP = (f"Where .onnx artifacts run: {BACKEND_LIST}. A GPU backend also runs checkpoints in PyTorch on "
                f"the GPU; engines run in TensorRT.")  # fmt: skip
PROVIDERS = click.Choice(list(PROVIDER_BACKENDS))  # the old --provider, an alias of --backend for one release


class Finite(click.FloatRange):
    """A float in a range that refuses NaN and infinity (click's FloatRange accepts both)."""

    name = "number"

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


COUNT = click.IntRange(min=1)  # images, iterations, epochs
NONNEGATIVE = click.IntRange(min=0)
BATCH = click.IntRange(min=1)  # the upper bound is the memory a batch needs, estimated by each command
THREADS = click.IntRange(0, MAX_THREADS)  # 0: the backend's default
SEED = click.IntRange(0, MAX_SEED)
PORT = click.IntRange(1, 65535)


def _field_type(owner, name: str) -> tuple[type, bool]:
    """The type a dataclass field holds (None aside), and whether it is a tuple of that type."""
    hint = typing.get_type_hints(owner)[name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else hint
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def _parsed_type(param: click.Option) -> type | None:
    """The Python type a click option parses its value into (None: none of ours)."""
    kind = param.type
    if param.is_flag or isinstance(kind, click.types.BoolParamType):
        return bool
    if isinstance(kind, click.types.IntParamType):
        return int
    if isinstance(kind, click.types.FloatParamType):
        return float
    if isinstance(kind, click.Choice):
        return {type(c) for c in kind.choices}.pop() if len({type(c) for c in kind.choices}) == 1 else None
    if isinstance(kind, (click.types.StringParamType, click.Path)):
        return str
    return None


def bound(owner, name: str, *decls: str, convert: type | None = None, show_default: bool = True, **attrs):
    """A click option that fills the field ``name`` of the options dataclass ``owner``: its default
    is the field's (shown in --help unless ``show_default=False``, where the help says it itself; a
    ``required`` option has none), and its click type must parse what the field holds (int, float,
    str, a flag for bool, a repeatable option for a tuple; ``convert``: the type the parsed value is
    turned into, for a choice of strings that fills an int). The option keeps ``(owner, name)`` as
    ``bound`` (tests/test_cli_options.py holds every command's options to their fields)."""
    field = next((f for f in dataclasses.fields(owner) if f.name == name), None)
    if field is None:
        raise TypeError(f"{owner.__name__} has no field {name!r} for {decls}")
    if "default" in attrs:
        raise TypeError(f"{decls}: the default of a bound option is {owner.__name__}.{name}'s")
    if not attrs.get("required"):
        attrs["default"] = None if field.default is dataclasses.MISSING else field.default
        attrs["show_default"] = show_default
    if convert is not None:
        attrs["callback"] = lambda ctx, param, value: value if value is None else convert(value)

    def decorate(command):
        command = click.option(*decls, **attrs)(command)
        param = command.__click_params__[-1]
        want, many = _field_type(owner, name)
        got = convert or _parsed_type(param)
        if got is not want or bool(param.multiple) != many:
            raise TypeError(f"{'/'.join(param.opts)} parses {'several ' if param.multiple else ''}"
                            f"{getattr(got, '__name__', got)}: it cannot fill {owner.__name__}.{name}, "
                            f"{typing.get_type_hints(owner)[name]}")  # fmt: skip
        param.bound = (owner, name)
        return command

    return decorate


def apply_options(options):
    def wrap(fn):
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return wrap


def given(kw: dict) -> dict:
    """The options the command hands to its API function: all but those left unset (None, or no
    value of a repeatable one), which take the function's own defaults."""
    return {k: v for k, v in kw.items() if v is not None and v != ()}


class InPlace(click.Path):
    """A file a command continues and rewrites in place by design (``train --resume``):
    the one input an output may be."""


def foreign_options(command):
    """``--preprocess``, ``--input-size``, ``--mean``, ``--std``, ``--classes``: how to feed an ONNX
    file another tool wrote (ModelOpt, ONNX Runtime's quantiser), which carries none of our metadata."""
    who = "For an ONNX file another tool wrote (no aft-export metadata)"
    options = [
        click.option("--preprocess", type=click.Path(dir_okay=False), help=f"{who}: JSON/YAML file with input_size, "
                     "mean, std, classes (or classes_file) [default: NAME.preprocess.json beside the file]."),
        click.option("--input-size", type=click.IntRange(1, MAX_SIDE), help=f"{who}: square input size."),
        click.option("--mean", help=f"{who}: r,g,b mean of (x / 255)."),
        click.option("--std", help=f"{who}: r,g,b std."),
        click.option("--classes", type=click.Path(dir_okay=False), help=f"{who}: class names, one per line."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def _provider_alias(ctx, param, value):
    """``--provider`` (cpu, cuda, tensorrt), the old name of ``--backend``: still read, with a note."""
    if value is not None:
        click.echo(f"warning: {ctx.command.name} --provider {value} is now --backend {PROVIDER_BACKENDS[value]}; the "
                   f"old name goes in aft-export {RENAMED_UNTIL}", err=True)  # fmt: skip
    return value


def backend_from(backend: str | None, provider: str | None) -> str | None:
    """The backend ``--backend`` and the old ``--provider`` name together (an error where they name two)."""
    return backend if provider is None else backend_of(backend, provider)


def backend_options(owner=None, help_text: str = BACKEND_HELP):
    """``--backend`` (the runners' own names, :data:`aft_export.options.BACKENDS`; its default ``owner``'s,
    else DEFAULT_BACKEND) and, hidden, the old ``--provider cpu|cuda|tensorrt`` it replaces (the library
    reads both: ``backend``, ``providers``)."""
    choice = click.Choice(list(BACKENDS))
    options = [bound(owner, "backend", "--backend", type=choice, help=help_text) if owner is not None else
               click.option("--backend", type=choice, default=DEFAULT_BACKEND, show_default=True, help=help_text),
               click.option("--provider", type=PROVIDERS, hidden=True, callback=_provider_alias,
                            help="The old name of --backend (cpu, cuda, tensorrt).")]  # fmt: skip
    return apply_options(options)
