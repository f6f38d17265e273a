"""The runtime rewrites: each pattern is present after the rewrite, ONNX Runtime fuses what
it should, and outputs match the unrewritten graph and the float64 formula."""

import math

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from aft_export.models.checkpoint import load_checkpoint
from aft_export.exporting.exporter import ExportOptions, _torch_export
from aft_export.exporting.rewrite import (gelu_for_fusion, merge_shared_matmuls, optimize_for_runtime,
                                         split_fused_projections, unmerge_shared_products)
from aft_export.artifacts.graph import AFT_LAYER_TYPES, node_module
from aft_export.runners import ModelInfo, OrtRunner
from aft_export.trtcheck import check_model
from tests.export.test_exporter import make_ckpt

INFO = ModelInfo(["a", "b"], (3, 8, 8), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))


def _torch_gelu_graph(n=4096):
    """GELU exactly as torch.onnx exports it: Mul(0.5, 1 + erf(x / sqrt 2)) then Mul(x, .)."""
    consts = {"sqrt2": np.float32(math.sqrt(2.0)), "one": np.float32(1.0), "half": np.float32(0.5)}
    nodes = [
        helper.make_node("Div", ["image", "sqrt2"], ["scaled"]),
        helper.make_node("Erf", ["scaled"], ["erf"]),
        helper.make_node("Add", ["erf", "one"], ["plus1"]),
        helper.make_node("Mul", ["half", "plus1"], ["halved"]),
        helper.make_node("Mul", ["image", "halved"], ["logits"]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "gelu", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", n])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", n])],
        [numpy_helper.from_array(np.array(v), k) for k, v in consts.items()],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_gelu_is_reordered_so_onnx_runtime_fuses_it():
    before = _torch_gelu_graph()
    after = onnx.ModelProto()
    after.CopyFrom(before)
    assert gelu_for_fusion(after) == 1
    assert gelu_for_fusion(after) == 0  # nothing left to rewrite
    onnx.checker.check_model(after, full_check=True)
    # ONNX Runtime's pattern: Mul(x, 1 + erf) then Mul(., 0.5)
    by_out = {n.output[0]: n for n in after.graph.node}
    assert list(by_out["halved"].input) == ["image", "plus1"]
    assert list(by_out["logits"].input) == ["halved", "half"]

    x = np.random.default_rng(0).standard_normal((2, 4096)).astype(np.float32) * 4
    runs = {}
    for name, model in (("before", before), ("after", after)):
        runner = OrtRunner(model, info=INFO, profile=True)
        runs[name] = runner.run({"image": x})["logits"]
        runs[name + "_ops"] = {r["op_type"] for r in runner.op_profile()}
    assert "Gelu" in runs["after_ops"] and "Erf" not in runs["after_ops"]
    assert "Gelu" not in runs["before_ops"] and "Erf" in runs["before_ops"]  # why the rewrite exists
    x64 = x.astype(np.float64)
    want = 0.5 * x64 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2)))
    for got in (runs["before"], runs["after"]):
        assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_gelu_left_alone_when_the_pattern_differs():
    model = _torch_gelu_graph()
    model.graph.initializer[2].CopyFrom(numpy_helper.from_array(np.array(np.float32(0.25)), "half"))
    assert gelu_for_fusion(model) == 0
    model = _torch_gelu_graph()
    model.graph.node[4].input[0] = "scaled"  # the last Mul is not by the GELU's own input
    assert gelu_for_fusion(model) == 0


@pytest.fixture(scope="module")
def full_ckpt(tmp_path_factory):
    return make_ckpt(tmp_path_factory.mktemp("rw") / "full.pt", "aft_full_test")


def _aft_matmuls(model):
    return [n for n in model.graph.node if n.op_type == "MatMul" and node_module(n)
            and node_module(n)[1] in AFT_LAYER_TYPES]  # fmt: skip


