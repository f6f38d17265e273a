"""The library speaks keywords, the command line speaks flags, and no text is rewritten by pattern.

Below the command line (floor 10: ``cli``, ``byo.cli``, ``client``) a message names a parameter
as data: :func:`aft_export.errors.said` (a template whose fields are the stage's keywords, or
``Named`` values), and another command's options as a whole command line spelled from the
declarations, :func:`aft_export.options.commands.command_line`. Each face names them in its own
words: Python in backquoted keywords, the command line with the running command's flags, read from
the declarations (:func:`aft_export.cli.words.flag_namer`). These tests read the source, so they
cover every message, raised or not:

- no message names a declared parameter as text (`images`, `images=0`, `aft-export export
  target=tensorrt8`): it would read the same on both faces;
- no module below the command line names one of our flags (``nvtools`` writes
  trtexec/polygraphy scripts, whose flags share names with ours, and is exempt); the one
  place a flag is written there is an ``aft-export`` argument list (the doctor's child
  commands, a script's build line), and it must be a flag of that command;
- every parameter a message names is a flag of each command whose code can show it. What a
  command's code can reach is read from the source: from the command's function in
  ``cli``, every function, method and class it names, and what those name in turn (a
  name resolved through the module's imports; ``x.name`` to every function or method of
  that name in the modules the module imports, at any depth). That reaches more than runs
  (never less, short of a call through a variable holding a function from a module the
  caller does not import), so a field a command can truly never show is listed in
  :data:`CANNOT_SHOW`, with the reason; one it shows though it has no flag for it (the
  message then names the commands that have one) in :data:`SHOWN_ELSEWHERE`. Fields are
  matched by name: the same name in two options classes is one entry;
- a parameter named at run time is ``Named(option)``, and every value ``option`` takes is a
  literal the test finds: a loop over literals, or an argument to a parameter named ``option``;
- every command line a message gives names options of that command.

``test_a_planted_bad_reference_fails`` shows each check failing on a message planted in a
module's source.
"""

from __future__ import annotations

import ast
import re
from functools import cache

import pytest

from tests.test_architecture import _modules

CLI_FLOOR = {"cli", "cli.__main__", "cli.words", "cli.signals", "cli.params", "cli.base", "cli.byo", "cli.models",
             "cli.export", "cli.checks", "cli.tensorrt", "cli.serving", "cli.workflow", "client", "serving.client"}
DISPATCHERS = CLI_FLOOR | {"api"}  # they import every stage: an attribute there is one of what its names import
OTHER_TOOLS = {"tensorrt.nvtools",  # writes trtexec/polygraphy command lines (whose flags share names with ours)
               "options.commands"}  # the one table that spells each command's flags (and its --help texts)
HOLE = "\x00{}\x01"  # an f-string's {expression}, numbered, in the text the patterns are matched on
DYNAMIC = re.compile(r"`\x00(\d+)\x01(?:=[^`]*)?`")
SPECIAL = {"__init__", "__post_init__", "__call__", "__enter__", "__exit__", "__iter__", "__next__", "__len__"}

BUILD_FIELDS = ("library", "batch_profile", "hw_profile", "workspace_mb", "dla_core", "version_compatible",
                "hardware_compatibility", "tf32", "timing_cache", "compute_capabilities")  # fmt: skip
