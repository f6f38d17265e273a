"""Every TensorRT rule, on a small hand-made graph that breaks it (and one that does not).

The graphs are made with onnx.helper, some on purpose invalid for ONNX's own checker
(a mixed-type Add): the check must still read them and say what TensorRT would do.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aft_export.trtcheck import RULES, check_model

F, F16, I8, I32, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.INT32, TensorProto.INT64
B = TensorProto.BOOL


def model(nodes, inputs, outputs, inits=(), opset=18, functions=(), target=None, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(inits))  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets],
                          functions=list(functions))  # fmt: skip
    m.ir_version = 10
    if target:
        m.metadata_props.add(key="export_target", value=target)
    return m


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def const(name, **kw):
    return helper.make_node("Constant", [], [name], name=name, **kw)


def rules(report, version):
    return {f.rule for f in report.findings if version in f.versions}


def check(m, *versions):
    return check_model(m, list(versions))


# ----------------------------------------------------------------------------- model level


def test_opset_range():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", F, [1, 4])], [("y", F, [1, 4])])
    r = check(m, "8.5", "8.6", "10.3")
    assert r.status == {"8.5": "refuses", "8.6": "refuses", "10.3": "accepts"}
    assert rules(r, "8.6") == {"opset.range"}
    m17 = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", F, [1, 4])], [("y", F, [1, 4])], opset=17)
    assert check(m17, "8.5", "8.6").exit_code == 0


def _function(name, domain="com.x", overload="", body_op="Relu"):
    return helper.make_function(domain, name, ["a"], ["b"], [helper.make_node(body_op, ["a"], ["b"])],
                                [helper.make_opsetid("", 17)], overload=overload)  # fmt: skip


def test_functions_are_not_imported_before_9():
    call = helper.make_node("MyOp", ["x"], ["y"], name="call", domain="com.x")
    m = model([call], [("x", F, [1, 4])], [("y", F, [1, 4])], opset=17, functions=[_function("MyOp")],
              extra_opsets=[helper.make_opsetid("com.x", 1)])  # fmt: skip
    r = check(m, "8.6", "10.3")
    assert r.status == {"8.6": "refuses", "10.3": "accepts"}
    assert rules(r, "8.6") == {"functions.not-imported"}
    assert "plugin named MyOp" in r.findings[0].message


def test_two_functions_of_one_name():
    """TensorRT keys local functions by name: two overloads of one name run one body."""
    calls = [helper.make_node("AFTConv", ["x"], ["h"], name="c3", domain="com.x", overload="k3"),
             helper.make_node("AFTConv", ["h"], ["y"], name="c5", domain="com.x", overload="k5")]  # fmt: skip
    fs = [_function("AFTConv", overload="k3"), _function("AFTConv", overload="k5", body_op="Sigmoid")]
    m = model(calls, [("x", F, [1, 4])], [("y", F, [1, 4])], functions=fs,
              extra_opsets=[helper.make_opsetid("com.x", 1)])  # fmt: skip
    r = check(m, "10.3", "11.4")
    assert r.exit_code == 1 and rules(r, "11.4") == {"functions.same-name"}
    one = model(calls[:1], [("x", F, [1, 4])], [("h", F, [1, 4])], functions=fs[:1],
                extra_opsets=[helper.make_opsetid("com.x", 1)])  # fmt: skip
    assert check(one, "10.3", "11.4").exit_code == 0


def test_function_shadowed_by_a_builtin():
    call = helper.make_node("Sigmoid", ["x"], ["y"], name="call", domain="com.x")
    m = model([call], [("x", F, [1, 4])], [("y", F, [1, 4])], functions=[_function("Sigmoid")],
              extra_opsets=[helper.make_opsetid("com.x", 1)])  # fmt: skip
    assert rules(check(m, "10.13"), "10.13") == {"functions.shadowed"}


# ----------------------------------------------------------------------------- ops and types


def test_unsupported_op_and_custom_op_without_body():
    ln = helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=-1)
    m = model([ln], [("x", F, [1, 4])], [("y", F, [1, 4])], [init("s", np.ones(4, np.float32))], opset=17)
    r = check(m, "8.5", "8.6")
    assert rules(r, "8.5") == {"op.unsupported"} and r.status["8.6"] == "accepts"
    foo = helper.make_node("Foo", ["x"], ["y"], name="foo", domain="com.x")
    r = check(model([foo], [("x", F, [1, 4])], [("y", F, [1, 4])], extra_opsets=[helper.make_opsetid("com.x", 1)]),
              "10.3")  # fmt: skip
    assert rules(r, "10.3") == {"op.unsupported"} and "plugin named Foo" in r.findings[0].message


def test_op_type():
    m = model([helper.make_node("Sigmoid", ["x"], ["y"], name="s")], [("x", I32, [1, 4])], [("y", I32, [1, 4])])
    r = check(m, "10.3")
    assert rules(r, "10.3") == {"op.type"} and "INT32" in r.findings[0].message
    ok = model([helper.make_node("Sigmoid", ["x"], ["y"], name="s")], [("x", F16, [1, 4])], [("y", F16, [1, 4])])
    assert check(ok, "10.3").exit_code == 0


# ----------------------------------------------------------------------------- literal attributes, constants


def _conv_with_computed_weight(kernel_shape):
    kw = {"kernel_shape": [3, 3]} if kernel_shape else {}
    nodes = [helper.make_node("Mul", ["w", "two"], ["w2"], name="mul"),
             helper.make_node("Conv", ["x", "w2"], ["y"], name="conv", pads=[1, 1, 1, 1], **kw)]  # fmt: skip
    return model(nodes, [("x", F, [1, 2, 8, 8])], [("y", F, [1, 2, 8, 8])],
                 [init("w", np.ones((2, 2, 3, 3), np.float32)), init("two", np.float32(2))])  # fmt: skip


def test_conv_with_computed_weight_needs_kernel_shape_up_to_10_3():
    r = check(_conv_with_computed_weight(False), "10.3", "10.13", "11.4")
    assert r.status == {"10.3": "refuses", "10.13": "accepts", "11.4": "accepts"}
    assert rules(r, "10.3") == {"conv.kernel-shape"}
    assert check(_conv_with_computed_weight(True), "10.3").exit_code == 0


def test_reduction_axes_input_is_ignored_by_tensorrt_8():
    nodes = [const("axes", value=numpy_helper.from_array(np.array([1], np.int64))),
             helper.make_node("ReduceMax", ["x", "axes"], ["y"], name="rmax", keepdims=1)]  # fmt: skip
    r = check(model(nodes, [("x", F, [2, 5, 3])], [("y", F, [2, 1, 3])]), "8.6", "10.3")
    assert "reduce.axes-ignored" in rules(r, "8.6") and r.status["10.3"] == "accepts"


def test_inputs_that_must_be_constant():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape", start=2),
             helper.make_node("Sub", ["s", "one"], ["axes"], name="sub"),
             helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="rsum", keepdims=1)]  # fmt: skip
    m = model(nodes, [("x", F, [2, 5, 3])], [("y", F, [2, 1, 3])], [init("one", np.array([1], np.int64))])
    r = check(m, "10.3", "11.4")
    assert rules(r, "10.3") == rules(r, "11.4") == {"input.must-be-constant"}


def test_integer_constants_are_misread_before_9_2():
    nodes = [const("shape", value_ints=[2, 6]), helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    m = model(nodes, [("x", F, [2, 3, 2])], [("y", F, [2, 6])], opset=17)
    r = check(m, "8.5", "8.6", "10.3")
    assert rules(r, "8.6") == {"constant.int-attribute"} and r.status["10.3"] == "accepts"
    tensor = model([const("shape", value=numpy_helper.from_array(np.array([2, 6], np.int64))), nodes[1]],
                   [("x", F, [2, 3, 2])], [("y", F, [2, 6])], opset=17)  # fmt: skip
    assert check(tensor, "8.5", "8.6").exit_code == 0


def test_shape_start_end_is_ignored_before_10():
    nodes = [helper.make_node("Shape", ["x"], ["y"], name="shape", start=1)]
    m = model(nodes, [("x", F, [2, 3, 4])], [("y", I64, [2])], opset=17)
    r = check(m, "8.6", "10.3")
    assert rules(r, "8.6") == {"shape.start-end"} and r.status["10.3"] == "accepts"


def test_a_tensor_name_defined_twice():
    """What onnx-tensorrt's registerTensor refuses, in every version: a graph input, initializer or named node
    output whose name is already defined. An input that is also an initializer (IR 3's form), a graph output
    and a name inside a function's body are not definitions of the top level."""
    x, w = ("x", F, [1, 4]), init("w", np.ones((1, 4), np.float32))
    every = ("8.5", "8.6", "10.3", "10.13", "11.4", "rtx-1.7")
    twice = {
        "two inputs": model([helper.make_node("Add", ["x", "x"], ["y"], name="add")], [x, x], [("y", F, None)]),
        "two initializers": model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [("y", F, None)],
                                  [w, init("w", np.zeros((1, 4), np.float32))]),
        "an output named like an input": model([helper.make_node("Relu", ["x"], ["x"], name="relu")], [x],
                                               [("x", F, None)]),
        "an output named like an initializer": model([helper.make_node("Relu", ["x"], ["w"], name="relu"),
                                                      helper.make_node("Add", ["w", "x"], ["y"], name="add")],
                                                     [x], [("y", F, None)], [w]),
        "two nodes' outputs": model([helper.make_node("Relu", ["x"], ["h"], name="a"),
                                     helper.make_node("Neg", ["x"], ["h"], name="b")], [x], [("h", F, None)]),
    }  # fmt: skip
    for what, m in twice.items():
        r = check(m, *every)
        assert all("names.duplicate" in rules(r, v) for v in every) and rules(r, "10.3") == {"names.duplicate"}, what
    assert "'x' names a graph input and, again, a graph input" in str(check(twice["two inputs"], "10.3").findings[0].message)
    once = {
        "an input that is an initializer": model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                                 [x, ("w", F, [1, 4])], [("y", F, None)], [w]),
        "a body's name like the top level's": model([helper.make_node("F", ["x"], ["y"], name="f", domain="a")], [x],
                                                    [("y", F, None)], functions=[helper.make_function("a", "F", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])],
                                                                                [helper.make_opsetid("", 18)])],
                                                    extra_opsets=[helper.make_opsetid("a", 1)]),
    }  # fmt: skip
    for what, m in once.items():
        assert "names.duplicate" not in rules(check(m, "10.3"), "10.3"), what


