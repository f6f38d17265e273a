"""The package's shape, counted: modules in the package root, the longest command-line module,
the modules over the length limit, and the floors' upward imports and import cycles.

    python tools/shape.py          # prints the counts; exit 1 when a limit is passed

The limits are issue 34's: about 12 modules in the root, no command-line module over 300 lines,
no module over 600 (a table of one idea is exempt: TABLES), 0 upward imports, 0 cycles. The
floors are tests/test_architecture.py's ORDER.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.test_architecture import ORDER, PACKAGE, _imports, _modules  # noqa: E402

ROOT_MODULES, CLI_LINES, MODULE_LINES = 12, 300, 600
TABLES = {"trtcheck/rules.py": "the rules of every TensorRT parser and builder version, one entry each"}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def _calls(name: str) -> list[str]:
    """Where the package calls the function ``name``: module:line, outside its definition."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if called == name:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def _defined(name: str) -> list[str]:
    """Where the package defines a function or property ``name``: module:Class.name."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for cls in [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]:
            found += [f"{path.relative_to(PACKAGE)}:{cls.name}.{name}" for n in cls.body
                      if isinstance(n, ast.FunctionDef) and n.name == name]  # fmt: skip
    return found


def _typed_by_the_api() -> list[str]:
    """Where api.py builds a result itself: a call of a result type (every class ``aft_export.results``
    names that is :class:`~aft_export.errors.Judged`, wherever its stage defines it) or of a classmethod
    of one (``of``, ``of_table``, ...), other than the Server handle. A stage that returns its typed
    result needs none."""
    import aft_export.results as results
    from aft_export.errors import Judged

    classes = {n for n, v in vars(results).items() if isinstance(v, type) and issubclass(v, Judged)}
    found = []
    for node in ast.walk(ast.parse((PACKAGE / "api.py").read_text())):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else (f.value.id if isinstance(f, ast.Attribute)
                                                      and isinstance(f.value, ast.Name) else None)  # fmt: skip
        if name in classes - {"Server"}:
            found.append((node.lineno, f"api.py:{node.lineno} {name}"))
    return [text for _, text in sorted(found)]


def _runtime_lists() -> list[str]:
    """Tuples, lists and sets of two or more string literals that are all runtime names (aft_export.runtimes):
    a list of runtimes spelled out somewhere other than the table."""
    from aft_export.runtimes import RUNTIMES

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "runtimes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and all(
                    isinstance(e, ast.Constant) and e.value in RUNTIMES for e in node.elts):  # fmt: skip
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def _named_as_text() -> list[str]:
    """String literals below the command line (not docstrings) that name a declared parameter as text:
    `keyword`, `keyword=value`, or a backquoted `aft-export COMMAND ... keyword=value` line. Each face
    could only name those by rewriting text; a parameter named as data (errors.said, Named,
    options.commands.command_line) is named by each face from the declarations."""
    from aft_export.cli.words import named_as_text

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "cli":
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}  # fmt: skip
        for node in ast.walk(tree):
            parts = ([node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                     else [v.value for v in node.values if isinstance(v, ast.Constant)] if isinstance(node, ast.JoinedStr)
                     else [])  # fmt: skip
            text = "".join(parts)
            if named_as_text(text) or (
                    "`aft-export " in text and "=" in text.split("`aft-export ", 1)[1].split("`")[0]):  # fmt: skip
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return sorted(set(found))


def _patterns_in_words() -> int:
    """Regular expressions in the command line's words module (cli/words.py): how a message was once put in flags."""
    tree = ast.parse((PACKAGE / "cli" / "words.py").read_text())
    return sum(isinstance(n, (ast.Import, ast.ImportFrom)) and any(a.name == "re" for a in n.names)
               or isinstance(n, ast.ImportFrom) and n.module == "re" for n in ast.walk(tree))


# what a file is, by its suffix, is decided in artifacts/kinds.py alone; the one other reading of a suffix
# is a weights file's format inside a checkpoint (safetensors or a pickle: models.weights, models.checkpoint)
KIND_SUFFIXES = (".onnx", ".engine", ".plan", ".pt", ".pth")
KIND_NAMES = ("onnx", "engine", "checkpoint")  # the kinds' own words (FileKind.name), compared: the runtime table's
# `runs` column holds them too (runtimes.py, below the kinds' floor)
FORMAT_ONLY = {"models/weights.py", "models/checkpoint.py"}
# the modules that hold how a parameter is declared, checked and worded (issue 55's count, 1,967 at 3aefeda)
PARAMETER_MODULES = ("options", "cli/params.py", "cli/words.py", "errors.py")


