"""Every TensorRT name aft_export/tensorrt/library.py uses exists in every TensorRT version it supports, or is
guarded by a version check. Static: reads the source (AST) and tests/data/trt_api.json (the API of
each version, extracted from NVIDIA's bindings wheels by tools/extract_trt_api.py); needs neither
TensorRT nor the network.

What counts as a use: ``trt.X`` and the chains hanging off it (``trt.BuilderFlag.FP16``,
``trt.Logger.WARNING``), attributes read, set or called on TensorRT objects, and string literals that
name a TensorRT member (``"BuilderFlag.FP16"``, resolved at run time). Objects are typed by following
assignments with the return types of the bindings' signatures (``builder.create_network()`` is an
``INetworkDefinition``); parameters, which carry no type, are typed by their name (PARAM_TYPES).

Guards the analyser understands (the convention tensorrt/library.py follows):
- ``if version >= (10, 9):`` and ``<``, ``<=``, ``>``, ``==``, ``!=`` against a tuple of ints, combined
  with ``and``/``or``/``not``, on a variable named ``version`` or ``trt_version`` (the tuple from
  ``check_trt_version``); the ``else`` branch gets the other versions. An unrelated condition keeps
  both branches live, so ``cond and version >= (8, 6)`` guards its body but ``cond or ...`` does not.
- an early exit: after ``if version < (10, 9): raise ...`` (or ``return``) the rest of the block
  runs only on 10.9 and later.
- ``getattr(obj, "name", default)``: a lookup with a fallback is a guard of its own.
A dynamic ``getattr(trt_object, expr)`` is checked through the module-level dict or tuple of strings
it indexes, and reported when the analyser cannot see its possible names; the one exception is the
resolver ``_trt_attr(trt, "BuilderFlag.FP16")`` (RESOLVERS), whose names are the checked literals.

Versions: those in the JSON (8.6, 10.3, 10.13, 11.4) and 8.5, which has no bindings wheel: its API is
8.6's less the names 8.6 added (ADDED_IN_8_6). Only versions the analysed module supports are
checked: from its ``MIN_TRT`` to its ``MAX_TRT_MAJOR`` (11 where it has none). Versions in between
are assumed to have what both neighbours have.

TensorRT-RTX (``rtx-1.7``, the ``tensorrt_rtx`` bindings) is one more version, of another library: it
reports 1.x, so code branches on the library before comparing versions, and the analyser reads those
branches like a version check, decided for the library of the version analysed:
- a column of the library's row in aft_export.tensorrt.library's table (``LIBRARIES``: a boolean column of
  ``Library``), read as ``lib.COLUMN`` (a variable named ``lib``) or ``library_of(...).COLUMN``:
  ``if lib.takes_targets:``, ``if not library_of(library).strongly_typed``. Its value is the table's own
  (imported here), so a row that changes is analysed as it now is.
- ``library == RTX`` / ``library != "tensorrt-rtx"`` (a variable named ``library``; ``RTX`` is
  aft_export.tensorrt.library's name for "tensorrt-rtx"): the table's module decides a library's releases
  so (check_trt_version); no other module compares a library's name (tools/shape.py counts them).
A module-level constant named ``RTX_*`` holds TensorRT-RTX names only and is checked against
TensorRT-RTX's API only. A module is checked for TensorRT-RTX when it defines ``MIN_RTX`` or defines
neither ``MIN_TRT`` nor ``MIN_RTX`` (the modules that take the versions from aft_export/tensorrt/library.py).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import re
from pathlib import Path

import pytest

from aft_export.errors import AFTExportError
from aft_export.tensorrt.library import (LIBRARIES, RTX_TARGETS, BuildOptions, Library, build_plan,
                                         compute_capabilities, hardware_level, network_flags,
                                         precision_flags)  # fmt: skip
from tests.conftest import REPO

DATA = json.loads((Path(__file__).parent / "data" / "trt_api.json").read_text())
VERSIONS = {"8.5": (8, 5), "8.6": (8, 6), "10.3": (10, 3), "10.13": (10, 13), "11.4": (11, 4), "rtx-1.7": (1, 7)}
RTX = "tensorrt-rtx"
LIBRARY = {key: RTX if key.startswith("rtx-") else "tensorrt" for key in VERSIONS}
STANDARD = [k for k in VERSIONS if LIBRARY[k] == "tensorrt"]
ORDER = list(VERSIONS).index
# Names the 8.6 bindings have and the 8.5 ones lack, among those near what aft-export touches: each is
# absent from the whole Python bindings source of TensorRT 8.5.3 (github.com/NVIDIA/TensorRT, tag 8.5.3,
# python/src and python/packaging). Version and hardware compatibility are 8.6 features (NVIDIA's
# "Version Compatibility" page: "supported from version 8.6").
ADDED_IN_8_6 = {
    "BuilderFlag.VERSION_COMPATIBLE", "BuilderFlag.EXCLUDE_LEAN_RUNTIME", "BuilderFlag.FP8", "DataType.FP8",
    "IBuilderConfig.hardware_compatibility_level", "IBuilderConfig.builder_optimization_level",
    "IBuilderConfig.max_aux_streams", "IBuilderConfig.plugins_to_serialize",
    "ICudaEngine.hardware_compatibility_level", "ICudaEngine.num_aux_streams",
    "IExecutionContext.set_aux_streams", "Runtime.engine_host_code_allowed", "Runtime.load_runtime",
    "Runtime.temporary_directory", "Runtime.tempfile_control_flags", "ILayer.metadata",
    "INetworkDefinition.add_cast", "INetworkDefinition.add_normalization",
    "OnnxParser.get_used_vc_plugin_libraries", "MemoryPoolType.TACTIC_DRAM",
}  # fmt: skip
CLASSES_ADDED_IN_8_6 = {"HardwareCompatibilityLevel", "TempfileControlFlag", "OnnxParserFlag", "ICastLayer",
                        "INormalizationLayer", "IReverseSequenceLayer"}  # fmt: skip
# Types the signatures do not give: parameters by name, and C++ names pybind11 printed for a Python class.
PARAM_TYPES = {"builder": "Builder", "network": "INetworkDefinition", "config": "IBuilderConfig",
               "parser": "OnnxParser", "profile": "IOptimizationProfile", "runtime": "Runtime",
               "engine": "ICudaEngine", "context": "IExecutionContext", "layer": "ILayer",
               "tensor": "ITensor"}  # fmt: skip
TYPE_ALIASES = {"nvonnxparser::IParserError": "ParserError"}
VERSION_NAMES = {"version", "trt_version"}
# a library's row (aft_export.tensorrt.library.Library) read as a guard: ROW_NAMES.COLUMN or ROW_LOOKUPS(...).COLUMN,
# COLUMN one of its boolean columns (in every row)
ROW_NAMES, ROW_LOOKUPS = {"lib"}, {"library_of"}
ROW_COLUMNS = {f.name for f in dataclasses.fields(Library)
               if all(isinstance(getattr(row, f.name), bool) for row in LIBRARIES.values())}  # fmt: skip
RESOLVERS = {"_trt_attr"}  # resolves "BuilderFlag.FP16" at run time; the literals are checked where written
ENUM_VALUE_ATTRS = {"name", "value"}  # what pybind11 gives every enum value
TRT_PY = REPO / "aft_export" / "tensorrt" / "library.py"
# every module that calls TensorRT: the version choices and manifest, the build, the runner
TRT_FILES = [TRT_PY, REPO / "aft_export" / "tensorrt" / "build.py", REPO / "aft_export" / "tensorrt" / "manifest.py",
             REPO / "aft_export" / "runners" / "engine.py"]


def api_for(key: str) -> dict:
    if key != "8.5":
        return DATA["versions"][key]
    base = DATA["versions"]["8.6"]
    kept = CLASSES_ADDED_IN_8_6.isdisjoint
    classes = {c: {m: t for m, t in ms.items() if f"{c}.{m}" not in ADDED_IN_8_6}
               for c, ms in base["classes"].items() if kept(c.split("."))}  # fmt: skip
    enums = {e: [m for m in ms if f"{e}.{m}" not in ADDED_IN_8_6]
             for e, ms in base["enums"].items() if kept(e.split("."))}  # fmt: skip
    module = {n: k for n, k in base["module"].items() if n not in CLASSES_ADDED_IN_8_6}
    return {"module": module, "classes": classes, "enums": enums}


APIS = {key: api_for(key) for key in VERSIONS}
TRT_TYPES = {name.split(".")[0] for api in APIS.values() for name in [*api["classes"], *api["enums"]]}

# ---------------------------------------------------------------- the analyser

MODULE = ("module", "")


class Analyser:
    """Walks one module for one TensorRT version; collects uses and the ones this version lacks."""

    def __init__(self, api: dict, version: tuple[int, ...], constants: dict, library: str = "tensorrt"):
        self.api, self.version, self.constants, self.library = api, version, constants, library
        self.used: set[tuple[int, str]] = set()
        self.missing: set[tuple[int, str]] = set()
        self.dynamic: set[tuple[int, str]] = set()

    # -- types: ("module", ""), ("type", path) for a class or enum, ("obj", path) for an instance,
    #    ("callable", return type) for a method or function; None when unknown or not TensorRT

    def _from_type(self, text: str | None):
        names = [TYPE_ALIASES.get(t, t) for t in (text or "").split("|") if t and t != "None"]
        if len(names) == 1 and (names[0] in self.api["classes"] or names[0] in self.api["enums"]):
            return ("obj", names[0])
        return None

    def _member(self, kind: str, path: str, name: str):
        """Type of ``name`` looked up on ``(kind, path)``, or KeyError if this version lacks it."""
        if kind == "module":
            entry = self.api["module"][name]
            if entry in ("class", "enum"):
                return ("type", name)
            what, _, rest = entry.partition(":")
            return ("callable", rest) if what == "function" else self._from_type(rest)
        if path in self.api["enums"]:
            if kind == "obj" and name in ENUM_VALUE_ATTRS:
                return None
            if name not in self.api["enums"][path]:
                raise KeyError(name)
            return ("obj", path)
        entry = self.api["classes"][path][name]  # KeyError if absent
        what, _, rest = entry.partition(":")
        if what == "class":
            return ("type", f"{path}.{name}")
        return ("callable", rest) if what == "method" else self._from_type(rest)

    def lookup(self, base, name: str, line: int):
        if base is None or base[0] == "callable":
            return None
        kind, path = base
        if kind != "module" and path not in self.api["classes"] and path not in self.api["enums"]:
            return None  # a type this version does not have was reported where it was named
        label = name if kind == "module" else f"{path}.{name}"
        try:
            result = self._member(kind, path, name)
        except KeyError:
            self.missing.add((line, label))
            return None
        self.used.add((line, label))
        return result

    # -- version conditions: True, False, or None (not a version condition / undecided)

    def decide(self, test):
        if isinstance(test, ast.BoolOp):
            values = [self.decide(v) for v in test.values]
            if isinstance(test.op, ast.And):
                return False if False in values else (True if all(v is True for v in values) else None)
            return True if True in values else (False if all(v is False for v in values) else None)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.decide(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.Attribute) and test.attr in ROW_COLUMNS and _reads_row(test.value):
            return getattr(LIBRARIES[self.library], test.attr)  # the table's own value for this library
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
                and test.left.id == "library" and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):  # fmt: skip
            other = test.comparators[0]
            names = [RTX] if isinstance(other, ast.Name) and other.id == "RTX" else self.possible_strings(other)
            if names and len(names) == 1 and names[0] in (RTX, "tensorrt"):
                return (self.library == names[0]) == isinstance(test.ops[0], ast.Eq)
            return None
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
                and test.left.id in VERSION_NAMES):  # fmt: skip
            try:
                bound = ast.literal_eval(test.comparators[0])
            except ValueError:
                return None
            if isinstance(bound, tuple) and all(isinstance(b, int) for b in bound):
                compare = {ast.GtE: tuple.__ge__, ast.Gt: tuple.__gt__, ast.LtE: tuple.__le__,
                           ast.Lt: tuple.__lt__, ast.Eq: tuple.__eq__, ast.NotEq: tuple.__ne__}  # fmt: skip
                return compare[type(test.ops[0])](self.version, bound)
        return None

    # -- expressions

    def expr(self, node, env: dict):
        if node is None:
            return None
        if isinstance(node, ast.Name):
            return MODULE if node.id == "trt" else env.get(node.id)
        if isinstance(node, ast.Attribute):
            dotted = _dotted_name(node)
            if dotted and dotted.startswith("self.") and dotted in env:
                return env[dotted]
            return self.lookup(self.expr(node.value, env), node.attr, node.lineno)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.string(node.value, node.lineno)
            return None
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, ast.BoolOp):
            for value in node.values:  # short-circuit: ``version >= (8, 6) and x.attr`` guards x.attr
                self.expr(value, env)
                if self.decide(value) is (isinstance(node.op, ast.Or)):
                    break
            return None
        if isinstance(node, ast.IfExp):
            decided = self.decide(node.test)
            self.expr(node.test, env)
            if decided is not False:
                self.expr(node.body, env)
            if decided is not True:
                self.expr(node.orelse, env)
            return None
        if isinstance(node, ast.Lambda):
            self.expr(node.body, env)
            return None
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.comprehension):
                self.expr(child.iter, env)
                self.assign(child.target, None, env)
                for cond in child.ifs:
                    self.expr(cond, env)
            elif isinstance(child, ast.expr):
                self.expr(child, env)
        return None

    def string(self, text: str, line: int) -> None:
        """A literal naming a TensorRT member (``"BuilderFlag.FP16"``) is a use."""
        m = re.fullmatch(r"([A-Z]\w*)\.(\w+)", text)
        if m and m.group(1) in TRT_TYPES:
            if m.group(1) not in self.api["classes"] and m.group(1) not in self.api["enums"]:
                self.missing.add((line, m.group(1)))
            else:
                self.lookup(("type", m.group(1)), m.group(2), line)

    def call(self, node: ast.Call, env: dict):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and len(node.args) >= 2:
            base = self.expr(node.args[0], env)
            if func.id == "hasattr" or len(node.args) == 3:  # a lookup with a fallback guards itself
                for arg in node.args[2:]:
                    self.expr(arg, env)
                return None
            names = self.possible_strings(node.args[1])
            if base is not None and names is None:
                self.dynamic.add((node.lineno, ast.unparse(node)))
            for name in names or ():
                self.lookup(base, name, node.lineno)
            return None
        target = self.expr(func, env)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            self.expr(arg, env)
        if target is not None and target[0] == "type":
            return ("obj", target[1])  # a constructor
        if target is not None and target[0] == "callable":
            return self._from_type(target[1])
        return None

    def possible_strings(self, node) -> list[str] | None:
        """The strings ``node`` can be: a literal, a module-level constant, or an item of one."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.Subscript):
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.constants:
            value = self.constants[node.id]
            if isinstance(value, str):
                return [value]
            return [v for v in (value.values() if isinstance(value, dict) else value) if isinstance(v, str)]
        return None

    # -- statements; block() returns True when the block always leaves (return/raise)

    def assign(self, target, value_type, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value_type
        elif isinstance(target, ast.Attribute):
            dotted = _dotted_name(target)
            if dotted and dotted.startswith("self."):
                env[dotted] = value_type
            else:  # setting a property of a TensorRT object is a use too
                self.lookup(self.expr(target.value, env), target.attr, target.lineno)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.assign(element, None, env)
        else:
            self.expr(target, env)

    def function(self, node, env: dict) -> None:
        if node.name in RESOLVERS:
            return
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            typed = arg.annotation is None and arg.arg in PARAM_TYPES
            env[arg.arg] = ("obj", PARAM_TYPES[arg.arg]) if typed else None
        self.block(node.body, env)

    def block(self, body: list, env: dict) -> bool:
        for stmt in body:
            if self.stmt(stmt, env):
                return True
        return False

    def stmt(self, node, env: dict) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(node, env)  # shares env: closures and self.* attributes set in __init__
            return False
        if isinstance(node, ast.ClassDef):
            self.block(node.body, env)
            return False
        if isinstance(node, ast.If):
            decided = self.decide(node.test)
            self.expr(node.test, env)
            if decided is True:
                return self.block(node.body, env)
            if decided is False:
                return self.block(node.orelse, env)
            body_leaves = self.block(node.body, env)
            return self.block(node.orelse, env) and body_leaves
        if isinstance(node, (ast.Return, ast.Raise)):
            for child in ast.iter_child_nodes(node):
                self.expr(child, env)
            return True
        if isinstance(node, ast.Assign):
            rtx_only = any(isinstance(t, ast.Name) and t.id.startswith("RTX_") for t in node.targets)
            if rtx_only and self.library != RTX:
                return False  # TensorRT-RTX names, for TensorRT-RTX only
            value_type = self.expr(node.value, env)
            for target in node.targets:
                self.assign(target, value_type, env)
            return False
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            value_type = self.expr(node.value, env)
            self.assign(node.target, value_type if isinstance(node, ast.AnnAssign) else None, env)
            return False
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname == "trt" or alias.name == "tensorrt":
                    env[alias.asname or alias.name] = MODULE
            return False
        if isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, env)
            self.assign(node.target, None, env)
        elif isinstance(node, ast.While):
            self.expr(node.test, env)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                value_type = self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, value_type, env)
        if isinstance(node, ast.Try):
            self.block(node.body, env)
            for handler in node.handlers:
                self.expr(handler.type, env)
                self.block(handler.body, env)
            self.block(node.orelse, env)
            return self.block(node.finalbody, env)
        if hasattr(node, "body"):
            self.block(node.body, env)
            self.block(getattr(node, "orelse", []), env)
            return False
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, env)
        return False