def test_layernorm_output_count():
    def ln(outputs):
        n = helper.make_node("LayerNormalization", ["x", "s"], outputs, name="ln", axis=-1)
        outs = [("y", F, [1, 4])] + [(o, F, [1, 1]) for o in outputs[1:] if o]
        return model([n], [("x", F, [1, 4])], outs, [init("s", np.ones(4, np.float32))])

    r = check(ln(["y", "", ""]), "10.3", "10.13")
    assert r.status == {"10.3": "refuses", "10.13": "accepts"} and rules(r, "10.3") == {"outputs.count"}
    assert check(ln(["y", "mean", "istd"]), "10.13").exit_code == 1
    assert check(ln(["y"]), "10.3").exit_code == 0


# ----------------------------------------------------------------------------- Q/DQ


def _qdq(x_type=I8, zp=0, scale=0.1, axis=None, with_zp=True, opset=18, w_shape=(4, 3)):
    """DequantizeLinear of a weight initializer feeding a MatMul."""
    w = init("w", np.ones(w_shape, {I8: np.int8, I32: np.int32}[x_type]))
    s = init("scale", np.asarray(scale, np.float32))
    inputs = ["w", "scale"]
    inits = [w, s]
    if with_zp:
        zp_arr = np.full(np.shape(scale), zp, {I8: np.int8, I32: np.int32}[x_type])
        inits.append(init("zp", zp_arr))
        inputs.append("zp")
    kw = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("DequantizeLinear", inputs, ["wf"], name="dq", **kw),
             helper.make_node("MatMul", ["x", "wf"], ["y"], name="mm")]  # fmt: skip
    return model(nodes, [("x", F, [2, 4])], [("y", F, [2, 3])], inits, opset=opset)


