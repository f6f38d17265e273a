"""Layers recognised by what they compute: a copy of aft-pytorch's AFTFull in the user's own
module exports with its com.aft node; a look-alike (the same parameters, another computation)
exports as plain ops with a warning, and fails under --require-aft."""

import json
import re

import numpy as np
import onnx
import pytest
import torch
from click.testing import CliRunner

from aft_export.byo.swap import find_layers, plan_swap
from aft_export.cli import main
from aft_export.data.images import normalize
from aft_export.data.datasets import load_labelled
from aft_export.exporting.functions import DOMAIN
from aft_export.artifacts.graph import aft_kind
from tests.byo import copied_layers
from tests.byo.user_models import DIM, HIDDEN, MAX_SEQ

MEAN, STD = "0.4914,0.4822,0.4465", "0.2470,0.2435,0.2616"


def export(out, factory, *extra):
    flags = ["--model-def", f"tests/byo/copied_layers.py:{factory}", "--input-size", "32", "--mean", MEAN,
             "--std", STD]  # fmt: skip
    return CliRunner().invoke(main, ["export", "-o", str(out), *flags, *[str(a) for a in extra]])


@pytest.fixture(scope="module")
def images(cifar10):
    data = load_labelled(str(cifar10 / "test.tar"), 32, limit=32)
    return normalize(data.images, [float(v) for v in MEAN.split(",")], [float(v) for v in STD.split(",")]).numpy()


def ort(path, x):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["logits"], {"image": x})[0]


def test_a_copy_is_found_by_its_parameters_and_proven_a_look_alike_is_not():
    tokens = torch.randn(2, 16, DIM, generator=torch.Generator().manual_seed(1))
    copy = copied_layers.AFTFull(MAX_SEQ, DIM, HIDDEN).eval()
    plan = plan_swap(copy, tokens)
    assert [r.action for r in plan.layers] == ["mapped"] and plan.layers[0].to.startswith("AFTFull(dim=24, hidden=16")
    assert "parameters of aft-pytorch AFTFull, proven" in plan.layers[0].source
    fake = copied_layers.TransposedBias(MAX_SEQ, DIM, HIDDEN).eval()
    with torch.no_grad():
        fake.wbias.normal_(0, 1)
    plan = plan_swap(fake, tokens)
    assert [r.action for r in plan.layers] == ["look-alike"] and plan.replacements == {}
    found = float(re.search(r"max abs difference (\S+) from our AFTFull", plan.layers[0].reason).group(1))
    assert found > 1e-4
    # a module whose parameters are not a known layout is not even a candidate
    assert find_layers(torch.nn.Sequential(torch.nn.Linear(DIM, DIM))) == {}


@pytest.mark.parametrize("factory, package, kind", [
    ("pasted_comvex_classifier", "comvex AFTGeneral", "AFTFull"),
    ("pasted_labml_classifier", "labml-nn AFTLocal", "AFTLocal"),
])  # fmt: skip
def test_pasted_comvex_and_labml_layers_are_proven_and_a_changed_paste_is_a_look_alike(factory, package, kind, images):
    model = getattr(copied_layers, factory)().eval()
    assert {type(m).__module__ for m in model.modules() if type(m).__name__.startswith("MyAFT")} == \
        {"my_project.layers"}  # fmt: skip
    plan = plan_swap(model, torch.from_numpy(images[:2]))
    assert [r.action for r in plan.layers] == ["mapped", "mapped"], [r.reason for r in plan.layers]
    assert all(f"parameters of {package}, proven" in r.source and r.to.startswith(kind) for r in plan.layers)
    for layer in (m for m in model.modules() if type(m).__name__.startswith("MyAFT")):
        # the same parameters, another activation on the query: not AFT any more
        setattr(layer, "query_act_fnc" if hasattr(layer, "query_act_fnc") else "activation", torch.nn.Tanh())
    plan = plan_swap(model, torch.from_numpy(images[:2]))
    assert [r.action for r in plan.layers] == ["look-alike", "look-alike"] and plan.replacements == {}
    found = float(re.search(rf"max abs difference (\S+) from our {kind}", plan.layers[0].reason).group(1))
    assert found > 1e-4


@pytest.mark.parametrize("factory, kind", [("copied_classifier", "AFTFull"), ("pasted_comvex_classifier", "AFTFull"),
                                           ("pasted_labml_classifier", "AFTLocal")])  # fmt: skip
def test_a_copied_layer_exports_one_com_aft_node_per_layer_and_matches_in_ort(tmp_path, cifar10, images, factory, kind):
    out = tmp_path / "copied.onnx"
    res = export(out, factory, "--verify-data", cifar10 / "test.tar", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["aft_nodes"] == 2 and [r["action"] for r in report["layers"]] == ["mapped", "mapped"]
    assert report["warnings"] == []
    nodes = [n for n in onnx.load(str(out)).graph.node if n.domain == DOMAIN]
    assert sorted(aft_kind(n) for n in nodes) == [kind, kind]
    model = getattr(copied_layers, factory)().eval()
    with torch.no_grad():
        want = model(torch.from_numpy(images)).numpy()
    assert np.abs(ort(out, images) - want).max() < 1e-4


def test_a_look_alike_exports_as_plain_ops_with_a_warning_naming_it(tmp_path, cifar10, images):
    out = tmp_path / "lookalike.onnx"
    res = export(out, "lookalike_classifier", "--verify-data", cifar10 / "test.tar", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["aft_nodes"] == 1  # the copy's; the look-alike is plain ops
    assert [r["action"] for r in report["layers"]] == ["mapped", "look-alike"]
    [warning] = report["warnings"]
    assert warning.startswith("blocks.1.mixer (TransposedBias in copied_layers.py) has the parameters of "
                              "aft-pytorch AFTFull but does not compute it: max abs difference ")  # fmt: skip
    assert float(re.search(r"max abs difference (\S+) ", warning).group(1)) > 1e-4
    assert "warning: blocks.1.mixer" in res.stderr or "warning: blocks.1.mixer" in res.output
    model = copied_layers.lookalike_classifier().eval()
    with torch.no_grad():
        want = model(torch.from_numpy(images)).numpy()
    assert np.abs(ort(out, images) - want).max() < 1e-4  # plain ops compute what the user's module does


@pytest.mark.parametrize("command", ["export", "pipeline"])
def test_require_aft_makes_a_look_alike_an_error(tmp_path, cifar10, command):
    out = tmp_path / ("m.onnx" if command == "export" else "run")
    if command == "export":
        res = export(out, "lookalike_classifier", "--verify-images", 0, "--require-aft")
    else:
        res = CliRunner().invoke(main, ["pipeline", "--model-def", "tests/byo/copied_layers.py:lookalike_classifier",
                                        "--input-size", "32", "--mean", MEAN, "--std", STD, "--out", str(out),
                                        "--data", str(cifar10 / "test.tar"), "--eval-limit", "16",
                                        "--parity-images", "8", "--require-aft"])  # fmt: skip
    assert res.exit_code == 2, res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("error: blocks.1.mixer (TransposedBias in copied_layers.py) has the parameters of "
                           "aft-pytorch AFTFull but does not compute it") and "--require-aft" in last  # fmt: skip
    assert not out.exists()
