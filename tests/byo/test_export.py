"""Models trained elsewhere through every command: export (CLI and API), quantize, parity,
check, eval, infer and pipeline, on the three kinds the issue names and labml-nn's."""

import argparse
import json
import re

import numpy as np
import onnx
import pytest
import torch
from click.testing import CliRunner

from aft_export.byo.export import export_model
from aft_export.data.images import Preprocessing
from aft_export.cli import main
from aft_export.data.images import normalize
from aft_export.data.datasets import load_labelled
from aft_export.errors import AFTExportError
from aft_export.exporting.exporter import ExportOptions, export_checkpoint
from aft_export.exporting.functions import DOMAIN
from aft_export.artifacts.graph import aft_kind
from tests.byo import user_models
from tests.export.test_exporter import make_ckpt

CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
MEAN, STD = "0.4914,0.4822,0.4465", "0.2470,0.2435,0.2616"
# the com.aft nodes each model must have: one per AFT module, counted from the architectures
EXPECTED = {
    "aft_pytorch_classifier": ["AFTFull", "AFTLocal", "AFTSimple"],  # three aft-pytorch layers
    "comvex_classifier": ["AFTFull", "AFTFull"],  # num_layers=2, aft_mode="full"
    "own_architecture": ["AFTConv", "AFTFull", "AFTLocal", "AFTSimple"],  # our four, in a new shape
    "labml_classifier": ["AFTLocal", "AFTLocal"],  # two labml AFTLocal, all-True masks
}
# untrained models' logits are near ties, so int8 flips top-1 more than a trained one would;
# and ONNX Runtime's int8 kernels differ by CPU (VNNI or not): the cosine of this untrained
# model's int8 logits was 0.979 on an AMD EPYC and above the default 0.98 on CI's machine
UNTRAINED_INT8 = ["--tolerance", "int8.min_top1_agreement=0.5", "--tolerance", "int8.max_abs=5",
                  "--tolerance", "int8.min_cosine=0.95"]  # fmt: skip


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def byo_flags(name, weights, classes):
    return ["--model-def", f"tests/byo/user_models.py:{name}", "--weights", weights, "--input-size", 32,
            "--mean", MEAN, "--std", STD, "--classes", classes]  # fmt: skip


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    path = tmp_path_factory.mktemp("c") / "classes.txt"
    path.write_text("\n".join(CIFAR10) + "\n")
    return path


@pytest.fixture(scope="module")
def exports(tmp_path_factory, classes, cifar10):
    """Each model's weights saved as training code saves them, then exported by the CLI."""
    root = tmp_path_factory.mktemp("byo")
    out = {}
    for name in EXPECTED:
        model = getattr(user_models, name)()
        weights = root / f"{name}.pth"
        torch.save({"model": {"module." + k: v for k, v in model.state_dict().items()},  # DeiT + DDP layout
                    "args": argparse.Namespace(epochs=1), "epoch": 0}, weights)  # fmt: skip
        onnx_path = root / f"{name}.onnx"
        res = run("export", "-o", onnx_path, "--verify-data", cifar10 / "test.tar", "--json",
                  *byo_flags(name, weights, classes))  # fmt: skip
        assert res.exit_code == 0, res.output
        out[name] = (model.eval(), weights, onnx_path, json.loads(res.stdout))
    return out


@pytest.fixture(scope="module")
def images(cifar10):
    data = load_labelled(str(cifar10 / "test.tar"), 32, limit=64)
    return normalize(data.images, [float(v) for v in MEAN.split(",")], [float(v) for v in STD.split(",")]).numpy()


def ort(path, x):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["logits"], {"image": x})[0]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_one_com_aft_node_per_aft_module(exports, name):
    proto = onnx.load(str(exports[name][2]))
    nodes = [n for n in proto.graph.node if n.domain == DOMAIN]
    assert sorted(aft_kind(n) for n in nodes) == sorted(EXPECTED[name])
    assert len({n.op_type for n in nodes}) == len(nodes)  # one function per layer
    report = exports[name][3]
    assert report["aft_nodes"] == len(EXPECTED[name])
    assert report["swap_check"]["inputs"] == 64 and report["swap_check"]["max_abs"] <= 1e-4
    assert report["trt_check"]["status"]["10.3"] == "accepts"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_onnx_runtime_matches_the_original_module(exports, images, name):
    model, _, path, _ = exports[name]
    with torch.no_grad():
        want = model(torch.from_numpy(images)).numpy()
    assert np.abs(ort(path, images) - want).max() < 1e-4


