"""The trained zoo: every checkpoint loads, has a card, and measures what its card says."""

import json

import pytest
import torch

from aft_export import load_checkpoint
from aft_export.evaluate import evaluate_checkpoint
from tests.conftest import REPO

ZOO_DIR = REPO / "models"
ZOO = json.loads((ZOO_DIR / "zoo.json").read_text())["models"] if (ZOO_DIR / "zoo.json").exists() else []
NAMES = [z["name"] for z in ZOO]


def test_zoo_has_one_model_per_variant():
    assert sorted(z["variant"] for z in ZOO) == ["conv", "full", "local", "simple"]
    assert sorted(p.stem for p in ZOO_DIR.glob("*.pt")) == sorted(NAMES)


def test_accuracy_floors():
    top1 = [z["top1"] for z in ZOO]
    assert min(top1) >= 60.0 and max(top1) >= 75.0, top1


@pytest.mark.parametrize("entry", ZOO, ids=NAMES)
def test_checkpoint_and_card(entry):
    path = ZOO_DIR / f"{entry['name']}.pt"
    model, meta = load_checkpoint(path)
    assert meta.sha256 == entry["sha256"]
    assert "train_state" not in torch.load(path, weights_only=True)
    assert meta.config.variant == entry["variant"] and meta.provenance["epochs"] == entry["epochs"]
    card = (ZOO_DIR / f"{entry['name']}.md").read_text()
    assert f"**{entry['top1']:.2f}%**" in card and entry["sha256"] in card


@pytest.mark.slow
@pytest.mark.parametrize("entry", ZOO, ids=NAMES)
def test_measured_top1_matches_card(entry, cifar10):
    result = evaluate_checkpoint(ZOO_DIR / f"{entry['name']}.pt", str(cifar10 / "test.tar"))
    assert result["images"] == 10000
    # CPU evaluation is deterministic up to float summation order across thread counts
    assert abs(result["top1"] - entry["top1"]) <= 0.1


def _script(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("entry", ZOO, ids=NAMES)
def test_quantised_zoo_meets_the_floors(entry, tmp_path, cifar10, monkeypatch):
    """fp16 within 0.2 and int8 within 1.0 top-1 points of fp32 on the 10,000 test images."""
    monkeypatch.setenv("AFT_CIFAR10_DIR", str(cifar10))
    report = tmp_path / "q.json"
    rc = _script("quantize_zoo").main(["--models", entry["name"], "--out", str(tmp_path), "--json", str(report)])
    row = json.loads(report.read_text())["rows"][0]
    assert rc == 0, row
    assert row["fp32"]["top1"] == pytest.approx(entry["top1"], abs=0.1)  # the ONNX export is the model
    assert row["int8"]["recipe"]["calibration"]["source"] == "cifar10:train"


@pytest.mark.slow
def test_default_pipeline_on_the_bundled_model(tmp_path, cifar10, monkeypatch):
    """The README's main command, as a user runs it: no arguments but the run directory."""
    from click.testing import CliRunner

    from aft_export.cli import main

    monkeypatch.setenv("AFT_CIFAR10_DIR", str(cifar10))
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["pipeline", "--out", str(out), "--iters", "5"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"]["model"] == "aft_conv_cifar" and manifest["passed"]
    assert manifest["summary"][0]["top1"] == pytest.approx(
        next(z["top1"] for z in ZOO if z["name"] == "aft_conv_cifar"), abs=0.1)


@pytest.mark.parametrize("name", ["aft_conv_cifar", "aft_full_cifar"])
def test_int8_covers_every_layer_of_the_real_graphs(name, tmp_path, cifar10):
    """On the zoo's graphs onnxsim rewrites AFT-conv's q/k/v linears into Reshape+Gemm;
    every MatMul/Gemm/Conv of a Linear or Conv2d module must still compute in int8."""
    import onnx

    from aft_export.export.exporter import ExportOptions, export_checkpoint
    from aft_export.graph import node_module
    from aft_export.quantize import QuantizeOptions, quantize_model

    fp32, int8 = tmp_path / "m.onnx", tmp_path / "m.int8.onnx"
    export_checkpoint(ZOO_DIR / f"{name}.pt", fp32, ExportOptions(verify_images=0), log=lambda *a: None)
    quantize_model(fp32, int8, str(cifar10 / "train.tar"), QuantizeOptions(count=16, cache_dir=""),
                   log=lambda *a: None)  # fmt: skip
    model = onnx.load(int8)
    dq = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    layers = [n for n in model.graph.node if n.op_type in ("MatMul", "Gemm", "Conv")
              and node_module(n) and node_module(n)[1] in ("Linear", "Conv2d")]  # fmt: skip
    assert len(layers) >= 17  # 4 blocks x (q/k/v, proj, fc1, fc2) + the head, at least
    assert [n.name for n in layers if not any(i in dq for i in n.input)] == []