OTHER_PROGRAMS = (r"client\.py --model",)  # their command lines, in what the library writes (the Triton README)
# functions that write another program's whole command line, whose flags share names with ours
OTHER_COMMAND_LINES = {("serving.server", "server_args"): "tritonserver's (--http-port, --grpc-port, --metrics-port)"}
# (commands, fields, why): each command's code reaches a message naming the field, which it
# has no flag for. Each pair must still be needed (a stale one fails the test).
CANNOT_SHOW = [  # the command never shows that message
    (("deepstream",), ("config", "weights_key"),
     "deepstream loads only ONNX files (its DeepStream files, and for --data the same files in ONNX Runtime), never "
     "a checkpoint or a weights file, whose messages name these"),
    (("deepstream",), ("trt_versions",),
     "deepstream checks each file against its release's TensorRT column alone, never versions a user typed"),
    (("pipeline",), ("release", "mode", "scaling_filter", "scaling_hw", "object_size"),
     "the pipeline writes RUN/deepstream with DeepStreamOptions' defaults (each file for its oldest release, primary, "
     "no measurement): the messages about these options are said only where they are given"),
    (("check", "deepstream", "infer", "parity", "pipeline", "quantize", "triton-repo"), ("input_format",),
     "runners.ort.onnx_info names `input_format` only when it was given for another tool's file (the "
     "ForeignPreprocessing of the commands that declare it, foreign()); these commands never give it"),
    (("bench",), ("batch_size",),
     "bench --reference evaluates each file in the deploy table at eval's default batch size, which eval's check "
     "of its batch size never refuses"),
    (("bench", "build", "export", "parity", "pipeline", "quantize"), ("trt_versions",),
     "only check passes TensorRT versions a user typed; the others check the columns of the rules they know"),
    (("check",), BUILD_FIELDS[1:],
     "check --build builds a graph at its own batch (a fixed one) or the default profile, every other option at "
     "its default"),
    (("pipeline",), BUILD_FIELDS,
     "the pipeline builds its own dynamic-batch exports, with a profile of its bench batch sizes and the library "
     "installed"),
    (("doctor",), ("batch_profile", "hw_profile"),
     "the doctor's engines are built by child `aft-export build` commands (whose messages speak build's flags); "
     "in its own process it only writes NVIDIA's scripts for its dynamic-batch exports, with a fixed profile"),
    (("bench", "parity"), ("opset", "target", "simplify", "allow_unsimplified"),
     "parity's in-memory export (to localise a divergence; bench --reference runs parity) takes op form and "
     "target from the artifact's metadata, with verification and onnxsim off"),
    (("infer", "triton-repo"), ("preprocess", "input_size", "mean", "std", "classes"),
     "their stages take no preprocessing (predict.classify, tritonrepo.write_repository pass "
     "preprocess.BESIDE_ONLY): the message about another tool's file asks only for the JSON beside it"),
    (("deepstream",), ("preprocess", "input_size", "mean", "std", "classes"),
     "deepstream reads only its DeepStream files, described by their own metadata (serving.deepstream refuses any "
     "other file first): no preprocessing is ever asked for"),
    (("quantize",), ("preprocess", "classes"),
     "quantize reads another tool's file with ForeignPreprocessing(takes=(input_size, mean, std)), what "
     "QuantizeOptions has: the message asks for those and the JSON beside the file, never a file or classes"),
    (("pipeline",), ("opset", "exclude", "device",
                     "max_batch", "exclude_op_types", "quantize_op_types", "keep_fp32"),
     "the pipeline sets these itself: it exports at the default opset with a dynamic batch, quantises with the "
     "default method and no exclusions, writes the Triton repository with its "
     "defaults"),
    (("quantize",), ("opset",),
     "quantize puts only an opset-18 default export in another target's form (export.forms.conversion_problem "
     "refuses any other opset first), so the portable form's opset message never reaches it"),
    (("check",), ("output",),
     "api.check's keyword `build` (check --build: the installed builder, in memory) is no call of api.build, which "
     "names the engine file: the test reads the name as the function"),
    (("parity",), ("dynamic_hw", "require_aft"),
     "api.parity exports an nn.Module in memory only for a Python caller (api._module); the command line passes "
     "paths and --model-def, whose parity export takes neither"),
    (("pipeline",), ("backend",),
     "the pipeline runs its ONNX files in the default backend and writes the Triton repository with it: no other "
     "backend is named there"),
]
SHOWN_ELSEWHERE = [  # the command shows it, as the flag of the commands that have it
    (("bench", "eval", "infer", "parity", "pipeline", "serve", "train"), ("config",),
     "a plain state_dict (no config of its own) loads only where a config is given: the message says which "
     "commands take one"),
    (("bench", "eval", "infer", "info", "serve", "train"), ("weights_key",),
     "a weights file with several state_dicts: the message says which commands choose one"),
    (("pipeline",), ("allow_fewer", "cache_dir", "no_cache", "simplify", "allow_unsimplified", "batch_size"),
     "the pipeline runs quantize, export and eval with their defaults: fewer calibration images than asked "
     "for, an unwritable calibration cache, onnxsim failing or eval's batch not fitting in memory stop it, "
     "and the message says which command has the way around"),
    (("pipeline",), ("rest_precision",),
     "the pipeline's int8 keeps the rest its target says; a graph whose scales do not fit fp16 stops it, and the "
     "message says which command keeps the rest in fp32"),
    (("check", "doctor"), ("preprocess", "input_size", "mean", "std", "classes"),
     "an ONNX file another tool wrote, with no NAME.preprocess.json beside it: these commands read only the "
     "file beside it, and the message says so and which commands take the preprocessing as flags"),
]


# ---------------------------------------------------------------- reading the source


# what a parameter named as text looks like: `field`, `field=value`, a command line `aft-export CMD ARG field=value`
OPTION_WORD = re.compile(r"`([a-z][a-z0-9_]*)(?:=([^`]*))?`")
COMMAND_LINE = re.compile(r"`aft-export ([a-z][a-z-]*)((?: [^`\s]+)*)`")


def _cli():
    from aft_export.cli import main

    return main, OPTION_WORD, COMMAND_LINE


def _declared(command: str):
    from aft_export.options.commands import DECLARED

    return DECLARED.get(command)


