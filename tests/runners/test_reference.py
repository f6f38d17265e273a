"""The ONNX reference evaluator runner, and the one gap it fills: DequantizeLinear before opset 19."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aft_export.runners import ModelInfo, ReferenceRunner

INFO = ModelInfo([], (4, 3, 2), (0.0,) * 4, (1.0,) * 4)


def dequantize(opset: int):
    """``y = (q - zero_point) * scale`` per channel (axis 1) of an int8 (N, 4, 3, 2) input."""
    scale = numpy_helper.from_array(np.array([0.5, 0.25, 2.0, 1.0], np.float32), "scale")
    zero = numpy_helper.from_array(np.array([0, 3, -2, 1], np.int8), "zero")
    node = helper.make_node("DequantizeLinear", ["image", "scale", "zero"], ["y"], axis=1)
    graph = helper.make_graph([node], "dq", [helper.make_tensor_value_info("image", TensorProto.INT8, ["N", 4, 3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 3, 2])],
                              [scale, zero])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model


def _formula(q):
    s = np.array([0.5, 0.25, 2.0, 1.0]).reshape(1, 4, 1, 1)
    z = np.array([0, 3, -2, 1]).reshape(1, 4, 1, 1)
    return (q.astype(np.float64) - z) * s


@pytest.mark.parametrize("opset", [13, 17, 18, 19])
def test_dequantize_linear_at_every_opset_we_write(opset):
    q = np.random.default_rng(opset).integers(-128, 128, (2, 4, 3, 2)).astype(np.int8)
    runner = ReferenceRunner(dequantize(opset), info=INFO)
    got = runner.run({runner.input_name: q})[runner.output_name]
    assert np.array_equal(got, _formula(q).astype(np.float32))
    assert bool(runner.notes) == (opset < 19)


def test_the_reference_itself_has_no_dequantize_linear_before_19():
    """Why the runner lends one (fails when onnx.reference implements it: then drop the loan)."""
    from onnx.reference import ReferenceEvaluator

    q = np.zeros((1, 4, 3, 2), np.int8)
    with pytest.raises(Exception, match="DequantizeLinear"):
        ReferenceEvaluator(dequantize(18)).run(None, {"image": q})
    ReferenceEvaluator(dequantize(19)).run(None, {"image": q})
