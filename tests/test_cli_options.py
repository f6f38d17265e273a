"""Each command's options are bound to the options dataclass they fill (issue 34, item 2): a field's
type, default and help are written once. Every option that fills a field is declared with
:func:`aft_export.cli.params.bound` and has that field's default; ``bound`` refuses a click type
that cannot hold what the field holds. The field has the flag's name; the fields renamed to it
keep their old names for one release (aft_export.version.renamed_fields)."""

from __future__ import annotations

import dataclasses

import click
import pytest

from aft_export import api
from aft_export.cli import main
from aft_export.cli.params import COUNT, bound
from aft_export.errors import AFTExportError
from aft_export.options import (BenchOptions, BuildOptions, DoctorOptions, EvalOptions, ExportOptions, ParityOptions,
                                PipelineOptions, QuantizeOptions, ServeOptions, TrainConfig, TritonRepoOptions)  # fmt: skip
from tests.test_api import _keyword

# the options dataclass each command fills (its API function builds one)
OWNERS = {"export": ExportOptions, "quantize": QuantizeOptions, "build": BuildOptions, "parity": ParityOptions,
          "eval": EvalOptions, "bench": BenchOptions, "pipeline": PipelineOptions, "doctor": DoctorOptions,
          "serve": ServeOptions, "triton-repo": TritonRepoOptions, "train": TrainConfig}  # fmt: skip
# (command, field): why the option that fills it is not bound to it
UNBOUND = {
    ("quantize", "mean"): "r,g,b text, which the API parses into the field's three floats (api._three)",
    ("quantize", "std"): "r,g,b text, which the API parses into the field's three floats (api._three)",
}
FUNCTIONS = {command: function for function, command in api.COMMANDS.items()}


def field_of(command: click.Command, param: click.Parameter) -> str | None:
    """The field of the command's options dataclass that ``param`` fills: its keyword's name, or the
    field api.KEYWORD_FIELDS names for it; None where it fills none (a stage's parameter, a
    value such as ``cache_dir=""``)."""
    owner = OWNERS.get(command.name)
    if owner is None or not isinstance(param, click.Option) or param.hidden:
        return None
    keyword = _keyword(param)
    mapped = api.KEYWORD_FIELDS.get(FUNCTIONS[command.name], {}).get(keyword)
    if mapped is not None:
        where, _, name = mapped.partition(".")
        return name if where == owner.__name__ and name.isidentifier() else None
    return keyword if keyword in {f.name for f in dataclasses.fields(owner)} else None


def unbound(command: click.Command) -> list[str]:
    """The command's options that fill a field but are not bound to it, or not with its default."""
    owner, out = OWNERS.get(command.name), []
    for param in command.params:
        name = field_of(command, param)
        if name is None or (command.name, name) in UNBOUND:
            continue
        flag = "/".join(param.opts)
        if getattr(param, "bound", None) != (owner, name):
            out.append(f"{command.name} {flag} fills {owner.__name__}.{name} but is not bound to it")
            continue
        field = next(f for f in dataclasses.fields(owner) if f.name == name)
        want = None if field.default is dataclasses.MISSING else field.default
        have = tuple(param.default) if param.multiple and param.default is not None else param.default
        if not param.required and have != want:
            out.append(f"{command.name} {flag}: default {have!r}, but {owner.__name__}.{name} = {want!r}")
    return out


@pytest.mark.parametrize("name", sorted(OWNERS))
def test_every_option_that_fills_a_field_is_bound_to_it_with_its_default(name):
    assert unbound(main.commands[name]) == []


def test_the_bound_options_are_found():
    """The reading works: most of each command's options fill its fields; every exception is still needed."""
    found = {name: [p for p in main.commands[name].params if field_of(main.commands[name], p)] for name in OWNERS}
    assert len(found["export"]) == 10 and len(found["quantize"]) >= 20 and len(found["pipeline"]) == 15
    assert all(found.values())
    for command, name in UNBOUND:
        assert any(field_of(main.commands[command], p) == name for p in main.commands[command].params)


def test_a_planted_unbound_option_and_a_wrong_default_are_found():
    """It can fail: an option that fills a field with a default of its own, or with no binding."""

    def export(**_):
        pass

    planted = click.Command("export", params=[click.Option(["--opset"], default=17), click.Option(["--target"])])
    found = unbound(planted)
    assert found == ["export --opset fills ExportOptions.opset but is not bound to it",
                     "export --target fills ExportOptions.target but is not bound to it"]  # fmt: skip
    wrong = bound(ExportOptions, "opset", "--opset", type=int)(export)
    wrong.__click_params__[-1].default = 17
    assert unbound(click.Command("export", params=wrong.__click_params__)) == [
        "export --opset: default 17, but ExportOptions.opset = 18"]  # fmt: skip