@cache
def _read() -> dict[str, str]:
    return {name: path.read_text() for name, path in _modules().items() if name}


def _sources() -> dict[str, str]:
    """Every module's source (a test plants a bad message by replacing this)."""
    return _read()


@cache
def _parse(text: str) -> ast.Module:
    return ast.parse(text)


def _trees() -> dict[str, ast.Module]:
    return {name: _parse(text) for name, text in _sources().items()}


def _library() -> dict[str, ast.Module]:
    return {name: tree for name, tree in _trees().items() if name not in CLI_FLOOR}


def _units(module: str, tree: ast.Module) -> list[tuple[str, ast.AST, list]]:
    """(unit id, node, the nodes that are its own) of a module: ``m:`` its top level (and every
    decorator: evaluated at import), ``m:f`` a function, ``m:C`` a class body, ``m:C.f`` a method."""
    top, out = [], []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top += node.decorator_list
            out.append((f"{module}:{node.name}", node, [*node.args.defaults, *node.args.kw_defaults, *node.body]))
        elif isinstance(node, ast.ClassDef):
            top += node.decorator_list
            body = []
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    top += item.decorator_list
                    out.append((f"{module}:{node.name}.{item.name}", item,
                                [*item.args.defaults, *item.args.kw_defaults, *item.body]))  # fmt: skip
                else:
                    body.append(item)
            out.append((f"{module}:{node.name}", node, body))
        else:
            top.append(node)
    out.append((f"{module}:", tree, top))
    return out


def _walk(nodes):
    for n in nodes:
        if n is not None:
            yield from ast.walk(n)


@cache
def _indexed() -> list[tuple[str, str, ast.AST, list]]:
    """(module, unit, its node, every node that is its own, walked once) of every module."""
    return [(module, unit, node, list(_walk(nodes))) for module, tree in _trees().items()
            for unit, node, nodes in _units(module, tree)]  # fmt: skip


def _text(node) -> tuple[str, list]:
    """A string literal's text, an f-string's expressions as numbered holes; and the expressions."""
    if isinstance(node, ast.Constant):
        return node.value, []
    parts, holes = [], []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(v.value)
        else:
            parts.append(HOLE.format(len(holes)))
            holes.append(v.value)
    return "".join(parts), holes


def _strings(found) -> list[tuple[ast.AST, str, list]]:
    """Every string literal among ``found`` (nodes, walked) that is not a docstring, an f-string as one."""
    docs = {id(n.value) for n in found if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    inner = {id(v) for n in found if isinstance(n, ast.JoinedStr) for v in n.values}
    return [(n, *_text(n)) for n in found
            if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str)
                                                and id(n) not in docs and id(n) not in inner)]  # fmt: skip


# ---------------------------------------------------------------- {option}: the values it takes


def _loop_values(target, iterable) -> list[str] | None:
    """The literal values a loop over ``iterable`` gives the name ``option`` (None: not such a loop)."""
    position = None
    if isinstance(target, ast.Name) and target.id == "option":
        position = -1
    elif isinstance(target, ast.Tuple):
        position = next((i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == "option"), None)
    if position is None:
        return None
    if (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and iterable.func.attr == "items"
            and isinstance(iterable.func.value, ast.Dict) and position == 0):  # fmt: skip
        items = iterable.func.value.keys
    elif isinstance(iterable, (ast.Tuple, ast.List, ast.Set)):
        items = [e if position == -1 else (e.elts[position] if isinstance(e, ast.Tuple) else None)
                 for e in iterable.elts]  # fmt: skip
    else:
        return None
    if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items):
        return None
    return [e.value for e in items]


def _option_loops(found) -> list[str] | None:
    """Every value the loops among ``found`` give ``option`` (None: there is no such loop)."""
    values = None
    for node in found:
        pairs = [(node.target, node.iter)] if isinstance(node, ast.For) else (
            [(g.target, g.iter) for g in node.generators] if isinstance(node, (ast.ListComp, ast.GeneratorExp,
                                                                                ast.SetComp, ast.DictComp)) else [])
        for target, iterable in pairs:
            more = _loop_values(target, iterable)
            if more is not None:
                values = (values or []) + more
    return values


def _option_parameters() -> dict[str, tuple[int, str | None]]:
    """Function name -> (position of its ``option`` parameter, not counting ``self``; its default,
    None where another function of the name has no such parameter: a call may be to either)."""
    found, names_seen = {}, {}
    for module, _, _, nodes in _indexed():
        for node in nodes:
            if isinstance(node, ast.FunctionDef) and module not in CLI_FLOOR:
                names = [a.arg for a in node.args.args]
                names_seen[node.name] = names_seen.get(node.name, 0) + 1
                if "option" in names:
                    i = names.index("option")
                    defaults = node.args.defaults
                    first_default = len(names) - len(defaults)
                    default = defaults[i - first_default].value if i >= first_default else None
                    found[node.name] = (i - (names[0] in ("self", "cls")), default)
    return {n: (i, d if names_seen[n] == 1 else None) for n, (i, d) in found.items()}


