"""The rules: what a TensorRT version's ONNX parser (or its strongly typed builder) refuses.

Each rule is a function of a :class:`GraphView` and a :class:`Version` that yields
``(node, message)`` for every violation (``node`` None for the model as a whole), and
is registered with its id, the versions it exists in, what to do about it and where it
comes from. ``ONNX_TRT`` below is github.com/onnx/onnx-tensorrt; file names are that
repository's, at the branch named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from aft_export.options.commands import command_line
from aft_export.trtcheck.versions import Version
from aft_export.trtcheck.view import GraphView

# the command lines the rules' fixes give (in flags on both faces: they are typed in a shell)
TRT8 = command_line("export", target="tensorrt8")
OPSET_N = command_line("export", opset="N")
DECOMPOSED = command_line("export", op_form="decomposed")
FP16 = command_line("quantize", precision="fp16")

DEFAULT_DOMAINS = ("", "ai.onnx")
MAX_DIMS = 8  # nvinfer1::Dims::MAX_DIMS


@dataclass(frozen=True)
class Rule:
    id: str
    summary: str
    source: str
    fix: str
    applies: Callable[[Version], bool]
    severity: str  # "error": the version refuses the graph (or computes something else); "warning"
    check: Callable[[GraphView, Version], Iterator]


RULES: dict[str, Rule] = {}


def rule(id: str, summary: str, source: str, fix: str, applies=lambda v: True, severity: str = "error"):
    def register(fn):
        RULES[id] = Rule(id, summary, source, fix, applies, severity, fn)
        return fn

    return register


def _default(node) -> bool:
    return node.domain in DEFAULT_DOMAINS


def _ops(view: GraphView, *op_types: str):
    """The default-domain nodes of these op types, in graph order."""
    return [n for n in view.nodes if n.op_type in op_types and _default(n)]


def _fmt(v: Version) -> str:
    return v.edition.title if v.edition else f"TensorRT {v.name}"


# ----------------------------------------------------------------------------- model


@rule("opset.range", "the default-domain opset is outside the range the parser supports",
      "ONNX_TRT docs/operators.md header of each version (recorded in trtcheck/ops.json)",
      f"export for this TensorRT: {TRT8} (opset 17) for TensorRT 8.x; "
      f"otherwise an opset inside the range ({OPSET_N})")  # fmt: skip
def _opset(view: GraphView, v: Version):
    lo, hi = v.opset_range
    if view.opset > hi:
        yield None, f"opset {view.opset} is newer than {_fmt(v)} parses (up to opset {hi})"
    elif lo is not None and view.opset < lo:
        yield None, f"opset {view.opset} is older than {_fmt(v)} parses (opset {lo} to {hi})"


@rule("functions.not-imported", "model-local functions are not imported before TensorRT 9.0",
      "ONNX_TRT docs/Changelog.md 9.0 EA: 'Added support for ONNX local functions'; before it "
      "ModelImporter.cpp sends an op without a built-in importer to FallbackPluginImporter (a plugin "
      "looked up by op type)",
      f"export the TensorRT 8 form: {TRT8} (functions inlined)",
      applies=lambda v: not v.imports_local_functions)  # fmt: skip
def _functions_not_imported(view: GraphView, v: Version):
    names = {f.name for f in view.model.functions}
    for node in view.nodes:
        if node.op_type in names and v.op(node.op_type) is None:
            yield node, (f"{node.op_type} is a model-local function; {_fmt(v)} does not import functions and looks "
                         f"for a plugin named {node.op_type}, which it does not have")  # fmt: skip


@rule("functions.same-name", "two model-local functions share a name",
      "ONNX_TRT ModelImporter.cpp importLocalFunctions (10.1-GA): functions are keyed by name alone "
      "(ctx->localFunctions().insert({name, function})), so the first one of a name is used for every call",
      f"give each body its own name, or export the decomposed op form ({DECOMPOSED})",
      applies=lambda v: v.imports_local_functions)  # fmt: skip
def _functions_same_name(view: GraphView, v: Version):
    seen: dict[str, tuple] = {}
    for f in view.source.functions:
        key = (f.domain, f.overload)
        if f.name in seen and seen[f.name] != key:
            yield None, (f"functions {f.name} ({seen[f.name][0]}, overload {seen[f.name][1] or '-'}) and "
                         f"{f.name} ({f.domain}, overload {f.overload or '-'}) share a name; {_fmt(v)} runs the "
                         f"first body for every {f.name} node")  # fmt: skip
        seen.setdefault(f.name, key)


@rule("functions.shadowed", "a model-local function has the name of a built-in op",
      "ONNX_TRT ModelImporter.cpp parseNode (10.1-GA): the built-in importer of an op type is chosen "
      "before a local function of the same name (the node's domain is not looked at)",
      "rename the function (it is not the op TensorRT will run)",
      applies=lambda v: v.imports_local_functions)  # fmt: skip
def _functions_shadowed(view: GraphView, v: Version):
    for f in view.source.functions:
        if f.domain not in DEFAULT_DOMAINS and (v.op(f.name) or {}).get("supported"):
            yield None, (f"function {f.domain}::{f.name} has the name of {_fmt(v)}'s built-in {f.name}; the "
                         f"built-in runs, not the body")  # fmt: skip


@rule("names.duplicate", "a tensor name is defined twice",
      "ONNX_TRT ImporterContext.cpp registerTensor (8.5-GA to 10.1-GA): 'ONNX graph has duplicate tensor name: "
      "NAME' where a name already holds a tensor or weights. ModelImporter.cpp registers, in this order, the graph "
      "inputs that are not initializers (importInputs), the initializers, then each node's named outputs "
      "(parseGraph); the graph's outputs are only reserved (a null tensor), so naming one is no duplicate",
      "give every graph input, initializer and node output a name of its own (ONNX's single assignment: "
      "onnx.checker refuses the file too)")  # fmt: skip
def _duplicate_names(view: GraphView, v: Version):
    graph = view.source.graph  # the top level: a function's body and a subgraph have scopes of their own
    initializers = {t.name for t in graph.initializer}
    seen: dict[str, str] = {}
    for name, what, node in ([(i.name, "a graph input", None) for i in graph.input if i.name not in initializers]
                             + [(t.name, "an initializer", None) for t in graph.initializer]
                             + [(o, f"an output of {n.op_type} {n.name}", n) for n in graph.node for o in n.output
                                if o]):  # fmt: skip
        if name in seen:
            yield node, (f"{name!r} names {seen[name]} and, again, {what}; {_fmt(v)} refuses the graph ('ONNX graph "
                         f"has duplicate tensor name')")  # fmt: skip
        seen.setdefault(name, what)


# ----------------------------------------------------------------------------- ops and types


@rule("op.unsupported", "an op the parser has no importer for",
      "ONNX_TRT docs/operators.md operator table of each version (trtcheck/ops.json); an op without an "
      "importer goes to FallbackPluginImporter (ModelImporter.cpp), which needs a registered plugin",
      "replace the op (re-export with another op form or target), or register a plugin of that name")  # fmt: skip
def _op_unsupported(view: GraphView, v: Version):
    functions = {f.name for f in view.model.functions} if view.inlined else set()
    for node in view.nodes:
        if node.op_type in functions:
            continue  # reported by the function rules
        entry = v.op(node.op_type)
        if entry is None and not _default(node) and node.op_type in {f.name for f in view.source.functions}:
            continue  # a function call on a version that does not import functions: functions.not-imported
        if entry is None:
            where = "" if _default(node) else f" (domain {node.domain})"
            yield node, (f"{_fmt(v)} has no importer for {node.op_type}{where} and would need a plugin named "
                         f"{node.op_type}")  # fmt: skip
        elif not entry["supported"]:
            why = f" (its importer is a plugin, and {_fmt(v)} has no plugin library)" if v.rtx and "plugin" in str(
                entry.get("edition", "")) else ""  # fmt: skip
            yield node, f"{node.op_type} is not supported by {_fmt(v)}{why}"


# For the type check: which input holds the data whose type the table lists. Everything
# else reads input 0, or output 0 where an op has no inputs.
_TYPED_INPUT = {"Where": 1, "Expand": 0, "Constant": None, "ConstantOfShape": None}
# Quantized types: operators.md's note ('INT8, INT4, FP8 and FP4 are treated as Quantized Types in
# TensorRT, where support is available only through quantization from a floating-point type') -
# an int8 tensor made by QuantizeLinear flows through Reshape/Transpose/Concat/MaxPool/... to its
# DequantizeLinear; the importers' own type checks are deny-lists (importerUtils.cpp notInvalidType,
# 10.1-GA) that name INT8 only for Hardmax. So the table's type column does not judge them.
_QUANTIZED = {"INT8", "INT4", "FP8", "FP4"}
_DENIES_QUANTIZED = {"Hardmax"}  # 10.1-GA onnxOpImporters.cpp Hardmax: notInvalidType(..., {..., "INT8", ...})
# Where the importer code (onnx-tensorrt 10.1-GA) and operators.md's type column disagree, from
# 10.0 on; each shown by TensorRT-RTX's parser too (tests/trtcheck/parser_graphs.py, type/* graphs).
_IMPORTER_TAKES = {  # types the importer takes that the column does not list
    "Equal": {"BOOL"},  # onnxOpImporters.cpp Equal: elementwiseHelper(kEQUAL), no type check
    "Clip": {"INT32", "INT64"},  # Clip: 'For INT32 and multi-input clips, use elementwise operators instead.'
    "Dropout": {"INT32", "INT64", "BOOL"},  # Dropout (inference): an identity of its input
}
_IMPORTER_REFUSES = {  # types the column lists that the importer refuses
    "Relu": {"INT32"},  # importerUtils.cpp activationHelper: notInvalidType(input, {"INT32", "BOOL", "UINT8"})
    "Gelu": {"INT32", "INT64"},  # the same, and an INT64 GELU is refused by the layer ('input has type Int64')
    "IsNaN": {"INT32", "INT64"},  # unaryHelper(kISNAN): validUnaryType, floating point only
    "ReduceL2": {"INT32", "INT64"},  # reduceTensor then unaryHelper(kSQRT): validUnaryType
    "ReduceLogSum": {"INT32", "INT64"},  # unaryHelper(kLOG): validUnaryType
    "ReduceLogSumExp": {"INT32", "INT64"},  # ReduceLogSumExp: notInvalidType(input, {"INT32", "INT64"})
    "Mean": {"INT32", "INT64"},  # Mean: a SUM divided by a FLOAT/HALF scale constant, mixed types
    "Celu": {"FP16", "BF16"},  # Celu: its 0, 1 and alpha constants are FLOAT weights (createNamedTempWeights),
    # so a strongly typed network mixes types ('The rank of operands should be the same adding inputs')
}
# Index inputs: the gather/scatter layers take INT32 or INT64 indices only (TensorRT IGatherLayer/
# IScatterLayer: 'indices input has type Int8 but must have type Int64 or Int32', the parser's message)
_INDEX_INPUT = {"Gather": 1, "GatherElements": 1, "GatherND": 1, "ScatterND": 1, "ScatterElements": 1,
                "Scatter": 1}  # fmt: skip


@rule("op.type", "an op gets a data type the parser does not take for it",
      "ONNX_TRT docs/operators.md 'Supported Types' column (trtcheck/ops.json), except where the importer "
      "code says otherwise (10.0+, onnx-tensorrt 10.1-GA): quantized types (INT8/INT4/FP8/FP4, operators.md's "
      "'Quantized Types' note; the importers' type checks are deny-lists, importerUtils.cpp notInvalidType); "
      "Equal of BOOL, Clip of INT32/INT64, Dropout of any type are taken; Relu/Gelu of INT32 (activationHelper), "
      "Gelu of INT64, IsNaN/ReduceL2/ReduceLogSum (validUnaryType), ReduceLogSumExp, Mean of INT32/INT64 and "
      "Celu of FP16 "
      "(FLOAT constants in a strongly typed network) are refused; index inputs of Gather*/Scatter* are "
      "INT32 or INT64 (the gather/scatter layers' type check); 8.x casts INT64 to INT32 and DOUBLE to FLOAT "
      "('limited support' note in the 8.5/8.6 tables)",
      "cast to a supported type before the op (or quantise/convert with aft-export, which only writes "
      "supported types)")  # fmt: skip
def _op_type(view: GraphView, v: Version):
    for node in view.nodes:
        entry = v.op(node.op_type) if _default(node) and node.op_type not in _QDQ else None
        if not entry or not entry["supported"]:
            continue
        index = _INDEX_INPUT.get(node.op_type)
        if index is not None and len(node.input) > index:
            t = view.type_name(node.input[index])
            if t is not None and t not in ("INT32", "INT64"):
                yield node, (f"{node.op_type} indices {node.input[index]} are {t}; {_fmt(v)} takes INT32 or INT64 "
                             f"indices")  # fmt: skip
        if not entry["types"]:
            continue
        idx = _TYPED_INPUT.get(node.op_type, 0)
        name = node.output[0] if idx is None or len(node.input) <= idx else node.input[idx]
        t = view.type_name(name)
        if t is None or (t in _QUANTIZED and node.op_type not in _DENIES_QUANTIZED):
            continue
        allowed = set(entry["types"])
        if v.v >= (10, 0):
            allowed = (allowed | _IMPORTER_TAKES.get(node.op_type, set())) - _IMPORTER_REFUSES.get(node.op_type, set())
        if v.v < (9, 0):  # casts down (table note); INT32 then has to be allowed
            t = {"INT64": "INT32", "DOUBLE": "FP32"}.get(t, t)
        else:
            t = {"DOUBLE": "FP32"}.get(t, t)
        if t not in allowed:
            yield node, (f"{node.op_type} input {name} is {t}; {_fmt(v)} takes {', '.join(entry['types'])} "
                         f"for {node.op_type}")  # fmt: skip


@rule("type.uint8-intermediate", "a node makes a UINT8 tensor that is not a graph output",
      "ONNX_TRT ModelImporter.cpp parseNode (8.6-GA, 10.1-GA; not in 8.5-GA): 'UINT8 is only allowed as network "
      "inputs and outputs' - 'TensorRT does not support UINT8 types for intermediate tensors!'; operators.md: "
      "'UINT8 is only supported as network input or output tensor types.'",
      "keep UINT8 to the graph's inputs and outputs (cast to a float type right after the input)",
      applies=lambda v: v.v >= (8, 6))  # fmt: skip
def _uint8(view: GraphView, v: Version):
    outputs = {o.name for o in view.model.graph.output}
    for node in view.nodes:
        if node.op_type == "Constant" or node.op_type in _QDQ:
            continue  # weights, and Q/DQ zero points (qdq.zero-point)
        for out in node.output:
            if out and out not in outputs and view.type_name(out) == "UINT8":
                yield node, f"{node.op_type} {node.name} makes {out} as UINT8; {_fmt(v)} has UINT8 only at graph I/O"


@rule("type.uint8-cast", "a Cast from UINT8 to a type other than FLOAT or FLOAT16",
      "TensorRT API reference, DataType.UINT8 (8.x, 10.x): 'uint8 conversions are only supported for {float32, "
      "float16}' - 'uint8 conversions are not supported for {int8, int32, bool}'; not in the rtx-1.7 column: "
      "TensorRT-RTX 1.7.1.116's parser and builder take a UINT8 input cast to INT32 "
      "(tests/trtcheck/test_rules_vs_parser.py)",
      "cast a UINT8 input to FLOAT (or FLOAT16) first, then to any other type",
      applies=lambda v: not v.rtx)  # fmt: skip
def _uint8_cast(view: GraphView, v: Version):
    for node in _ops(view, "Cast"):
        to = next((a.i for a in node.attribute if a.name == "to"), None)
        if node.input and view.type_name(node.input[0]) == "UINT8" and to not in (1, 10):  # FLOAT, FLOAT16
            yield node, (f"Cast {node.name} casts UINT8 {node.input[0]} to {_type_name(to)}; {_fmt(v)} casts UINT8 "
                         f"only to FLOAT or FLOAT16")  # fmt: skip


def _type_name(to) -> str:
    """A Cast's ``to`` as ONNX names the type (INT32), or what is wrong with it."""
    from onnx import TensorProto

    if to is None:
        return "no type (its 'to' attribute is missing)"
    try:
        return TensorProto.DataType.Name(to)
    except ValueError:
        return f"type {to}, which ONNX does not define"


