"""Each command's parameters are declared once (aft_export.options.commands): what each takes, whether it
repeats, its default and its help. The command line's options are derived from the declarations, the API's
keywords have the same defaults, and a parameter that fills an options field has that field's default.
The fields renamed to their flags' names keep their old names for one release
(aft_export.version.renamed_fields)."""

from __future__ import annotations

import dataclasses
import inspect

import click
import pytest

from aft_export import api
from aft_export.cli import main
from aft_export.errors import AFTExportError
from aft_export.options import BenchOptions, BuildOptions, PipelineOptions, QuantizeOptions
from aft_export.options import params as kinds
from aft_export.options.commands import DECLARED
from aft_export.options.params import REQUIRED

FUNCTIONS = {command: function for function, command in api.COMMANDS.items()}
# (command, parameter): why its default is not its options field's
DIFFERENT = {
    ("bench", "backend"): "None: onnxruntime, or with `reference` every runtime here (BenchOptions.backend is the first)",
    ("bench", "images"): "None: BenchOptions.images with `reference`; given without `reference` it is an error",
}
CLI_ONLY = {"as_json", "provider"}  # --json chooses how a result is shown; --provider is --backend's old name


def _same(a, b) -> bool:
    return (tuple(a) if isinstance(a, list) else a) == (tuple(b) if isinstance(b, list) else b)


def field_defaults() -> list[str]:
    """Each declared parameter that fills an options field, whose default is not the field's."""
    out = []
    for name, command in sorted(DECLARED.items()):
        for p in command.params:
            if not command.fills(p.name) or (name, p.name) in DIFFERENT:
                continue
            field = command.options.__dataclass_fields__[p.name]
            want = None if field.default is dataclasses.MISSING else field.default
            have = want if p.required and want is None else p.default
            if not _same(have, want):
                out.append(f"{name} {p.name}: default {have!r}, but {command.options.__name__}.{p.name} = {want!r}")
    return out


def test_every_parameter_that_fills_an_options_field_has_its_default():
    assert field_defaults() == []
    for command, name in DIFFERENT:  # every exception is still needed
        assert DECLARED[command].fills(name) and not _same(DECLARED[command][name].default,
                                                           getattr(DECLARED[command].options, name))  # fmt: skip


def signature_defaults(function, command) -> list[str]:
    """What differs between a function's keywords and the command's declared parameters: a name on one side
    only, or another default."""
    signature = inspect.signature(function)
    names, declared = set(signature.parameters), {p.name for p in command.params}
    out = [f"{command.name}: {function.__name__}({n}=...) is not declared" for n in sorted(names - declared)]
    out += [f"{command.name}: `{n}` has no keyword in {function.__name__}()" for n in sorted(declared - names)]
    for p in command.params:
        if p.name in names:
            default = signature.parameters[p.name].default
            default = REQUIRED if default is inspect.Parameter.empty else default
            if not (p.required and default in (None, REQUIRED)) and not _same(default, p.default):
                out.append(f"{command.name}: {function.__name__}({p.name}={default!r}), declared {p.default!r}")
    return out


@pytest.mark.parametrize("function, command", sorted(api.COMMANDS.items()))
def test_every_keyword_is_declared_with_the_same_default(function, command):
    """From Python and from the command line alike: bench's backend and images are None in both, and mean
    the same."""
    assert signature_defaults(getattr(api, function), DECLARED[command]) == []


def test_the_default_check_finds_a_planted_difference():
    def bench(artifacts, *, batch_sizes=(1, 8), colour=None, **_):  # noqa: ARG001
        pass

    found = signature_defaults(bench, DECLARED["bench"])
    assert "bench: bench(colour=...) is not declared" in found and "bench: `warmup` has no keyword in bench()" in found
    assert "bench: bench(batch_sizes=(1, 8)), declared (1, 32)" in found


def derived(command: click.Command) -> list[str]:
    """The command's click parameters that are not what its declarations say: one not declared (but the command
    line's own), and what a derived one parses otherwise than the declaration (repeats, range, choices,
    default, whether it is required)."""
    declaration, out = DECLARED.get(command.name), []
    for param in command.params:
        if param.name in CLI_ONLY:
            continue
        if declaration is None or param.name not in declaration or getattr(param, "declared", None) != (
                command.name, param.name):  # fmt: skip
            out.append(f"{command.name} {param.name}: not derived from a declaration")
            continue
        p, kind, t = declaration[param.name], declaration[param.name].kind, param.type
        said = []
        if bool(getattr(param, "multiple", False) or param.nargs == -1) != p.repeat:
            said.append("repeats otherwise")
        if isinstance(kind, kinds.Whole) and (getattr(t, "min", None), getattr(t, "max", None)) != (kind.lo, kind.hi):
            said.append(f"takes [{getattr(t, 'min', None)}, {getattr(t, 'max', None)}]")
        if isinstance(kind, kinds.Number) and (t.min, t.max, t.min_open, t.max_open) != (kind.lo, kind.hi,
                                                                                        kind.lo_open, kind.hi_open):
            said.append(f"takes [{t.min}, {t.max}]")
        if isinstance(kind, kinds.Choice) and list(t.choices) != list(kind.values):
            said.append(f"chooses {list(t.choices)}")
        if param.required != (p.required or p.cli_required):
            said.append("is required otherwise")
        default = () if isinstance(param, click.Argument) and param.nargs == -1 else param.default  # none given: ()
        if not param.required and not _same(default, p.default):
            said.append(f"defaults to {param.default!r}")
        out += [f"{command.name} {param.name}: {s}, declared otherwise" for s in said]
    return out


@pytest.mark.parametrize("name", sorted(set(main.commands) - {"models"}))
def test_every_option_is_derived_from_its_declaration(name):
    assert derived(main.commands[name]) == []


def test_the_derivation_check_finds_a_planted_option():
    planted = click.Command("bench", params=[click.Option(["--warmup"], type=click.IntRange(0), default=3),
                                             click.Option(["--colour"])])  # fmt: skip
    assert derived(planted) == ["bench warmup: not derived from a declaration", "bench colour: not derived from a "
                                                                                 "declaration"]  # fmt: skip
    param = main.commands["bench"].params[[p.name for p in main.commands["bench"].params].index("warmup")]
    changed = click.Option(["--warmup"], type=click.IntRange(1), default=3)
    changed.declared = param.declared
    assert derived(click.Command("bench", params=[changed])) == [
        "bench warmup: takes [1, None], declared otherwise", "bench warmup: defaults to 3, declared otherwise"]


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
    with pytest.warns(DeprecationWarning), pytest.raises(AFTExportError, match="`images` takes a whole number >= 1, got 0"):
        QuantizeOptions(count=0)
    with pytest.warns(DeprecationWarning), pytest.raises(AFTExportError, match="`bench_batch_sizes` takes a whole number >= 1, or a list of them, got \\(\\) \\(tuple\\), no value"):
        PipelineOptions(bench_batches=())
