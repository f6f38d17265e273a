"""The portable target: functions inlined, standard ops, opset 19; read by ONNX Runtime,
OpenVINO, the ONNX reference evaluator and TensorRT-RTX's parser as written, quantised
forms included. (The zoo's numerics in every runtime: tests/test_conformance.py.)"""

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.verify.compare import TOLERANCES, metrics
from aft_export.exporting.exporter import ExportOptions, export_graph, to_target
from aft_export.models.checkpoint import load_checkpoint
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.runners import OpenVinoRunner, OrtRunner, ReferenceRunner
from tests.conftest import need_openvino
from tests.export.test_exporter import make_ckpt
from tests.rtx import parse

QUIET = dict(log=lambda *a: None, progress=False)


@pytest.fixture(scope="module")
def portable(tmp_path_factory, cifar10):
    """`aft-export export --target portable` of a small AFT-conv model (custom op form: its
    com.aft bodies are what gets inlined), and its int8 and fp16 quantisations."""
    d = tmp_path_factory.mktemp("portable")
    ckpt = make_ckpt(d / "m.pt", "aft_conv_test")
    out = d / "model.portable.onnx"
    res = CliRunner().invoke(main, ["export", str(ckpt), "-o", str(out), "--target", "portable", "--json",
                                    "--images", "16", "--data", str(cifar10 / "test.tar")])  # fmt: skip
    assert res.exit_code == 0, res.output
    paths = {"fp32": out}
    for precision in ("int8", "fp16"):
        paths[precision] = d / f"model.portable.{precision}.onnx"
        quantize_model(out, paths[precision], str(cifar10 / "train.tar") if precision == "int8" else None,
                       QuantizeOptions(precision=precision, images=16, cache_dir=""), **QUIET)  # fmt: skip
    return ckpt, json.loads(res.stdout), paths


def _within(got, fp32, precision):
    """The parity limits of ``precision`` (max abs, cosine; random inputs: no top-1 check)."""
    m, tol = metrics(fp32, got), TOLERANCES[precision]
    assert m["nonfinite"] == 0 and m["max_abs"] <= tol.max_abs and m["cosine_min"] >= tol.min_cosine, m


@pytest.mark.parametrize("precision", ["fp32", "int8", "fp16"])
def test_portable_files_are_standard_ops_at_opset_19(portable, precision):
    _, report, paths = portable
    model = onnx.load(paths[precision])
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["export_target"] == "portable" and meta["opset"] == "19"
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 19)] and model.ir_version == 9
    assert not model.functions and {n.domain for n in model.graph.node} <= {""}
    onnx.checker.check_model(model, full_check=True)
    if precision == "fp32":
        assert report["parity"]["passed"] and report["aft_nodes"] == 0
        assert report["trt_check"]["status"] == {"8.5": "not targeted", "8.6": "not targeted", "10.3": "accepts",
                                                 "10.13": "accepts", "11.4": "accepts"}  # fmt: skip
    # the fused q/k/v projection split back into one MatMul per part (exporting.rewrite.split_fused_projections)
    assert not any(n.op_type == "Split" for n in model.graph.node)
    if precision == "int8":  # 7-bit weights (QuantizeOptions.weight_bits): no overflow in OpenVINO without VNNI
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        weights = [inits[n.input[0]] for n in model.graph.node if n.op_type == "DequantizeLinear"
                   and n.input[0] in inits and inits[n.input[0]].dtype == np.int8]  # fmt: skip
        assert len(weights) >= 8 and max(int(np.abs(w.astype(np.int32)).max()) for w in weights) <= 64
        assert json.loads(meta["quantization"])["weight_bits"] == 7


@pytest.mark.parametrize("precision", ["fp32", "int8", "fp16"])
def test_the_reference_evaluator_reads_portable_files_as_written(portable, precision):
    """No help from the runner (DequantizeLinear is version 19), and the reference is within
    the precision's parity limits of the fp32 file in ONNX Runtime."""
    from onnx.reference import ReferenceEvaluator

    _, _, paths = portable
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    ReferenceEvaluator(onnx.load(paths[precision]))  # loads as the spec's implementation ships
    ref = ReferenceRunner(str(paths[precision]))
    assert ref.notes == [] and ref.backend == "onnx-reference"
    _within(ref.logits(x), OrtRunner(str(paths["fp32"])).logits(x), precision)