# ----------------------------------------------------------------------------- literal attributes, constants


@rule("conv.kernel-shape", "a Conv with a computed weight has no literal kernel_shape",
      "ONNX_TRT convMultiInput (8.5-GA/8.6-GA onnx2trt_utils.cpp, 10.1-GA importerUtils.cpp), taken for any "
      "Conv whose weight or bias is not an initializer (a DequantizeLinear output included): the filter size "
      "comes from getKernelParams (the kernel_shape attribute) only, else 'The input tensor shape misaligns "
      "with the input kernel shape.'; "
      "docs/Changelog.md 10.4: 'Fixed kernel shape inference in multi-input convolutions'",
      "re-export with this aft-export (AFTConv bodies carry kernel_shape), or add kernel_shape to the Conv",
      applies=lambda v: v.conv_reads_kernel_shape_attribute)  # fmt: skip
def _conv_kernel_shape(view: GraphView, v: Version):
    for node in _ops(view, "Conv"):
        if len(node.input) > 1 and not view.is_weights(node.input[1]) and not view.has_attr(node, "kernel_shape"):
            yield node, (f"Conv {node.name} has a computed weight ({node.input[1]}) and no kernel_shape "
                         f"attribute; {_fmt(v)} takes the kernel size from that attribute only")  # fmt: skip