def test_dequantize_input_types():
    r = check(_qdq(x_type=I32, opset=17), "8.6", "10.3", "11.4")
    assert all(rules(r, v) == {"qdq.dequantize-input"} for v in ("8.6", "10.3", "11.4"))
    assert "INT32" in r.findings[0].message
    assert check(_qdq(), "10.3", "11.4").exit_code == 0


def test_zero_point():
    assert rules(check(_qdq(zp=3), "10.3"), "10.3") == {"qdq.zero-point"}
    r = check(_qdq(with_zp=False, opset=17), "8.6", "10.3")
    assert rules(r, "8.6") == {"qdq.zero-point"} and r.status["10.3"] == "accepts"


def test_scale_positive_and_constant():
    assert rules(check(_qdq(scale=-0.5), "10.3"), "10.3") == {"qdq.scale"}
    m = _qdq()
    m.graph.node.insert(0, helper.make_node("Abs", ["scale_raw"], ["scale"], name="abs"))
    m.graph.initializer[1].name = "scale_raw"
    assert "qdq.scale" in rules(check(m, "10.3"), "10.3")


def test_per_channel_axis_is_explicit_and_matches():
    scales = [0.1, 0.2, 0.3]
    assert rules(check(_qdq(scale=scales), "10.3"), "10.3") == {"qdq.axis"}  # no axis attribute
    assert rules(check(_qdq(scale=scales, axis=0), "10.3"), "10.3") == {"qdq.axis"}  # 3 scales, dim 0 is 4
    assert check(_qdq(scale=scales, axis=1), "10.3", "11.4").exit_code == 0


