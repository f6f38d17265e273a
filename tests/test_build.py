"""NVIDIA's own parser and builder on every kind of artifact aft-export writes: TensorRT for RTX,
live, on this CPU (it builds engines ahead of time with no GPU).

Each *kind* once: the zoo x fp32/fp16/int8 x ``--target tensorrt``/``tensorrt8``; the option
variants on one model (decomposed op form, ``--quantize-aft-core``, ``--per-tensor``, dynamic
height/width); ``aft_full_tiny_224`` and ``aft_conv_tiny_224`` in fp32 and int8; the
bring-your-own examples. Every one must parse with zero parser errors and build a serialized
engine, and the manifest must say what the parser made of it (int8 layers for Q/DQ graphs, fp16
for fp16 ones). Artifacts are made once per module and shared. The full product (every model x
option x 224 config) is ``benchmarks/rtx_build.py``, not this suite.

Nothing here stands in for TensorRT: without TensorRT-RTX these tests skip (and fail under CI,
which installs it through the ``rtx`` extra). No engine built here is run: there is no GPU, and
the tests check that it is reported so.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from aft_export.tensorrt.build import build_engine, offline_column, parse
from aft_export.models.checkpoint import load_checkpoint
from aft_export.cli import main
from aft_export.data.datasets import load_labelled
from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.exporting.exporter import ExportOptions
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.runners import TrtRunner
from aft_export.environment import has_gpu
from aft_export.tensorrt.library import RTX, BuildOptions
from aft_export.trtcheck import check_model
from tests.conftest import REPO, unavailable

QUIET = dict(log=lambda *a: None)
ZOO = ["aft_conv_cifar", "aft_full_cifar", "aft_local_cifar", "aft_simple_cifar"]
TARGETS = ["tensorrt", "tensorrt8"]
PRECISIONS = ["fp32", "fp16", "int8"]
# the portable target's files (the CPU's int8: its rest fp32, 7-bit weights) are made for other runtimes, and
# TensorRT must still read them ("safe on every runtime"): built for one zoo model, the parser's rules being
# the graph's, not the weights'
PORTABLE = [f"zoo/aft_conv_cifar.portable.{p}" for p in PRECISIONS]
VARIANTS = ["decomposed.fp32", "dynamic_hw.fp32", "quantize_aft_core.int8", "per_tensor.int8"]  # on aft_conv_cifar
IMAGENET = ["aft_full_tiny_224.fp32", "aft_full_tiny_224.int8", "aft_conv_tiny_224.fp32", "aft_conv_tiny_224.int8"]
BYO = ["aft_pytorch_cifar", "comvex_cifar", "own_cifar"]  # examples/byo/*.py:build
KINDS = ([f"zoo/{m}.{t}.{p}" for m in ZOO for t in TARGETS for p in PRECISIONS] + PORTABLE
         + [f"variant/{v}" for v in VARIANTS]
         + [f"imagenet/{k}" for k in IMAGENET] + [f"byo/{b}.fp32" for b in BYO])  # fmt: skip
CALIBRATION_IMAGES = 8  # few: the parser and builder are what is tested, not the calibration
HW = "16,32,48"  # the dynamic-H/W variant's profile


@pytest.fixture(scope="module")
def rtx():
    if importlib.util.find_spec("tensorrt_rtx") is None:
        unavailable("TensorRT-RTX is not installed here (pip install -e '.[rtx]')")
    return RTX


class Artifacts:
    """Every kind of artifact, made on first use and kept for the module: each fp32 export once,
    its quantisations from it."""

    def __init__(self, root: Path, cifar10: Path, zoo_onnx, tiny_onnx):
        self.root, self.cifar10, self.made, self.zoo_onnx, self.tiny_onnx = root, cifar10, {}, zoo_onnx, tiny_onnx
        images = load_labelled(str(cifar10 / "test.tar"), 32, limit=CALIBRATION_IMAGES).images
        self.calib = root / "calib.npy"  # uint8 (N, H, W, 3): preprocessed by each model's own metadata
        np.save(self.calib, images)

    def get(self, kind: str) -> Path:
        if kind not in self.made:
            self.made[kind] = self._make(kind)
        return self.made[kind]

    def _quantize(self, fp32: Path, out: Path, precision: str, **kw) -> Path:
        quantize_model(fp32, out, str(self.calib) if precision == "int8" else None,
                       QuantizeOptions(precision=precision, images=CALIBRATION_IMAGES, cache_dir="", **kw),
                       progress=False, **QUIET)  # fmt: skip
        return out

    def _make(self, kind: str) -> Path:
        group, name = kind.split("/")
        stem, precision = name.rsplit(".", 1)
        out = self.root / f"{group}.{name}.onnx"
        if group == "zoo":
            model, target = stem.split(".")
            if precision != "fp32":
                return self._quantize(self.get(f"zoo/{model}.{target}.fp32"), out, precision)
            self.zoo_onnx.export(model, out, target=target)  # the session's (tests/conftest.py), verification off
        elif group == "variant":
            if stem in ("decomposed", "dynamic_hw"):
                self.zoo_onnx.export("aft_conv_cifar", out, **{"decomposed": {"op_form": "decomposed"},
                                                              "dynamic_hw": {"dynamic_hw": True}}[stem])  # fmt: skip
            else:
                opts = {"quantize_aft_core": {"quantize_aft_core": True}, "per_tensor": {"per_channel": False}}[stem]
                return self._quantize(self.get("zoo/aft_conv_cifar.tensorrt.fp32"), out, "int8", **opts)
        elif group == "imagenet":
            if precision != "fp32":
                return self._quantize(self.get(f"imagenet/{stem}.fp32"), out, precision)
            # untrained: the graph is what is tested (make_ckpt and export_checkpoint, once per session:
            # tests/export/test_exporter.py exports and verifies the same checkpoint)
            self.tiny_onnx.export(self.tiny_onnx.ckpt(self.root / stem / "m.pt", stem), out)
        else:
            _export_example(stem, out)
        return out


def _export_example(stem: str, out: Path) -> None:
    """An examples/byo model (untrained: the graph is what is tested), exported as a user would."""
    from aft_export.byo.export import export_model
    from aft_export.data.images import Preprocessing
    from tests.byo.publicpkgs import need

    for package in {"aft_pytorch_cifar": ["aft_pytorch"], "comvex_cifar": ["einops", "comvex"]}.get(stem, []):
        need(package)
    spec = importlib.util.spec_from_file_location(f"byo_example_{stem}", REPO / "examples" / "byo" / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pre = Preprocessing(32, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
    export_model(module.build().eval(), out, pre, ExportOptions(images=0), log=lambda *a: None)


@pytest.fixture(scope="module")
def made(tmp_path_factory, cifar10, rtx, zoo_onnx, tiny_onnx):
    return Artifacts(tmp_path_factory.mktemp("rtx"), cifar10, zoo_onnx, tiny_onnx)


@pytest.mark.parametrize("kind", KINDS)
def test_every_artifact_kind_parses_and_builds(made, kind):
    path = made.get(kind)
    hw = HW if "dynamic_hw" in kind else None
    batch = "1" if kind.startswith("imagenet/") else "1,8,32"  # a 224 AFT-conv int8 build takes 3x as long at 1,8,32
    result = build_engine(path, None, BuildOptions(library=RTX, batch_profile=batch, hw_profile=hw), **QUIET)
    engine, m = Path(result.engine), result.manifest
    assert engine.name.endswith(".rtx.engine") and engine.stat().st_size > 0  # zero parser errors, or it raised
    assert m["library"] == RTX and m["library_version"] and m["compute_capabilities"] == []
    assert m["built_on_gpu"] is has_gpu() and "not the engine's kernels" in m["note"]
    precision = kind.rsplit(".", 1)[1]
    assert m["precision"] == precision
    out = m["network"]["outputs"]
    if precision == "int8":  # Q/DQ reached the network: int8 tensors, matrix products fed by int8
        assert out.get("int8", 0) > 0 and m["network"]["quantized"]
    else:
        assert "int8" not in out and not m["network"]["quantized"]
    # fp16 tensors: an fp16 graph, and the fp16 rest of the tensorrt target's int8 (tensorrt8 and portable keep it
    # fp32)
    rest16 = precision == "int8" and not any(f".{t}." in kind for t in ("tensorrt8", "portable")) and \
        not kind.startswith("byo/")  # fmt: skip
    assert ("fp16" in out) == (precision == "fp16" or rest16)
    compute = m["network"]["compute"]
    assert ("fp16" in compute) == ("fp16" in out) and ("int8" in compute) == (precision == "int8")
    if kind.startswith("zoo/") and precision == "int8" and rest16:
        # the int8 engine keeps no more in fp32 than the same model's fp16 engine: the fixed rule's layers
        fp16 = parse(made.get(kind.replace(".int8", ".fp16")), RTX).network["compute"]
        assert 0 < compute["fp32"] <= fp16["fp32"] and compute["int8"] == len(m["network"]["quantized"])
    if kind == "variant/quantize_aft_core.int8":  # the AFT core's matrix products quantised too
        default = parse(made.get("zoo/aft_conv_cifar.tensorrt.int8"), RTX).network["quantized"]
        assert set(default) < set(m["network"]["quantized"])


def test_no_parser_warns_of_duplicate_node_names(made):
    """Every AFT layer addressable: no "A node named ... already exists" from the parser, on any kind.
    Parsed in one fresh process: the library prints a warning text once per process, so a parse in
    this one could hide what an earlier test's printed; one process that has parsed nothing before
    reports the first occurrence of every such warning."""
    paths = [str(made.get(kind)) for kind in KINDS]
    code = ("import json, sys\nfrom aft_export.tensorrt.build import parse\n"
            "print(json.dumps({p: parse(p, 'tensorrt-rtx').warnings for p in sys.argv[1:]}))")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, check=True)
    warnings = json.loads(run.stdout.strip().splitlines()[-1])
    assert all(w is not None for w in warnings.values()), "the parser's log was not captured"
    duplicates = {Path(p).name: [w for w in ws if "already exists" in w] for p, ws in warnings.items()}
    duplicates = {name: ws for name, ws in duplicates.items() if ws}
    assert not duplicates, f"{sum(map(len, duplicates.values()))} duplicate-name warnings, first in " + \
        ", ".join(f"{n} ({len(ws)}: {ws[0]})" for n, ws in list(duplicates.items())[:4])  # fmt: skip


def test_check_reports_the_real_parser_beside_the_rules(made, rtx, tmp_path):
    paths = [str(made.get("zoo/aft_full_cifar.tensorrt.int8")), str(made.get("zoo/aft_local_cifar.tensorrt8.fp16"))]
    res = CliRunner().invoke(main, ["check", *paths, "--build", "--strict", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["verdict"]["status"] == "ok" and len(out["files"]) == 2
    for report in out["files"]:
        real = report["real"]
        assert real["library"] == RTX and real["parses"] and real["builds"] and real["errors"] == []
        assert real["verdict"] == "accepts" and real["agrees"] and real["engine_bytes"] > 0
        assert real["column"] == offline_column(RTX, (1, 7))
    text = CliRunner().invoke(main, ["check", paths[0]]).output
    assert "parser, TensorRT-RTX 1.7" in text and "offline rules (column rtx-1.7) vs the parser: agree" in text
    # a graph the library refuses (NonZero: TensorRT-RTX imports it through a plugin and ships no plugin
    # library): refused, exit 1, and the rtx-1.7 column says so too (10.13's, which has NonZero, does not)
    g = onnx.helper.make_graph([onnx.helper.make_node("NonZero", ["x"], ["y"], name="nz")], "g",
                               [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
                               [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [2, None])])  # fmt: skip
    nonzero = tmp_path / "nonzero.onnx"
    onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 18)], ir_version=9), nonzero)
    res = CliRunner().invoke(main, ["check", str(nonzero), "--strict", "--json"])
    assert res.exit_code == 1, res.output
    (real,) = [f["real"] for f in json.loads(res.stdout)["files"]]
    assert not real["parses"] and "NonZero" in real["errors"][0] and real["verdict"] == "refuses"
    assert real["column"] == "rtx-1.7" and check_model(str(nonzero), ["rtx-1.7"]).status["rtx-1.7"] == "refuses"
    assert real["agrees"] and real["disagreement"] is None
    assert CliRunner().invoke(main, ["check", str(nonzero), "--offline-only"]).exit_code == 0  # 10.x's rules pass it
    # a disagreement exits 1 under --strict: custom::Relu is run as the built-in Relu (parsed; the rules
    # refuse it: functions.shadowed, a documented difference, tests/data/rtx_differences.json)
    body = onnx.helper.make_function("custom", "Relu", ["x"], ["y"], [onnx.helper.make_node("Sigmoid", ["x"], ["y"])],
                                     [onnx.helper.make_opsetid("", 17)])  # fmt: skip
    g = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"], name="act", domain="custom")], "g",
                               [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
                               [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 4])])  # fmt: skip
    shadowed = tmp_path / "shadowed.onnx"
    onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17), onnx.helper.make_opsetid(
        "custom", 1)], functions=[body], ir_version=9), shadowed)  # fmt: skip
    lax = CliRunner().invoke(main, ["check", str(shadowed), "--trt", "8.6"])  # 8.6: no functions, a plain Relu
    strict = CliRunner().invoke(main, ["check", str(shadowed), "--trt", "8.6", "--strict"])
    assert lax.exit_code == 0 and strict.exit_code == 1 and "DISAGREE (false refusal" in strict.output, strict.output
    assert "column rtx-1.7" in strict.output


def test_an_engine_built_here_is_never_reported_as_run(made, cifar10):
    """The runner refuses it without a GPU, and parity says skipped (exit 3), never passed."""
    if has_gpu():
        pytest.skip("a GPU is visible here: this checks the no-GPU path")
    onnx_path = made.get("zoo/aft_simple_cifar.tensorrt.fp16")
    engine = Path(str(onnx_path).replace(".onnx", ".rtx.engine"))
    if not engine.exists():
        build_engine(onnx_path, engine, BuildOptions(library=RTX), **QUIET)
    with pytest.raises(RuntimeMissing, match="no GPU: a TensorRT-RTX engine is built ahead of time"):
        TrtRunner(str(engine))
    res = CliRunner().invoke(main, ["parity", str(REPO / "models" / "aft_simple_cifar.pt"), str(engine), "--data",
                                    str(cifar10 / "test.tar"), "--images", "8", "--json"])  # fmt: skip
    assert res.exit_code == 3, res.output
    (row,) = json.loads(res.stdout)["artifacts"]
    assert row["status"] == "skipped" and row["passed"] is None and "no GPU" in row["reason"]
    assert load_checkpoint(REPO / "models" / "aft_simple_cifar.pt")  # the reference itself is fine


def test_parse_records_the_network(made, rtx):
    """What the parser made of an int8 graph, by layer name, from the network definition."""
    parsed = parse(made.get("zoo/aft_full_cifar.tensorrt.int8"), RTX)
    n = parsed.network
    assert parsed.ok and n["layers"]["QUANTIZE"] > 0 and n["layers"]["DEQUANTIZE"] > n["layers"]["QUANTIZE"]
    assert n["outputs"]["int8"] >= n["layers"]["QUANTIZE"] and n["outputs"]["fp32"] > 0
    assert set(n["quantized"]).isdisjoint(n["float"]) and len(n["quantized"]) + len(n["float"]) == \
        n["layers"]["MATRIX_MULTIPLY"] + n["layers"]["CONVOLUTION"]  # fmt: skip


def test_compute_layers_per_precision_see_through_casts_and_shuffles(rtx, tmp_path):
    """The network's compute layers per precision: constants, shuffles, casts and Q/DQ are not
    counted; a MatMul whose inputs are int8 dequantised, reached through a Cast and a Transpose,
    is int8; the other compute layers count by their output type."""
    from onnx import TensorProto, helper

    from tests.test_onnxio import cast_chain, qdq_inits

    nodes = [*cast_chain(), helper.make_node("Cast", ["g"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], qdq_inits())  # fmt: skip
    path = tmp_path / "casts.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)
    n = parse(path, RTX).network
    assert n["compute_layers"] == {"fp16": {"ACTIVATION": 1}, "fp32": {"ACTIVATION": 1}, "int8": {"MATRIX_MULTIPLY": 1}}
    assert n["compute"] == {"fp16": 1, "fp32": 1, "int8": 1} and len(n["quantized"]) == 1 and not n["float"]


def test_offline_column_for_each_parser():
    """The rules' column a real parser's verdict is compared with: TensorRT's own version; TensorRT-RTX's
    own edition column (rtx-1.7: 10.13's rules plus its documented differences), never a standard
    version's; for a newer 1.x the newest rtx column not newer than it; none is an error."""
    assert offline_column("tensorrt", (10, 13, 3, 9)) == "10.13" and offline_column("tensorrt", (8, 6, 1)) == "8.6"
    assert offline_column(RTX, (1, 7, 1, 116)) == "rtx-1.7" and offline_column(RTX, (1, 9)) == "rtx-1.7"
    for older in ((1, 5), (2, 0)):
        with pytest.raises(AFTExportError, match="no rules for TensorRT-RTX"):
            offline_column(RTX, older)