def _passed_options(found, params: dict) -> list[tuple[int, str]]:
    """(line, field) for every literal a call among ``found`` passes to an ``option`` parameter."""
    out = []
    for node in found:
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name not in params:
            continue
        position, default = params[name]
        arg = next((k.value for k in node.keywords if k.arg == "option"), None)
        if arg is None and len(node.args) > position:
            arg = node.args[position]
        if isinstance(arg, ast.Name) and arg.id == "option":
            continue  # handed through: the callers of this unit are searched
        if arg is not None and not isinstance(arg, ast.Constant):
            raise AssertionError(f"line {node.lineno}: {name}(option=...) must be given a literal field name (the "
                                 f"test cannot follow {ast.unparse(arg)})")  # fmt: skip
        if arg is not None or default is not None:
            out.append((node.lineno, default if arg is None else arg.value))
    return out


# ---------------------------------------------------------------- every option a message names


@cache
def references() -> list[dict]:
    """Every option reference below the command line: module, unit, line, command (None: the
    command that is running), field, value."""
    _, option_word, command_line = _cli()
    params = _option_parameters()
    refs = []
    for module, unit, top, nodes in _indexed():
        if module in CLI_FLOOR:
            continue
        for node, text, holes in _strings(nodes):
            where = dict(module=module, unit=unit, line=node.lineno)
            for m in command_line.finditer(text):
                for arg in m.group(2).split():
                    field, eq, value = arg.partition("=")
                    if eq and "\x00" not in field:
                        refs.append({**where, "command": m.group(1), "field": field, "value": value, "text": True})
            plain = command_line.sub("", text)
            for m in option_word.finditer(plain):
                refs.append({**where, "command": None, "field": m.group(1), "value": m.group(2), "text": True,
                             "stage": None})
            for m in DYNAMIC.finditer(plain):
                expr = holes[int(m.group(1))]
                if not (isinstance(expr, ast.Name) and expr.id == "option"):
                    continue  # a value in backquotes (a file name in markdown), not an option
                values = _option_loops(nodes)
                is_param = isinstance(top, ast.FunctionDef) and "option" in [a.arg for a in top.args.args]
                if values is None and not is_param:
                    raise AssertionError(f"aft_export.{module} line {node.lineno}: {{option}} is neither a loop "
                                         f"over literal field names nor a parameter")  # fmt: skip
                refs += [{**where, "command": None, "field": v, "value": None, "text": True, "stage": None}
                         for v in values or ()]
        refs += [{"module": module, "unit": unit, "line": line, "command": None, "field": field, "value": None,
                  "stage": None} for line, field in _passed_options(nodes, params)]  # fmt: skip
        refs += [{"module": module, "unit": unit, **ref} for ref in _command_lines(nodes)]
        refs += [{"module": module, "unit": unit, **ref} for ref in _said(nodes)]
    return refs


def _command_lines(nodes) -> list[dict]:
    """The options each ``command_line(COMMAND, ..., option=value)`` call names."""
    found = []
    for node in nodes:
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "command_line"
                and node.args and isinstance(node.args[0], ast.Constant)):  # fmt: skip
            found += [{"line": node.lineno, "command": node.args[0].value, "field": k.arg, "value": None}
                      for k in node.keywords if k.arg]  # fmt: skip
    return found


def _said(nodes) -> list[dict]:
    """The parameters each message written with ``errors.said`` names, as data: the template's fields
    that are not values, and each ``Named`` value's keyword (its value where a literal says it), with
    the stage that says them."""
    import string

    found = []
    for node in nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "said"):
            continue
        template, stage = (a.value if isinstance(a, ast.Constant) else None for a in node.args[:2])
        if template is None:  # a template handed in (api._checked_flags'): its fields are values, its keywords Named
            template = ""
        values = {k.arg: k.value for k in node.keywords}
        where = dict(line=node.lineno, command=None, stage=stage)
        for _, field, _, _ in string.Formatter().parse(template):
            if field and field not in values:
                found.append({**where, "field": field, "value": None})
        for value in values.values():
            if not (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "Named"):
                continue
            given = value.args[1] if len(value.args) > 1 else None
            shown = given.value if isinstance(given, ast.Constant) else None
            if isinstance(value.args[0], ast.Constant):
                found.append({**where, "field": value.args[0].value, "value": shown})
            elif isinstance(value.args[0], ast.Name) and value.args[0].id == "option":  # the loops' literals
                found += [{**where, "field": v, "value": shown} for v in _option_loops(nodes) or ()]
    return found


# ---------------------------------------------------------------- what each command's code reaches