def test_tensorrt_8_quantises_fp32_only():
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="dq")]  # fmt: skip
    inits = [init("s", np.float16(0.1)), init("zp", np.int8(0))]
    m = model(nodes, [("x", F16, [2, 4])], [("y", F16, [2, 4])], inits, opset=17)
    assert "qdq.float-type" in rules(check(m, "8.6"), "8.6")


# ----------------------------------------------------------------------------- strongly typed


def test_mixed_types_in_a_strongly_typed_network():
    add = helper.make_node("Add", ["x", "b"], ["y"], name="add")
    m = model([add], [("x", F16, [1, 4])], [("y", F16, [1, 4])], [init("b", np.ones(4, np.float32))])
    r = check(m, "8.6", "10.3", "11.4")
    assert rules(r, "10.3") == rules(r, "11.4") == {"typed.mixed-inputs"}
    assert "typed.mixed-inputs" not in rules(r, "8.6")  # weakly typed: TensorRT 8 chooses


def test_quantize_scale_may_be_fp32_for_an_fp16_input():
    """No rule: TensorRT's Quantize operator takes input T1 (float16, float32) and scale T2 (float32)
    (docs.nvidia.com/deeplearning/tensorrt operators/docs/Quantize.html), and TensorRT-RTX's parser
    and builder take this graph (tests/trtcheck/test_rules_vs_parser.py); the former rule
    typed.quantize-scale refused it."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="dq")]  # fmt: skip
    inits = [init("s", np.float32(0.1)), init("zp", np.int8(0))]
    m = model(nodes, [("x", F16, [2, 4])], [("y", F, [2, 4])], inits, opset=19)
    assert "typed.quantize-scale" not in RULES and check(m, "10.13", "rtx-1.7").exit_code == 0


# ----------------------------------------------------------------------------- shapes


def test_rank_above_8():
    shape = [1] * 9
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", F, shape)], [("y", F, shape)])
    assert rules(check(m, "11.4"), "11.4") == {"shape.rank"}


def test_conv_channels_may_be_dynamic():
    """No rule: the Conv importer checks the channel count only where it is known ('nchan == -1 ||',
    onnx-tensorrt 8.6-GA builtin_op_importers.cpp, 10.1-GA onnxOpImporters.cpp Conv and importerUtils.cpp
    convMultiInput), and TensorRT-RTX parses and builds this graph; the former rule conv.channels refused it."""
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[1, 1])
    m = model([conv], [("x", F, [1, "C", 4, 4])], [("y", F, [1, 2, 4, 4])], [init("w", np.ones((2, 2, 1, 1), np.float32))])
    assert "conv.channels" not in RULES and check(m, "10.3", "rtx-1.7").exit_code == 0


def test_quantized_types_pass_through_data_movement():
    """op.type does not judge INT8 tensors by the table's type column (operators.md: quantized types
    come from Q/DQ; the importers' type checks are deny-lists): Q -> Reshape -> DQ is taken."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q"),
             helper.make_node("Reshape", ["q", "shp"], ["r"], name="reshape"),
             helper.make_node("DequantizeLinear", ["r", "s", "zp"], ["y"], name="dq")]  # fmt: skip
    inits = [init("s", np.float32(0.1)), init("zp", np.int8(0)), init("shp", np.array([4, 2], np.int64))]
    m = model(nodes, [("x", F, [2, 4])], [("y", F, [4, 2])], inits)
    assert check(m, "10.13", "rtx-1.7").exit_code == 0
    gather = helper.make_node("Gather", ["x", "i"], ["y"], name="gather")
    bad = model([gather], [("x", F, [4, 2])], [("y", F, [2, 2])], [init("i", np.array([0, 1], np.int8))])
    assert rules(check(bad, "10.13"), "10.13") == {"op.type"}  # indices: INT32/INT64 only


