"""The com.aft function bodies, run by ONNX Runtime, against the float64 formula."""

import numpy as np
import onnx
import onnx.inliner
import pytest
import torch
from onnx import TensorProto, helper

from aft_export.exporting.functions import DOMAIN, FUNCTIONS, attach_functions
from aft_export.artifacts.graph import MODULE_KEY, aft_kind, set_props
from tests.layers.test_aft import conv_bias_matrix, local_bias_matrix, make_qkv, reference, rel_err


def run_single(op_type, inputs: dict, attrs=None, inline=False):
    """Build a one-node model calling com.aft::op_type and run it with ORT."""
    import onnxruntime as ort

    vals = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in inputs.items()]
    node = helper.make_node(op_type, list(inputs), ["y"], name="layer", domain=DOMAIN, **(attrs or {}))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(inputs["q"].shape))
    graph = helper.make_graph([node], "g", vals, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    attach_functions(model)
    onnx.checker.check_model(model, full_check=True)
    if inline:
        return model
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v.numpy() for k, v in inputs.items()})[0]


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
def test_full_body(k_scale):
    q, k, v = make_qkv(2, 12, 5, k_scale, seed=11)
    w = torch.randn(12, 12, generator=torch.Generator().manual_seed(12)) * 2
    y = run_single("AFTFull", {"q": q, "k": k, "v": v, "w": w})
    assert np.isfinite(y).all()
    assert rel_err(torch.from_numpy(y), reference(q, k, v, w)) <= 1e-5


def local_band(grid, window, seed):
    """A banded AFT-local bias, 0 for offsets off the grid (as the exporter passes it)."""
    from aft_export.layers.cores import local_band_valid

    valid = local_band_valid(grid, window)
    return torch.randn(valid.shape, generator=torch.Generator().manual_seed(seed)) * valid


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
@pytest.mark.parametrize("grid,window", [((3, 4), 3), ((1, 12), 2), ((12, 11), 2), ((9, 10), 3)])
def test_local_body(k_scale, grid, window):
    """One tile (the window spans the grid), a 1-D sequence, padded multi-tile grids."""
    t = grid[0] * grid[1]
    q, k, v = make_qkv(2, t, 5, k_scale, seed=11)
    w = local_band(grid, window, seed=12)
    y = run_single("AFTLocal", {"q": q, "k": k, "v": v, "w": w}, {"window": window, "grid": list(grid)})
    assert np.isfinite(y).all()
    assert rel_err(torch.from_numpy(y), reference(q, k, v, local_bias_matrix(w, grid, window))) <= 1e-5


def test_local_is_version_2_with_the_layers_own_body():
    q, k, v = make_qkv(1, 12, 2, 1.0, seed=16)
    model = run_single("AFTLocal", {"q": q, "k": k, "v": v, "w": local_band((3, 4), 2, 17)},
                       {"window": 2, "grid": [3, 4]}, inline=True)  # fmt: skip
    assert [(o.domain, o.version) for o in model.opset_import if o.domain == DOMAIN] == [(DOMAIN, 2)]
    assert [(f.name, f.overload) for f in model.functions] == [("AFTLocal.layer", "")]
    assert model.graph.node[0].op_type == "AFTLocal.layer" and aft_kind(model.graph.node[0]) == "AFTLocal"
    with pytest.raises(ValueError, match="grid"):  # a version-1 node: dense bias, no grid
        run_single("AFTLocal", {"q": q, "k": k, "v": v, "w": torch.zeros(12, 12)}, {"window": 2})


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
def test_simple_body(k_scale):
    q, k, v = make_qkv(2, 9, 4, k_scale, seed=13)
    y = run_single("AFTSimple", {"q": q, "k": k, "v": v})
    assert rel_err(torch.from_numpy(y), reference(q, k, v, torch.zeros(9, 9))) <= 1e-5


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
@pytest.mark.parametrize("grid,ks", [((4, 4), 3), ((3, 5), 3), ((5, 6), 5)])
def test_conv_body(k_scale, grid, ks):
    heads, dh = 3, 2
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
    elif op_type == "AFTLocal":
        grid, window = (12, 12), 2  # tiled: the window is far smaller than the grid
        t = grid[0] * grid[1]
        inputs = {"q": torch.zeros(b, t, d), "k": torch.zeros(b, t, d), "v": torch.zeros(b, t, d),
                  "w": torch.zeros(t, 3, 3)}  # fmt: skip
        attrs = {"window": window, "grid": list(grid)}
    else:
        t = 36
        inputs = {"q": torch.zeros(b, t, d), "k": torch.zeros(b, t, d), "v": torch.zeros(b, t, d)}
        if op_type != "AFTSimple":
            inputs["w"] = torch.zeros(t, t)
        attrs = None
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
    if op_type == "AFTLocal":  # banded: at most nine halos of (eK V, eK), never T x T
        assert max(sizes) <= 9 * 2 * b * t * d and max(sizes) < t * t
    else:  # AFT-full: [eK * V | eK] in one product
        assert max(sizes) <= max(2 * b * t * d, t * t)
    assert max(sizes) < b * t * t * d