def _names(found) -> tuple[set[str], set[str]]:
    """(names, attribute names) used among ``found``."""
    return ({n.id for n in found if isinstance(n, ast.Name)}, {n.attr for n in found if isinstance(n, ast.Attribute)})


@cache
def _graph():
    """Every unit's (names, attributes); each module's top-level definitions, imported names
    (any depth of the file) and import closure; every method and function by name."""
    trees, modules = _trees(), _modules()
    known = set(modules)
    units, defined, imported, by_name = {}, {}, {}, {}
    for module, tree in trees.items():
        defined[module] = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                        ast.ClassDef))}  # fmt: skip
        imported[module] = {}
    for module, unit, _, nodes in _indexed():
        units[unit] = _names(nodes)
        name = unit.split(":")[1].split(".")[-1]
        if name and ("." in unit.split(":")[1] or unit.split(":")[1] in defined[module]):
            by_name.setdefault(name, []).append(unit)
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "aft_export":
                base = node.module[len("aft_export"):].lstrip(".")
                for alias in node.names:
                    imported[module][alias.asname or alias.name] = (base, alias.name)
    closure = {}
    for module in trees:
        seen, todo = {module}, [module]
        while todo:
            for base, name in imported[todo.pop()].values():
                target = f"{base}.{name}".lstrip(".") if f"{base}.{name}".lstrip(".") in known else base
                if target in known and target not in seen:
                    seen.add(target)
                    todo.append(target)
        closure[module] = seen
    return units, defined, imported, by_name, closure


def _resolve(module: str, name: str, depth: int = 0) -> list[str]:
    """The units ``name`` means in ``module``: its own definition, or what it imports (through a
    package's re-exports); a class also brings its special methods."""
    units, defined, imported, _, _ = _graph()
    if depth > 5:
        return []
    if name in defined.get(module, ()):
        unit = f"{module}:{name}"
        return [unit] + [f"{unit}.{m}" for m in SPECIAL if f"{unit}.{m}" in units]
    if name in imported.get(module, {}):
        base, original = imported[module][name]
        return _resolve(base, original, depth + 1)
    return []


def reach(command: str) -> frozenset[str]:
    """The units ``command``'s code can reach, from its function in the command line."""
    units, _, _, by_name, closure = _graph()
    main = _cli()[0]
    callback = main.commands[command].callback
    todo, seen = [f"{callback.__module__.removeprefix('aft_export.')}:{callback.__name__}"], set()
    while todo:
        unit = todo.pop()
        if unit in seen or unit not in units:
            continue
        seen.add(unit)
        module = unit.split(":")[0]
        seen.add(f"{module}:")  # a module's top level runs when it is imported
        todo.append(f"{module}:")
        names, attrs = units[unit]
        named = [u for name in names for u in _resolve(module, name)]
        todo += named
        # x.attr: a function or method of that name in what the module imports (the command
        # line and the API import every stage: there, in what the names it uses import)
        scope = closure[module] if module not in DISPATCHERS else set().union(
            *(closure[u.split(":")[0]] for u in named if u.split(":")[0] not in DISPATCHERS))
        for attr in attrs:
            todo += [u for u in by_name.get(attr, ()) if u.split(":")[0] in scope]
    return frozenset(seen)


@cache
def _all_reach() -> dict[str, frozenset[str]]:
    return {c: reach(c) for c in _commands()}


def _commands() -> list[str]:
    return sorted(_cli()[0].commands)


def unmapped(command: str, refs: list[dict], reached: frozenset[str] | None = None) -> list[dict]:
    """The references ``command``'s code can show that its table has no flag for."""
    from aft_export.cli.words import flag_namer

    main = _cli()[0]
    reached = reach(command) if reached is None else reached
    name = flag_namer(command, main.commands[command])

    def own(r) -> bool:  # named by the running command's own flag
        return not name(r["stage"], r["field"], r["value"]).startswith(("aft-export ", "`"))

    return [r for r in refs if r["command"] is None and r["unit"] in reached and not own(r)]


# ---------------------------------------------------------------- the tests


def _pairs(table) -> set[tuple[str, str]]:
    return {(c, f) for commands, fields, _ in table for c in commands for f in fields}


def test_every_option_a_command_can_show_is_one_of_its_flags():
    refs = references()
    assert len(refs) > 100 and len(_all_reach()["export"]) > 100  # the reading works
    listed = _pairs(CANNOT_SHOW) | _pairs(SHOWN_ELSEWHERE)
    bad, used = [], set()
    for command, reached in _all_reach().items():
        for r in unmapped(command, refs, reached):
            if (command, r["field"]) in listed:
                used.add((command, r["field"]))
            else:
                bad.append(f"{command}: aft_export.{r['module']} line {r['line']}: `{r['field']}`")
    assert bad == [], ("messages name options these commands have no flag for (add the flag to the command's "
                       "declaration, a `gives` in aft_export/options/commands.py; reword the message; or say why in CANNOT_SHOW or "
                       "SHOWN_ELSEWHERE):\n" + "\n".join(sorted(set(bad))))  # fmt: skip
    assert sorted(listed - used) == [], "entries no longer needed"


