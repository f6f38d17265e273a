"""The TensorRT 8 form: what TensorRT 8.5/8.6's parser needs, with the same numerics."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from aft_export.errors import AFTExportError
from aft_export.exporting.exporter import ExportOptions, export_checkpoint
from aft_export.exporting.trt8 import to_tensorrt8
from aft_export.artifacts.graph import node_module
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from tests.export.test_exporter import make_ckpt

QUIET = dict(log=lambda *a: None)


def _run(model, x):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("name", ["aft_full_test", "aft_local_test", "aft_simple_test", "aft_conv_test"])
@pytest.mark.parametrize("form", ["custom", "decomposed"])
def test_tensorrt8_export_matches_pytorch_and_has_the_8x_form(name, form, tmp_path, cifar10):
    out = tmp_path / "m.onnx"
    result = export_checkpoint(make_ckpt(tmp_path / "m.pt", name), out,
                               ExportOptions(op_form=form, target="tensorrt8", images=16,
                                             data=str(cifar10 / "test.tar")), **QUIET)  # fmt: skip
    assert result.parity.passed and result.parity.max_abs <= 1e-4  # against PyTorch, real images
    model = onnx.load(out)
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["export_target"] == "tensorrt8" and meta["opset"] == "17"
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)] and model.ir_version == 8
    assert not model.functions and result.aft_nodes == 0
    ops = {n.op_type for n in model.graph.node}
    assert not ops & {"LayerNormalization", "CastLike", "Gelu"}
    for node in model.graph.node:
        attrs = {a.name for a in node.attribute}
        if node.op_type == "Constant":
            assert attrs == {"value"}, node.name
        if node.op_type == "Shape":
            assert not attrs & {"start", "end"}, node.name
        if node.op_type.startswith("Reduce") and node.op_type != "ReduceSum":
            assert len(node.input) == 1 and "axes" in attrs, node.name
    assert result.trt_check["status"] == {v: "accepts" for v in ("8.5", "8.6", "10.3", "10.13", "11.4")}


def _layernorm_model(axis, with_bias=True, shape=(2, 3, 5)):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape[axis:]).astype(np.float32), "s")]
    inputs = ["x", "s"]
    if with_bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(shape[axis:]).astype(np.float32), "b"))
        inputs.append("b")
    ln = helper.make_node("LayerNormalization", inputs, ["y"], name="ln", axis=axis, epsilon=1e-3)
    ln.metadata_props.add(key="aft.module", value="norm")
    ln.metadata_props.add(key="aft.module_type", value="LayerNorm")
    graph = helper.make_graph([ln], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("axis,with_bias", [(-1, True), (1, True), (-1, False)])
def test_layernorm_decomposition_against_the_formula(axis, with_bias):
    model = _layernorm_model(axis, with_bias)
    out = to_tensorrt8(model)
    assert "LayerNormalization" not in {n.op_type for n in out.graph.node}
    assert all(node_module(n) == ("norm", "LayerNorm") for n in out.graph.node), "metadata kept on every node"
    x = np.random.default_rng(1).standard_normal((2, 3, 5)).astype(np.float32) * 3 + 1
    got = _run(out, x)
    axes = tuple(range(axis % 3, 3))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    want = (x64 - mean) / np.sqrt(var + 1e-3) * inits["s"] + (inits["b"] if with_bias else 0)
    assert np.abs(got - want).max() / np.abs(want).max() <= 1e-6


def test_what_has_no_opset_17_form_is_refused_by_name():
    split = helper.make_node("Split", ["x"], ["a", "b"], name="split18", axis=1, num_outputs=2)
    graph = helper.make_graph([split], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2]) for n in "ab"])  # fmt: skip
    with pytest.raises(AFTExportError, match="Split split18 splits by num_outputs"):
        to_tensorrt8(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    pad = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp")
    graph = helper.make_graph([pad], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                              [numpy_helper.from_array(np.array([2, 2], np.int64), "shape")])  # fmt: skip
    with pytest.raises(AFTExportError, match="CenterCropPad ccp: the opset-18 definition"):
        to_tensorrt8(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_fp16_keeps_the_decomposed_layernorm_in_fp32(tmp_path, cifar10):
    src = tmp_path / "m.onnx"
    export_checkpoint(make_ckpt(tmp_path / "m.pt", "aft_full_test"), src,
                      ExportOptions(target="tensorrt8", images=0), **QUIET)  # fmt: skip
    out = tmp_path / "m.fp16.onnx"
    quantize_model(src, out, str(cifar10 / "train.tar"), QuantizeOptions(precision="fp16", images=16, cache_dir=""),
                   progress=False, **QUIET)  # fmt: skip
    model = onnx.shape_inference.infer_shapes(onnx.load(out))
    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
    norm_outputs = [o for n in model.graph.node if (node_module(n) or ("", ""))[1] == "LayerNorm" for o in n.output]
    assert norm_outputs and {types[o] for o in norm_outputs if o in types} == {TensorProto.FLOAT}
    assert TensorProto.FLOAT16 in set(types.values())
