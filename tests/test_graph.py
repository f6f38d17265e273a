"""Graph facts: the memory one image needs, from ONNX shape inference; the range of the int8
weights a graph dequantises."""

import onnx

from aft_export.artifacts.graph import PAIR_SAFE_INT8, activation_bytes_per_image, int8_weight_bits
from tests.test_quantize import _conv_head


def test_activation_bytes_of_a_known_graph(tmp_path):
    """image (N, 3, 8, 8) -> Conv, 4 filters of 2x2 stride 2 -> (N, 4, 4, 4) -> Flatten
    (N, 64) -> Gemm (N, 10): per image the largest intermediate is 64 floats (256 bytes),
    the input 192 floats and the output 10 (808 bytes), whatever the batch dimension says."""
    import numpy as np

    path = _conv_head(tmp_path / "m.onnx", np.ones((4, 3, 2, 2)), np.zeros(4), np.ones((10, 64)), np.zeros(10), size=8)
    model = onnx.load(path)
    assert activation_bytes_per_image(model, (3, 8, 8)) == (256, 808)
    # large weights are read by shape only: the estimate is the same
    big = _conv_head(tmp_path / "b.onnx", np.ones((4, 3, 2, 2)), np.zeros(4), np.ones((2000, 64)), np.zeros(2000),
                     size=8)  # fmt: skip
    assert activation_bytes_per_image(onnx.load(big), (3, 8, 8)) == (256, 768 + 8000)


def _dequantized(weights, as_constant: bool = False, dtype=None):
    """image (N, 4) -> MatMul by DequantizeLinear(weights int8 (4, 4), scale 0.1) -> (N, 4)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.asarray(weights, dtype or np.int8).reshape(4, 4), "w")
    scale = numpy_helper.from_array(np.array(0.1, np.float32), "scale")
    nodes = [helper.make_node("DequantizeLinear", ["w", "scale"], ["wf"]),
             helper.make_node("MatMul", ["image", "wf"], ["y"])]  # fmt: skip
    inits = [scale]
    if as_constant:
        nodes.insert(0, helper.make_node("Constant", [], ["w"], value=w))
    else:
        inits.append(w)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def test_int8_weight_bits_from_the_weights_a_graph_dequantises():
    """7 where every int8 weight is within [-64, 64] (two u8 x s8 products fit a 16-bit sum: 2 x 255 x 64 =
    32640), 8 where one is outside, from an initializer or a Constant node; None without int8 weights."""
    import numpy as np

    assert 2 * 255 * PAIR_SAFE_INT8 <= 2**15 - 1 < 2 * 255 * (PAIR_SAFE_INT8 + 1)
    seven = np.linspace(-64, 64, 16).round()
    assert int8_weight_bits(_dequantized(seven)) == 7 == int8_weight_bits(_dequantized(seven, as_constant=True))
    for outside in (65, -65, 127, -128):
        eight = seven.copy()
        eight[5] = outside
        assert int8_weight_bits(_dequantized(eight)) == 8 == int8_weight_bits(_dequantized(eight, as_constant=True))
    assert int8_weight_bits(_dequantized(np.full(16, 200), dtype=np.uint8)) is None  # not int8
    model = _dequantized(seven)
    del model.graph.node[0]  # a graph without DequantizeLinear
    assert int8_weight_bits(model) is None


def test_int8_weights_in_external_data_are_read_beside_the_file(tmp_path):
    """Not shown safe (8) until read from the file's folder."""
    import numpy as np

    onnx.save_model(_dequantized(np.linspace(-64, 64, 16).round()), tmp_path / "m.onnx", save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=0)  # fmt: skip
    model = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    assert int8_weight_bits(model) == 8 and int8_weight_bits(model, str(tmp_path)) == 7