def _kind_by_suffix() -> list[str]:
    """Comparisons (``==``, ``!=``, ``in``, ``endswith``) of a path against a kind's suffix literal, of a kind
    against its name, or of anything against a ``*_SUFFIXES`` tuple, outside artifacts/kinds.py (and
    models/sources.py's registry)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel in ("artifacts/kinds.py", "models/sources.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            parts = ([node.left, *node.comparators] if isinstance(node, ast.Compare) else
                     [*node.args] if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "endswith"
                     else [])  # fmt: skip
            for part in parts:
                named = [e for e in ast.walk(part) if isinstance(e, ast.Constant) and isinstance(e.value, str)
                         and (e.value.lower() in KIND_SUFFIXES + (() if rel in FORMAT_ONLY else (".safetensors",))
                              or isinstance(node, ast.Compare) and rel != "runtimes.py" and e.value in KIND_NAMES)]
                tuples = [e for e in ast.walk(part) if isinstance(e, ast.Name) and e.id.endswith("_SUFFIXES")]
                if named or tuples:
                    found.append(f"{rel}:{node.lineno}")
                    break
    return found


# the names of the file formats (aft_export.data.formats' tables) and the constants that hold them
FORMAT_NAMES = ("normalized", "uint8-nhwc", "float-nchw", "logits", "probabilities")
FORMAT_CONSTANTS = ("NORMALIZED", "UINT8_NHWC", "FLOAT_NCHW", "LOGITS", "PROBABILITIES")


def _compared(table: str, literals, names=()) -> list[str]:
    """Comparisons (``==``, ``!=``, ``in``) outside the module ``table`` in which one of ``literals`` (not an
    argument of a call: a module's or a package's name) or a name of ``names`` takes part."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel == table:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            called = {id(a) for c in ast.walk(node) if isinstance(c, ast.Call) for a in c.args}
            if any(isinstance(e, ast.Constant) and e.value in literals and id(e) not in called
                   or isinstance(e, ast.Name) and e.id in names for e in ast.walk(node)):  # fmt: skip
                found.append(f"{rel}:{node.lineno}")
    return found


def _format_names_compared() -> list[str]:
    """A format's name or its constant compared outside data/formats.py (the table). The code serving/repository.py
    writes for Triton's Python backend, which cannot import the package, names them in a string, and says so."""
    return _compared("data/formats.py", FORMAT_NAMES, FORMAT_CONSTANTS)


def _runtime_names_compared() -> list[str]:
    """A runtime's name as a literal (a key of aft_export.runtimes.RUNTIMES) compared outside runtimes.py: code
    that branches on a backend's name rather than on a column of its row. (The TensorRT libraries' names are
    counted apart, against their own table: :func:`_library_names_compared`.)"""
    from aft_export.runtimes import RUNTIMES, TENSORRT_MODULES

    return _compared("runtimes.py", set(RUNTIMES) - set(TENSORRT_MODULES))


def _library_names_compared() -> list[str]:
    """A TensorRT library's name compared outside tensorrt/library.py (the libraries' table, LIBRARIES), by this
    rule: a comparison (``==``, ``!=``, ``in``, ``not in``) with an operand, or an item of a tuple, list or set
    operand, that is a library's name as a literal (the engine runtimes of aft_export.runtimes, TENSORRT_MODULES:
    "tensorrt", "tensorrt-rtx") or the constant ``RTX``. Code that branches on a library reads a column of its row
    (``library_of(name).takes_targets``), which tests/test_trt_api.py reads like a version check. The word
    "tensorrt" is the default export target's name too: an export target is compared with options.DEFAULT_TARGET.
    A library an engine's manifest does not name is standard TensorRT: ``library_of(None).name``."""
    from aft_export.runtimes import TENSORRT_MODULES

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel == "tensorrt/library.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            items = [e for o in operands for e in (o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o])]
            if any(isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in TENSORRT_MODULES
                   or isinstance(e, ast.Name) and e.id == "RTX" for e in items):  # fmt: skip
                found.append(f"{rel}:{node.lineno}")
    return found