_REDUCE_ATTR_ONLY = ("ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                     "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")  # fmt: skip


@rule("reduce.axes-ignored", "a reduction's axes input is ignored: it reduces over every axis",
      "ONNX_TRT 8.6-GA builtin_op_importers.cpp ReduceMax/ReduceMean/ReduceMin/ReduceProd/... call "
      "onnx2trt_utils.cpp reduceTensor without the axes input (only ReduceSum reads it, opset 13+); "
      "10.0-GA onnxOpImporters.cpp passes inputs.at(1)",
      f"export the TensorRT 8 form: {TRT8} (opset 17: axes as an attribute)",
      applies=lambda v: not v.reduce_axes_input)  # fmt: skip
def _reduce_axes_ignored(view: GraphView, v: Version):
    for node in _ops(view, *_REDUCE_ATTR_ONLY):
        if len(node.input) > 1 and node.input[1] and not view.has_attr(node, "axes"):
            yield node, (f"{node.op_type} {node.name} gives its axes as an input (opset 18); {_fmt(v)} reads the "
                         f"axes attribute only, so it would reduce over every axis (a wrong result, no error)")


# (op, input index) -> (what the input is, the last version that needs it constant)
_REDUCES = ("ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceL1", "ReduceL2", "ReduceLogSum",
            "ReduceLogSumExp", "ReduceSumSquare")  # fmt: skip
_MUST_BE_CONSTANT = {
    **{(op, 1): ("axes", None) for op in _REDUCES},  # every version: 'Axis input must be an initializer!'
    ("Unsqueeze", 1): ("axes", (10, 6)), ("Squeeze", 1): ("axes", (10, 6)),  # Changelog 10.7: dynamic axes
    ("Slice", 3): ("axes", (10, 2)),  # Changelog 10.3: 'Added support for tensor `axes` inputs for `Slice`'
    ("Dropout", 2): ("training_mode", None),  # 'only supports the training_mode input as an initializer.'
    ("STFT", 1): ("frame_step", None), ("STFT", 2): ("window", None),  # 'windowWeights must be an initializer!'
}  # fmt: skip
# TensorRT-RTX 1.7 refuses computed Squeeze/Unsqueeze axes in its shape analysis ('squeeze axis is
# not a constant', makeAxesMask), as TensorRT did before 10.7: its column keeps the old rule.
_RTX_MUST_BE_CONSTANT = {("Unsqueeze", 1), ("Squeeze", 1)}


@rule("input.must-be-constant", "an input the parser needs at build time is computed",
      "ONNX_TRT reduceTensor 'Axis input must be an initializer!' (8.6-GA onnx2trt_utils.cpp, 10.1-GA "
      "importerUtils.cpp); Unsqueeze/Squeeze 'Axes input for unsqueeze operation should be a constant tensor.' "
      "until Changelog 10.7 ('dynamic axes support'), and always in TensorRT-RTX 1.7 ('squeeze axis is not a "
      "constant'); Slice 'This version of TensorRT does not support dynamic axes.' until Changelog 10.3; "
      "Dropout 'only supports the training_mode input as an initializer.' (10.1-GA onnxOpImporters.cpp); STFT "
      "'windowWeights must be an initializer!'; docs/operators.md restrictions",
      "give the input as a constant (an initializer or a Constant node), or export for a newer TensorRT")  # fmt: skip
def _must_be_constant(view: GraphView, v: Version):
    for node in view.nodes:
        if not _default(node):
            continue
        for i, name in enumerate(node.input):
            what, until = _MUST_BE_CONSTANT.get((node.op_type, i), (None, None))
            if v.rtx and (node.op_type, i) in _RTX_MUST_BE_CONSTANT:
                until = None
            if what and name and (until is None or v.v <= until) and not view.is_weights(name):
                yield node, (f"{node.op_type} {node.name}: its {what} ({name}) is computed; {_fmt(v)} needs it "
                             f"as an initializer or Constant")  # fmt: skip


@rule("constant.int-attribute", "a Constant given by value_int/value_ints is read as 0 / empty",
      "ONNX_TRT 8.5-GA/8.6-GA builtin_op_importers.cpp Constant: value_int is read with attrs.get<float> and "
      "value_ints with attrs.get<std::vector<float>> (OnnxAttrs.cpp returns f()/floats(): 0 and empty); "
      "fixed in 9.2 (attrs.get<int64_t>)",
      f"export the TensorRT 8 form: {TRT8} (integer Constants as tensors)",
      applies=lambda v: v.v < (9, 2))  # fmt: skip
def _constant_int(view: GraphView, v: Version):
    for node in _ops(view, "Constant"):
        kind = next((a.name for a in node.attribute if a.name in ("value_int", "value_ints")), None)
        if kind:
            yield node, (f"Constant {node.name} uses {kind}; {_fmt(v)} reads it as "
                         f"{'0' if kind == 'value_int' else 'an empty tensor'} (a wrong shape, axes or "
                         f"sizes downstream, no error of its own)")  # fmt: skip


@rule("shape.start-end", "Shape's start/end attributes are ignored: it returns the whole shape",
      "ONNX_TRT 8.5-GA/8.6-GA builtin_op_importers.cpp Shape is addShape(input) only (the opset-15 start/end "
      "are never read); 10.0 EA onnxOpImporters.cpp Shape slices by start/end",
      f"export the TensorRT 8 form: {TRT8} (Shape followed by Slice)",
      applies=lambda v: v.v < (10, 0))  # fmt: skip
def _shape_start_end(view: GraphView, v: Version):
    for node in _ops(view, "Shape"):
        given = [a.name for a in node.attribute if a.name in ("start", "end")]
        if given:
            yield node, (f"Shape {node.name} has {'/'.join(given)}; {_fmt(v)} ignores them and returns the full "
                         f"shape (a wrong result, no error of its own)")  # fmt: skip


@rule("outputs.count", "a node lists more outputs than the importer makes",
      "ONNX_TRT ModelImporter.cpp parseGraph/parseNode: 'Node has more output tensors than TRT expected.' "
      "(8.6-GA, 10.1-GA count empty output names too; from 10.7 only named outputs count; the parser of "
      "TensorRT-RTX 1.7: 'doesn't support mode than 1 outputs for MaxPool nodes!'); operators.md: "
      "LayerNormalization 'Only the first output \"Y\" is supported.', MaxPool '\"Indices\" output tensor unsupported'",
      "keep only the first output (re-export; aft-export writes LayerNormalization with Y alone)")  # fmt: skip
def _outputs(view: GraphView, v: Version):
    single = ("LayerNormalization", "Dropout", "MaxPool")
    for node in view.nodes:
        if node.op_type in single and _default(node) and len(node.output) > 1:
            named = [o for o in node.output[1:] if o]
            if named or v.v < (10, 7):
                yield node, (f"{node.op_type} {node.name} lists {len(node.output)} outputs; {_fmt(v)} makes only the "
                             f"first"
                             + ("" if named else " and counts the empty output names"))  # fmt: skip


# ----------------------------------------------------------------------------- Q/DQ

_QDQ = ("QuantizeLinear", "DequantizeLinear")


def _qdq_nodes(view: GraphView):
    """Every QuantizeLinear/DequantizeLinear of the default domain with a scale input."""
    return [n for n in view.nodes if n.op_type in _QDQ and _default(n) and len(n.input) > 1]


def _dq_inputs(v: Version) -> set[str]:
    if v.v < (10, 0):
        return {"INT8"}
    return {"INT8", "FP8"} if v.v < (10, 13) else {"INT8", "FP8", "INT4", "FP4"}


@rule("qdq.dequantize-input", "DequantizeLinear gets an input type TensorRT cannot dequantize",
      "TensorRT IDequantizeLayer docstrings (bindings 8.6.1: 'only supports tensorrt.int8'; 10.3.0: int8 or "
      "fp8; 10.13.3.9 and 11.4.0.106: int8, fp8, int4, fp4); ONNX_TRT docs/operators.md DequantizeLinear; "
      "onnx-tensorrt issue 850 (INT32 bias); the output of a QuantizeLinear is not judged by its ONNX type from "
      "10.0 on: QuantDequantLinearHelper (10.1-GA) makes it INT8 where the zero point is UINT8 or absent ('ONNX "
      "default is UINT8, TRT will default to INT8')",
      "re-quantise with aft-export quantize (biases stay float; activations and weights int8)")  # fmt: skip
def _dq_input(view: GraphView, v: Version):
    allowed = _dq_inputs(v)
    for node in view.nodes:
        if node.op_type == "DequantizeLinear" and _default(node):
            made_by = view.producer.get(node.input[0])
            if made_by is not None and made_by.op_type == "QuantizeLinear" and v.v >= (10, 0):
                continue  # the Q's type is TensorRT's choice: INT8 for a UINT8 or absent zero point (qdq.zero-point)
            t = view.type_name(node.input[0])
            if t is not None and t not in allowed:
                yield node, (f"it dequantizes {t} ({node.input[0]}); TensorRT dequantizes 8-bit (by version also "
                             f"fp8, int4, fp4) inputs only")  # fmt: skip


@rule("qdq.scalar-weights", "DequantizeLinear of a 0-d (scalar) quantised constant",
      "TensorRT-RTX 1.7.1.116's builder (ahead of time): 'Quantized constant (c) is only allowed before DQ or "
      "PLUGIN_V2 or kPLUGIN_V3 node' (qdqGraphOptimizer.cpp matchQuantizedConstantPluginOrDQ) for an int8 scalar "
      "initializer feeding a DequantizeLinear, while a 1-element one of rank 1 builds (tests/trtcheck/"
      "test_rules_vs_parser.py builds both); ONNX Runtime's quantize_static writes such constants when it "
      "quantises Add/Mul with a scalar operand. Not checked with standard TensorRT's builder (no GPU here)",
      "keep scalar constants in float (ONNX Runtime: op_types_to_quantize=['MatMul', 'Conv', 'Gemm'], as "
      "aft-export quantize does), or give the constant shape [1]",
      applies=lambda v: v.rtx)  # fmt: skip
def _dq_scalar_weights(view: GraphView, v: Version):
    for node in view.nodes:
        if node.op_type == "DequantizeLinear" and _default(node) and view.is_weights(node.input[0]):
            if view.rank(node.input[0]) == 0 and view.type_name(node.input[0]) in _QUANTIZED:
                yield node, (f"DequantizeLinear {node.name} dequantizes the scalar constant {node.input[0]}; "
                             f"{_fmt(v)}'s builder takes quantised constants of rank 1 or more only")  # fmt: skip


@rule("qdq.zero-point", "a Q/DQ zero point is missing, not constant, not int8 or not zero",
      "ONNX_TRT QuantDequantLinearHelper: 8.5-GA 'This version of TensorRT requires 3 inputs for the "
      "DequantizeLinear operator.'; 8.6-GA reads inputs.at(2) unconditionally; all versions 'TensorRT only "
      "supports symmetric quantization. The zero point ... must be all zeros.'; UINT8 zero points: "
      "'Found invalid input type of UINT8' (8.x); from 10.0 a QuantizeLinear with a UINT8 zero point is taken "
      "with a warning and quantised to INT8 instead (10.1-GA QuantDequantLinearHelper: 'TensorRT will use INT8 "
      "instead.'), so what the ONNX graph maps to 128..255 saturates at 127: a wrong result, no error; "
      "docs/operators.md 'x_zero_point must be zero'",
      "re-quantise with aft-export quantize (symmetric int8, zero point 0)")  # fmt: skip
def _zero_point(view: GraphView, v: Version):
    for node in view.nodes:
        if node.op_type not in _QDQ or not _default(node):
            continue
        zp = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if zp is None:
            if v.v < (10, 0):
                yield node, f"{node.op_type} {node.name} has no zero point; {_fmt(v)} requires one (int8, all zeros)"
            continue
        t = view.type_name(zp)
        if not view.is_weights(zp):
            yield node, f"{node.op_type} {node.name}: zero point {zp} is computed; it must be a constant of zeros"
        elif view.value(zp) is not None and np.any(view.value(zp)):
            yield node, f"{node.op_type} {node.name}: zero point {zp} is not all zeros; TensorRT is symmetric only"
        if t == "UINT8" and (v.v < (10, 0) or node.op_type == "QuantizeLinear"):
            yield node, (f"{node.op_type} {node.name}: zero point {zp} is UINT8; {_fmt(v)} "
                         + ("takes int8 only" if v.v < (10, 0) else "quantises to int8 instead (values above 127 "
                            "saturate: a wrong result, no error)"))  # fmt: skip


@rule("qdq.scale", "a Q/DQ scale is not a positive build-time constant",
      "ONNX_TRT QuantDequantLinearHelper: 'Cannot have scale with no coefficients.', 'Scale coefficients must "
      "all be positive', 10.1-GA 'Dynamic shape for scale tensor is not supported.'; IQuantizeLayer/"
      "IDequantizeLayer docstrings: the scale is a build-time constant, a scalar or 1-D",
      "re-quantise with aft-export quantize (constant per-tensor or per-channel scales)")  # fmt: skip
def _scale(view: GraphView, v: Version):
    for node in _qdq_nodes(view):
        scale = node.input[1]
        if not view.is_weights(scale):
            yield node, f"{node.op_type} {node.name}: scale {scale} is computed; TensorRT needs a constant scale"
            continue
        value = view.value(scale)
        if value is not None and (value.size == 0 or np.any(value <= 0) or value.ndim > 1):
            yield node, (f"{node.op_type} {node.name}: scale {scale} must be a non-empty scalar or 1-D tensor of "
                         f"positive values")  # fmt: skip


@rule("qdq.axis", "a per-channel Q/DQ has no explicit axis, or the scales do not match that axis",
      "ONNX_TRT QuantDequantLinearHelper: without an 'axis' attribute 8.5-GA/8.6-GA/10.1-GA take axis 0, the "
      "code of 10.14+ takes the ONNX default 1; 'The number of scales is not equal to the number of output "
      "channels.'",
      "re-quantise with aft-export quantize (it writes the axis of every per-channel scale)")  # fmt: skip
def _axis(view: GraphView, v: Version):
    for node in _qdq_nodes(view):
        value = view.value(node.input[1])
        dims = view.shapes.get(node.input[0])
        if value is None or value.size <= 1:
            continue
        if not view.has_attr(node, "axis"):
            yield node, (f"{node.op_type} {node.name} is per-channel ({value.size} scales) without an axis attribute; "
                         f"TensorRT versions disagree on the default (0 before 10.14, 1 after)")  # fmt: skip
        elif dims is not None:
            axis = view.attr(node, "axis")
            axis = axis + len(dims) if axis < 0 else axis
            if 0 <= axis < len(dims) and isinstance(dims[axis], int) and dims[axis] != value.size:
                yield node, (f"{node.op_type} {node.name}: {value.size} scales for axis {axis} of size {dims[axis]}; "
                             f"'The number of scales is not equal to the number of output channels.'")  # fmt: skip


@rule("qdq.float-type", "TensorRT 8 quantises fp32 only",
      "TensorRT 8.6.1 IQuantizeLayer/IDequantizeLayer docstrings: input (Q) and output (DQ) fp32 only, 'FP16 "
      "input is not supported'",
      "quantise the fp32 export (aft-export quantize takes the fp32 file), not an fp16 one",
      applies=lambda v: v.v < (9, 0))  # fmt: skip
def _qdq_float(view: GraphView, v: Version):
    for node in _qdq_nodes(view):
        name = node.input[0] if node.op_type == "QuantizeLinear" else node.input[1]
        t = view.type_name(name)
        if t not in (None, "FP32"):
            yield node, f"{node.op_type} {node.name}: {t} ({name}); {_fmt(v)} quantises from and to fp32 only"


# ----------------------------------------------------------------------------- strongly typed networks

# ops whose listed inputs must share one type (the ONNX schema ties them; TensorRT's
# strongly typed builder and the parser's elementwiseHelper insert no Cast between them)
_SAME_TYPE = {op: None for op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Less",
                                  "Greater", "LessOrEqual", "GreaterOrEqual", "PRelu", "MatMul", "Concat")}  # fmt: skip