@pytest.mark.parametrize("op_form", ["decomposed", "custom"])
def test_exported_graph_rewritten_outputs_unchanged(full_ckpt, op_form):
    model, meta = load_checkpoint(full_ckpt)
    opts = ExportOptions(op_form=op_form, images=0)
    plain = _torch_export(model, meta.config, opts)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(plain)
    counts = optimize_for_runtime(rewritten)
    depth = meta.config.depth
    assert counts["gelu_reordered"] == depth
    if op_form == "decomposed":
        assert len(_aft_matmuls(plain)) == 2 * depth and counts["matmuls_merged"] == depth
        merged = _aft_matmuls(rewritten)
        assert len(merged) == depth  # one product per layer, on [eK * V | eK]
        producer = {o: n for n in rewritten.graph.node for o in n.output}
        assert all(producer[m.input[1]].op_type == "Concat" for m in merged)
        assert merge_shared_matmuls(rewritten) == 0
    else:  # the com.aft body already computes num and den as one product
        body = next(f for f in rewritten.functions if f.name.startswith("AFTFull."))
        matmuls = [n for n in body.node if n.op_type == "MatMul"]
        producer = {o: n for n in body.node for o in n.output}
        assert len(matmuls) == 1 and producer[matmuls[0].input[1]].op_type == "Concat"
    ops = {n.op_type for n in rewritten.graph.node}
    assert not any(n.domain == "com.microsoft" for n in rewritten.graph.node) and "Gelu" not in ops
    assert check_model(rewritten).exit_code == 0

    info = ModelInfo(meta.classes, meta.input_size, meta.mean, meta.std)
    x = np.random.default_rng(1).standard_normal((3, *meta.input_size)).astype(np.float32)
    got = OrtRunner(rewritten, info=info).logits(x)
    assert np.abs(got - OrtRunner(plain, info=info).logits(x)).max() <= 1e-5
    with torch.inference_mode():
        want = model.double()(torch.from_numpy(x).double()).numpy()
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())


def _fused_projection(bias: bool, sizes=(4, 2, 4), axis=-1, extra_reader=False):
    """x (n, 5, 6) @ W (6, 10) [+ b] -> Split on the last axis into ``sizes``, each part doubled
    (``extra_reader``: the product is also a graph output, so it must stay)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 10)).astype(np.float32), "W"),
             numpy_helper.from_array(np.array(sizes, np.int64), "sizes")]
    nodes = [helper.make_node("MatMul", ["image", "W"], ["mm"], name="qkv")]
    split_in = "mm"
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "b"))
        nodes.append(helper.make_node("Add", ["mm", "b"], ["biased"], name="qkv_bias"))
        split_in = "biased"
    nodes.append(helper.make_node("Split", [split_in, "sizes"], ["q", "k", "v"], name="split", axis=axis))
    nodes += [helper.make_node("Add", [p, p], [f"{p}2"]) for p in "qkv"]
    outputs = [helper.make_tensor_value_info(f"{p}2", TensorProto.FLOAT, ["n", 5, w] if axis == -1 else None)
               for p, w in zip("qkv", sizes)]  # fmt: skip
    if extra_reader:
        outputs.append(helper.make_tensor_value_info(split_in, TensorProto.FLOAT, ["n", 5, 10]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 5, 6])],
                              outputs, inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _rewritten_once(before, rewrite):
    """A copy of ``before`` that ``rewrite`` changed once (and then found nothing more to do in), checked."""
    after = onnx.ModelProto()
    after.CopyFrom(before)
    assert rewrite(after) == 1 and rewrite(after) == 0
    onnx.checker.check_model(after, full_check=True)
    return after


def _ort_outputs(model, feeds) -> list:
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("bias", [False, True])
def test_a_fused_projection_is_split_into_one_matmul_per_part(bias):
    """One MatMul (and bias Add) per part of the Split, on the weight's columns of that part, writing the
    Split's outputs: the same products to the last bit, no Split, the fused weight gone; metadata kept."""
    before = _fused_projection(bias)
    before.graph.node[0].metadata_props.add(key="aft.module", value="blocks.0.mixer")
    after = _rewritten_once(before, split_fused_projections)
    ops = [n.op_type for n in after.graph.node]
    assert "Split" not in ops and ops.count("MatMul") == 3 and ops.count("Add") == 3 + 3 * bias
    inits = {t.name: numpy_helper.to_array(t) for t in after.graph.initializer}
    assert "W" not in inits and [inits[f"W/part{j}"].shape for j in range(3)] == [(6, 4), (6, 2), (6, 4)]
    assert all(dict((p.key, p.value) for p in n.metadata_props).get("aft.module") == "blocks.0.mixer"
               for n in after.graph.node if n.op_type == "MatMul")  # fmt: skip
    x = np.random.default_rng(1).standard_normal((3, 5, 6)).astype(np.float32)
    run = [_ort_outputs(m, {"image": x}) for m in (before, after)]
    assert all(np.array_equal(a, b) for a, b in zip(*run))