def _reads_row(node) -> bool:
    """Whether ``node`` is a library's row: a variable of ROW_NAMES, or a call of ROW_LOOKUPS."""
    if isinstance(node, ast.Name):
        return node.id in ROW_NAMES
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ROW_LOOKUPS


def _dotted_name(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _constants(tree: ast.Module) -> dict:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def supported_versions(constants: dict) -> list[str]:
    low, top = tuple(constants.get("MIN_TRT", (0, 0))), constants.get("MAX_TRT_MAJOR", 11)
    rtx = "MIN_RTX" in constants or "MIN_TRT" not in constants
    rlow, rtop = tuple(constants.get("MIN_RTX", (0, 0))), constants.get("MAX_RTX_MAJOR", 1)
    return [key for key, v in VERSIONS.items()
            if (LIBRARY[key] == "tensorrt" and low <= v and v[0] <= top) or
            (LIBRARY[key] == RTX and rtx and rlow <= v and v[0] <= rtop)]  # fmt: skip


def analyse(source: str) -> dict:
    """``{"problems": [(line, name, versions lacking it)], "used": {name: [versions]}, "dynamic": [...],
    "versions": [...]}`` for a module's source."""
    tree = ast.parse(source)
    constants = _constants(tree)
    versions = supported_versions(constants)
    missing, used, dynamic = {}, {}, set()
    for key in versions:
        analyser = Analyser(APIS[key], VERSIONS[key], constants, LIBRARY[key])
        analyser.block(tree.body, {})
        for line, name in analyser.missing:
            missing.setdefault((line, name), []).append(key)
        for _, name in analyser.used:
            used.setdefault(name, set()).add(key)
        dynamic |= analyser.dynamic
    problems = sorted((line, name, sorted(keys, key=ORDER)) for (line, name), keys in missing.items())
    return {"problems": problems, "used": {k: sorted(v, key=ORDER) for k, v in used.items()},
            "dynamic": sorted(dynamic), "versions": versions}  # fmt: skip


def report(result: dict) -> str:
    lines = [f"line {line}: {name} is missing in TensorRT {', '.join(keys)} and no version check guards it"
             for line, name, keys in result["problems"]]  # fmt: skip
    lines += [f"line {line}: {text}: a TensorRT lookup whose name the API check cannot see"
              for line, text in result["dynamic"]]  # fmt: skip
    return "\n".join(lines)


# ---------------------------------------------------------------- the data


def test_api_data_comes_from_pinned_wheels():
    assert set(DATA["versions"]) == {"8.6", "10.3", "10.13", "11.4", "rtx-1.7"}
    for key, api in DATA["versions"].items():
        wheel = api["wheel"]
        assert wheel["version"].startswith(key.removeprefix("rtx-") + ".") and re.fullmatch(r"[0-9a-f]{64}",
                                                                                            wheel["sha256"])  # fmt: skip
        assert wheel["file"].endswith(".whl") and len(api["classes"]) > 100 and len(api["enums"]) > 50
    assert "8.5" in DATA["no_wheel"]
    assert all(name.split(".")[-1] in DATA["versions"]["8.6"]["classes"].get(name.rpartition(".")[0], {})
               or name.split(".")[-1] in DATA["versions"]["8.6"]["enums"].get(name.rpartition(".")[0], [])
               for name in ADDED_IN_8_6), "ADDED_IN_8_6 lists a name 8.6 does not have"  # fmt: skip


def test_the_extractor_reads_pybind11_signatures():
    spec = importlib.util.spec_from_file_location("extract_trt_api", REPO / "tools" / "extract_trt_api.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    doc = ("create_network(self: tensorrt.tensorrt.Builder, flags: int = 0) -> "
           "tensorrt.tensorrt.INetworkDefinition\n\n\n    Create a :class:`INetworkDefinition` object.\n")  # fmt: skip
    assert script._returns(doc) == "INetworkDefinition"
    overloads = ("deserialize_cuda_engine(*args, **kwargs)\nOverloaded function.\n\n"
                 "1. deserialize_cuda_engine(self: tensorrt.tensorrt.Runtime, serialized_engine: buffer) "
                 "-> tensorrt.tensorrt.ICudaEngine\n\n    Deserialize ... (a) -> b\n\n"
                 "2. deserialize_cuda_engine(self: tensorrt.tensorrt.Runtime, stream_reader: "
                 "tensorrt.tensorrt.IStreamReader) -> tensorrt.tensorrt.ICudaEngine\n")  # fmt: skip
    assert script._returns(overloads) == "ICudaEngine"
    assert script._returns("(arg0: tensorrt.tensorrt.ILogger) -> tensorrt.tensorrt.ILogger.Severity\n") \
        == "ILogger.Severity"  # fmt: skip
    assert script._returns("Builds an engine.") == ""


@pytest.mark.parametrize("key, name, present", [
    ("10.13", "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", True),
    ("11.4", "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", True),
    ("10.3", "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", False),
    ("11.4", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH", False),
    ("10.13", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH", True),
    ("8.6", "NetworkDefinitionCreationFlag.STRONGLY_TYPED", False),
    ("11.4", "BuilderFlag.INT8", False), ("11.4", "BuilderFlag.FP16", False),
    ("10.3", "BuilderFlag.FP16", True),
    ("8.5", "BuilderFlag.VERSION_COMPATIBLE", False), ("8.6", "BuilderFlag.VERSION_COMPATIBLE", True),
    ("8.5", "IExecutionContext.execute_async_v3", True), ("8.5", "Runtime.engine_host_code_allowed", False),
    ("rtx-1.7", "NetworkDefinitionCreationFlag.STRONGLY_TYPED", True),
    ("rtx-1.7", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH", False), ("rtx-1.7", "BuilderFlag.INT8", False),
    ("rtx-1.7", "BuilderFlag.OBEY_PRECISION_CONSTRAINTS", False), ("rtx-1.7", "ComputeCapability.SM75", True),
    ("rtx-1.7", "IBuilderConfig.num_compute_capabilities", True), ("11.4", "ComputeCapability.SM75", False),
])  # fmt: skip
def test_known_facts_about_the_versions(key, name, present):
    owner, _, member = name.rpartition(".")
    api = APIS[key]
    assert (member in api["enums"].get(owner, ()) or member in api["classes"].get(owner, {})) == present
    assert "IInt8Calibrator" in APIS["10.13"]["classes"] and "IInt8Calibrator" not in APIS["11.4"]["classes"]


# ---------------------------------------------------------------- the analyser can fail

UNGUARDED = """
def build(trt, config):
    config.hardware_compatibility_level = trt.HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY
"""


def test_an_unguarded_name_is_reported_with_the_versions_lacking_it():
    result = analyse("MIN_TRT = (10, 3)\n" + UNGUARDED)
    assert result["versions"] == ["10.3", "10.13", "11.4"]
    assert result["problems"] == [(4, "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", ["10.3"])]
    message = "line 4: HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY is missing in TensorRT 10.3 "
    assert report(result).startswith(message)
    everything = analyse(UNGUARDED)["problems"]  # from 8.5 on, the enum and the property are 8.6's
    assert (3, "IBuilderConfig.hardware_compatibility_level", ["8.5"]) in everything
    assert (3, "HardwareCompatibilityLevel", ["8.5"]) in everything


@pytest.mark.parametrize("guard, lacking", [
    ("if version >= (10, 9):", []), ("if trt_version > (10, 8):", []), ("if version >= (10, 0):", ["10.3"]),
    ("if not version < (10, 9):", []), ("if ready and version >= (10, 9):", []),
    ("if ready or version >= (10, 9):", ["10.3"]), ("if ready:", ["10.3"]),
])  # fmt: skip
def test_version_guards(guard, lacking):
    code = f"MIN_TRT = (10, 3)\ndef f(trt, ready, version, trt_version):\n    {guard}\n" \
           f"        x = trt.HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY\n"  # fmt: skip
    assert [keys for _, _, keys in analyse(code)["problems"]] == ([lacking] if lacking else [])


def test_else_branches_early_exits_strings_and_dynamic_lookups():
    code = '''MIN_TRT = (8, 5)
LEVELS = {"a": "AMPERE_PLUS", "s": "SAME_COMPUTE_CAPABILITY"}
def flags(version):
    if version >= (11, 0):
        return ()
    else:
        return ("BuilderFlag.FP16",)
def level(version):
    if version < (10, 9):
        raise ValueError("too old")
    return "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY"
def unguarded():
    return "BuilderFlag.INT8", "Not a TensorRT name.SAME_COMPUTE_CAPABILITY"
def lookups(trt, err, name, key):
    getattr(err, "node_name", lambda: "")()
    getattr(trt.HardwareCompatibilityLevel, LEVELS[key])
    getattr(trt.BuilderFlag, name)
'''
    result = analyse(code)
    assert result["problems"] == [(13, "BuilderFlag.INT8", ["11.4"]),
                                  (16, "HardwareCompatibilityLevel", ["8.5"]),
                                  (16, "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", ["8.6", "10.3"])]
    assert result["dynamic"] == [(17, "getattr(trt.BuilderFlag, name)")]


def test_types_follow_assignments_and_return_types():
    code = """MIN_TRT = (10, 3)
def build(trt):
    builder = trt.Builder(trt.Logger(trt.Logger.WARNING))
    net = builder.create_network(0)
    cfg = builder.create_builder_config()
    cfg.set_flag(trt.BuilderFlag.FP16)
    lay = net.get_layer(0)
    lay.precision = trt.float32
    lay.no_such_thing()
"""
    result = analyse(code)
    assert {"Builder.create_network", "INetworkDefinition.get_layer", "Logger.WARNING"} <= set(result["used"])
    assert result["problems"] == [(6, "BuilderFlag.FP16", ["11.4"]), (8, "ILayer.precision", ["11.4"]),
                                  (9, "ILayer.no_such_thing", ["10.3", "10.13", "11.4"])]


# The lines of build_engine on main before this check existed (commit 254dd7e), as they were.
OLD_TRT_PY = """
MIN_TRT = (10, 3)
HW_LEVELS = {"none": "NONE", "ampere+": "AMPERE_PLUS", "same-cc": "SAME_COMPUTE_CAPABILITY"}


def build_engine(onnx_path, out, options=None, log=print):
    opts = options or BuildOptions()
    trt = import_tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    parser = trt.OnnxParser(network, logger)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, opts.workspace_mb << 20)
    if opts.version_compatible:
        config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
    if opts.hardware_compatibility != "none":
        config.hardware_compatibility_level = getattr(trt.HardwareCompatibilityLevel,
                                                      HW_LEVELS[opts.hardware_compatibility])  # fmt: skip
"""


def test_the_old_code_is_flagged_at_its_same_cc_lookup():
    result = analyse(OLD_TRT_PY)
    assert result["problems"] == [(18, "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", ["10.3"])]


# ---------------------------------------------------------------- aft_export/tensorrt/library.py


@pytest.mark.parametrize("path", TRT_FILES, ids=lambda p: p.name)
def test_trt_code_uses_only_what_every_supported_version_has(path):
    result = analyse(path.read_text())
    assert result["versions"] == ["8.5", "8.6", "10.3", "10.13", "11.4", "rtx-1.7"]
    assert not result["problems"] and not result["dynamic"], "\n" + report(result)


def test_the_check_sees_the_calls_that_matter():
    """Guards against a check that passes because it resolved nothing."""
    used = {}
    for path in TRT_FILES:
        for name, versions in analyse(path.read_text())["used"].items():
            used[name] = sorted(set(used.get(name, [])) | set(versions), key=ORDER)
    everywhere = ["8.5", "8.6", "10.3", "10.13", "11.4", "rtx-1.7"]
    for name in ("Builder.create_network", "Builder.create_builder_config", "OnnxParser.parse_from_file",
                 "OnnxParser.get_error", "ParserError.desc", "IBuilderConfig.set_flag",
                 "IBuilderConfig.set_memory_pool_limit", "IOptimizationProfile.set_shape",
                 "Runtime.deserialize_cuda_engine", "ICudaEngine.create_execution_context",
                 "ICudaEngine.num_io_tensors", "ICudaEngine.get_tensor_name", "ICudaEngine.get_tensor_mode",
                 "ICudaEngine.get_tensor_dtype", "IExecutionContext.set_input_shape",
                 "IExecutionContext.set_tensor_address", "IExecutionContext.get_tensor_shape",
                 "IExecutionContext.execute_async_v3", "TensorIOMode.INPUT", "nptype", "Logger.WARNING",
                 "Logger.ERROR", "INetworkDefinition.get_layer", "ILayer.get_output", "ILayer.get_input", "ITensor.dtype",
                 "LayerType.DEQUANTIZE", "LayerType.MATRIX_MULTIPLY", "LayerType.CONVOLUTION", "int8"):  # fmt: skip
        assert used.get(name) == everywhere, name
    assert used["NetworkDefinitionCreationFlag.EXPLICIT_BATCH"] == ["8.5", "8.6"]
    assert used["NetworkDefinitionCreationFlag.STRONGLY_TYPED"] == ["10.3", "10.13", "rtx-1.7"]
    for name in ("BuilderFlag.INT8", "BuilderFlag.FP16", "BuilderFlag.OBEY_PRECISION_CONSTRAINTS",
                 "ILayer.precision", "ILayer.set_output_type"):  # fmt: skip
        assert used[name] == ["8.5", "8.6"], name
    standard = ["8.5", "8.6", "10.3", "10.13", "11.4"]
    for name in ("BuilderFlag.TF32", "ITimingCache.serialize", "IBuilderConfig.create_timing_cache",
                 "IBuilderConfig.set_timing_cache", "Builder.num_DLA_cores", "IBuilderConfig.DLA_core"):  # fmt: skip
        assert used[name] == standard, name  # TensorRT-RTX: refused, or forces a GPU (timing cache)
    for name in ("IBuilderConfig.num_compute_capabilities", "IBuilderConfig.set_compute_capability",
                 "IBuilderConfig.get_compute_capability", "ComputeCapability.SM75", "ComputeCapability.SM121"):
        assert used[name] == ["rtx-1.7"], name
    assert used["Runtime.engine_host_code_allowed"] == ["8.6", "10.3", "10.13", "11.4"]
    assert used["IBuilderConfig.hardware_compatibility_level"] == ["8.6", "10.3", "10.13", "11.4"]
    assert used["BuilderFlag.VERSION_COMPATIBLE"] == ["8.6", "10.3", "10.13", "11.4"]
    assert used["HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY"] == ["10.13", "11.4"]


def test_library_checks_are_read_like_version_checks():
    code = """MIN_TRT = (10, 3)
MIN_RTX = (1, 7)
RTX = "tensorrt-rtx"
RTX_NAMES = ("ComputeCapability.SM86",)
def build(trt, config, library, version):
    if library == RTX:
        config.num_compute_capabilities = 1
        return
    if version >= (10, 0):
        config.clear_flag(trt.BuilderFlag.TF32)
    if library != "tensorrt-rtx" and version >= (10, 9):
        x = trt.HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY
    config.set_flag(trt.BuilderFlag.INT8)
"""
    result = analyse(code)
    assert result["versions"] == ["10.3", "10.13", "11.4", "rtx-1.7"]
    assert result["problems"] == [(13, "BuilderFlag.INT8", ["11.4"])]  # after the RTX branch left: standard only
    assert result["used"]["IBuilderConfig.num_compute_capabilities"] == ["rtx-1.7"]
    assert result["used"]["ComputeCapability.SM86"] == ["rtx-1.7"]
    unguarded = analyse(code.replace("    if library == RTX:\n        config.num_compute_capabilities = 1\n"
                                     "        return\n", ""))["problems"]  # fmt: skip
    assert (10, "BuilderFlag.INT8", ["11.4", "rtx-1.7"]) in unguarded


LIBRARY_COLUMNS = """MIN_TRT = (10, 3)
MIN_RTX = (1, 7)
def build(trt, config, library, version):
    lib = library_of(library)
    if lib.takes_targets:
        config.num_compute_capabilities = 1
    if not lib.strongly_typed and version < (11, 0):
        config.set_flag(trt.BuilderFlag.INT8)
    if library_of(library).strongly_typed:
        return
    config.set_flag(trt.BuilderFlag.FP16)
"""


def test_library_columns_are_read_like_version_checks():
    """A column of the library's row guards like a version check (``lib.takes_targets``,
    ``library_of(library).strongly_typed``), decided for the library analysed; without the guard,
    the name the other library lacks is reported."""
    result = analyse(LIBRARY_COLUMNS)
    assert result["versions"] == ["10.3", "10.13", "11.4", "rtx-1.7"]
    assert result["problems"] == [(11, "BuilderFlag.FP16", ["11.4"])]  # after the strongly typed exit: standard only
    assert result["used"]["IBuilderConfig.num_compute_capabilities"] == ["rtx-1.7"]
    assert result["used"]["BuilderFlag.INT8"] == ["10.3", "10.13"]
    unguarded = analyse(LIBRARY_COLUMNS.replace("    if lib.takes_targets:\n        config", "    config"))
    assert (5, "IBuilderConfig.num_compute_capabilities", ["10.3", "10.13", "11.4"]) in unguarded["problems"]
    unguarded = analyse(LIBRARY_COLUMNS.replace("not lib.strongly_typed and ", ""))["problems"]
    assert (8, "BuilderFlag.INT8", ["rtx-1.7"]) in unguarded  # 11.4: still under its version check
    # a row of another name, or an attribute that is no column of it, decides nothing: both branches are live
    for guard in ("row.takes_targets", "lib.no_such_column", "lib.suffix"):
        problems = analyse(LIBRARY_COLUMNS.replace("lib.takes_targets", guard))["problems"]
        assert (6, "IBuilderConfig.num_compute_capabilities", ["10.3", "10.13", "11.4"]) in problems, guard


@pytest.mark.parametrize("key", list(VERSIONS))
def test_library_columns_are_decided_from_the_table(key):
    """Each boolean column decides as aft_export.tensorrt.library's table says for the version's library."""
    analyser = Analyser(APIS[key], VERSIONS[key], {}, LIBRARY[key])
    row = LIBRARIES[LIBRARY[key]]
    assert ROW_COLUMNS >= {"strongly_typed", "takes_targets", "builds_without_gpu", "version_compatible"}
    for column in ROW_COLUMNS:
        for guard in (f"lib.{column}", f"library_of(library).{column}"):
            assert analyser.decide(ast.parse(guard).body[0].value) is getattr(row, column), guard
            assert analyser.decide(ast.parse(f"not {guard}").body[0].value) is not getattr(row, column), guard


# ---------------------------------------------------------------- the version-dependent choices


@pytest.mark.parametrize("key", list(VERSIONS))
def test_build_choices_exist_in_their_version(key):
    """Every flag a build may ask of a version is a member that version has (the analyser checks the
    literals where they are written; this checks what the functions return, for every precision)."""
    api, v, library = APIS[key], VERSIONS[key], LIBRARY[key]
    names = list(network_flags(v, library))
    for precision in ("fp32", "fp16", "int8"):
        names += precision_flags(v, precision, library)
        names += build_plan(v, precision, BuildOptions(), library).builder_flags
    if library == RTX:
        names += compute_capabilities(RTX_TARGETS, library)
        assert sorted(RTX_TARGETS.values()) == sorted(f"ComputeCapability.{m}" for m in api["enums"]
                                                      ["ComputeCapability"] if m.startswith("SM"))  # fmt: skip
    for level in ("none", "ampere+", "same-cc"):
        try:
            names.append(hardware_level(level, v) if library != RTX else None)
        except AFTExportError:
            pass
    for name in filter(None, names):
        enum, _, member = name.partition(".")
        assert member in api["enums"][enum], f"{name} is not in TensorRT {key}"
