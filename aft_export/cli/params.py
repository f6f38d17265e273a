"""Each command's click arguments and options, derived from its declared parameters
(:mod:`aft_export.options.commands`: what each takes, whether it repeats, its default, its help), so the
command line parses and refuses what the Python API's door checks; and the options of the command
line alone (``--json``, the old ``--provider``)."""

from __future__ import annotations

import functools

import click

from aft_export.cli.words import RENAMED_UNTIL
from aft_export.options import PROVIDER_BACKENDS, backend_of
from aft_export.options import params as kinds
from aft_export.options.commands import BACKEND, DECLARED
from aft_export.options.params import Param

PROVIDERS = click.Choice(list(PROVIDER_BACKENDS))  # the old --provider, an alias of --backend for one release


class Finite(click.FloatRange):
    """A number in a range (NaN and infinity, which click takes, are the door's to refuse: the declaration's
    one check)."""

    name = "number"


def click_type(param: Param):
    """The click type that parses what ``param`` takes from the command line (text becomes the number,
    path or choice the declaration says; its range checked as click checks one)."""
    kind = param.kind
    if isinstance(kind, kinds.Whole):
        return click.INT if kind.lo is None and kind.hi is None else click.IntRange(kind.lo, kind.hi)
    if isinstance(kind, kinds.Number):
        return Finite(kind.lo, kind.hi, min_open=kind.lo_open, max_open=kind.hi_open)
    if isinstance(kind, kinds.Choice):
        return click.Choice(kind.values)  # whole numbers too: click gives back the value its text names
    if isinstance(kind, (kinds.Path, kinds.Model, kinds.Classes)):
        what = getattr(kind, "what", "file")
        cls = InPlace if param.in_place else click.Path
        return cls(dir_okay=what != "file", file_okay=what != "directory")
    return click.STRING  # text, r,g,b triples (the door reads them)


def click_param(command: str, param: Param):
    """The click argument or option of a declared parameter."""
    kind = param.kind
    default = None if param.required else param.default
    if param.positional:
        option = click.argument(param.name, nargs=-1 if param.repeat else 1, type=click_type(param),
                                required=param.required or param.cli_required,
                                **({} if param.required or param.repeat else {"default": default}))  # fmt: skip
    else:
        decls = [f"{param.long}/{param.off}" if param.off else param.long] + ([param.short] if param.short else [])
        attrs = dict(help=param.help or None, required=param.required or param.cli_required,
                     show_default=param.show_default, metavar=param.metavar)  # fmt: skip
        if isinstance(kind, kinds.Flag):
            attrs.update(is_flag=True, default=bool(default))
        else:
            attrs.update(type=click_type(param), multiple=param.repeat, default=default)
        if attrs["required"]:
            attrs.pop("default")
        option = click.option(*decls, param.name, **attrs)

    def decorate(fn):
        fn = option(fn)
        fn.__click_params__[-1].declared = (command, param.name)
        return fn

    return decorate


def declared_options(command: str, extra: dict[str, list] | None = None):
    """Every declared parameter of ``command`` as its click argument or option, in the declared order,
    with ``extra``: click options of the command line alone (``--json``), each list after the parameter
    it names ("" first). The backend's old ``--provider`` name follows ``--backend`` (hidden)."""
    extra = extra or {}
    options = list(extra.get("", []))
    for param in DECLARED[command].params:
        options.append(click_param(command, param))
        if param.kind == BACKEND:
            options.append(click.option("--provider", type=PROVIDERS, hidden=True, callback=_provider_alias,
                                        help="The old name of --backend (cpu, cuda, tensorrt)."))  # fmt: skip
        options += extra.get(param.name, [])
    return lambda fn: functools.reduce(lambda f, option: option(f), reversed(options), fn)  # the first option on top


JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def given(kw: dict) -> dict:
    """The options the command hands to its API function: all but those left unset (None, or no
    value of a repeatable one), which take the function's own defaults."""
    return {k: v for k, v in kw.items() if v is not None and v != ()}


class InPlace(click.Path):
    """A file a command continues and rewrites in place by design (``train --resume``):
    the one input an output may be."""


def _provider_alias(ctx, param, value):
    """``--provider`` (cpu, cuda, tensorrt), the old name of ``--backend``: still read, with a note."""
    if value is not None:
        click.echo(f"warning: {ctx.command.name} --provider {value} is now --backend {PROVIDER_BACKENDS[value]}; the "
                   f"old name goes in aft-export {RENAMED_UNTIL}", err=True)  # fmt: skip
    return value


def backend_from(backend: str | None, provider: str | None) -> str | None:
    """The backend ``--backend`` and the old ``--provider`` name together (an error where they name two)."""
    return backend if provider is None else backend_of(backend, provider)
