"""ONNX files another tool wrote (issue 28, item 4): eval, parity, bench, build, info and the
Triton description take them, fed with the preprocessing the user gives (options, or the JSON
beside the file), or, in parity, the checkpoint's.

The file is the one the ``foreign`` fixture makes (tests/conftest.py): ONNX Runtime's own
quantiser run on our portable export, our metadata stripped. The same graph with our metadata
still in it (``copied``) is the yardstick: fed as the user said, the stripped file must give what
the self-describing one gives.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.data.datasets import CIFAR10_CLASSES
from aft_export.errors import AFTExportError
from aft_export.data.preprocess import ForeignPreprocessing, sidecar_path
from aft_export.runners import load_runner

MEAN, STD = [0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def sidecar(path, **override):
    beside = sidecar_path(path)
    beside.write_text(json.dumps({"input_size": 32, "mean": MEAN, "std": STD, "classes": CIFAR10_CLASSES,
                                  **override}))  # fmt: skip
    return beside


@pytest.fixture
def bare(foreign, tmp_path):
    """The stripped file alone in a fresh directory (no JSON beside it until a test writes one)."""
    path = tmp_path / "theirs.onnx"
    path.write_bytes(foreign["theirs"].read_bytes())
    return path


def test_no_preprocessing_is_one_line_naming_what_to_give(bare, foreign, tmp_path):
    for args in (["eval", bare, "--data", foreign["data"], "--images", 4], ["bench", bare, "--iters", 1],
                 ["build", bare, "-o", tmp_path / "t.rtx.engine", "--library", "tensorrt-rtx"]):  # fmt: skip
        res = run(*args)
        assert res.exit_code == 2, (args, res.output)
        last = res.output.strip().splitlines()[-1]
        assert last.startswith("error: ") and "theirs.onnx has no aft-export metadata" in last
        assert "theirs.preprocess.json beside it" in last and "input_size" in last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.onnx"]  # the build wrote nothing


def test_the_json_beside_it_or_options_feed_it_as_our_metadata_would(bare, foreign):
    """Described by the JSON beside it (or by options, which override the JSON), the stripped file
    gives exactly the logits of the same graph carrying our metadata."""
    ref = load_runner(str(foreign["copied"]))
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
    sidecar(bare)
    runner = load_runner(str(bare))
    assert runner.info.preprocessing_from == "theirs.preprocess.json" and runner.info.precision == "int8"
    assert (runner.info.classes, runner.info.input_size, list(runner.info.mean)) == (CIFAR10_CLASSES, (3, 32, 32), MEAN)
    np.testing.assert_array_equal(runner.logits(x), ref.logits(x))
    given = ForeignPreprocessing(mean="0.5,0.5,0.5")  # one option; the rest still from the JSON
    info = load_runner(str(bare), preprocessing=given).info
    assert info.mean == (0.5, 0.5, 0.5) and info.std == tuple(STD)
    assert info.preprocessing_from == "the options (`mean`) and theirs.preprocess.json"
    sidecar(bare, input_size=64)
    with pytest.raises(AFTExportError, match=r"graph takes 3x32x32 inputs but its preprocessing \(theirs.preprocess"):
        load_runner(str(bare))


def test_eval_and_parity_from_the_command_line(bare, foreign):
    """`eval` with the options; `parity CHECKPOINT ours.onnx theirs.onnx` with nothing: the
    checkpoint's preprocessing serves both. Each row equals the self-describing file's."""
    res = run("eval", foreign["copied"], bare, "--data", foreign["data"], "--images", 50, "--input-size", 32,
              "--mean", ",".join(map(str, MEAN)), "--std", ",".join(map(str, STD)), "--classes",
              _classes_file(bare.parent), "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    mine, theirs = json.loads(res.output)["rows"]
    assert theirs["preprocessing"].startswith("the options") and theirs["precision"] == "int8"
    assert (theirs["top1"], theirs["top5"], theirs["agreement"]) == (mine["top1"], mine["top5"], 100.0)
    res = run("parity", foreign["ckpt"], foreign["ours"], foreign["copied"], bare, "--data", foreign["data"],
              "--images", 8, "--json")  # fmt: skip
    assert res.exit_code in (0, 1), res.output  # int8 of a random tiny model may pass or fail; the rows must match
    rows = {r["artifact"]: r for r in json.loads(res.output)["artifacts"]}
    stripped, copied = rows[str(bare)], rows[str(foreign["copied"])]
    assert stripped["preprocessing"] == "the reference m.pt" and "preprocessing" not in copied
    assert stripped["inputs"] == copied["inputs"] and stripped["status"] == copied["status"]
    res = run("parity", foreign["ckpt"], bare, "--data", foreign["data"], "--images", 8)
    assert "theirs.onnx: no aft-export metadata; preprocessing from the reference m.pt" in res.output


def _classes_file(root):
    path = root / "classes.txt"
    path.write_text("\n".join(CIFAR10_CLASSES) + "\n")
    return path


def test_bench_and_the_triton_description(bare):
    from aft_export.verify.bench import bench
    from aft_export.serving.spec import describe

    sidecar(bare)
    report = bench([str(bare)], batches=[2], warmup=0, iters=1)
    assert [(r["precision"], r["batch"]) for r in report.rows] == [("int8", 2)] and not report.skipped
    spec = describe(bare)
    assert (spec.classes, spec.input_size, spec.mean) == (CIFAR10_CLASSES, (3, 32, 32), tuple(MEAN))
    assert spec.preprocessing is not None and spec.preprocessing.complete  # what serve's runners are given
    runner = load_runner(str(bare), preprocessing=spec.preprocessing)
    assert runner.info.classes == CIFAR10_CLASSES


def test_build_records_the_preprocessing_in_the_manifest(bare, tmp_path):
    """TensorRT-RTX builds it ahead of time on the CPU; the engine's manifest says how to feed it,
    so every later command (eval, serve, info) reads it as it reads ours."""
    from tests.rtx import need_rtx

    need_rtx()
    from aft_export.tensorrt.build import build_engine
    from aft_export.artifacts.info import describe_artifact
    from aft_export.options import BuildOptions
    from aft_export.serving.spec import describe

    sidecar(bare)
    engine = tmp_path / "theirs.rtx.engine"
    lines = []
    result = build_engine(bare, engine, BuildOptions(library="tensorrt-rtx", batch_profile="1,2,4"), log=lines.append)
    model = result.manifest["model"]
    assert json.loads(model["classes"]) == CIFAR10_CLASSES and json.loads(model["input_size"]) == [3, 32, 32]
    assert model["preprocessing_from"] == "theirs.preprocess.json"
    assert any("has no aft-export metadata" in line for line in lines)
    assert result.manifest["network"]["outputs"].get("int8", 0) > 0  # the quantiser's Q/DQ reached the network
    spec = describe(engine)
    assert spec.classes == CIFAR10_CLASSES and spec.preprocessing is None  # the manifest describes it
    d = describe_artifact(engine)
    assert d["kind"] == "engine" and d["preprocessing_from"] == "theirs.preprocess.json"
    assert d["model"]["classes"] == CIFAR10_CLASSES and d["precision"] == "int8"


def test_a_node_without_module_metadata_takes_the_references_module_never_the_root(foreign, tmp_path):
    """Another tool's file whose nodes carry no ``aft.module`` (a tool that drops node metadata):
    the localisation names each node's module from the reference's node producing the same
    value (what the same graph with our node metadata still in it, ``copied``, says), not the
    root; a module neither names is unknown (None), and the report says so rather than
    ``(root) []``."""
    import onnx

    from aft_export.artifacts.graph import node_module
    from aft_export.data.images import CIFAR10_MEAN, CIFAR10_STD, normalize
    from aft_export.data.datasets import load_labelled
    from aft_export.verify.localize import localize
    from aft_export.errors import Verdict
    from aft_export.verify.parity import InputParity, ParityResult, ParityRow

    model = onnx.load(str(foreign["theirs"]))
    for node in model.graph.node:
        del node.metadata_props[:]
    x = normalize(load_labelled(foreign["data"], 32, limit=4).images, CIFAR10_MEAN, CIFAR10_STD).numpy()
    found = localize(str(foreign["ours"]), model, x, "int8", limit=0.0)
    truth = {o: node_module(n) for n in onnx.load(str(foreign["copied"])).graph.node for o in n.output}
    assert found["compared"] > 10 and found["first"] is not None
    assert all((r["module"], r["module_type"]) == truth[r["value"]] for r in found["nodes"])
    assert any(r["module"].startswith("blocks.0.") for r in found["nodes"])
    real = dict.fromkeys(("max_abs", "mean_abs", "max_rel", "cosine_min", "sqnr_db", "top1_agreement",
                          "top5_overlap", "nonfinite"), 0)  # fmt: skip
    row = ParityRow("theirs.onnx", "onnxruntime", "int8", inputs={"real": InputParity(real, ["x"])},
                    divergence={"reference": "ours", **found})  # fmt: skip
    first = found["first"]
    line = ParityResult("m.pt", "d", 4, [row], 0, Verdict()).lines()[3]
    assert f"from module {first['module']} [{first['module_type']}]: relative error" in line, line

    reference = onnx.load(str(foreign["ours"]))  # neither graph names its modules
    for node in reference.graph.node:
        del node.metadata_props[:]
    unknown = localize(reference, model, x, "int8", limit=0.0)
    assert {(r["module"], r["module_type"]) for r in unknown["nodes"]} == {(None, None)}
    row.divergence = {"reference": "ours", **unknown}
    line = ParityResult("m.pt", "d", 4, [row], 0, Verdict()).lines()[3]
    assert "from an unknown module (neither the node nor the reference names one)" in line and "(root)" not in line