@pytest.mark.parametrize("owner, name, decls, attrs, says", [
    (ExportOptions, "opset", ("--opset",), {"type": click.Choice(["a", "b"])}, "parses str"),
    (QuantizeOptions, "exclude", ("--exclude",), {}, "parses str: it cannot fill QuantizeOptions.exclude"),
    (ExportOptions, "simplify", ("--simplify",), {"type": COUNT}, "parses int"),
    (BenchOptions, "batch_sizes", ("--batch-size",), {"type": float, "multiple": True}, "parses several float"),
    (ExportOptions, "nope", ("--nope",), {}, "has no field 'nope'"),
    (ExportOptions, "opset", ("--opset",), {"default": 17}, "the default of a bound option"),
])  # fmt: skip
def test_bound_refuses_a_type_that_cannot_fill_the_field(owner, name, decls, attrs, says):
    with pytest.raises(TypeError, match=says):
        bound(owner, name, *decls, **attrs)(lambda **_: None)


def test_bound_takes_the_default_and_converts():
    fn = bound(QuantizeOptions, "weight_bits", "--weight-bits", type=click.Choice(["7", "8"]), convert=int)(
        bound(TrainConfig, "epochs", "--epochs", type=COUNT)(lambda **_: None))  # fmt: skip
    command = click.Command("x", params=fn.__click_params__, callback=lambda **kw: kw)
    assert command.main(["--weight-bits", "7"], standalone_mode=False) == {"epochs": TrainConfig.epochs,
                                                                            "weight_bits": 7}  # fmt: skip
    assert [p.bound for p in command.params] == [(TrainConfig, "epochs"), (QuantizeOptions, "weight_bits")]


def test_every_bound_option_fills_the_field_of_its_flag_s_name():
    """A field has its flag's name, a repeatable flag's field is plural: the keyword's own rule (tests/test_api.py)."""
    bad = [f"{name} {'/'.join(p.opts)} fills {p.bound[0].__name__}.{p.bound[1]}, not {_keyword(p)}"
           for name, command in sorted(main.commands.items()) for p in command.params
           if getattr(p, "bound", None) and p.bound[1] != _keyword(p)]  # fmt: skip
    assert bad == []


# the fields renamed after their flags: (options, old field, new field, a value)
RENAMED = [(QuantizeOptions, "count", "images", 16), (BenchOptions, "batches", "batch_sizes", (1, 8)),
           (BuildOptions, "batch", "batch_profile", "1,2,4"), (BuildOptions, "hw", "hw_profile", "16,32,64"),
           (PipelineOptions, "bench_batches", "bench_batch_sizes", (1, 8))]  # fmt: skip


def test_the_renamed_fields_are_these():
    from aft_export.version import RENAMED_FIELDS

    assert {(c, old, new) for c, r in RENAMED_FIELDS.items() for old, new in r.items()} == {r[:3] for r in RENAMED}


@pytest.mark.parametrize("owner, old, new, value", RENAMED, ids=[f"{r[0].__name__}.{r[1]}" for r in RENAMED])
def test_a_renamed_field_s_old_name_works_until_the_release_that_drops_it(owner, old, new, value):
    """The old keyword and the old attribute are the new field's, each with a DeprecationWarning
    naming the new name (at the caller's line); the dataclass's fields are the new names only."""
    from aft_export.version import RENAMED_UNTIL

    name = owner.__name__
    with pytest.warns(DeprecationWarning, match=rf"^{name}\({old}=\.\.\.\) is now {name}\({new}=\.\.\.\); the old "
                                                rf"name goes in aft-export {RENAMED_UNTIL}$") as said:  # fmt: skip
        made = owner(**{old: value})
    assert [w.filename for w in said] == [__file__]
    assert made == owner(**{new: value}) and getattr(made, new) == value
    with pytest.warns(DeprecationWarning, match=rf"^{name}\.{old} is now {name}\.{new};") as said:
        assert getattr(made, old) == value
    with pytest.warns(DeprecationWarning, match=rf"^{name}\.{old} is now {name}\.{new};") as on_class:
        assert getattr(owner, old) == getattr(owner, new)  # the new field's default
    assert [w.filename for w in [*said, *on_class]] == [__file__] * 2
    assert old not in {f.name for f in dataclasses.fields(owner)} and old not in dataclasses.asdict(made)
    with pytest.raises(TypeError, match=f"got both {old}= and {new}=; give {new}= alone"):
        owner(**{old: value, new: value})


def test_an_old_keyword_is_checked_as_the_new_field():
    with pytest.warns(DeprecationWarning), pytest.raises(AFTExportError, match="e.g. `images=512`"):
        QuantizeOptions(count=0)
    with pytest.warns(DeprecationWarning), pytest.raises(AFTExportError, match="e.g. `bench_batch_sizes=\\(1, 32\\)`"):
        PipelineOptions(bench_batches=())
