"""Every AFT layer addressable in TensorRT: the real parser (TensorRT-RTX) reads each form
we write without a duplicate node name, and finds each layer's internal tensors by name.

TensorRT's parser keys model-local functions by name and names each inlined layer after
the body's node (aft_export/exporting/functions.py says why each layer has its own function).
"""

from __future__ import annotations

import onnx
import pytest

from aft_export.models.checkpoint import save_checkpoint
from aft_export.exporting.exporter import ExportOptions, export_checkpoint
from aft_export.artifacts.graph import DOMAIN, aft_kind, node_module
from aft_export.models import create_model
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from tests.rtx import DUPLICATE_NAME, need_rtx, parse

VARIANTS = ("full", "local", "simple", "conv")
QUIET = {"log": lambda *a: None, "progress": False}


@pytest.fixture(scope="module")
def graphs(tmp_path_factory, cifar10):
    """Each tiny model in the custom op form, and for AFT-local (the largest body) every
    other form and precision we write: name -> ModelProto."""
    need_rtx()
    root = tmp_path_factory.mktemp("names")
    out = {}
    for v in VARIANTS:
        ckpt = root / f"{v}.pt"
        model = create_model(f"aft_{v}_test")
        save_checkpoint(ckpt, model, [f"c{i}" for i in range(model.cfg.num_classes)], model_name=f"aft_{v}_test")
        forms = {"custom": ExportOptions(images=0)}
        if v == "local":
            forms["decomposed"] = ExportOptions(op_form="decomposed", images=0)
            forms["tensorrt8"] = ExportOptions(target="tensorrt8", images=0)
        for form, opts in forms.items():
            path = root / f"{v}.{form}.onnx"
            export_checkpoint(ckpt, path, opts, log=QUIET["log"])
            out[f"{v} {form} fp32"] = path
    calib = str(cifar10 / "test.tar")
    src = out["local custom fp32"]
    for tag, opts in {"fp16": QuantizeOptions(precision="fp16"),
                      "int8": QuantizeOptions(images=8, cache_dir=""),
                      "int8 --quantize-aft-core": QuantizeOptions(images=8, quantize_aft_core=True,
                                                                  cache_dir="")}.items():
        path = root / f"local.{tag.replace(' ', '_')}.onnx"
        quantize_model(src, path, None if tag == "fp16" else calib, opts, **QUIET)
        out[f"local custom {tag}"] = path
    return {name: onnx.load(path) for name, path in out.items()}


def test_no_duplicate_node_names_in_any_form(graphs):
    """Zero parser errors and no 'A node named ... already exists' for any form we write;
    and, independently of what the parser logged before (it logs each name once per
    process), no two nodes TensorRT reads share a name."""
    assert len(graphs) == 9
    for name, model in graphs.items():
        parsed = parse(model)
        assert parsed.ok and not parsed.errors, (name, parsed.errors)
        assert parsed.warnings(DUPLICATE_NAME) == [], name
        read = [n.name for n in model.graph.node]
        functions = {f.name: f for f in model.functions}
        for node in model.graph.node:  # the parser inlines a body under its own node names
            if node.op_type in functions:
                read += [b.name for b in functions[node.op_type].node]
        assert all(read) and len(read) == len(set(read)), name


@pytest.mark.parametrize("graph", [*(f"{v} custom fp32" for v in VARIANTS), "local custom fp16", "local custom int8"])
def test_each_aft_layers_internal_tensors_are_found_by_name(graphs, graph):
    """For every AFT layer: every node of its body gives the parser's tensor of that name,
    named after the layer (a Constant gives weights, not a tensor), and its layer names
    carry the layer's module path."""
    model = graphs[graph]
    parsed = parse(model)
    assert parsed.ok, parsed.errors
    functions = {f.name: f for f in model.functions}
    layers = [n for n in model.graph.node if n.domain == DOMAIN]
    assert layers and len({n.op_type for n in layers}) == len(layers)
    trt_layers = [parsed.network.get_layer(i).name for i in range(parsed.network.num_layers)]
    for call in layers:
        module = node_module(call)[0]
        body = functions[call.op_type]
        assert aft_kind(call) and call.op_type == f"{aft_kind(call)}.{module}"
        formal = dict(zip(body.output, call.output))
        found = 0
        for node in body.node:
            assert node.name.startswith(f"{module}/"), node.name
            tensor = parsed.tensor(node.name)
            if node.op_type == "Constant":
                assert tensor is None
                continue
            assert tensor is not None, f"{graph}: {node.name} not found"
            assert tensor.name == formal.get(node.output[0], node.output[0])
            assert tensor.name == call.output[0] or tensor.name.startswith(f"{module}/")
            found += 1
        assert found >= 9  # AFT-simple, the smallest body, has 9 nodes besides its Constants
        assert sum(t.startswith(f"{module}/") for t in trt_layers) >= found