def test_no_message_names_a_parameter_as_text():
    """A parameter in backquotes, or a command line with field=value in backquotes, reads the same on
    both faces: every message names them as data (said, Named, command_line)."""
    from aft_export.options.commands import DECLARED

    keywords = {p.name for c in DECLARED.values() for p in c.params}
    bad = [f"aft_export.{r['module']} line {r['line']}: `{r['field']}`" for r in references()
           if r.get("text") and (r["command"] is not None or r["field"] in keywords)]  # fmt: skip
    assert bad == []


def test_an_option_shown_elsewhere_is_a_flag_of_some_command():
    """Every parameter a message names is declared by at least one command (or is an option of the
    command line alone: the old --provider), and where the running command has none, the message
    says which commands have it."""
    from aft_export.cli.words import flag_namer
    from aft_export.errors import said

    assert _undeclared() == []
    assert said("({config})", None).render(flag_namer("eval")) == "(aft-export export/info --config)"
    assert said("{allow_fewer}", "quantize").render(flag_namer("pipeline")) == "aft-export quantize --allow-fewer"


def _undeclared() -> list[str]:
    """The parameters messages name that no command declares (nor the command line alone has)."""
    from aft_export.cli import main
    from aft_export.options.commands import DECLARED

    fields = {r["field"] for r in references() if r["command"] is None}
    options = {p.name for c in main.commands.values() for p in c.params}
    return sorted(f for f in fields if not any(f in c for c in DECLARED.values()) and f not in options)


def test_every_command_line_in_a_message_names_options_of_that_command():
    bad = []
    for r in references():
        if r["command"] is None:
            continue
        declared = _declared(r["command"])
        if declared is None or r["field"] not in declared:
            bad.append(f"aft_export.{r['module']} line {r['line']}: aft-export {r['command']} {r['field']}")
    assert bad == []


def _our_flags() -> set[str]:
    from aft_export.cli.words import RENAMED_FLAGS

    main = _cli()[0]
    flags = {o for c in main.commands.values() for p in c.params
             for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())) if o.startswith("--")}  # fmt: skip
    return flags | {old for renamed in RENAMED_FLAGS.values() for old in renamed}


def _argv_lists(tree) -> list[tuple[str, ast.Constant]]:
    """(command, the --flag constant) of every aft-export argument list: ``["aft-export", CMD,
    ...]`` literals, and the doctor's ``_aft(CMD, ...)`` calls with the lists they spread
    (assigned in the same function)."""

    def flags(node) -> list[ast.Constant]:
        return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and n.value.startswith("--")]  # fmt: skip

    out = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        assigned = {t.id: a.value for a in ast.walk(fn) if isinstance(a, ast.Assign) for t in a.targets
                    if isinstance(t, ast.Name)}  # fmt: skip
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_aft" and node.args:
                found = flags(node)
                for a in node.args:
                    if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) and a.value.id in assigned:
                        found += flags(assigned[a.value.id])
                out += [(node.args[0].value, f) for f in found]
    for node in ast.walk(tree):
        if (isinstance(node, ast.List) and len(node.elts) > 1 and all(isinstance(e, ast.Constant) for e in node.elts[:2])
                and node.elts[0].value == "aft-export"):  # fmt: skip
            out += [(node.elts[1].value, f) for f in flags(node)]
    return out


def flag_mentions() -> list[str]:
    """Our flags named below the command line (strings, docstrings, comments), and flags an
    aft-export argument list gives its command although it has no such flag."""
    main = _cli()[0]
    ours = _our_flags()
    bad = []
    for module, tree in _library().items():
        allowed = set()
        for command, const in _argv_lists(tree):
            params = main.commands[command].params
            if const.value not in {o for p in params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}:
                bad.append(f"aft_export.{module} line {const.lineno}: aft-export {command} has no {const.value}")
            allowed.add((const.lineno, const.value))
        if module in OTHER_TOOLS:
            continue
        theirs = {line for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                  and (module, node.name) in OTHER_COMMAND_LINES
                  for line in range(node.lineno, node.end_lineno + 1)}  # fmt: skip
        # a declared parameter's flags and help (options.params.declare(..., help=...), its --help text) name flags
        theirs |= {line for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and getattr(node.func, "id", None) == "declare" for k in node.keywords
                   if k.arg in ("help", "flag", "off")
                   for line in range(k.value.lineno, k.value.end_lineno + 1)}  # fmt: skip
        for i, text in enumerate(_sources()[module].splitlines(), 1):
            if i in theirs:
                continue
            for other in OTHER_PROGRAMS:
                text = re.sub(other, "", text)
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text):
                if flag in ours and (i, flag) not in allowed:
                    bad.append(f"aft_export.{module} line {i}: {flag}")
    return bad