_SAME_TYPE.update({"Gemm": (0, 1, 2), "Conv": (0, 1, 2), "LayerNormalization": (0, 1, 2), "Where": (1, 2)})


@rule("typed.mixed-inputs", "an op mixes input types in a strongly typed network",
      "TensorRT 11.0 release notes ('Weak typing is no longer supported ... adheres to [the types] strictly'); "
      "ElementWise operator doc (both inputs T1); ONNX_TRT elementwiseHelper inserts no Cast",
      f"insert an explicit Cast so both inputs have one type ({FP16} does)",
      applies=lambda v: v.strongly_typed)  # fmt: skip
def _mixed(view: GraphView, v: Version):
    for node in view.nodes:
        if node.op_type not in _SAME_TYPE or not _default(node):
            continue
        idx = _SAME_TYPE[node.op_type] or range(len(node.input))
        types = {view.type_name(node.input[i]) for i in idx if i < len(node.input) and node.input[i]}
        types.discard(None)
        if len(types) > 1:
            yield node, (f"{node.op_type} {node.name} mixes {' and '.join(sorted(types))}; a strongly typed network "
                         f"({_fmt(v)}) needs one type, with explicit Casts")  # fmt: skip


# ----------------------------------------------------------------------------- shapes


@rule("shape.rank", f"a tensor has more than {MAX_DIMS} dimensions",
      "TensorRT nvinfer1::Dims::MAX_DIMS = 8 (NvInferRuntimeBase.h), the same in every supported version",
      "reshape to at most 8 dimensions")  # fmt: skip