def test_metadata_is_stored_as_for_our_own_checkpoints(exports, tmp_path, cifar10):
    ours = tmp_path / "ours.onnx"
    export_checkpoint(make_ckpt(tmp_path / "c.pt", "aft_simple_test"), ours, ExportOptions(images=0),
                      log=lambda *a: None)  # fmt: skip
    theirs = {p.key: p.value for p in onnx.load(str(exports["comvex_classifier"][2])).metadata_props}
    mine = {p.key: p.value for p in onnx.load(str(ours)).metadata_props}
    assert set(theirs) == set(mine)
    assert json.loads(theirs["classes"]) == CIFAR10 and json.loads(theirs["input_size"]) == [3, 32, 32]
    assert json.loads(theirs["mean"]) == [float(v) for v in MEAN.split(",")]
    for key in ("input_name", "input_layout", "input_color", "preprocess"):
        assert theirs[key] == mine[key]


def test_quantize_parity_check_eval_infer_work_unchanged(exports, tmp_path, cifar10, classes):
    _, weights, fp32, _ = exports["aft_pytorch_classifier"]
    int8, fp16 = tmp_path / "m.int8.onnx", tmp_path / "m.fp16.onnx"
    calib = ["--calib", cifar10 / "train.tar", "--count", 64]
    assert run("quantize", fp32, "-o", int8, "--precision", "int8", *calib).exit_code == 0
    assert run("quantize", fp32, "-o", fp16, "--precision", "fp16", *calib).exit_code == 0
    res = run("parity", fp32, fp16, int8, "--data", cifar10 / "test.tar", "--images", 32, "--json",
              *UNTRAINED_INT8, *byo_flags("aft_pytorch_classifier", weights, classes))  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert [r["status"] for r in report["artifacts"]] == ["pass"] * 3
    assert report["artifacts"][0]["inputs"]["real"]["max_abs"] < 1e-4
    res = run("check", fp32, int8, fp16, "--trt", "10.3", "--trt", "11.4")
    assert res.exit_code == 0, res.output
    res = run("eval", fp32, int8, "--data", cifar10 / "test.tar", "--limit", 32, "--json")
    assert res.exit_code == 0, res.output
    assert [r["images"] for r in json.loads(res.stdout)["rows"]] == [32, 32]
    from PIL import Image

    data = load_labelled(str(cifar10 / "test.tar"), 32, limit=2)
    for i, img in enumerate(data.images):
        Image.fromarray(img).save(tmp_path / f"{i}.png")
    res = run("infer", int8, tmp_path / "0.png", tmp_path / "1.png", "--json", "--top-k", 2)
    assert res.exit_code == 0, res.output
    assert all(t["class"] in CIFAR10 for r in json.loads(res.stdout)["results"] for t in r["top"])


def test_parity_refuses_an_export_of_other_weights(exports, tmp_path, cifar10, classes):
    """The reference and the artifact must be the same model: weights of another seed are refused."""
    _, _, fp32, _ = exports["own_architecture"]
    other = user_models.own_architecture()
    with torch.no_grad():
        other.head[0].weight.add_(0.1)
    torch.save(other.state_dict(), tmp_path / "other.pt")
    res = run("parity", fp32, "--data", cifar10 / "test.tar", "--images", 8,
              *byo_flags("own_architecture", tmp_path / "other.pt", classes))  # fmt: skip
    assert res.exit_code == 2 and "exported from another checkpoint" in res.output