def _passed_in_dicts() -> list[str]:
    """Where a result's row decides its own ``passed`` as a dict: a ``"passed"`` key or item set to anything but
    a result's attribute (``self.passed``, ``result.passed``), outside ``to_dict``. A typed row with its own
    verdict is the aim (each result renders itself)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        tree = ast.parse(path.read_text())
        skip = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "to_dict"
                for n in ast.walk(f)}  # fmt: skip
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            values = []
            if isinstance(node, ast.Dict):
                values = [v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == "passed"]
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                                                      and t.slice.value == "passed" for t in node.targets):  # fmt: skip
                values = [node.value]
            if any(not (isinstance(v, ast.Attribute) and v.attr == "passed") for v in values):
                found.append(f"{rel}:{node.lineno}")
    return found


def _parameter_lines() -> int:
    paths = [p for m in PARAMETER_MODULES for p in ((PACKAGE / m).rglob("*.py") if (PACKAGE / m).is_dir()
                                                    else [PACKAGE / m])]  # fmt: skip
    return sum(_lines(p) for p in paths)


def _single_field_checks(function: ast.FunctionDef) -> list[str]:
    """The fields each check of ``function`` (a ``__post_init__``) reads when it reads one field alone, one entry
    per check: a statement of its body (not an assignment) counts the fields it reads, through ``self.FIELD``
    or a local name an assignment before it made from fields; a loop over a literal tuple of names read with
    ``getattr(self, name)`` is a check of each of those fields alone; a statement that reads ``self`` whole
    (``fields(self)``, ``getattr`` of a name it computes) spans fields."""
    made: dict[str, set[str]] = {}  # local name -> the fields it was made from
    out = []
    for stmt in function.body:
        attrs = {a.attr for a in ast.walk(stmt) if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
                 and a.value.id == "self"}  # fmt: skip
        reads = attrs | {f for n in ast.walk(stmt) if isinstance(n, ast.Name) for f in made.get(n.id, ())}
        if isinstance(stmt, ast.Assign):
            made.update({t.id: reads for t in stmt.targets if isinstance(t, ast.Name)})
            continue
        selves = sum(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(stmt))
        loop = isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and isinstance(stmt.iter, ast.Tuple)
        getattrs = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "getattr"
                    and len(n.args) == 2 and getattr(n.args[0], "id", "") == "self"
                    and getattr(n.args[1], "id", "") == getattr(getattr(stmt, "target", None), "id", None)]  # fmt: skip
        if loop and getattrs and not attrs and selves == len(getattrs):
            out += [e.value for e in stmt.iter.elts if isinstance(e, ast.Constant)]
        elif len(reads) == 1 and selves == len([a for a in ast.walk(stmt) if isinstance(a, ast.Attribute)
                                               and getattr(a.value, "id", "") == "self"]):  # fmt: skip
            out += list(reads)
    return out


def _parameter_places() -> dict[tuple[str, str], list[str]]:
    """Where each parameter that fills an options field is written, by this rule: its field's default
    (``options/``), its declaration (a ``declare(...)`` field, or a ``Param("name", ...)`` literal in the
    command's declaration, ``options/commands.py``), its keyword in the API function's signature, a keyword
    ``name=`` in a call of the options class in ``api.py``, and a check in ``__post_init__`` that reads no
    other field (:func:`_single_field_checks`; a rule spanning fields is not counted). Two is the floor: the
    declaration and the signature."""
    import inspect

    import aft_export.api as api
    from aft_export.options.commands import DECLARED
    from aft_export.options.params import PARAM

    commands_tree = ast.parse((PACKAGE / "options" / "commands.py").read_text())
    literals: dict[str, set[str]] = {}  # command variable's Command name -> Param names written there
    for node in ast.walk(commands_tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Command" and node.args:
            name = node.args[0].value
            literals[name] = {c.args[0].value for c in ast.walk(node) if isinstance(c, ast.Call)
                              and getattr(c.func, "id", None) == "Param" and c.args
                              and isinstance(c.args[0], ast.Constant)}  # fmt: skip
    api_tree = ast.parse((PACKAGE / "api.py").read_text())
    options_tree = {p: ast.parse(p.read_text()) for p in (PACKAGE / "options").glob("*.py")}
    out = {}
    for command in DECLARED.values():
        if command.options is None:
            continue
        fields = command.options.__dataclass_fields__
        cls = command.options.__name__
        checks = {}  # field -> single-field checks in __post_init__
        for tree in options_tree.values():
            for c in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls):
                for f in (n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__"):
                    for field in _single_field_checks(f):
                        checks[field] = checks.get(field, 0) + 1
        calls = {k.arg for n in ast.walk(api_tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == cls
                 for k in n.keywords}  # fmt: skip
        function = getattr(api, command.function or command.name.replace("-", "_"), None)
        signature = inspect.signature(function).parameters if function else {}
        for p in command.params:
            if not command.fills(p.name):
                continue
            declared = PARAM in fields[p.name].metadata
            places = (["declaration"] if declared else ["field default"]) + (
                ["Param literal"] if p.name in literals.get(command.name, ()) else []) + (
                ["signature"] if p.name in signature else []) + (
                ["options call in api"] if p.name in calls else []) + (
                ["__post_init__ check"] * checks.get(p.name, 0))  # fmt: skip
            out[command.name, p.name] = places
    return out


def main() -> int:
    modules = _modules()
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    cli = {str(p.relative_to(PACKAGE)): _lines(p) for p in sorted((PACKAGE / "cli").glob("*.py"))}
    long = {str(p.relative_to(PACKAGE)): _lines(p) for p in sorted(PACKAGE.rglob("*.py")) if _lines(p) > MODULE_LINES}
    rank = {m: i for i, m in enumerate(ORDER)}
    graph = {name: {t for _, t in _imports(path, set(modules)) if t and t != name} for name, path in modules.items()}
    upward = [(n, t) for n, ts in graph.items() if n for t in ts if rank.get(t, -1) >= rank.get(n, -1)]
    cycles = _cycles({n: ts for n, ts in graph.items() if n})
    worst_cli = max(cli.items(), key=lambda kv: kv[1])
    print(f"modules in the package root: {len(root)} (limit about {ROOT_MODULES}): {', '.join(root)}")
    print(f"longest command-line module: {worst_cli[0]} {worst_cli[1]} lines (limit {CLI_LINES}; {len(cli)} modules)")
    print(f"modules over {MODULE_LINES} lines: {len(long)}" + "".join(
        f"\n  {p}: {n}" + (f" (a table: {TABLES[p]})" if p in TABLES else "") for p, n in long.items()))
    print(f"upward imports: {len(upward)}" + "".join(f"\n  aft_export.{n} imports aft_export.{t}" for n, t in upward))
    print(f"import cycles: {len(cycles)}" + "".join(f"\n  {' <-> '.join(c)}" for c in cycles))
    # `passed`: a result's is its verdict's (Judged.passed reads Verdict.passed); a typed row's (a parity row, the
    # export's check, a swap's agreement) is its own, from its fields, and its result's verdict reads it
    passed = _defined("passed")
    print(f"`passed` defined: {len(passed)} ({', '.join(passed)})")
    # a stage's result typed by the API (from the stage's dict or list) rather than built by the stage
    typed = _typed_by_the_api()
    print(f"results the API builds itself (from a stage's plain data): {len(typed)}" + "".join(f"\n  {t}" for t in typed))
    # the backend word: made from the old `provider` word in one function (runtimes.backend_of), called only
    # where the old word still comes in; everywhere else a backend is a name the door checked, looked up
    old_word = _calls("backend_of")
    print(f"backend names made from the old word: {len(old_word)} calls of runtimes.backend_of ({', '.join(old_word)})")
    # item 4: the library's messages read right on both faces with no text rewritten
    text = _named_as_text()
    print(f"messages that name a parameter as text (not as data): {len(text)}" + "".join(f"\n  {t}" for t in text))
    print(f"imports of re in cli/words.py (rewriting messages by pattern): {_patterns_in_words()}")
    print(f"messages that name parameters as data: {len(_calls('said'))} said(...), "
          f"{len(_calls('command_line'))} command_line(...)")
    lists = _runtime_lists()
    print(f"lists of runtimes spelled outside aft_export/runtimes.py: {len(lists)}" + "".join(
        f"\n  {where}" for where in lists))
    by_suffix = _kind_by_suffix()
    print(f"a path's kind decided by its suffix or named outside artifacts/kinds.py: {len(by_suffix)}" + "".join(
        f"\n  {where}" for where in by_suffix))
    rows = _passed_in_dicts()
    print(f"rows that decide their own `passed` as a dict: {len(rows)}" + "".join(f"\n  {w}" for w in rows))
    names = _runtime_names_compared()
    print(f"a runtime's name compared outside runtimes.py: {len(names)}" + "".join(f"\n  {w}" for w in names))
    formats = _format_names_compared()
    print(f"a file format's name compared outside data/formats.py: {len(formats)}" + "".join(
        f"\n  {where}" for where in formats))
    libraries = _library_names_compared()
    print(f"a TensorRT library's name compared outside tensorrt/library.py: {len(libraries)}" + "".join(
        f"\n  {where}" for where in libraries))
    print(f"lines of {', '.join(PARAMETER_MODULES)}: {_parameter_lines()} (1,967 at 3aefeda)")
    places = _parameter_places()
    over = {k: v for k, v in places.items() if len(v) > 2}
    print(f"parameters that fill an options field: {len(places)}, written in {sum(map(len, places.values()))} "
          f"places; in more than two (the declaration and the signature): {len(over)}")
    done = sorted({c for c, _ in places} - {c for c, _ in over})
    print(f"  commands whose every such parameter is written twice at most: {', '.join(done) or 'none'}")
    over = (len(root) > ROOT_MODULES or worst_cli[1] > CLI_LINES or any(p not in TABLES for p in long)
            or upward or cycles)  # fmt: skip
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
