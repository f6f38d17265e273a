"""Small graphs for the rules-vs-parser comparison (issue 19, item 4), and the comparison itself.

For every rule of ``aft-export check --rules`` a graph that breaks it and a near miss that
does not; then graphs of the operators and restrictions of the op table (``trtcheck/ops.json``):
attribute values, input types, sizes the importer caps. Each graph is built in memory with
onnx.helper, parsed from bytes by TensorRT-RTX's own ONNX parser (parse only, no build) and
checked offline against the ``rtx-1.7`` column; :func:`compare` says where the two disagree.

The table (graphs, agreements, each difference with its reason)::

    python -m tests.trtcheck.parser_graphs            # text
    python -m tests.trtcheck.parser_graphs --build    # and the builder's table
    python -m tests.trtcheck.parser_graphs --json     # one row per graph

The only checked-in expectation is ``tests/data/rtx_differences.json``: the documented
differences (graph, rule, what each side says, reason, source). tests/trtcheck/
test_rules_vs_parser.py fails on a disagreement that is not listed there and on a listed one
that no longer happens.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

COLUMN = "rtx-1.7"
BASE = "10.13"  # the standard version whose rules the column starts from
DIFFERENCES = Path(__file__).resolve().parents[1] / "data" / "rtx_differences.json"

F, F16, I8, U8, I32, I64, B, D = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.UINT8,
                                  TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL, TensorProto.DOUBLE)  # fmt: skip


@dataclass(frozen=True)
class Case:
    id: str  # "<rule>/break", "<rule>/near", or "op/<what>"; one graph of one kind per id
    rule: str | None  # the rule it is about (None: a wider op-table graph)
    what: str
    make: Callable
    shapes: dict | None = None  # the builder's shape for a dynamic input (default: 1 for each dynamic size)


def model(nodes, inputs, outputs, inits=(), opset=18, functions=(), extra_opsets=()):
    """An onnx.ModelProto; ``inputs``/``outputs``: (name, elem type, shape) tuples."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(inits))  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets],
                          functions=list(functions))  # fmt: skip
    m.ir_version = 10
    return m


def init(name, array, dtype=None):
    return numpy_helper.from_array(np.asarray(array, dtype=dtype), name)


def node(op, ins, outs, name=None, **attrs):
    return helper.make_node(op, list(ins), list(outs), name=name or f"{op.lower()}_0", **attrs)


def unary(op, elem=F, shape=(1, 4), opset=18, **attrs):
    return model([node(op, ["x"], ["y"], **attrs)], [("x", elem, list(shape))], [("y", elem, None)], opset=opset)


def qdq(zero=0, scale=0.1, dq_input=None, axis=None, shape=(1, 4), scales=None):
    """x (fp32) -> QuantizeLinear -> DequantizeLinear -> y; or, with ``dq_input`` (an elem
    type), a DequantizeLinear of a constant of that type."""
    s = init("s", scales if scales is not None else scale, np.float32)
    zp_dtype = np.int8
    kw = {} if axis is None else {"axis": axis}
    if dq_input is not None:
        dt = {I8: np.int8, I32: np.int32, U8: np.uint8}[dq_input]
        w = init("w", np.ones(shape, dtype=dt))
        zp = init("zp", np.zeros(np.shape(numpy_helper.to_array(s)), dtype=dt))
        return model([node("DequantizeLinear", ["w", "s", "zp"], ["d"], **kw), node("Add", ["x", "d"], ["y"])],
                     [("x", F, list(shape))], [("y", F, None)], [w, s, zp])  # fmt: skip
    zp = init("zp", np.full(np.shape(numpy_helper.to_array(s)), zero, dtype=zp_dtype))
    return model([node("QuantizeLinear", ["x", "s", "zp"], ["q"], **kw),
                  node("DequantizeLinear", ["q", "s", "zp"], ["y"], **kw)],
                 [("x", F, list(shape))], [("y", F, None)], [s, zp])  # fmt: skip


def functions_model(bodies, calls, domain_of_call=None):
    """Model-local functions ``bodies`` [(domain, name, op)] (y = op(x)), called in order."""
    fns = [helper.make_function(d, n, ["x"], ["y"], [helper.make_node(op, ["x"], ["y"], name=f"{n}_body")],
                                [helper.make_opsetid("", 18)]) for d, n, op in bodies]  # fmt: skip
    nodes, prev = [], "x"
    for i, (d, n) in enumerate(calls):
        out = "y" if i == len(calls) - 1 else f"t{i}"
        nodes.append(helper.make_node(n, [prev], [out], name=f"call{i}", domain=d))
        prev = out
    domains = sorted({d for d, _, _ in bodies} | {d for d, _ in calls})
    return model(nodes, [("x", F, [1, 4])], [("y", F, None)], functions=fns,
                 extra_opsets=[helper.make_opsetid(d, 1) for d in domains if d])  # fmt: skip


def reduce_axes(constant: bool, op="ReduceSum"):
    if constant:
        return model([node(op, ["x", "a"], ["y"])], [("x", F, [2, 4])], [("y", F, None)], [init("a", [1], np.int64)])
    return model([node(op, ["x", "a"], ["y"])], [("x", F, [2, 4]), ("a", I64, [1])], [("y", F, None)])


def conv(channel, computed_weight=False, kernel_shape=True, opset=18):
    w = init("w", np.ones((2, 3, 3, 3), np.float32))
    if not computed_weight:
        return model([node("Conv", ["x", "w"], ["y"])], [("x", F, [1, channel, 8, 8])], [("y", F, None)], [w])
    s = init("s", np.float32(0.1))
    q = init("wq", np.ones((2, 3, 3, 3), np.int8))
    kw = {"kernel_shape": [3, 3]} if kernel_shape else {}
    return model([node("DequantizeLinear", ["wq", "s"], ["wd"]), node("Conv", ["x", "wd"], ["y"], **kw)],
                 [("x", F, [1, channel, 8, 8])], [("y", F, None)], [q, s], opset=opset)  # fmt: skip


def reshape_rank(rank):
    shape = [1] * (rank - 1) + [4]
    return model([node("Reshape", ["x", "shp"], ["y"])], [("x", F, [1, 4])], [("y", F, None)],
                 [init("shp", shape, np.int64)])  # fmt: skip


def layernorm(outputs):
    outs = ["y", "mean", "inv"][:outputs]
    return model([node("LayerNormalization", ["x", "g", "b"], outs, axis=-1)], [("x", F, [2, 4])],
                 [(o, F, None) for o in outs], [init("g", np.ones(4, np.float32)), init("b", np.zeros(4, np.float32))])


