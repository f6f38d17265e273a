import json

import onnx
import pytest
from onnx import TensorProto, helper

from aft_export.artifacts.onnxio import ArtifactMeta


def _model():
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 2, 2])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, 2, 2])
    return helper.make_model(helper.make_graph([helper.make_node("Identity", ["image"], ["logits"])], "g", [x], [y]))


def test_artifact_meta_writes_reads_and_parses_the_metadata_in_one_place():
    model = _model()
    meta = ArtifactMeta({"classes": json.dumps(["a", "b"]), "input_size": "[3, 2, 2]", "mean": "[0.5, 0.5, 0.5]",
                         "std": "[0.25, 0.25, 0.25]", "source_sha256": "ab" * 32, "export_target": "tensorrt8"})  # fmt: skip
    meta["precision"] = "fp16"
    meta.write(model)
    assert [p.key for p in model.metadata_props] == sorted(p.key for p in model.metadata_props)  # deterministic
    back = ArtifactMeta.of(onnx.load_from_string(model.SerializeToString()), "m.onnx")
    assert back.classes == ["a", "b"] and back.input_size == (3, 2, 2) and back.mean == (0.5, 0.5, 0.5)
    assert back.std == (0.25, 0.25, 0.25) and back.source_sha256 == "ab" * 32 and back["precision"] == "fp16"
    assert back.export_target == "tensorrt8" and back.op_form == "custom" and back.where == "m.onnx"
    assert "classes" in back and back.get("nothing", "x") == "x"


def test_missing_and_malformed_values_raise_what_callers_turn_into_one_line_errors():
    empty = ArtifactMeta.of(_model())
    with pytest.raises(KeyError):
        empty.classes
    assert empty.source_sha256 == "" and empty.export_target == "tensorrt"
    with pytest.raises(ValueError):
        ArtifactMeta({"mean": "[0.5, "}).mean


def test_nonfinite_weights_are_found_in_initializers_constants_and_functions():
    import numpy as np
    from onnx import numpy_helper

    from aft_export.artifacts.onnxio import nonfinite_weights

    model = _model()
    model.graph.initializer.extend([numpy_helper.from_array(np.array([1.0, np.nan, np.nan], np.float32), "w"),
                                    numpy_helper.from_array(np.array([1.0, 2.0], np.float16), "ok"),
                                    numpy_helper.from_array(np.array([7], np.int64), "shape")])  # fmt: skip
    inf = numpy_helper.from_array(np.array([np.inf, -np.inf, 0.0]), "c")  # float64
    model.graph.node.append(helper.make_node("Constant", [], ["c"], value=inf))
    body = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([np.nan], np.float16)))
    model.functions.append(helper.make_function("com.x", "F", [], ["k"], [body], [helper.make_opsetid("", 18)]))
    assert nonfinite_weights(model) == [("w", 2, 0), ("c", 0, 2), ("k", 1, 0)]
    assert nonfinite_weights(_model()) == []


def over_limit_onnx(folder):
    """An fp32 graph whose one weight, in an external data file, is just over 2 GiB: the file is
    sparse (no disk used) and nothing here reads it."""
    from aft_export.artifacts.onnxio import TWO_GB

    n = TWO_GB // 4 + 1
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [n])
    model = _model()
    big = model.graph.initializer.add()
    big.name, big.data_type, big.data_location = "big", TensorProto.FLOAT, TensorProto.EXTERNAL
    big.dims.append(n)
    for key, value in (("location", "big.data"), ("offset", "0"), ("length", str(4 * n))):
        big.external_data.add(key=key, value=value)
    model.graph.node.append(helper.make_node("Identity", ["big"], ["w"]))
    model.graph.output.append(w)
    with open(folder / "big.data", "wb") as f:
        f.truncate(4 * n)
    onnx.save(model, str(folder / "big.onnx"))
    return folder / "big.onnx"


def test_a_graph_over_protobufs_limit_is_refused_before_its_weights_are_read(tmp_path):
    from aft_export.errors import AFTExportError
    from aft_export.artifacts.onnxio import load_onnx, weight_bytes

    path = over_limit_onnx(tmp_path)
    model = load_onnx(path, external_data=False)  # what build, serve and triton-repo read
    assert weight_bytes(model) == 2**31 + 4 + model.ByteSize()
    with pytest.raises(AFTExportError) as caught:
        load_onnx(path, whole=("quantize", "do something else"))
    assert str(caught.value) == (f"{path} holds 2.00 GiB of weights ({2**31 + 4 + model.ByteSize():,} bytes), more "
                                 "than the 2 GiB protobuf lets one ONNX graph hold, and quantize works on the whole "
                                 "graph in memory; do something else")  # fmt: skip
    small = tmp_path / "small.onnx"
    onnx.save(_model(), str(small))
    assert load_onnx(small, whole=("quantize", "")).graph.node[0].op_type == "Identity"