def test_uint8_only_at_graph_inputs_and_outputs():
    nodes = [helper.make_node("Cast", ["x"], ["u"], name="to_u8", to=TensorProto.UINT8),
             helper.make_node("Cast", ["u"], ["y"], name="to_f", to=F)]  # fmt: skip
    m = model(nodes, [("x", F, [1, 4])], [("y", F, [1, 4])])
    assert rules(check(m, "10.13"), "10.13") == {"type.uint8-intermediate"}
    ok = model([helper.make_node("Cast", ["x"], ["y"], name="to_f", to=F)], [("x", TensorProto.UINT8, [1, 4])],
               [("y", F, [1, 4])])  # fmt: skip
    assert check(ok, "10.13").exit_code == 0


def test_uint8_casts_only_to_float_or_half():
    """A pixel file's Cast takes its UINT8 input to FLOAT; a Cast of UINT8 to INT32 is refused by
    TensorRT 8 and 10 (DataType.UINT8: conversions only to and from float32/float16), and taken by
    TensorRT-RTX 1.7, whose real parser and builder build it (test_rules_vs_parser)."""
    u8 = [("x", TensorProto.UINT8, [1, 4])]
    bad = model([helper.make_node("Cast", ["x"], ["y"], name="to_i", to=TensorProto.INT32)], u8,
                [("y", TensorProto.INT32, [1, 4])])  # fmt: skip
    r = check(bad, "8.6", "10.13", "rtx-1.7")
    assert "type.uint8-cast" in rules(r, "8.6") & rules(r, "10.13") and "type.uint8-cast" not in rules(r, "rtx-1.7")
    for to in (F, TensorProto.FLOAT16):
        ok = model([helper.make_node("Cast", ["x"], ["y"], name="to_f", to=to)], u8, [("y", to, [1, 4])])
        assert "type.uint8-cast" not in rules(check(ok, "10.13", "8.6"), "10.13") | rules(check(ok, "8.6"), "8.6")


@pytest.mark.parametrize("op, attrs, what", [
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}, "dilations"),
    ("Resize", {"antialias": 1, "mode": "linear"}, "antialias"),
    ("Resize", {"coordinate_transformation_mode": "tf_crop_and_resize"}, "coordinate_transformation_mode"),
    ("ScatterND", {"reduction": "add"}, "reduction"),
])  # fmt: skip
def test_attribute_values_the_importer_refuses(op, attrs, what):
    ins = {"MaxPool": ["x"], "Resize": ["x", "", "sc"], "ScatterND": ["x", "i", "u"]}[op]
    inits = {"Resize": [init("sc", np.array([1, 1, 2, 2], np.float32))],
             "ScatterND": [init("i", np.array([[1]], np.int64)), init("u", np.ones((1, 1, 8, 8), np.float32))]}
    m = model([helper.make_node(op, ins, ["y"], name="n", **attrs)], [("x", F, [4, 1, 8, 8])], [("y", F, None)],
              inits.get(op, []), opset=19)  # fmt: skip
    r = check(m, "10.13", "rtx-1.7")
    assert rules(r, "10.13") == rules(r, "rtx-1.7") == {"op.attribute"} and what in r.findings[0].message
    cubic = model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="n", mode="cubic")], [("x", F, [1, 1, 4, 4])],
                  [("y", F, None)], inits["Resize"], opset=19)  # the importer takes cubic (operators.md says not)
    assert check(cubic, "10.13").exit_code == 0


def test_spatial_dims_and_static_inputs():
    pool = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2, 2, 2])
    m = model([pool], [("x", F, [1, 1, 4, 4, 4, 4])], [("y", F, None)])
    assert rules(check(m, "rtx-1.7"), "rtx-1.7") == {"op.spatial-dims"}
    eye = model([helper.make_node("EyeLike", ["x"], ["y"], name="e")], [("x", F, ["n", "n"])], [("y", F, None)])
    assert rules(check(eye, "rtx-1.7"), "rtx-1.7") == {"shape.static-input"}


