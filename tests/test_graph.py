"""Graph facts: the memory one image needs, from ONNX shape inference."""

import onnx

from aft_export.graph import activation_bytes_per_image
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