# ---------------------------------------------------------------- compute nodes per precision (issue 33)


def _graph(nodes, inits, opset=19, functions=(), out_type=TensorProto.FLOAT):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", out_type, [2, 4])], inits)  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.x", 1)],
                             functions=list(functions))  # fmt: skip


def qdq_inits():
    """The int8 weight ``w``, the scales ``s``/``ws`` and the zero points ``z``/``wz`` of :func:`cast_chain`."""
    import numpy as np
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.arange(-8, 8, dtype=np.int8).reshape(4, 4), "w")]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("s", 0.05), ("ws", 0.1))]
    return inits + [numpy_helper.from_array(np.array(0, np.int8), n) for n in ("z", "wz")]


def cast_chain() -> list:
    """x -> Relu (fp32 compute) -> Q/DQ -> Cast fp16, and the int8 weight dequantised -> Transpose -> Cast
    fp16, into a MatMul (int8, through the casts and the transpose) -> Sigmoid ``g`` (fp16 compute); its
    initializers are :func:`qdq_inits`. tests/test_build.py has TensorRT-RTX parse it."""
    return [helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
            helper.make_node("Cast", ["dq"], ["dq16"], to=TensorProto.FLOAT16),
            helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wdq"]),
            helper.make_node("Transpose", ["wdq"], ["wt"], perm=[1, 0]),
            helper.make_node("Cast", ["wt"], ["w16"], to=TensorProto.FLOAT16),
            helper.make_node("MatMul", ["dq16", "w16"], ["m"]),
            helper.make_node("Sigmoid", ["m"], ["g"])]  # fmt: skip


def test_compute_nodes_count_int8_through_casts_and_transposes_and_skip_data_movement():
    """The graph tests/test_build.py parses with TensorRT-RTX (compute 1 int8, 1 fp16, 1 fp32 there):
    a MatMul fed by int8 DequantizeLinears through a Cast and a Transpose is int8; Relu (fp32) and
    Sigmoid (fp16) count by their type; Q/DQ, casts, the transpose and shape arithmetic are not compute."""
    from aft_export.artifacts.onnxio import compute_precisions

    nodes = [*cast_chain(),
             helper.make_node("Shape", ["g"], ["shape"]),  # shape arithmetic: int64, not compute
             helper.make_node("Mul", ["shape", "shape"], ["shape2"]),
             helper.make_node("Reshape", ["g", "shape2"], ["gr"]),
             helper.make_node("Cast", ["gr"], ["y"], to=TensorProto.FLOAT)]  # fmt: skip
    assert compute_precisions(_graph(nodes, qdq_inits())) == {"int8": 1, "fp16": 1, "fp32": 1}
    # a MatMul with only one int8 input computes in float: its activations are not rounded
    half = [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wdq"]),
            helper.make_node("MatMul", ["x", "wdq"], ["y"])]
    assert compute_precisions(_graph(half, qdq_inits())) == {"fp32": 1}


def test_compute_nodes_of_qoperator_graphs_and_inside_functions():
    """ONNX's QOperator form (MatMulInteger, QLinearMatMul) is int8 by its op; nodes inside a model-local
    function (the com.aft bodies) count where they are called, once per call."""
    from aft_export.artifacts.onnxio import compute_precisions

    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "xs"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "s", "z"], ["mq"]),
             helper.make_node("QLinearMatMul", ["mq", "s", "z", "w", "ws", "wz", "s", "z"], ["oq"]),
             helper.make_node("DequantizeLinear", ["oq", "s", "z"], ["y"])]  # fmt: skip
    import numpy as np
    from onnx import numpy_helper

    inits = [t for t in qdq_inits() if t.name != "w"]
    inits.append(numpy_helper.from_array(np.arange(16, dtype=np.uint8).reshape(4, 4), "w"))  # uint8 for MatMulInteger
    for t in inits:
        if t.name in ("z", "wz"):
            t.CopyFrom(numpy_helper.from_array(np.array(0, np.uint8), t.name))
    assert compute_precisions(_graph(nodes, inits)) == {"int8": 2, "fp32": 1}  # the rescale Mul is float
    body = helper.make_function("com.x", "Gate", ["a"], ["b"], [helper.make_node("Sigmoid", ["a"], ["s"]),
                                                               helper.make_node("Mul", ["a", "s"], ["b"])],
                                [helper.make_opsetid("", 19)])  # fmt: skip
    calls = [helper.make_node("Gate", ["x"], ["h"], domain="com.x", name="g1"),
             helper.make_node("Gate", ["h"], ["y"], domain="com.x", name="g2")]
    assert compute_precisions(_graph(calls, [], functions=[body])) == {"fp32": 4}