def test_no_module_below_the_command_line_names_our_flags():
    assert flag_mentions() == []


def test_a_command_line_is_spelled_from_the_declarations():
    """A command line in a message: a value, a switch on and off, a repeated option, a positional
    argument; the same on both faces (it is typed in a shell)."""
    from aft_export.options.commands import command_line

    assert command_line("export", "m.pt", target="tensorrt8", simplify=False, require_aft=True) == (
        "aft-export export m.pt --target tensorrt8 --no-simplify --require-aft")
    assert command_line("build", "m.onnx", library="tensorrt", batch_profile="1,8,32", output="m.engine") == (
        "aft-export build m.onnx --library tensorrt --batch-profile 1,8,32 --output m.engine")
    assert command_line("check", trt_versions=["8.6", "10.3"]) == "aft-export check --trt 8.6 --trt 10.3"
    assert command_line("quantize", no_cache=True) == "aft-export quantize --no-cache"
    with pytest.raises(KeyError):
        command_line("build", batch_profil="1")


def test_a_message_names_its_parameters_in_each_face_s_words():
    """A message that names parameters as data (errors.said) reads in keywords from Python and in
    the running command's flags on the command line, from the declarations: the pipeline's flag
    that gives a stage's keyword its value (quantisation's `images` is --calib-images, the export's
    `images=0` is --parity-images 0), else the running command's own, else the stage's command line."""
    from aft_export.cli.words import flag_namer
    from aft_export.errors import Named, said

    fewer = said("give {eg} or {allow_fewer}", "quantize", eg=Named("images", 20))
    assert str(fewer) == "give `images=20` or `allow_fewer`"
    assert fewer.render(flag_namer("quantize")) == "give --images 20 or --allow-fewer"
    assert fewer.render(flag_namer("pipeline")) == "give --calib-images 20 or aft-export quantize --allow-fewer"
    none = said("give {data} (or {none}); {what!r} {{x}}", "export", none=Named("images", 0), what="a{b}")
    assert str(none) == "give `data` (or `images=0`); 'a{b}' {x}"
    assert none.render(flag_namer("export")) == "give --data (or --images 0); 'a{b}' {x}"
    assert none.render(flag_namer("pipeline")) == "give --data (or --parity-images 0); 'a{b}' {x}"
    cache = said("give {without} or another {cache_dir}", "quantize", without=Named("no_cache", True))
    assert cache.render(flag_namer("quantize")) == "give --no-cache or another --cache-dir"
    assert said("{simplify}", "export", simplify=Named("simplify", False)).render(flag_namer("export")) == "--no-simplify"
    sizes = said("e.g. {eg}", "bench", eg=Named("batch_sizes", [1, 32]))
    assert sizes.render(flag_namer("pipeline")) == "e.g. --bench-batch-size 1 --bench-batch-size 32"
    assert said("{trt_versions}", "check").render(flag_namer("export")) == "aft-export check --trt"
    assert said("{images}", None).render(flag_namer("eval")) == "--images"
    # put together with text, joined, cut to one line: still data (an f-string around it would not be)
    from aft_export.errors import joined
    from aft_export.readers import one_line

    assert ("why: " + fewer + ".").render(flag_namer("pipeline")) == (
        "why: give --calib-images 20 or aft-export quantize --allow-fewer.")
    assert joined("; ", ["a", cache]).render(flag_namer("quantize")) == "a; give --no-cache or another --cache-dir"
    line = one_line(said("{path} is missing; check {data}", "export", path="a\nb"))
    assert line.render(flag_namer("export")) == "a\\nb is missing; check --data" and str(line) == "a\\nb is missing; check `data`"
    # from Python, inside the API function running: its keyword that gives the stage's its value
    from aft_export.errors import RUNNING
    from aft_export.options.commands import DECLARED

    running = RUNNING.set(DECLARED["pipeline"])
    try:
        assert str(said("give {eg} or {allow_fewer}", "quantize", eg=Named("images", 20))) == (
            "give `calib_images=20` or `allow_fewer`")
    finally:
        RUNNING.reset(running)
    # a copy keeps its parameters (an error crossing processes is pickled)
    import pickle

    assert pickle.loads(pickle.dumps(fewer)).render(flag_namer("pipeline")) == fewer.render(flag_namer("pipeline"))