def mixed_add(mixed: bool):
    return model([node("Add", ["a", "b"], ["y"])], [("a", F, [1, 4]), ("b", F16 if mixed else F, [1, 4])],
                 [("y", F, None)])  # fmt: skip


def q_scale_type(same: bool):
    s = init("s", np.float16(0.1) if same else np.float32(0.1))
    zp = init("zp", np.int8(0))
    return model([node("QuantizeLinear", ["x", "s", "zp"], ["q"]), node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
                 [("x", F16, [1, 4])], [("y", F16, None)], [s, zp], opset=19)  # fmt: skip


def constant_int(int_attr: bool):
    c = (node("Constant", [], ["shp"], value_ints=[4, 1]) if int_attr else
         node("Constant", [], ["shp"], value=numpy_helper.from_array(np.array([4, 1], np.int64))))  # fmt: skip
    return model([c, node("Reshape", ["x", "shp"], ["y"])], [("x", F, [1, 4])], [("y", F, None)])


def shape_slice(start_end: bool):
    attrs = {"start": 1} if start_end else {}
    return model([node("Shape", ["x"], ["y"], **attrs)], [("x", F, [1, 4])], [("y", I64, None)])


# ----------------------------------------------------------------------------- wider graphs: the op table


def pool(op, dims=2, opset=19, outputs=1, **attrs):
    shape = [1, 1] + [8] * dims
    attrs.setdefault("kernel_shape", [2] * dims)
    outs = ["y", "i"][:outputs]
    return model([node(op, ["x"], outs, **attrs)], [("x", F, shape)],
                 [("y", F, None)] + ([("i", I64, None)] if outputs > 1 else []), opset=opset)  # fmt: skip


def topk(k, sorted_=1, n=16):
    return model([node("TopK", ["x", "k"], ["v", "i"], sorted=sorted_)], [("x", F, [1, n])],
                 [("v", F, None), ("i", I64, None)], [init("k", [k], np.int64)])  # fmt: skip


def resize(opset=19, **attrs):
    return model([node("Resize", ["x", "", "scales"], ["y"], **attrs)], [("x", F, [1, 1, 4, 4])], [("y", F, None)],
                 [init("scales", [1, 1, 2, 2], np.float32)], opset=opset)  # fmt: skip


def scatter_nd(reduction="none"):
    return model([node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)], [("x", F, [4])], [("y", F, None)],
                 [init("i", [[1]], np.int64), init("u", [2.0], np.float32)])  # fmt: skip


def lstm(**attrs):
    h, i = 3, 2
    return model([node("LSTM", ["x", "w", "r"], ["y"], hidden_size=h, **attrs)], [("x", F, [2, 1, i])],
                 [("y", F, None)], [init("w", np.ones((1, 4 * h, i), np.float32)),
                                    init("r", np.ones((1, 4 * h, h), np.float32))])  # fmt: skip


def dropout(training):
    if training == "input":
        return model([node("Dropout", ["x", "", "t"], ["y"])], [("x", F, [1, 4]), ("t", B, [])], [("y", F, None)])
    return model([node("Dropout", ["x", "", "t"], ["y"])], [("x", F, [1, 4])], [("y", F, None)],
                 [init("t", np.bool_(training))])  # fmt: skip


def cumsum(constant: bool):
    if constant:
        return model([node("CumSum", ["x", "a"], ["y"])], [("x", F, [2, 4])], [("y", F, None)], [init("a", np.int64(1))])
    return model([node("CumSum", ["x", "a"], ["y"])], [("x", F, [2, 4]), ("a", I64, [])], [("y", F, None)])


def onehot(constant: bool):
    ins = [("i", I64, [3])] + ([] if constant else [("d", I64, [])])
    inits = [init("v", [0.0, 1.0], np.float32)] + ([init("d", np.int64(5))] if constant else [])
    return model([node("OneHot", ["i", "d", "v"], ["y"])], ins, [("y", F, None)], inits)


def eyelike(static: bool):
    return model([node("EyeLike", ["x"], ["y"])], [("x", F, [3, 3] if static else ["n", "n"])], [("y", F, None)])


def gridsample(rank):
    sp = [4] * (rank - 2)
    return model([node("GridSample", ["x", "g"], ["y"])], [("x", F, [1, 1] + sp), ("g", F, [1] + sp + [rank - 2])],
                 [("y", F, None)], opset=20)  # fmt: skip


def constant_attr(kind):
    if kind == "sparse":
        values = numpy_helper.from_array(np.array([1.0], np.float32), "v")
        indices = numpy_helper.from_array(np.array([1], np.int64), "i")
        c = node("Constant", [], ["c"], sparse_value=helper.make_sparse_tensor(values, indices, [4]))
    else:
        c = node("Constant", [], ["c"], value_float=2.0)
    return model([c, node("Add", ["x", "c"], ["y"])], [("x", F, [4])], [("y", F, None)])


def computed_axes(op, constant: bool, opset=18):
    ins = [("x", F, [1, 4, 1])] + ([] if constant else [("a", I64, [1])])
    inits = [init("a", [2], np.int64)] if constant else []
    if op == "Slice":
        inits += [init("st", [0], np.int64), init("en", [1], np.int64)]
        return model([node("Slice", ["x", "st", "en", "a"], ["y"])], ins, [("y", F, None)], inits, opset=opset)
    return model([node(op, ["x", "a"], ["y"])], ins, [("y", F, None)], inits, opset=opset)


def typed(op, elem, n_inputs=1, shape=(2, 4), out=None, **attrs):
    ins = [(f"x{i}", elem, list(shape)) for i in range(n_inputs)]
    return model([node(op, [i[0] for i in ins], ["y"], **attrs)], ins, [("y", out or elem, None)])


def q_then(op, *extra_inputs, inits=(), **attrs):
    """x -> Q (int8) -> op -> DQ -> y: an int8 tensor through a data-movement op."""
    s, zp = init("s", np.float32(0.1)), init("zp", np.int8(0))
    return model([node("QuantizeLinear", ["x", "s", "zp"], ["q"]), node(op, ["q", *extra_inputs], ["m"], **attrs),
                  node("DequantizeLinear", ["m", "s", "zp"], ["y"])], [("x", F, [1, 1, 4, 4])], [("y", F, None)],
                 [s, zp, *inits])  # fmt: skip


def cast_through(elem):
    return model([node("Cast", ["x"], ["c"], name="cast_in", to=elem), node("Cast", ["c"], ["y"], name="cast_out", to=F)],
                 [("x", F, [1, 4])], [("y", F, None)])  # fmt: skip