def test_a_modelopt_style_int8_whose_rest_is_fp16_counts_mostly_fp16():
    """Another tool's int8 file (ModelOpt's default --high_precision_dtype fp16): the input cast to fp16,
    int8 products, everything else in fp16. Labelled "int8" by graph_precision, its compute is mostly fp16."""
    from aft_export.artifacts.onnxio import compute_precisions, graph_precision

    import numpy as np
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.arange(-8, 8, dtype=np.int8).reshape(4, 4), "w"),
             numpy_helper.from_array(np.array(0.05, np.float16), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"), numpy_helper.from_array(np.full(4, 0.1, np.float16), "b"),
             numpy_helper.from_array(np.ones(4, np.float16), "g")]  # fmt: skip
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"]),
             helper.make_node("QuantizeLinear", ["n", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
             helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wdq"]),
             helper.make_node("MatMul", ["dq", "wdq"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["mb"]),
             helper.make_node("Erf", ["mb"], ["e"]),
             helper.make_node("Mul", ["e", "mb"], ["gelu"]),
             helper.make_node("Add", ["gelu", "h"], ["res"]),
             helper.make_node("Softmax", ["res"], ["p"]),
             helper.make_node("Cast", ["p"], ["y"], to=TensorProto.FLOAT)]  # fmt: skip
    model = _graph(nodes, inits)
    onnx.checker.check_model(model, full_check=True)
    counts = compute_precisions(model)
    assert graph_precision(model) == "int8" and counts == {"int8": 1, "fp16": 6}


def test_a_graph_already_quantised_is_int8_in_either_form_and_says_which():
    """Q/DQ pairs (ours, ModelOpt's, ONNX Runtime's QDQ) and integer ops (ONNX Runtime's QOperator
    and dynamic quantisers) are both int8: parity takes int8's limits, quantize refuses it as such."""
    from aft_export.artifacts.onnxio import foreign_kind, graph_precision, quantized_form

    model = _model()
    assert quantized_form(model) is None and graph_precision(model) == "fp32" and foreign_kind(model) == "fp32 graph"
    model.graph.node.extend([helper.make_node("DynamicQuantizeLinear", ["image"], ["q", "s", "z"]),
                             helper.make_node("MatMulInteger", ["q", "q"], ["m"])])  # fmt: skip
    assert quantized_form(model) == ("QOperator", ["DynamicQuantizeLinear", "MatMulInteger"])
    assert graph_precision(model) == "int8"
    assert foreign_kind(model) == "int8 graph, already quantised (QOperator form: DynamicQuantizeLinear, MatMulInteger)"
    qdq = _model()
    qdq.graph.node.append(helper.make_node("DequantizeLinear", ["w", "s"], ["d"]))
    assert quantized_form(qdq) == ("QDQ", ["DequantizeLinear"]) and graph_precision(qdq) == "int8"


def test_what_keeps_a_graph_from_being_fed_is_said_before_any_advice():
    from aft_export.artifacts.onnxio import image_input_problem, unfeedable

    assert image_input_problem(_model()) is None and unfeedable(_model(), "m.onnx") is None
    two = _model()
    two.graph.input.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1]))
    assert image_input_problem(two) == "takes 2 inputs ('image', 'mask')"
    message = unfeedable(two, "t.onnx")
    assert message.startswith("t.onnx has no aft-export metadata: it is another tool's fp32 graph that takes 2 inputs")
    assert "no preprocessing changes what a graph takes" in message and "`" not in message
    ids = _model()
    ids.graph.input[0].CopyFrom(helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", 128]))
    assert image_input_problem(ids) == ("takes int64 of shape [?, 128] as its input 'ids', not a float32 (N, C, H, W) "
                                        "image batch or uint8 (N, H, W, 3) pixels")  # fmt: skip
    half = _model()
    half.graph.input[0].CopyFrom(helper.make_tensor_value_info("image", TensorProto.FLOAT16, [1, 3, 32, 32]))
    assert image_input_problem(half) == ("takes float16 of shape [1, 3, 32, 32] as its input 'image', not a float32 "
                                         "(N, C, H, W) image batch or uint8 (N, H, W, 3) pixels")  # fmt: skip
    pixels = _model()  # raw pixels: a format of its own (aft_export.data.formats)
    pixels.graph.input[0].CopyFrom(helper.make_tensor_value_info("image", TensorProto.UINT8, ["n", 32, 32, 3]))
    assert image_input_problem(pixels) is None
    planar = _model()
    planar.graph.input[0].CopyFrom(helper.make_tensor_value_info("image", TensorProto.UINT8, ["n", 3, 32, 32]))
    assert "takes uint8 of shape [?, 3, 32, 32] as its input 'image', not" in image_input_problem(planar)
    unranked = _model()  # a rank the graph does not declare: let through, as before (the runtime says)
    unranked.graph.input[0].CopyFrom(helper.make_tensor_value_info("image", TensorProto.FLOAT, None))
    assert not unranked.graph.input[0].type.tensor_type.HasField("shape") and image_input_problem(unranked) is None
    gray = _model()
    gray.graph.input[0].CopyFrom(helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 28, 28]))
    assert "takes 1-channel images of shape [1, 1, 28, 28] as its input 'image', not RGB" in image_input_problem(gray)


