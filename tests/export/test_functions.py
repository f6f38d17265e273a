"""The com.aft function bodies, run by ONNX Runtime, against the float64 formula."""

import numpy as np
import onnx
import onnx.inliner
import pytest
import torch
from onnx import TensorProto, helper

from aft_export.export.functions import DOMAIN, FUNCTIONS, attach_functions
from tests.layers.test_aft import conv_bias_matrix, make_qkv, reference, rel_err


def run_single(op_type, inputs: dict, attrs=None, inline=False):
    """Build a one-node model calling com.aft::op_type and run it with ORT."""
    import onnxruntime as ort

    vals = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in inputs.items()]
    node = helper.make_node(op_type, list(inputs), ["y"], domain=DOMAIN, **(attrs or {}))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(inputs["q"].shape))
    graph = helper.make_graph([node], "g", vals, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    attach_functions(model)
    onnx.checker.check_model(model, full_check=True)
    if inline:
        return model
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v.numpy() for k, v in inputs.items()})[0]


@pytest.mark.parametrize("op_type", ["AFTFull", "AFTLocal"])
@pytest.mark.parametrize("k_scale", [1.0, 50.0])
def test_full_and_local_bodies(op_type, k_scale):
    q, k, v = make_qkv(2, 12, 5, k_scale, seed=11)
    w = torch.randn(12, 12, generator=torch.Generator().manual_seed(12)) * 2
    attrs = {"window": 3} if op_type == "AFTLocal" else None
    y = run_single(op_type, {"q": q, "k": k, "v": v, "w": w}, attrs)
    assert np.isfinite(y).all()
    assert rel_err(torch.from_numpy(y), reference(q, k, v, w)) <= 1e-5


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
def test_simple_body(k_scale):
    q, k, v = make_qkv(2, 9, 4, k_scale, seed=13)
    y = run_single("AFTSimple", {"q": q, "k": k, "v": v})
    assert rel_err(torch.from_numpy(y), reference(q, k, v, torch.zeros(9, 9))) <= 1e-5


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
@pytest.mark.parametrize("grid", [(4, 4), (3, 5)])
def test_conv_body(k_scale, grid):
    heads, dh, ks = 3, 2, 3
    t, d = grid[0] * grid[1], heads * dh
    kernel = torch.randn(heads, ks, ks, generator=torch.Generator().manual_seed(14)) * 2
    q, kh, v = make_qkv(2, t, d, k_scale, seed=15, k_dim=heads)
    b = q.shape[0]
    y = run_single(
        "AFTConv",
        {"q": q.reshape(b, *grid, d), "k": kh.reshape(b, *grid, heads), "v": v.reshape(b, *grid, d),
         "kernel": kernel},
        {"heads": heads, "kernel_size": ks},
    )  # fmt: skip
    want = reference(q, kh.repeat_interleave(dh, dim=2), v, conv_bias_matrix(kernel, grid).repeat_interleave(dh, 0))
    assert rel_err(torch.from_numpy(y).reshape(b, t, d), want) <= 1e-5


@pytest.mark.parametrize("op_type", sorted(FUNCTIONS))
def test_no_intermediate_has_BTTd_elements(op_type):
    """Inline the body, infer shapes with concrete sizes, and bound every tensor."""
    b, d = 2, 8
    if op_type == "AFTConv":
        grid, heads = (6, 6), 4
        t = grid[0] * grid[1]
        inputs = {"q": torch.zeros(b, *grid, d), "k": torch.zeros(b, *grid, heads),
                  "v": torch.zeros(b, *grid, d), "kernel": torch.zeros(heads, 3, 3)}  # fmt: skip
        attrs = {"heads": heads, "kernel_size": 3}
    else:
        t = 36
        inputs = {"q": torch.zeros(b, t, d), "k": torch.zeros(b, t, d), "v": torch.zeros(b, t, d)}
        if op_type != "AFTSimple":
            inputs["w"] = torch.zeros(t, t)
        attrs = {"window": 2} if op_type == "AFTLocal" else None
    model = run_single(op_type, inputs, attrs, inline=True)
    inlined = onnx.inliner.inline_local_functions(model)
    assert not any(n.domain == DOMAIN for n in inlined.graph.node)
    inferred = onnx.shape_inference.infer_shapes(inlined, strict_mode=True, data_prop=True)
    sizes = []
    for value in inferred.graph.value_info:
        dims = value.type.tensor_type.shape.dim
        assert all(dim.HasField("dim_value") for dim in dims), value.name
        sizes.append(int(np.prod([dim.dim_value for dim in dims])))
    assert len(sizes) > 5
    assert max(sizes) <= max(b * t * d, t * t)
    assert max(sizes) < b * t * t * d