def _rank(view: GraphView, v: Version):
    for node in view.nodes:
        for out in node.output:
            r = view.rank(out)
            if r is not None and r > MAX_DIMS:
                yield node, f"{out} has {r} dimensions; TensorRT tensors have at most {MAX_DIMS}"


# ----------------------------------------------------------------------------- attribute values, ranks

_POOLS = ("AveragePool", "MaxPool", "LpPool")
_RESIZE_MODES = ("half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric", "align_corners")
_RNN_ACTIVATIONS = {"RNN": 1, "GRU": 2, "LSTM": 3}  # activations per direction


def _attribute_checks(view: GraphView, node):
    """(what is wrong) for each attribute value the importer refuses; the importer sources are in
    the rule's source."""
    op = node.op_type

    def attr(name, default=None):
        return view.attr(node, name, default)

    if op in _POOLS and any(d != 1 for d in attr("dilations", []) or []):
        yield f"dilations {list(attr('dilations'))}: only 1 is supported"
    if op == "Resize":
        if attr("antialias", 0):
            yield "antialias=1: antialiasing is not supported"
        mode = _text(attr("coordinate_transformation_mode", b"half_pixel"))
        if mode not in _RESIZE_MODES:
            yield f"coordinate_transformation_mode {mode}: supported are {', '.join(_RESIZE_MODES)}"
        policy = _text(attr("keep_aspect_ratio_policy", b"stretch"))
        if policy != "stretch":
            yield f"keep_aspect_ratio_policy {policy}: only stretch is supported"
    if op == "ScatterND" and _text(attr("reduction", b"none")) != "none":
        yield f"reduction {_text(attr('reduction'))}: only none is supported"
    if op == "LSTM" and attr("input_forget", 0):
        yield "input_forget=1: coupled input/forget gates are not supported"
    if op == "Mod" and not attr("fmod", 0) and view.type_name(node.input[0]) not in (None, "INT32", "INT64"):
        yield "fmod=0 on a floating-point input: fmod=0 is for INT32/INT64 inputs only"
    if op == "Constant" and any(a.name in ("sparse_value", "value_string", "value_strings") for a in node.attribute):
        yield "sparse_value/value_string(s) is not supported"
    if op in _RNN_ACTIVATIONS and _text(attr("direction", b"forward")) == "bidirectional":
        k = _RNN_ACTIVATIONS[op]
        for name in ("activations", "activation_alpha", "activation_beta"):
            values = list(attr(name, []) or [])
            if len(values) >= 2 * k and values[:k] != values[k:2 * k]:
                yield f"bidirectional with other {name} for the reverse pass than the forward one"
    if op == "STFT" and view.rank(node.input[0]) == 3 and view.shapes[node.input[0]][2] not in (1, None):
        yield f"signal {node.input[0]} is complex (last dimension {view.shapes[node.input[0]][2]}): real-valued only"
    if op == "Resize" and len(node.input) > 2 and node.input[2] in view.graph_inputs:
        yield (f"scales {node.input[2]} is a graph input: a network input that is a shape tensor must be INT32 or "
               f"INT64 (give sizes, or constant scales)")
    if op == "Dropout" and len(node.input) > 2 and node.input[2] and view.is_weights(node.input[2]):
        value = view.value(node.input[2])
        if value is not None and bool(np.asarray(value).any()):
            yield "training_mode is True: Dropout in training mode is not supported"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@rule("op.attribute", "an attribute value or input form the importer refuses",
      "ONNX_TRT 10.1-GA onnxOpCheckers.cpp: pooling 'This version of TensorRT does not support dilations other "
      "than 1.', Resize 'Antialiasing is not supported currently.', the transformation modes it lists (not "
      "half_pixel_symmetric or tf_crop_and_resize), 'Only \"stretch\" is supported currently as "
      "\"keep_aspect_ratio_policy\".', LSTM 'Coupled input/forget is unsupported in the LSTM converter', Constant "
      "'does not support the sparse_value, value_string and value_strings attributes.'; onnxOpImporters.cpp: "
      "ScatterND 'Attribute reduction is not supported.' (newer: 'ScatterND with reduction is not supported.'), "
      "Dropout 'TensorRT does not support the Dropout operator in training mode.', Mod 'The fmod attribute is "
      "set to 0. Inputs cannot be of floating point types.'; onnxOpCheckers.cpp RNN/GRU/LSTM 'The parser does "
      "not currently support cases where activations for the reverse pass of the GRU do not match the forward "
      "pass.'; STFT 'TensorRT only supports STFT on real-valued signals!' (TensorRT-RTX 1.7's parser); Resize "
      "scales as a graph input: 'Network input s is a shape tensor and must have type Int32 or Int64' (the "
      "network's check, TensorRT-RTX 1.7); docs/operators.md restrictions of these ops. (Not "
      "refused, though operators.md says so: Resize mode cubic, LSTM layout=1, TopK sorted=0 - the importer "
      "takes them.)",
      "change the attribute to a supported value (or the op: e.g. MaxPool without dilation)")  # fmt: skip