def _external(model, tensor_name: str, location: str):
    """``model`` with the tensor ``tensor_name`` (an initializer, or a Constant's value anywhere) kept at
    ``location``."""
    from onnx.external_data_helper import _get_all_tensors

    tensor = next(t for t in _get_all_tensors(model) if t.name == tensor_name)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    return model


def _with_function_constant():
    """A graph that calls a model-local function whose body holds a Constant of 4 floats."""
    import numpy as np
    from onnx import numpy_helper

    value = numpy_helper.from_array(np.ones(4, np.float32), "kept")
    body = [helper.make_node("Constant", [], ["c"], value=value), helper.make_node("Add", ["x", "c"], ["y"])]
    fn = helper.make_function("local", "F", ["x"], ["y"], body, [helper.make_opsetid("", 17)])
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("F", ["image"], ["logits"], domain="local")], "g", [x], [y])
    return helper.make_model(graph, functions=[fn], opset_imports=[helper.make_opsetid("", 17),
                                                                   helper.make_opsetid("local", 1)])


def test_every_external_location_is_found_and_contained_functions_included(tmp_path):
    """Initializers', Constants' and function bodies' external data alike (info listed initializers only), each
    a regular file in the model's folder, by its name normalised; every reader refuses one that is not
    (load_onnx), naming the file and the tensor, before a byte of it is read."""
    from aft_export.artifacts.onnxio import external_files, load_onnx
    from aft_export.errors import AFTExportError

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.bin").write_bytes(b"\0" * 16)
    model = _external(_with_function_constant(), "kept", "sub/../sub/w.bin")
    onnx.save(model, tmp_path / "f.onnx")
    found = external_files(load_onnx(tmp_path / "f.onnx", external_data=False), tmp_path / "f.onnx")
    assert [(f.location, f.name, f.path) for f in found] == [("sub/../sub/w.bin", "sub/w.bin",
                                                             (tmp_path / "sub" / "w.bin").resolve())]  # fmt: skip
    assert load_onnx(tmp_path / "f.onnx").functions[0].node[0].attribute[0].t.raw_data == b"\0" * 16
    outside = tmp_path.parent / f"{tmp_path.name}-outside.bin"
    outside.write_bytes(b"\0" * 16)
    (tmp_path / "link.bin").symlink_to(outside)
    for location, said in (("../" + outside.name, "outside the folder of the file that names it"),
                           (str(outside), "an absolute path"), ("link.bin", f"a link to {outside}"),
                           ("sub", "which is a directory"), ("nope.bin", "which does not exist in"),
                           ("sub/../../x.bin", "outside the folder"), (".", "the folder itself")):  # fmt: skip
        onnx.save(_external(_with_function_constant(), "kept", location), tmp_path / "g.onnx")
        with pytest.raises(AFTExportError, match=rf"^{tmp_path}/g\.onnx: tensor \"kept\" keeps its data in .*{said}"):
            load_onnx(tmp_path / "g.onnx", external_data=False)
    with pytest.raises(AFTExportError, match=r"the name of a file the output itself holds \(model\.onnx\)"):
        external_files(_external(_with_function_constant(), "kept", "model.onnx/w.bin"), tmp_path / "f.onnx",
                       reserved=("model.onnx",))  # fmt: skip