def unsupported_op(op, elem=F, shape=(2, 2), opset=18, outputs=1, **attrs):
    outs = ["y", "y1", "y2", "y3"][:outputs]
    return model([node(op, ["x"], outs, **attrs)], [("x", elem, list(shape))], [(o, elem, None) for o in outs],
                 opset=opset)  # fmt: skip


def custom_op(domain):
    return model([helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain=domain)], [("x", F, [1, 4])],
                 [("y", F, None)], extra_opsets=[helper.make_opsetid(domain, 1)] if domain else [])  # fmt: skip


def gru(**attrs):
    h, i = 3, 2
    return model([node("GRU", ["x", "w", "r"], ["y"], hidden_size=h, direction="bidirectional", **attrs)],
                 [("x", F, [2, 1, i])], [("y", F, None)], [init("w", np.ones((2, 3 * h, i), np.float32)),
                                                           init("r", np.ones((2, 3 * h, h), np.float32))])  # fmt: skip


def stft(last):
    return model([node("STFT", ["x", "st", "w"], ["y"])], [("x", F, [1, 16, last])], [("y", F, None)],
                 [init("st", np.int64(2)), init("w", np.ones(4, np.float32))], opset=17)  # fmt: skip


def if_ranks(b_shape=(8,)):
    then = helper.make_graph([node("Identity", ["a"], ["o"], name="t")], "then", [],
                             [helper.make_tensor_value_info("o", F, None)])  # fmt: skip
    other = helper.make_graph([node("Identity", ["b"], ["o2"], name="e")], "else", [],
                              [helper.make_tensor_value_info("o2", F, None)])  # fmt: skip
    return model([node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [("c", B, []), ("a", F, [2, 4]), ("b", F, list(b_shape))], [("y", F, None)])  # fmt: skip


def dq_constant(shape):
    """An int8 constant of ``shape`` dequantized and added to x, as ONNX Runtime's quantiser writes the
    scalar operand of an Add it quantises."""
    return model([node("DequantizeLinear", ["c", "s", "z"], ["d"]), node("Add", ["x", "d"], ["y"])],
                 [("x", F, [1, 4])], [("y", F, None)],
                 [init("c", np.ones(shape, np.int8)), init("s", np.float32(0.01)), init("z", np.int8(0))])  # fmt: skip


def matmul_dq_int32():
    """An INT32 bias dequantized (onnx-tensorrt issue 850's pattern)."""
    return qdq(dq_input=I32)


def _rule_cases() -> list[Case]:
    C = Case
    return [
        C("opset.range/break", "opset.range", "opset 25, newer than the parser knows", lambda: unary("Relu", opset=25)),
        C("opset.range/near", "opset.range", "opset 17", lambda: unary("Relu", opset=17)),
        C("functions.not-imported/break", "functions.not-imported", "a model-local function call (8.x only)",
          lambda: functions_model([("custom", "F", "Relu")], [("custom", "F")])),
        C("functions.not-imported/near", "functions.not-imported", "the same op without a function",
          lambda: unary("Relu")),
        C("functions.same-name/break", "functions.same-name", "two functions F (domains a, b), Relu and Sigmoid",
          lambda: functions_model([("a", "F", "Relu"), ("b", "F", "Sigmoid")], [("a", "F"), ("b", "F")])),
        C("functions.same-name/near", "functions.same-name", "two functions F1, F2",
          lambda: functions_model([("a", "F1", "Relu"), ("b", "F2", "Sigmoid")], [("a", "F1"), ("b", "F2")])),
        C("functions.shadowed/break", "functions.shadowed", "function custom::Relu whose body is Sigmoid",
          lambda: functions_model([("custom", "Relu", "Sigmoid")], [("custom", "Relu")])),
        C("functions.shadowed/near", "functions.shadowed", "function custom::MyAct whose body is Sigmoid",
          lambda: functions_model([("custom", "MyAct", "Sigmoid")], [("custom", "MyAct")])),
        C("op.unsupported/break", "op.unsupported", "an op of a custom domain with no importer (plugin lookup)",
          lambda: custom_op("custom")),
        C("op.unsupported/near", "op.unsupported", "Relu", lambda: unary("Relu")),
        C("op.type/break", "op.type", "Sigmoid of INT32", lambda: unary("Sigmoid", I32)),
        C("op.type/near", "op.type", "Sigmoid of FP32", lambda: unary("Sigmoid")),
        C("conv.kernel-shape/break", "conv.kernel-shape", "Conv with a dequantized weight, no kernel_shape (<10.4)",
          lambda: conv(3, computed_weight=True, kernel_shape=False)),
        C("conv.kernel-shape/near", "conv.kernel-shape", "the same with kernel_shape",
          lambda: conv(3, computed_weight=True, kernel_shape=True)),
        C("reduce.axes-ignored/break", "reduce.axes-ignored", "ReduceMax with an axes input (opset 18; <10.0)",
          lambda: reduce_axes(True, "ReduceMax")),
        C("reduce.axes-ignored/near", "reduce.axes-ignored", "ReduceMax with an axes attribute (opset 17)",
          lambda: model([node("ReduceMax", ["x"], ["y"], axes=[1])], [("x", F, [2, 4])], [("y", F, None)], opset=17)),
        C("input.must-be-constant/break", "input.must-be-constant", "ReduceSum with computed axes",
          lambda: reduce_axes(False)),
        C("input.must-be-constant/near", "input.must-be-constant", "ReduceSum with constant axes",
          lambda: reduce_axes(True)),
        C("constant.int-attribute/break", "constant.int-attribute", "Constant value_ints (<9.2)",
          lambda: constant_int(True)),
        C("constant.int-attribute/near", "constant.int-attribute", "Constant value", lambda: constant_int(False)),
        C("shape.start-end/break", "shape.start-end", "Shape with start (<10.0)", lambda: shape_slice(True)),
        C("shape.start-end/near", "shape.start-end", "Shape", lambda: shape_slice(False)),
        C("names.duplicate/break", "names.duplicate", "two graph inputs named x",
          lambda: model([node("Add", ["x", "x"], ["y"])], [("x", F, [1, 4]), ("x", F, [1, 4])], [("y", F, None)])),
        C("names.duplicate/near", "names.duplicate", "graph inputs x and x2",
          lambda: model([node("Add", ["x", "x2"], ["y"])], [("x", F, [1, 4]), ("x2", F, [1, 4])], [("y", F, None)])),
        C("names.duplicate/node-output", "names.duplicate", "a node's output named like an initializer",
          lambda: model([node("Relu", ["x"], ["w"]), node("Add", ["w", "x"], ["y"], name="add_0")],
                        [("x", F, [1, 4])], [("y", F, None)], inits=[init("w", np.ones((1, 4)), np.float32)])),
        C("outputs.count/break", "outputs.count", "LayerNormalization with Mean and InvStdDev outputs",
          lambda: layernorm(3)),
        C("outputs.count/near", "outputs.count", "LayerNormalization with Y only", lambda: layernorm(1)),
        C("qdq.dequantize-input/break", "qdq.dequantize-input", "DequantizeLinear of an INT32 constant",
          matmul_dq_int32),
        C("qdq.dequantize-input/near", "qdq.dequantize-input", "DequantizeLinear of an INT8 constant",
          lambda: qdq(dq_input=I8)),
        C("qdq.zero-point/break", "qdq.zero-point", "Q/DQ with zero point 3 (asymmetric)", lambda: qdq(zero=3)),
        C("qdq.zero-point/near", "qdq.zero-point", "Q/DQ with zero point 0", lambda: qdq(zero=0)),
        C("qdq.scale/break", "qdq.scale", "Q/DQ with a negative scale", lambda: qdq(scale=-0.1)),
        C("qdq.scale/near", "qdq.scale", "Q/DQ with a positive scale", lambda: qdq(scale=0.1)),
        C("qdq.axis/break", "qdq.axis", "3 scales for axis 1 of size 4",
          lambda: qdq(axis=1, shape=(2, 4), scales=[0.1, 0.1, 0.1])),
        C("qdq.axis/near", "qdq.axis", "4 scales for axis 1 of size 4",
          lambda: qdq(axis=1, shape=(2, 4), scales=[0.1, 0.1, 0.1, 0.1])),
        C("qdq.float-type/break", "qdq.float-type", "QuantizeLinear of FP16 (8.x)", lambda: q_scale_type(True)),
        C("qdq.float-type/near", "qdq.float-type", "QuantizeLinear of FP32", lambda: qdq()),
        C("typed.mixed-inputs/break", "typed.mixed-inputs", "Add of FP32 and FP16", lambda: mixed_add(True)),
        C("typed.mixed-inputs/near", "typed.mixed-inputs", "Add of FP32 and FP32", lambda: mixed_add(False)),
        C("shape.rank/break", "shape.rank", "a 9-D Reshape", lambda: reshape_rank(9)),
        C("shape.rank/near", "shape.rank", "an 8-D Reshape", lambda: reshape_rank(8)),
        C("type.uint8-intermediate/break", "type.uint8-intermediate", "Cast to UINT8 and back",
          lambda: cast_through(U8)),
        C("type.uint8-intermediate/near", "type.uint8-intermediate", "a UINT8 graph input cast to FLOAT",
          lambda: model([node("Cast", ["x"], ["y"], to=F)], [("x", U8, [1, 4])], [("y", F, None)])),
        C("type.uint8-cast/break", "type.uint8-cast", "a UINT8 graph input cast to INT32",
          lambda: model([node("Cast", ["x"], ["y"], to=TensorProto.INT32)], [("x", U8, [1, 4])],
                        [("y", TensorProto.INT32, None)])),
        C("type.uint8-cast/near", "type.uint8-cast", "a UINT8 graph input cast to FLOAT16",
          lambda: model([node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)], [("x", U8, [1, 4])],
                        [("y", TensorProto.FLOAT16, None)])),
        C("op.attribute/break", "op.attribute", "MaxPool dilations 2", lambda: pool("MaxPool", dilations=[2, 2])),
        C("op.attribute/near", "op.attribute", "MaxPool dilations 1", lambda: pool("MaxPool", dilations=[1, 1])),
        C("op.spatial-dims/break", "op.spatial-dims", "MaxPool with 4 spatial dimensions", lambda: pool("MaxPool", 4)),
        C("op.spatial-dims/near", "op.spatial-dims", "MaxPool with 3 spatial dimensions", lambda: pool("MaxPool", 3)),
        C("shape.static-input/break", "shape.static-input", "EyeLike of a dynamic input", lambda: eyelike(False)),
        C("shape.static-input/near", "shape.static-input", "EyeLike of a static input", lambda: eyelike(True)),
        # rules this column no longer has (the importer code contradicts them); the graphs stay
        C("qdq.scalar-weights/break", "qdq.scalar-weights", "DequantizeLinear of an int8 scalar constant",
          lambda: dq_constant(())),
        C("qdq.scalar-weights/near", "qdq.scalar-weights", "the same constant with shape [1]",
          lambda: dq_constant((1,))),
        C("if.branch-ranks/break", "if.branch-ranks", "If on an input condition, branches of rank 2 and 1",
          if_ranks),
        C("if.branch-ranks/near", "if.branch-ranks", "the same If, branches of rank 2 and 2",
          lambda: if_ranks((2, 4))),
        C("conv.channels (removed)/break", None, "Conv of an input with a dynamic channel dimension",
          lambda: conv("c"), shapes={"x": (1, 3, 8, 8)}),
        C("typed.quantize-scale (removed)/break", None, "opset 19 QuantizeLinear: FP16 input, FP32 scale",
          lambda: q_scale_type(False)),
    ]  # fmt: skip