def test_a_rebuild_command_is_build_s_own_flags():
    """The engine's rebuild line is put together at run time: every option on it is one of build's."""
    from pathlib import Path

    from aft_export.tensorrt.manifest import rebuild_command

    m = {"onnx": "model.fp16.onnx", "library": "tensorrt-rtx",
         "build_options": {"batch_profile": "1,8,32", "hw_profile": "16,32,64",
                           "compute_capabilities": ["7.5"]}}  # fmt: skip
    line = rebuild_command(Path("x/model.fp16.rtx.engine"), m)
    assert line == ("aft-export build model.fp16.onnx --library tensorrt-rtx --batch-profile 1,8,32 --hw-profile "
                    "16,32,64 --compute-capability 7.5 --output model.fp16.rtx.engine")  # fmt: skip


PLANTS = {  # a message each check must refuse: (module, the message's code, the command it misleads, the field)
    "a typo": ("exporting.exporter", 'said("give {verify_dat}", "export")', "export", "verify_dat"),
    "another command's option": ("verify.evaluate", 'said("give {tolerances}", "eval")', "eval", "tolerances"),
    "a field its stage has, another command's flag": ("tensorrt.manifest", 'said("give {hw_profile}", "build")',
                                                      "eval", "hw_profile"),
    "a command line's unknown option": ("tensorrt.manifest", 'command_line("build", "MODEL.onnx", batch_profil="1")',
                                        "build", "batch_profil"),
    "a parameter named as text": ("verify.evaluate", '"give `images`"', "text", "images"),
    "a flag": ("exporting.exporter", '"give --verify-data DIR"', None, "--verify-data"),
}


@pytest.mark.parametrize("plant", PLANTS, ids=list(PLANTS))
def test_a_planted_bad_reference_fails(plant, monkeypatch):
    """Each check above fails on a message planted in a module's source, in a function the
    command's code calls."""
    module, message, command, field = PLANTS[plant]
    sources = dict(_read())
    target = {"exporting.exporter": "def export_graph(", "verify.evaluate": "def evaluate_artifacts(",
              "tensorrt.manifest": "def check_manifest("}[module]  # fmt: skip
    head, _, tail = sources[module].partition(target)
    body = tail.index('"""', tail.index('"""') + 3) + 3  # after the function's docstring
    sources[module] = head + target + tail[:body] + f"\n    if 0:\n        raise AFTExportError({message})" + tail[body:]
    monkeypatch.setattr(__import__(__name__, fromlist=["_sources"]), "_sources", lambda: sources)
    for cached in (_graph, references, _indexed):
        cached.cache_clear()
    try:
        if command is None:
            assert any(field in line for line in flag_mentions())
        elif command == "text":
            assert [r["field"] for r in references() if r.get("text") and r["field"] == field] == [field]
        elif message.startswith("command_line"):
            bad = [r for r in references() if r["command"] == command and r["field"] == field]
            assert bad and field not in _declared(command)
        elif plant == "a typo":
            assert _undeclared() == [field]
        else:
            assert [r["field"] for r in unmapped(command, references()) if r["field"] == field] == [field]
    finally:
        for cached in (_graph, references, _indexed):
            cached.cache_clear()


# ---------------------------------------------------------------- words that say what was checked (item 7)


def test_a_signed_figure_says_which_way():
    from aft_export.workflow.report import _versus, summary_table

    assert [_versus(d) for d in (-0.13, 0.05, 0.0, None)] == ["+0.13 (better)", "-0.05 (worse)", "+0.00", "-"]
    row = {"artifact": "m.int8.onnx", "backend": "onnxruntime", "precision": "int8", "mb": 1.0, "top1": 80.13,
           "top1_drop": -0.13, "agreement": 99.0, "max_abs": 0.1, "cosine_min": 0.99, "parity": "pass",
           "trt_check": "pass 10.3+", "latency_ms": {}, "images_per_s": {}}  # fmt: skip
    head, _, line = summary_table([row], [1])
    assert "| top-1 vs torch |" in head and "| TRT rules |" in head and "| +0.13 (better) |" in line


def test_the_fp16_recipe_lists_only_the_op_types_the_model_holds():
    from onnx import TensorProto, helper

    from aft_export.quantization.fp16 import to_fp16

    def graph(*ops):
        nodes = [helper.make_node(op, ["x", "s", "b"] if op == "LayerNormalization" else ["x", "x"], [f"y{i}"],
                                  name=f"n{i}") for i, op in enumerate(ops)]  # fmt: skip
        inits = [helper.make_tensor(n, TensorProto.FLOAT, [4], [1.0] * 4) for n in ("s", "b")]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [2, 4]) for i in range(len(ops))],
                              inits)  # fmt: skip
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])

    for ops, kept in ((("Add", "LayerNormalization"), ["LayerNormalization"]), (("Add", "Mul"), [])):
        _, recipe = to_fp16(graph(*ops), [])
        assert recipe["fp32_op_types"] == kept  # no AFTFull, AFTLocal, ... where the model has none