def _conv_node_model(kernel_sizes, modules=None):
    """One AFTConv node per kernel size, chained, on a 6x6 grid with 2 heads of width 2;
    ``modules``: the module path each node's metadata names (default: none)."""
    b, grid, heads, d = 2, (6, 6), 2, 4
    vals = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
            for n, s in (("q", [b, *grid, d]), ("k", [b, *grid, heads]), ("v", [b, *grid, d]))]  # fmt: skip
    nodes, inits, prev = [], [], "q"
    for i, ks in enumerate(kernel_sizes):
        w = np.random.default_rng(i).standard_normal((heads, ks, ks)).astype(np.float32)
        inits.append(onnx.numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("AFTConv", [prev, "k", "v", f"w{i}"], [f"y{i}"], name=f"call{i}", domain=DOMAIN,
                                      heads=heads, kernel_size=ks))  # fmt: skip
        if modules:
            set_props(nodes[-1], {MODULE_KEY: modules[i]})
        prev = f"y{i}"
    out = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [b, *grid, d])
    model = helper.make_model(helper.make_graph(nodes, "g", vals, [out], inits),
                              opset_imports=[helper.make_opsetid("", 18)])  # fmt: skip
    attach_functions(model)
    return model


def test_conv_kernel_shape_is_literal_in_each_layers_body():
    """TensorRT <= 10.3 reads a computed-weight Conv's kernel size from kernel_shape only:
    every Conv TensorRT will see (after inlining) has it literally, matching the weights."""
    model = _conv_node_model([3, 5, 3])
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["AFTConv.call0", "AFTConv.call1", "AFTConv.call2"]
    assert [(f.name, f.overload) for f in model.functions] == [(n.op_type, "") for n in model.graph.node]
    assert {aft_kind(n) for n in model.graph.node} == {"AFTConv"}
    for node, f in zip(model.graph.node, model.functions):
        convs = [n for n in f.node if n.op_type == "Conv"]
        assert len(convs) == 2
        ks = next(a.i for a in node.attribute if a.name == "kernel_size")
        for conv in convs:
            attr = {a.name: a for a in conv.attribute}
            assert list(attr["kernel_shape"].ints) == [ks, ks] and not attr["kernel_shape"].ref_attr_name
    inlined = onnx.inliner.inline_local_functions(model)
    shapes = sorted(tuple(a.ints) for n in inlined.graph.node if n.op_type == "Conv" for a in n.attribute
                    if a.name == "kernel_shape")  # fmt: skip
    assert shapes == [(3, 3)] * 4 + [(5, 5)] * 2
    assert not any(n.op_type == "CastLike" for n in inlined.graph.node), "CastLike: not parsed by TensorRT 8"


def test_each_layer_has_its_own_function_named_after_its_module():
    """TensorRT keys functions by name and names inlined layers after the body's nodes: each
    layer's function, nodes and inner values carry the layer's module path, all distinct."""
    model = _conv_node_model([3, 3, 3], modules=["blocks.0.mixer", "blocks.1.mixer", "blocks.1.mixer"])
    onnx.checker.check_model(model, full_check=True)
    names = [n.op_type for n in model.graph.node]
    assert names == ["AFTConv.blocks.0.mixer", "AFTConv.blocks.1.mixer", "AFTConv.blocks.1.mixer_2"]
    seen_nodes, seen_values = set(), set()
    for f, layer in zip(model.functions, ["blocks.0.mixer", "blocks.1.mixer", "blocks.1.mixer_2"]):
        assert f.name == f"AFTConv.{layer}" and f.domain == DOMAIN and not f.overload
        inner = {o for n in f.node for o in n.output} - set(f.output)
        assert all(n.name.startswith(f"{layer}/") for n in f.node)
        assert all(v.startswith(f"{layer}/") for v in inner)
        assert not seen_nodes & {n.name for n in f.node} and not seen_values & inner
        seen_nodes |= {n.name for n in f.node}
        seen_values |= inner
    before = [f.name for f in model.functions]
    assert attach_functions(model) == ["AFTConv"] and [f.name for f in model.functions] == before  # idempotent
    with pytest.raises(ValueError, match="op type"):
        bad = onnx.ModelProto()
        bad.CopyFrom(model)
        bad.graph.node[0].op_type = "AFTOther"
        attach_functions(bad)


def test_two_kernel_sizes_run_with_their_own_bodies():
    import onnxruntime as ort

    model = _conv_node_model([3, 5])
    rng = np.random.default_rng(7)
    feeds = {"q": rng.standard_normal((2, 6, 6, 4)), "k": rng.standard_normal((2, 6, 6, 2)),
             "v": rng.standard_normal((2, 6, 6, 4))}  # fmt: skip
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    inlined = onnx.inliner.inline_local_functions(model)
    want = ort.InferenceSession(inlined.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.abs(got - want).max() < 1e-6
    # and each layer used its own kernel: the k5 layer's output differs from a k3-only chain's
    k3 = _conv_node_model([3])
    first = ort.InferenceSession(k3.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.abs(first - got).max() > 1e-3