def _attribute(view: GraphView, v: Version):
    for node in view.nodes:
        if _default(node):
            for what in _attribute_checks(view, node):
                yield node, f"{node.op_type} {node.name}: {what} ({_fmt(v)})"


@rule("op.spatial-dims", "a convolution or pooling has other than 1 to 3 spatial dimensions",
      "ONNX_TRT importerUtils.cpp (10.1-GA): 'The attribute kernel_shape misaligns with the shape of the input "
      "tensor.' (nbSpatialDims 1, expanded to 2, or 2 or 3); INetworkDefinition::addConvolutionNd / "
      "addPoolingNd: 'kernelSize.nbDims == 2 || kernelSize.nbDims == 3'; operators.md AveragePool/MaxPool '2D "
      "or 3D Pooling only'",
      "reshape to at most 3 spatial dimensions")  # fmt: skip
def _spatial(view: GraphView, v: Version):
    for node in _ops(view, "Conv", "ConvTranspose", *_POOLS):
        r = view.rank(node.input[0])
        if r is not None and not 1 <= r - 2 <= 3:
            yield node, f"{node.op_type} {node.name}: {r - 2} spatial dimensions; {_fmt(v)} takes 1 to 3"


def _branch_rank(view: GraphView, graph, name: str) -> int | None:
    """The rank of a branch's output ``name``: its declared shape, else, for an Identity of a value
    from the enclosing graph (how an exporter passes one through), that value's."""
    out = next((o for o in graph.output if o.name == name), None)
    if out is not None and out.type.tensor_type.HasField("shape"):
        return len(out.type.tensor_type.shape.dim)
    inner = next((n for n in graph.node if name in n.output), None)
    if inner is not None and inner.op_type == "Identity" and inner.input:
        return view.rank(inner.input[0])
    return None