def _op_cases() -> list[Case]:
    C = Case
    return [
        # restrictions of the op table (attribute values, build-time constants, sizes)
        C("op/averagepool-1d", None, "AveragePool 1-D ('2D or 3D Pooling only')", lambda: pool("AveragePool", 1)),
        C("op/averagepool-dilations", None, "AveragePool dilations 2 ('dilations must be empty or all ones')",
          lambda: pool("AveragePool", dilations=[2, 2])),
        C("op/maxpool-indices", None, "MaxPool with its Indices output", lambda: pool("MaxPool", outputs=2)),
        C("op/lppool-dilations", None, "LpPool dilations 2", lambda: pool("LpPool", dilations=[2, 2])),
        C("op/topk-unsorted", None, "TopK sorted=0 ('sorted must be 1')", lambda: topk(2, sorted_=0)),
        C("op/topk-k-3840", None, "TopK K=3840 ('K input must be less than 3840')", lambda: topk(3840, n=4096)),
        C("op/topk-k-3839", None, "TopK K=3839", lambda: topk(3839, n=4096)),
        C("op/resize-cubic", None, "Resize mode cubic ('Supported resize modes: nearest, linear')",
          lambda: resize(mode="cubic")),
        C("op/resize-antialias", None, "Resize antialias=1 ('Antialiasing is not supported')",
          lambda: resize(mode="linear", antialias=1)),
        C("op/resize-crop", None, "Resize tf_crop_and_resize", lambda: resize(coordinate_transformation_mode="tf_crop_and_resize")),
        C("op/resize-aspect", None, "Resize keep_aspect_ratio_policy not_larger ('stretch' only)",
          lambda: model([node("Resize", ["x", "", "", "sz"], ["y"], keep_aspect_ratio_policy="not_larger", axes=[2, 3])],
                        [("x", F, [1, 1, 4, 4])], [("y", F, None)], [init("sz", [8, 6], np.int64)], opset=19)),
        C("op/resize-linear", None, "Resize linear, half_pixel", lambda: resize(mode="linear")),
        C("op/scatternd-add", None, "ScatterND reduction add ('reduction other than none is not supported')",
          lambda: scatter_nd("add")),
        C("op/scatternd-none", None, "ScatterND reduction none", lambda: scatter_nd("none")),
        C("op/lstm-input-forget", None, "LSTM input_forget=1 ('must be 0')", lambda: lstm(input_forget=1)),
        C("op/lstm-layout", None, "LSTM layout=1 ('must be 0')",
          lambda: model([node("LSTM", ["x", "w", "r"], ["y"], hidden_size=3, layout=1)], [("x", F, [1, 2, 2])],
                        [("y", F, None)], [init("w", np.ones((1, 12, 2), np.float32)),
                                           init("r", np.ones((1, 12, 3), np.float32))])),
        C("op/lstm", None, "LSTM", lambda: lstm()),
        C("op/dropout-training-true", None, "Dropout training_mode True ('must evaluate to False')",
          lambda: dropout(True)),
        C("op/dropout-training-input", None, "Dropout training_mode computed ('must be an initializer')",
          lambda: dropout("input")),
        C("op/dropout-training-false", None, "Dropout training_mode False", lambda: dropout(False)),
        C("op/cumsum-axis-computed", None, "CumSum with a computed axis ('axis must be a build-time constant')",
          lambda: cumsum(False)),
        C("op/onehot-depth-computed", None, "OneHot with a computed depth ('depth must be a build-time constant')",
          lambda: onehot(False)),
        C("op/onehot", None, "OneHot with a constant depth", lambda: onehot(True)),
        C("op/gridsample-5d", None, "GridSample of a 5-D input ('Input must be 4D input')", lambda: gridsample(5)),
        C("op/gridsample-4d", None, "GridSample of a 4-D input", lambda: gridsample(4)),
        C("op/constant-sparse", None, "Constant sparse_value ('unsupported')", lambda: constant_attr("sparse")),
        C("op/constant-float", None, "Constant value_float", lambda: constant_attr("float")),
        C("op/squeeze-axes-computed", None, "Squeeze with computed axes (10.7+: dynamic axes)",
          lambda: computed_axes("Squeeze", False)),
        C("op/slice-axes-computed", None, "Slice with computed axes (10.3+)", lambda: computed_axes("Slice", False)),
        # ops the table marks unsupported
        C("op/det", None, "Det (table: not supported)", lambda: unsupported_op("Det")),
        C("op/unique", None, "Unique (table: not supported)", lambda: unsupported_op("Unique", outputs=1)),
        C("op/bitwise-and", None, "BitwiseAnd (table: not supported)",
          lambda: model([node("BitwiseAnd", ["a", "b"], ["y"])], [("a", I32, [4]), ("b", I32, [4])],
                        [("y", I32, None)])),
        C("op/dft", None, "DFT (table: not supported)",
          lambda: model([node("DFT", ["x"], ["y"])], [("x", F, [1, 8, 1])], [("y", F, None)], opset=17)),
        C("op/attention", None, "Attention, opset 23 (the 10.13 table: added in 10.14)",
          lambda: model([node("Attention", ["q", "k", "v"], ["y"])], [("q", F, [1, 2, 4, 8]), ("k", F, [1, 2, 4, 8]),
                                                                    ("v", F, [1, 2, 4, 8])], [("y", F, None)], opset=23)),
        C("op/rmsnorm", None, "RMSNormalization, opset 23 (the 10.13 table: added in 10.15)",
          lambda: model([node("RMSNormalization", ["x", "g"], ["y"])], [("x", F, [2, 4])], [("y", F, None)],
                        [init("g", np.ones(4, np.float32))], opset=23)),
        C("op/rotary-embedding", None, "RotaryEmbedding, opset 23 (the 10.13 table: added in 10.15)", lambda: model(
            [node("RotaryEmbedding", ["x", "c", "s"], ["y"])], [("x", F, [1, 2, 4, 8])], [("y", F, None)],
            [init("c", np.ones((1, 4, 4), np.float32)), init("s", np.zeros((1, 4, 4), np.float32))], opset=23)),
        # input types: the table's 'Supported Types' against the importer
        C("op/reshape-int8", None, "Reshape of an int8 tensor (Q -> Reshape -> DQ)",
          lambda: q_then("Reshape", "shp", inits=[init("shp", [1, 16], np.int64)])),
        C("op/transpose-int8", None, "Transpose of an int8 tensor (Q -> Transpose -> DQ)",
          lambda: q_then("Transpose", perm=[0, 1, 3, 2])),
        C("op/maxpool-int8", None, "MaxPool of an int8 tensor (Q -> MaxPool -> DQ)",
          lambda: q_then("MaxPool", kernel_shape=[2, 2])),
        C("op/concat-int8", None, "Concat of int8 tensors (Q -> Concat -> DQ)", lambda: q_then("Concat", "q", axis=1)),
        C("op/relu-int8", None, "Relu of an int8 tensor (Q -> Relu -> DQ)", lambda: q_then("Relu")),
        C("op/floor-int32", None, "Floor of INT32", lambda: unary("Floor", I32)),
        C("op/sqrt-int32", None, "Sqrt of INT32", lambda: unary("Sqrt", I32)),
        C("op/matmul-int32", None, "MatMul of INT32", lambda: typed("MatMul", I32, 2, shape=(4, 4))),
        C("op/matmul-int64", None, "MatMul of INT64", lambda: typed("MatMul", I64, 2, shape=(4, 4))),
        C("op/softmax-int32", None, "Softmax of INT32", lambda: unary("Softmax", I32)),
        C("op/conv-int32", None, "Conv of INT32",
          lambda: model([node("Conv", ["x", "w"], ["y"])], [("x", I32, [1, 1, 4, 4])], [("y", I32, None)],
                        [init("w", np.ones((1, 1, 3, 3), np.int32))])),
        C("op/and-int32", None, "And of INT32 (table: BOOL only)", lambda: typed("And", I32, 2, out=I32)),
        C("op/equal-bool", None, "Equal of BOOL (table: FP32..INT64)", lambda: typed("Equal", B, 2, out=B)),
        C("op/where-float", None, "Where of FP32", lambda: model([node("Where", ["c", "a", "b"], ["y"])],
                                                                 [("c", B, [4]), ("a", F, [4]), ("b", F, [4])],
                                                                 [("y", F, None)])),
        C("op/cast-int8", None, "Cast to INT8 and back (INT8: quantized types only)", lambda: cast_through(I8)),
        C("op/cast-double", None, "Cast to DOUBLE and back", lambda: cast_through(D)),
        C("op/input-double", None, "a DOUBLE graph input (limited support: cast to FLOAT)",
          lambda: unary("Relu", D)),
        C("op/gather-int8-indices", None, "Gather with INT8 indices",
          lambda: model([node("Gather", ["x", "i"], ["y"])], [("x", F, [4, 2])], [("y", F, None)],
                        [init("i", [0, 1], np.int8)])),
        C("op/neg-int8", None, "Neg of INT8", lambda: unary("Neg", I8)),
        C("op/abs-int64", None, "Abs of INT64", lambda: unary("Abs", I64)),
        C("op/dq-uint8", None, "DequantizeLinear of a UINT8 constant, zero point 0",
          lambda: model([node("DequantizeLinear", ["w", "s", "zp"], ["d"]), node("Add", ["x", "d"], ["y"])],
                        [("x", F, [1, 4])], [("y", F, None)], [init("w", np.ones((1, 4), np.uint8)),
                                                                init("s", np.float32(0.1)), init("zp", np.uint8(0))])),
        C("op/q-uint8-zero-point", None, "QuantizeLinear with a UINT8 zero point 0 (ONNX: a uint8 result)",
          lambda: model([node("QuantizeLinear", ["x", "s", "zp"], ["q"]), node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
                        [("x", F, [1, 4])], [("y", F, None)], [init("s", np.float32(0.1)), init("zp", np.uint8(0))])),
        C("op/q-no-zero-point", None, "Q/DQ without a zero point", lambda: model(
            [node("QuantizeLinear", ["x", "s"], ["q"]), node("DequantizeLinear", ["q", "s"], ["y"])],
            [("x", F, [1, 4])], [("y", F, None)], [init("s", np.float32(0.1))])),
        C("op/q-fp32-fp16-scale", None, "opset 19 QuantizeLinear: FP32 input, FP16 scale", lambda: model(
            [node("QuantizeLinear", ["x", "s", "zp"], ["q"]), node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
            [("x", F, [1, 4])], [("y", F16, None)], [init("s", np.float16(0.1)), init("zp", np.int8(0))], opset=19)),
        # ops whose importer is a plugin, and ops some versions import through a plugin
        C("op/roialign", None, "RoiAlign (importer: the ROIAlign_TRT plugin)", lambda: model(
            [node("RoiAlign", ["x", "r", "b"], ["y"], output_height=2, output_width=2)], [("x", F, [1, 1, 8, 8])],
            [("y", F, None)], [init("r", [[0, 0, 4, 4]], np.float32), init("b", [0], np.int64)])),
        C("op/deformconv", None, "DeformConv (importer: a plugin)", lambda: model(
            [node("DeformConv", ["x", "w", "o"], ["y"], kernel_shape=[3, 3])], [("x", F, [1, 1, 8, 8]),
                                                                             ("o", F, [1, 18, 6, 6])],
            [("y", F, None)], [init("w", np.ones((1, 1, 3, 3), np.float32))], opset=19)),
        C("op/scatterelements", None, "ScatterElements (10.3: 'an updated plugin')", lambda: model(
            [node("ScatterElements", ["x", "i", "u"], ["y"])], [("x", F, [4])], [("y", F, None)],
            [init("i", [1], np.int64), init("u", [2.0], np.float32)])),
        C("op/instancenorm", None, "InstanceNormalization", lambda: model(
            [node("InstanceNormalization", ["x", "g", "b"], ["y"])], [("x", F, [1, 2, 4, 4])], [("y", F, None)],
            [init("g", np.ones(2, np.float32)), init("b", np.zeros(2, np.float32))])),
        C("op/nms", None, "NonMaxSuppression", lambda: model(
            [node("NonMaxSuppression", ["bx", "sc", "m"], ["y"])], [("bx", F, [1, 4, 4]), ("sc", F, [1, 1, 4])],
            [("y", I64, None)], [init("m", [2], np.int64)])),
        C("op/nonzero", None, "NonZero (TensorRT-RTX: a plugin)", lambda: model([node("NonZero", ["x"], ["y"])], [("x", F, [2, 4])],
                                                                             [("y", I64, None)])),
        C("op/einsum", None, "Einsum", lambda: model([node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
                                                     [("a", F, [2, 3]), ("b", F, [3, 4])], [("y", F, None)])),
        # more restrictions
        C("op/stft-window-computed", None, "STFT with a computed window ('window must be an initializer')",
          lambda: model([node("STFT", ["x", "st", "w"], ["y"])], [("x", F, [1, 16, 1]), ("w", F, [4])],
                        [("y", F, None)], [init("st", np.int64(2))], opset=17)),
        C("op/conv-4d-spatial", None, "Conv with 4 spatial dimensions", lambda: model(
            [node("Conv", ["x", "w"], ["y"])], [("x", F, [1, 1, 3, 3, 3, 3])], [("y", F, None)],
            [init("w", np.ones((1, 1, 2, 2, 2, 2), np.float32))])),
        C("op/conv-1d", None, "Conv with 1 spatial dimension", lambda: model(
            [node("Conv", ["x", "w"], ["y"])], [("x", F, [1, 1, 8])], [("y", F, None)],
            [init("w", np.ones((1, 1, 3), np.float32))])),
        C("op/mod-fmod0-float", None, "Mod fmod=0 of FP32 (ONNX: fmod=1 for floats)", lambda: model(
            [node("Mod", ["a", "b"], ["y"], fmod=0)], [("a", F, [4]), ("b", F, [4])], [("y", F, None)])),
        C("op/mod-fmod0-int", None, "Mod fmod=0 of INT32", lambda: model(
            [node("Mod", ["a", "b"], ["y"], fmod=0)], [("a", I32, [4]), ("b", I32, [4])], [("y", I32, None)])),
        C("op/resize-half-pixel-symmetric", None, "Resize half_pixel_symmetric (not in the importer's list)",
          lambda: resize(mode="linear", coordinate_transformation_mode="half_pixel_symmetric")),
        C("op/unsqueeze-axes-computed", None, "Unsqueeze with computed axes (10.7+: dynamic axes)",
          lambda: computed_axes("Unsqueeze", False)),
        C("op/unsqueeze-axes-constant", None, "Unsqueeze with constant axes", lambda: computed_axes("Unsqueeze", True)),
        C("op/clip-min-computed", None, "Clip with a computed min", lambda: model(
            [node("Clip", ["x", "lo"], ["y"])], [("x", F, [4]), ("lo", F, [])], [("y", F, None)])),
        C("op/topk-k-computed", None, "TopK with a computed K", lambda: model(
            [node("TopK", ["x", "k"], ["v", "i"])], [("x", F, [1, 8]), ("k", I64, [1])],
            [("v", F, None), ("i", I64, None)])),
        C("op/pad-wrap", None, "Pad mode wrap", lambda: model(
            [node("Pad", ["x", "p"], ["y"], mode="wrap")], [("x", F, [1, 4])], [("y", F, None)],
            [init("p", [0, 1, 0, 1], np.int64)], opset=19)),
        C("op/opset-8", None, "opset 8, older than the parser documents", lambda: unary("Relu", opset=8)),
        C("op/gru-bidirectional-activations", None, "bidirectional GRU, other activations for the reverse pass",
          lambda: gru(activations=["Sigmoid", "Tanh", "Relu", "Tanh"])),
        C("op/gru-bidirectional", None, "bidirectional GRU, the same activations both ways",
          lambda: gru(activations=["Sigmoid", "Tanh", "Sigmoid", "Tanh"])),
        C("op/stft-complex", None, "STFT of a complex signal ('Input must be real-valued')", lambda: stft(2)),
        C("op/stft-real", None, "STFT of a real signal", lambda: stft(1)),
        C("op/resize-scales-input", None, "Resize with its scales a graph input", lambda: model(
            [node("Resize", ["x", "", "s"], ["y"])], [("x", F, [1, 1, 4, 4]), ("s", F, [4])], [("y", F, None)], opset=19)),
        C("op/resize-sizes-input", None, "Resize with its sizes a graph input", lambda: model(
            [node("Resize", ["x", "", "", "sz"], ["y"])], [("x", F, [1, 1, 4, 4]), ("sz", I64, [4])], [("y", F, None)],
            opset=19)),
        C("op/convtranspose-4d-spatial", None, "ConvTranspose with 4 spatial dimensions", lambda: model(
            [node("ConvTranspose", ["x", "w"], ["y"])], [("x", F, [1, 1, 4, 4, 4, 4])], [("y", F, None)],
            [init("w", np.ones((1, 1, 2, 2, 2, 2), np.float32))])),
        C("op/hardmax-dynamic-axis", None, "Hardmax over a dynamic axis ('must be a build-time constant')",
          lambda: model([node("Hardmax", ["x"], ["y"], axis=-1)], [("x", F, [2, "n"])], [("y", F, None)])),
        C("op/concat-600", None, "Concat of 600 inputs", lambda: model(
            [node("Concat", ["x"] * 600, ["y"], axis=0)], [("x", F, [1, 4])], [("y", F, None)])),
        C("op/gathernd-batch-dims", None, "GatherND batch_dims=1", lambda: model(
            [node("GatherND", ["x", "i"], ["y"], batch_dims=1)], [("x", F, [2, 3])], [("y", F, None)],
            [init("i", [[1], [0]], np.int64)])),
    ]  # fmt: skip


# Ops whose one-input FP32 graph TensorRT-RTX 1.7's parser takes (every supported op of the rtx-1.7
# table was tried with one (2, 4) input at opset 20; these parsed): each is tried with the other types.
_ONE_INPUT_OPS = (
    "Abs Acos Acosh Add ArgMax ArgMin Asin Asinh Atan Atanh Ceil Celu Clip Cos Cosh Div Dropout Elu Equal Erf Exp "
    "EyeLike Flatten Floor Gelu Greater HardSigmoid HardSwish Hardmax Identity IsInf IsNaN LeakyRelu Less Log "
    "LogSoftmax LpNormalization Max Mean Min Mish Mul Neg RandomNormalLike RandomUniformLike Reciprocal ReduceL1 "
    "ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu "
    "Round Selu Shape Shrink Sigmoid Sign Sin Sinh Size Softmax Softplus Softsign Split Sqrt Squeeze Sub Sum Tan Tanh "
    "ThresholdedRelu Transpose Trilu"
).split()
# The same for the other supported ops whose two-input (4, 4) FP32 graph it takes (TopK left out: a
# float 2-D K crashes the parser, a segfault, not a refusal).
_TWO_INPUT_OPS = "CastLike Gemm GreaterOrEqual LayerNormalization LessOrEqual MatMul PRelu Pow RMSNormalization".split()
_TYPES = {"FP16": F16, "INT32": I32, "INT64": I64, "BOOL": B}


def _type_cases() -> list[Case]:
    """Every one- and two-input op above with each input type but FP32 (the table's type column
    against the importer): 'type/<Op>-<TYPE>'."""
    one = [Case(f"type/{op}-{name}", None, f"{op} of {name}",
                lambda op=op, t=t: model([node(op, ["x"], ["y"])], [("x", t, [2, 4])], [("y", t, None)], opset=20))
           for op in _ONE_INPUT_OPS for name, t in _TYPES.items()]  # fmt: skip
    two = [Case(f"type/{op}-{name}", None, f"{op} of two {name} inputs",
                lambda op=op, t=t: model([node(op, ["x", "z"], ["y"])], [("x", t, [4, 4]), ("z", t, [4, 4])],
                                         [("y", t, None)], opset=23))
           for op in _TWO_INPUT_OPS for name, t in _TYPES.items()]  # fmt: skip
    return one + two


def cases() -> list[Case]:
    return _rule_cases() + _op_cases() + _type_cases()


def offline(m, column: str | None = None) -> tuple[str, list[str]]:
    """A column's verdict (:data:`COLUMN` by default): ``accepts`` or ``refuses``, and the rules that refuse."""
    from aft_export.trtcheck import check_model

    column = column or COLUMN
    report = check_model(m, [column])
    refusing = sorted({f.rule for f in report.errors_for(column)})
    return ("refuses" if report.status[column] == "refuses" else "accepts"), refusing


def compare(parse, build=None) -> list[dict]:
    """Every graph through the offline rules and ``parse`` (tests/rtx.py's, from bytes): one row
    per graph with both verdicts, whether they agree, and 10.13's verdict beside (where it differs
    from the ``rtx-1.7`` column, that is one of TensorRT-RTX's documented differences). With
    ``build`` (tests/rtx.py's), every graph the parser accepts is also built, ahead of time on the
    CPU: ``builder`` is its verdict (None where the parser refused), ``library`` the two together
    (what a user of ``aft-export build`` meets), ``builder_agrees`` the rules against that."""
    rows = []
    for case in cases():
        m = case.make()
        data = m.SerializeToString()
        t0 = time.perf_counter()
        parsed = parse(data)
        seconds = time.perf_counter() - t0
        verdict, rules = offline(m)
        base, base_rules = offline(m, BASE) if COLUMN != BASE else (verdict, rules)
        real = "accepts" if parsed.ok else "refuses"
        row = {"graph": case.id, "rule": case.rule, "what": case.what, "offline": verdict,
               "offline_rules": rules, "parser": real, "agrees": verdict == real, BASE: base,
               f"{BASE}_rules": base_rules, "parser_errors": [e[:200] for e in parsed.errors][:3],
               "parse_seconds": round(seconds, 4)}  # fmt: skip
        if build is not None:
            built = build(parsed, case.shapes) if parsed.ok else None
            library = "accepts" if parsed.ok and built.ok else "refuses"
            row.update({"builder": None if built is None else "accepts" if built.ok else "refuses",
                        "builder_errors": [] if built is None else [e[:300] for e in built.errors][:2],
                        "build_seconds": None if built is None else round(built.seconds, 4),
                        "library": library, "builder_agrees": verdict == library})  # fmt: skip
        rows.append(row)
    return rows


def documented() -> dict[str, dict]:
    return {d["graph"]: d for d in json.loads(DIFFERENCES.read_text())["differences"]}


def table(rows: list[dict]) -> list[str]:
    known = documented() if COLUMN == "rtx-1.7" else {}
    agree = [r for r in rows if r["agrees"]]
    differ = [r for r in rows if not r["agrees"]]
    lines = [f"rules (column {COLUMN}) vs TensorRT-RTX's ONNX parser: {len(rows)} graphs "
             f"({sum(r['rule'] is not None for r in rows)} for the {len({r['rule'] for r in rows if r['rule']})} "
             f"rules, {sum(r['rule'] is None for r in rows)} more from the op table), {len(agree)} agree, "
             f"{len(differ)} differ ({sum(r['graph'] in known for r in differ)} documented)", "",
             f"{'graph':36s} {'rules':8s} {'parser':8s} reason"]  # fmt: skip
    for r in differ:
        why = known.get(r["graph"], {}).get("reason", "NOT DOCUMENTED" if COLUMN == "rtx-1.7" else "-")
        lines.append(f"{r['graph']:36s} {r['offline']:8s} {r['parser']:8s} {why}")
    fp = sum(r["offline"] == "accepts" for r in differ)
    lines.insert(1, f"false passes (rules accept, parser refuses): {fp}; false refusals: {len(differ) - fp}")
    base = [r for r in rows if r[BASE] != r["offline"]]
    if COLUMN == BASE:
        return lines
    lines += ["", f"where the {COLUMN} column differs from {BASE}'s ({len(base)} graphs; TensorRT-RTX's documented "
              f"differences, aft_export/trtcheck/versions.py EDITIONS):",
              f"{'graph':36s} {BASE:8s} {COLUMN:8s} parser   rules"]  # fmt: skip
    for r in base:
        lines.append(f"{r['graph']:36s} {r[BASE]:8s} {r['offline']:8s} {r['parser']:8s} "
                     f"{', '.join(r['offline_rules'] or r[BASE + '_rules'])}")  # fmt: skip
    return lines


def builder_table(rows: list[dict]) -> list[str]:
    """The rules against the parser and the builder together (rows of ``compare(parse, build)``)."""
    known = documented() if COLUMN == "rtx-1.7" else {}
    parsed = [r for r in rows if r["parser"] == "accepts"]
    differ = [r for r in rows if not r["builder_agrees"]]
    fp = sum(r["offline"] == "accepts" for r in differ)
    lines = [f"rules (column {COLUMN}) vs TensorRT-RTX's parser and builder (ahead of time, on the CPU): {len(rows)} "
             f"graphs, {len(parsed)} parsed and built: {sum(r['builder'] == 'accepts' for r in parsed)} build, "
             f"{sum(r['builder'] == 'refuses' for r in parsed)} do not; {len(rows) - len(differ)} agree, "
             f"{len(differ)} differ ({sum(r['graph'] in known for r in differ)} documented)",
             f"false passes (rules accept, parser or builder refuses): {fp}; false refusals: {len(differ) - fp}", "",
             f"{'graph':36s} {'rules':8s} {'parser':8s} {'builder':8s} reason"]  # fmt: skip
    for r in differ:
        why = known.get(r["graph"], {}).get("reason", "NOT DOCUMENTED" if COLUMN == "rtx-1.7" else "-")
        lines.append(f"{r['graph']:36s} {r['offline']:8s} {r['parser']:8s} {str(r['builder'] or '-'):8s} {why}")
    refused = [r for r in parsed if r["builder"] == "refuses"]
    lines += ["", f"graphs the parser takes and the builder refuses ({len(refused)}), and the rules' verdict:"]
    for r in refused:
        lines.append(f"{r['graph']:36s} rules {r['offline']:8s} {', '.join(r['offline_rules']) or '-':24s} "
                     f"{(r['builder_errors'] or ['(no error logged)'])[0][:110]}")  # fmt: skip
    slow = sorted(parsed, key=lambda r: -r["build_seconds"])[:3]
    lines.append(f"build time: {sum(r['build_seconds'] for r in parsed):.1f} s in all; slowest "
                 + ", ".join(f"{r['graph']} {r['build_seconds']:.2f} s" for r in slow))
    return lines


def main(argv) -> int:
    """``--json``: the rows; ``--column 10.13``: compare another column with the parser (the
    differences file is then not the expectation); ``--rules-from DIR``: the aft_export package of
    another checkout (e.g. a ``git worktree`` of an older commit), to compare its rules."""
    import argparse

    global COLUMN
    ap = argparse.ArgumentParser(prog="python -m tests.trtcheck.parser_graphs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--column", default=COLUMN)
    ap.add_argument("--rules-from", metavar="DIR")
    ap.add_argument("--build", action="store_true", help="also build every graph the parser accepts")
    args = ap.parse_args(argv)
    if args.rules_from:
        sys.path.insert(0, str(Path(args.rules_from).resolve()))
    sys.path.insert(1 if args.rules_from else 0, str(Path(__file__).resolve().parents[2]))
    COLUMN = args.column
    from tests.rtx import build, parse

    import aft_export

    rows = compare(parse, build if args.build else None)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"(rules: {Path(aft_export.__file__).parent})")
        print("\n".join(table(rows)))
        if args.build:
            print("\n" + "\n".join(builder_table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