@pytest.mark.parametrize("kind", ["axis_0", "read_elsewhere", "uneven"])
def test_a_projection_that_is_not_a_plain_fused_one_is_left_alone(kind):
    model = {"axis_0": lambda: _fused_projection(True, axis=0), "read_elsewhere": lambda: _fused_projection(
        True, extra_reader=True), "uneven": lambda: _fused_projection(False, sizes=(4, 2, 3))}[kind]()  # fmt: skip
    before = model.SerializeToString()
    assert split_fused_projections(model) == 0 and model.SerializeToString() == before


def _merged_product(form: str):
    """ew (n, 5, 5) @ Concat(a, b, axis=-1), a and b (n, 5, 3), split back into the two products: by a Split
    (the decomposed form's merge) or by a Reshape to [0, 0, 2, -1] and a Gather of each half on axis 2 (the
    AFT-full body's, its constants as value_ints and value_int)."""
    const = lambda name, **kw: helper.make_node("Constant", [], [name], name=name, **kw)  # noqa: E731
    nodes = [helper.make_node("Concat", ["a", "b"], ["cat"], axis=-1),
             helper.make_node("MatMul", ["ew", "cat"], ["both"], name="core")]  # fmt: skip
    if form == "split":
        nodes += [const("sizes", value=numpy_helper.from_array(np.array([3, 3], np.int64))),
                  helper.make_node("Split", ["both", "sizes"], ["num", "den"], axis=-1)]  # fmt: skip
    else:
        nodes += [const("shape", value_ints=[0, 0, 2, -1]), const("i0", value_int=0), const("i1", value_int=1),
                  helper.make_node("Reshape", ["both", "shape"], ["halves"]),
                  helper.make_node("Gather", ["halves", "i0"], ["num"], axis=2),
                  helper.make_node("Gather", ["halves", "i1"], ["den"], axis=2)]  # fmt: skip
    nodes.append(helper.make_node("Div", ["num", "den"], ["y"]))
    inputs = [helper.make_tensor_value_info("ew", TensorProto.FLOAT, ["n", 5, 5])] + [
        helper.make_tensor_value_info(x, TensorProto.FLOAT, ["n", 5, 3]) for x in "ab"]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.mark.parametrize("form", ["split", "gather"])
def test_a_merged_product_is_unmerged_into_two_matmuls(form):
    """The merged numerator/denominator product back as two MatMuls on the shared left operand, writing
    the outputs its split wrote: the same values to the bit, no Concat, Split, Reshape or Gather left."""
    before = _merged_product(form)
    before.graph.node[1].metadata_props.add(key="aft.module", value="blocks.0.mixer")
    after = _rewritten_once(before, unmerge_shared_products)
    ops = [n.op_type for n in after.graph.node if n.op_type != "Constant"]
    assert ops == ["MatMul", "MatMul", "Div"]
    assert all(dict((p.key, p.value) for p in n.metadata_props)["aft.module"] == "blocks.0.mixer"
               for n in after.graph.node if n.op_type == "MatMul")  # fmt: skip
    rng = np.random.default_rng(2)
    feeds = {"ew": rng.random((2, 5, 5), np.float32), "a": rng.standard_normal((2, 5, 3)).astype(np.float32),
             "b": rng.random((2, 5, 3), np.float32) + 0.5}  # fmt: skip
    run = [_ort_outputs(m, feeds)[0] for m in (before, after)]
    assert np.array_equal(*run)


def test_the_default_exports_merged_core_is_unmerged_in_the_portable_form(full_ckpt):
    """AFT-full's body (com.aft, inlined) has its merged product; the portable form has two MatMuls instead."""
    from aft_export.exporting.forms import to_target
    from aft_export.exporting.exporter import export_graph

    model, meta = load_checkpoint(full_ckpt)
    graph = export_graph(model, meta, ExportOptions(images=0, simplify=False)).model
    portable = to_target(graph, "portable")
    core = [n.op_type for n in portable.graph.node if "mixer" in n.name]
    assert core.count("MatMul") == 2 * sum(n.domain == "com.aft" for n in graph.graph.node) > 0
    assert not {"Gather", "Concat", "Split"} & set(core)