@rule("if.branch-ranks", "an If whose branches give outputs of different ranks, on a condition known only at run "
      "time",
      "ONNX_TRT docs/operators.md If restriction (10.x: 'Output tensors of the two conditional branches must have "
      "the same rank'; 8.x: 'must have broadcastable shapes', and TensorRT broadcasts only between equal ranks); "
      "TensorRT-RTX 1.7.1.116's builder: 'IConditionalOutputLayer ...: Must have inputs with equal ranks when "
      "condition is not a build-time constant' (the parser takes the graph; tests/trtcheck/"
      "test_rules_vs_parser.py builds it)",
      "give both branches outputs of one rank (reshape in the branch), or make the condition a constant")  # fmt: skip
def _if_branch_ranks(view: GraphView, v: Version):
    for node in _ops(view, "If"):
        if node.input and view.is_weights(node.input[0]):
            continue  # a build-time condition: the builder keeps one branch
        then, other = view.attr(node, "then_branch"), view.attr(node, "else_branch")
        if then is None or other is None:
            continue
        for i, (a, b) in enumerate(zip(then.output, other.output)):
            ra, rb = _branch_rank(view, then, a.name), _branch_rank(view, other, b.name)
            if ra is not None and rb is not None and ra != rb:
                yield node, (f"If {node.name}: output {i} is rank {ra} in then_branch and rank {rb} in else_branch; "
                             f"{_fmt(v)} needs one rank when the condition is not a build-time constant")  # fmt: skip


@rule("shape.static-input", "an op that needs static input dimensions gets dynamic ones",
      "ONNX_TRT onnxOpImporters.cpp EyeLike (10.1-GA): 'Eyelike does not work for dynamically shaped tensors.'; "
      "operators.md EyeLike '\"input\" must have static dimensions'",
      "give the input static dimensions")  # fmt: skip
def _static_input(view: GraphView, v: Version):
    for node in _ops(view, "EyeLike"):
        dims = view.shapes.get(node.input[0])
        if dims is not None and not all(isinstance(d, int) for d in dims):
            yield node, f"EyeLike {node.name}: {node.input[0]} has dynamic dimensions {dims}"


def checks_for(v: Version) -> list[Rule]:
    return [r for r in RULES.values() if r.applies(v)]