def test_pipeline_takes_a_model_spec(exports, tmp_path, cifar10, classes):
    _, weights, _, _ = exports["comvex_classifier"]
    spec = tmp_path / "comvex.json"
    spec.write_text(json.dumps({"model_def": f"{user_models.__file__}:comvex_classifier", "weights": str(weights),
                                "input_size": 32,
                                "mean": [float(v) for v in MEAN.split(",")], "std": [float(v) for v in STD.split(",")],
                                "classes_file": str(classes)}))  # fmt: skip
    out = tmp_path / "run"
    res = run("pipeline", spec, "--out", out, "--data", cifar10 / "test.tar", "--calib", cifar10 / "train.tar",
              "--eval-limit", 32, "--parity-images", 16, "--batch", 1, "--iters", 2, "--precision", "int8",
              *UNTRAINED_INT8)  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    not_run = manifest["unverified"]  # engines built here that cannot run here (TensorRT-RTX with no GPU)
    assert res.exit_code == (3 if not_run else 0), res.output
    assert manifest["results"]["export"]["tensorrt"]["aft_nodes"] == 2
    statuses = {r["artifact"].rsplit("/", 1)[-1]: r["status"] for r in manifest["results"]["parity"]["artifacts"]}
    assert [statuses[a] for a in ("model.onnx", "model.int8.onnx")] == ["pass", "pass"]
    assert all(statuses[a] == "skipped" for a in not_run)


def test_api_export_of_an_in_memory_model(tmp_path, images):
    model = user_models.own_architecture()
    pre = Preprocessing(32, (0.49, 0.48, 0.46), (0.25, 0.24, 0.26), tuple("abcdefghij"))
    res = export_model(model, tmp_path / "m.onnx", pre, ExportOptions(images=0), log=lambda *a: None)
    assert res.aft_nodes == 4 and [r["action"] for r in res.layers] == ["ours"] * 4
    with torch.no_grad():
        assert np.abs(ort(tmp_path / "m.onnx", images[:8]) - model(torch.from_numpy(images[:8])).numpy()).max() < 1e-4
    with pytest.raises(AFTExportError, match="3 class names for a model with 10 outputs"):
        export_model(user_models.plain_cnn(), tmp_path / "p.onnx", Preprocessing(32, pre.mean, pre.std, ("a", "b", "c")),
                     log=lambda *a: None)  # fmt: skip


def test_no_aft_layer_exports_plain_ops_with_a_warning(tmp_path):
    lines = []
    pre = Preprocessing(32, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    res = export_model(user_models.plain_cnn(), tmp_path / "p.onnx", pre, ExportOptions(images=0),
                       log=lines.append)  # fmt: skip
    assert res.aft_nodes == 0 and res.warnings and "no AFT layer recognised" in res.warnings[0]
    assert any(line.startswith("warning: no AFT layer recognised") for line in lines)


@pytest.mark.parametrize("case, message", [
    ("no_import", "does not import"),
    ("factory_raises", "raised ValueError"),
    ("not_module", "returned a list"),
    ("wrong_weights", r"do not fit the model: missing keys \[.pos., .embed.weight.*unexpected keys \[.cls., .stem"),
    ("pickled_code", "refused to load .* nothing was executed"),
    ("refused_layer", r"layers.0.attn_block \(comvex AFTGeneral\): comvex's AFTLocal calls Tensor.mask_fill_"),
    # the library names options (`input_size`); the command line may say them as its flags
    ("no_preprocessing", "needs its preprocessing: give (`input_size`|--input-size), (`mean`|--mean), (`std`|--std)"),
])  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, case, message, classes):
    weights = tmp_path / "w.pt"
    torch.save(user_models.own_architecture().state_dict(), weights)
    factory = {"no_import": "tests.byo.nowhere:build", "factory_raises": "tests.byo.user_models:raises",
               "not_module": "tests.byo.user_models:not_a_module",
               "wrong_weights": "tests.byo.user_models:aft_pytorch_classifier"}  # fmt: skip
    model_def = factory.get(case, "tests.byo.user_models:own_architecture")
    if case == "pickled_code":
        torch.save({"model": torch.load(weights), "hook": argparse.ArgumentTypeError("x")}, weights)
    if case == "refused_layer":
        model_def, weights = "tests.byo.user_models:comvex_local_classifier", None
    flags = ["--model-def", model_def, "--input-size", 32, "--mean", MEAN, "--std", STD]
    if case == "no_preprocessing":
        flags = ["--model-def", model_def]
    if weights is not None:
        flags += ["--weights", weights]
    out = tmp_path / "m.onnx"
    res = run("export", "-o", out, "--verify-images", 0, *flags)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert [line for line in lines if "error" in line] == [lines[-1]] and lines[-1].startswith("error: ")
    assert re.search(message, lines[-1]), res.output
    assert not out.exists()