def test_rtx_column_is_1013_plus_its_differences():
    """rtx-1.7 sees 10.13's version-dependent rules, and refuses what TensorRT-RTX does not have (a
    plugin-backed op; computed Squeeze axes) while taking the newer parser's ops."""
    from aft_export.trtcheck.versions import Version

    v = Version("rtx-1.7")
    assert v.v == (10, 13) and v.rtx and v.opset_range == Version("10.13").opset_range
    nz = model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", F, [4, 4])], [("y", I64, None)])
    r = check(nz, "10.13", "rtx-1.7")
    assert rules(r, "rtx-1.7") == {"op.unsupported"} and r.status["10.13"] == "accepts"
    assert "no plugin library" in r.findings[0].message
    sq = model([helper.make_node("Squeeze", ["x", "a"], ["y"], name="sq")], [("x", F, [1, 4, 1]), ("a", I64, [1])],
               [("y", F, None)])  # fmt: skip
    r = check(sq, "10.13", "rtx-1.7")
    assert rules(r, "rtx-1.7") == {"input.must-be-constant"} and r.status["10.13"] == "accepts"
    rms = model([helper.make_node("RMSNormalization", ["x", "g"], ["y"], name="rms")], [("x", F, [2, 4])],
                [("y", F, None)], [init("g", np.ones(4, np.float32))], opset=23)  # fmt: skip
    r = check(rms, "10.13", "rtx-1.7")
    assert r.status["rtx-1.7"] == "accepts" and r.status["10.13"] == "refuses"


def test_what_tensorrt_rtx_builder_refuses():
    """Rules from TensorRT-RTX's builder (tests/trtcheck/test_rules_vs_parser.py builds these graphs):
    an int8 scalar dequantized (rtx only: standard TensorRT's builder is not checked here), an If with
    branches of different ranks on a run-time condition (every version: operators.md), and
    NonMaxSuppression, which TensorRT-RTX cannot build."""
    def dq_add(shape):
        return model([helper.make_node("DequantizeLinear", ["c", "s", "z"], ["d"], name="dq"),
                      helper.make_node("Add", ["x", "d"], ["y"], name="add")], [("x", F, [1, 4])], [("y", F, None)],
                     [init("c", np.ones(shape, np.int8)), init("s", np.float32(0.01)), init("z", np.int8(0))])  # fmt: skip

    r = check(dq_add(()), "10.13", "rtx-1.7")
    assert rules(r, "rtx-1.7") == {"qdq.scalar-weights"} and r.status["10.13"] == "accepts"
    assert check(dq_add((1,)), "rtx-1.7").status["rtx-1.7"] == "accepts"

    def if_model(b_shape, condition_constant=False):
        then = helper.make_graph([helper.make_node("Identity", ["a"], ["o"], name="t")], "then", [],
                                 [helper.make_tensor_value_info("o", F, None)])  # fmt: skip
        other = helper.make_graph([helper.make_node("Identity", ["b"], ["o2"], name="e")], "else", [],
                                  [helper.make_tensor_value_info("o2", F, None)])  # fmt: skip
        inputs = [("a", F, [2, 4]), ("b", F, list(b_shape))] + ([] if condition_constant else [("c", B, [])])
        inits = [init("c", np.array(True))] if condition_constant else []
        return model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                     inputs, [("y", F, None)], inits)  # fmt: skip

    r = check(if_model((8,)), "10.3", "rtx-1.7")
    assert rules(r, "10.3") == rules(r, "rtx-1.7") == {"if.branch-ranks"}
    assert "rank 2 in then_branch and rank 1" in r.findings[0].message
    assert check(if_model((2, 4)), "rtx-1.7").status["rtx-1.7"] == "accepts"
    assert check(if_model((8,), condition_constant=True), "rtx-1.7").status["rtx-1.7"] == "accepts"

    nms = model([helper.make_node("NonMaxSuppression", ["bx", "sc", "m"], ["y"], name="nms")],
                [("bx", F, [1, 4, 4]), ("sc", F, [1, 1, 4])], [("y", I64, None)], [init("m", np.array([2], np.int64))])
    r = check(nms, "10.13", "rtx-1.7")
    assert rules(r, "rtx-1.7") == {"op.unsupported"} and r.status["10.13"] == "accepts"


# ----------------------------------------------------------------------------- every rule is tested


def test_every_rule_has_a_test_here():
    from aft_export.trtcheck import RULES

    source = open(__file__).read()
    untested = [rule for rule in RULES if f'"{rule}"' not in source]
    assert untested == [], f"rules without a breaking graph in this file: {untested}"


@pytest.mark.parametrize("rule", ["opset.range", "conv.kernel-shape", "qdq.dequantize-input"])
def test_every_finding_names_source_and_fix(rule):
    from aft_export.trtcheck import RULES

    r = RULES[rule]
    assert r.source and r.fix and r.summary