@pytest.mark.parametrize("precision", ["fp32", "int8", "fp16"])
def test_openvino_and_tensorrt_rtx_read_portable_files_unchanged(portable, precision):
    need_openvino()
    _, _, paths = portable
    x = np.random.default_rng(1).standard_normal((8, 3, 32, 32)).astype(np.float32)
    _within(OpenVinoRunner(str(paths[precision])).logits(x), OrtRunner(str(paths["fp32"])).logits(x), precision)
    parsed = parse(paths[precision].read_bytes())
    assert parsed.ok and parsed.errors == []


def test_the_exporter_ends_with_to_target(portable):
    """tests/test_conformance.py makes tensorrt8 and portable from one export with
    :func:`to_target`: the same graph `export --target portable` writes."""
    ckpt, _, paths = portable
    model, meta = load_checkpoint(str(ckpt))
    default = export_graph(model, meta, ExportOptions(images=0), log=lambda *a: None).model
    made = to_target(default, "portable")
    written = onnx.load(paths["fp32"])
    assert made.graph.SerializeToString() == written.graph.SerializeToString()
    assert {p.key: p.value for p in made.metadata_props} == {p.key: p.value for p in written.metadata_props}


def test_portable_has_a_fixed_opset():
    from aft_export.errors import AFTExportError

    with pytest.raises(AFTExportError, match="portable form is always opset 19.*leave `opset` out"):
        ExportOptions(target="portable", opset=19)


def test_quantize_target_portable_of_the_default_export_is_the_portable_int8(portable, tmp_path, cifar10):
    """`aft-export quantize model.onnx --target portable` (issue 33): the CPU's int8 made from the default
    export is the portable export quantised, graph for graph (same ranges, same bytes), only its recipe
    saying where it came from; within int8's parity limits of PyTorch on real images in ONNX Runtime,
    run by the reference evaluator, parsed by TensorRT-RTX."""
    from aft_export.data.images import normalize
    from aft_export.data.datasets import load_labelled
    from aft_export.exporting.exporter import export_checkpoint
    from aft_export.runners import TorchRunner

    ckpt, _, paths = portable
    default, cpu = tmp_path / "model.onnx", tmp_path / "model.portable.int8.onnx"
    export_checkpoint(ckpt, default, ExportOptions(images=0), log=lambda *a: None)
    result = quantize_model(default, cpu, str(cifar10 / "train.tar"),
                            QuantizeOptions(images=16, cache_dir="", target="portable"), **QUIET)  # fmt: skip
    made, written = onnx.load(cpu), onnx.load(paths["int8"])
    assert made.graph.SerializeToString() == written.graph.SerializeToString()
    meta = {p.key: p.value for p in made.metadata_props}
    theirs = {p.key: p.value for p in written.metadata_props}
    assert {k for k in meta if meta[k] != theirs.get(k)} == {"quantization"}
    assert result.recipe["converted_from"] == "tensorrt" and result.recipe["weight_bits"] == 7
    data = load_labelled(str(cifar10 / "test.tar"), 32, limit=32)
    torch_runner = TorchRunner(str(ckpt))
    x = normalize(data.images, torch_runner.info.mean, torch_runner.info.std).numpy()
    want = torch_runner.logits(x)
    m, tol = metrics(want, OrtRunner(str(cpu)).logits(x)), TOLERANCES["int8"]
    assert m["max_abs"] <= tol.max_abs and m["cosine_min"] >= tol.min_cosine, m
    _within(ReferenceRunner(str(cpu)).logits(x[:2]), want[:2], "int8")
    parsed = parse(cpu.read_bytes())
    assert parsed.ok and parsed.errors == []
