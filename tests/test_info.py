"""`aft-export info` reads every artifact the project writes or takes (issue 27, item 6): a
checkpoint, our ONNX files (target, opset, precision, com.aft layers, recipe, calibration hash),
another tool's ONNX file (what the file says, and how it would be fed), an engine's manifest."""

import json

import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.data.datasets import CIFAR10_CLASSES
from aft_export.errors import AFTExportError
from aft_export.artifacts.info import describe_artifact


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def ours(foreign, tmp_path_factory):
    """The fixture's checkpoint exported for the default target (com.aft functions) and its
    portable export quantised by aft-export (a recipe with its calibration hash)."""
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    root = tmp_path_factory.mktemp("info")
    custom = root / "m.onnx"
    export_checkpoint(foreign["ckpt"], custom, ExportOptions(images=0, simplify=False), log=lambda *a: None)
    int8 = root / "m.portable.int8.onnx"
    result = quantize_model(foreign["ours"], int8, foreign["data"], QuantizeOptions(images=8, cache_dir=""),
                            progress=False, log=lambda *a: None)  # fmt: skip
    return {"custom": custom, "int8": int8, "calibration_sha256": result.recipe["calibration"]["sha256"]}


def test_checkpoint_and_our_onnx_files(foreign, ours):
    d = describe_artifact(foreign["ckpt"])
    assert d["kind"] == "checkpoint" and d["classes"] == CIFAR10_CLASSES and d["params"] > 0
    d = describe_artifact(ours["custom"])
    assert (d["kind"], d["aft_export"], d["export_target"], d["opset"], d["precision"]) == (
        "onnx", True, "tensorrt", "18", "fp32")
    assert d["com_aft_layers"] == {"AFTConv": 2} and d["com_aft_functions"] >= 1  # aft_conv_test: depth 2
    assert d["inputs"][0]["name"] == "image" and d["inputs"][0]["shape"][1:] == [3, 32, 32]
    d = describe_artifact(ours["int8"])
    assert (d["export_target"], d["opset"], d["precision"], d["com_aft_layers"]) == ("portable", "19", "int8", {})
    assert d["recipe"]["calibration"]["sha256"] == ours["calibration_sha256"]
    res = run("info", ours["int8"])
    assert res.exit_code == 0, res.output
    assert f"sha256 {ours['calibration_sha256'][:16]}" in res.output and "target       portable (opset 19)" in res.output
    assert "corrupt" not in res.output
    # what each file is for, and its compute per precision counted from the graph (issue 33)
    assert describe_artifact(ours["custom"])["for"].startswith("TensorRT 10.3+/11")
    assert d["for"] == "CPUs: ONNX Runtime, OpenVINO" and set(d["compute"]) == {"int8", "fp32"} and d["compute"]["int8"]
    assert f"compute      {d['compute']['int8']} int8, 0 fp16, {d['compute']['fp32']} fp32 nodes (from the graph)" \
        in res.output and "for          CPUs: ONNX Runtime, OpenVINO" in res.output  # fmt: skip
    assert json.loads(run("info", ours["int8"], "--json").output)["compute"] == d["compute"]


def test_another_tools_file_says_what_it_can(foreign, tmp_path):
    bare = tmp_path / "theirs.onnx"
    bare.write_bytes(foreign["theirs"].read_bytes())
    res = run("info", bare)
    assert res.exit_code == 0, res.output  # no preprocessing is not an error here: info says so
    assert "producer     onnx.quantize" in res.output and "opsets       ai.onnx 19" in res.output
    assert "written by   another tool" in res.output and "preprocess   none given" in res.output
    assert "input        image tensor(float) [" in res.output and "output       logits tensor(float)" in res.output
    res = run("info", bare, "--input-size", 32, "--mean", "0.5,0.5,0.5", "--std", "0.25,0.25,0.25", "--json")
    d = json.loads(res.output)
    assert d["aft_export"] is False and d["precision"] == "int8" and d["opsets"] == {"ai.onnx": 19}
    assert d["for"] == "not recorded (another tool's file)" and d["compute"]["int8"] and "fp16" not in d["compute"]
    assert d["preprocessing"]["from"] == "the options (`input_size`, `mean`, `std`)"
    assert d["preprocessing"]["classes"] == [str(i) for i in range(10)]  # numbered: none were named


def test_an_engine_without_its_manifest_and_unknown_files(tmp_path):
    engine = tmp_path / "x.engine"
    engine.write_bytes(b"\0" * 16)
    d = describe_artifact(engine)
    assert d["kind"] == "engine" and "has no manifest" in d["manifest_error"]
    res = run("info", engine)
    # shown, but nothing says what the engine is: not verified (3), as for malformed metadata (issue 52)
    assert res.exit_code == 3 and "manifest     x.engine.json: engine" in res.output
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(AFTExportError, match="unknown artifact type"):
        describe_artifact(other)


def test_malformed_metadata_is_said_not_raised(tmp_path):
    """A file whose metadata look like ours but do not parse (hand-edited, another tool's copy)
    is shown with what is readable and the keys that are not: no traceback."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, {"aft_export.format": "1", "classes": "not json", "input_size": "32",
                                   "mean": "[0.5, 0.5, 0.5]", "quantization": '{"calibration": "x"}'})  # fmt: skip
    path = tmp_path / "odd.onnx"
    onnx.save(model, path)
    d = describe_artifact(path)
    assert d["malformed"] == ["classes", "input_size"] and d["preprocessing"] == {"mean": [0.5, 0.5, 0.5]}
    helper.set_model_props(model, {"aft_export.format": "1", "quantization": "3"})
    onnx.save(model, path)
    res = run("info", path)
    assert res.exit_code == 0 and "malformed quantization metadata (not a JSON object)" in res.output, res.output


def test_an_option_the_artifact_cannot_take_is_a_user_error(foreign, tmp_path):
    """`config` is for a plain state_dict, the preprocessing options for another tool's ONNX file:
    given for an artifact they do not fit (an ONNX file; an engine; a checkpoint; our ONNX file,
    whose metadata says how it is fed), each is one line naming the option, exit 2, not ignored."""
    from aft_export.data.preprocess import ForeignPreprocessing

    engine = tmp_path / "x.engine"
    engine.write_bytes(b"\0" * 16)
    for path in (foreign["ours"], foreign["theirs"], engine):
        with pytest.raises(AFTExportError, match=r"^`config` names the architecture of a plain state_dict .*; leave "):
            describe_artifact(path, config="aft_conv_test")
    mean = ForeignPreprocessing(mean="0.5,0.5,0.5")
    for path, what in ((foreign["ours"], "an aft-export ONNX file"), (engine, "an engine"),
                       (foreign["ckpt"], "a checkpoint or model spec")):  # fmt: skip
        with pytest.raises(AFTExportError, match=rf"^`mean` says how to feed an ONNX file another tool wrote, and "
                                                 rf".*{path.name} is {what}.*; leave it out$"):  # fmt: skip
            describe_artifact(path, preprocessing=mean)
    assert describe_artifact(foreign["theirs"], preprocessing=mean)["kind"] == "onnx"  # where they fit, they are read
    assert describe_artifact(foreign["ours"], preprocessing=ForeignPreprocessing())["kind"] == "onnx"  # none given
    for args, flags in (([foreign["ours"], "--config", "aft_conv_test"], "--config"),
                        ([foreign["ours"], "--input-size", 32, "--std", "1,1,1"], "--input-size and --std"),
                        ([foreign["ckpt"], "--classes", tmp_path / "c.txt"], "--classes")):  # fmt: skip
        res = run("info", *args)
        assert res.exit_code == 2 and len(res.output.splitlines()) == 1, res.output
        assert res.output.startswith(f"error: {flags} ") and "leave " in res.output and "`" not in res.output


def test_every_command_says_preprocessing_no_file_of_it_takes(foreign):
    """eval, bench, build and serve feed another tool's ONNX file by --mean, --input-size, ...; where
    every file they are given says how it is fed, the flags are said (exit 2), never ignored. Among
    files that include another tool's, they are taken (tests/test_foreign.py: `eval` of one of each)."""
    ours = str(foreign["ours"])
    for args in (["eval", ours, "--data", foreign["data"], "--images", 4, "--mean", "0.5,0.5,0.5"],
                 ["bench", ours, ours, "--iters", 1, "--batch-size", 1, "--input-size", 32],
                 ["build", ours, "--library", "tensorrt-rtx", "--std", "1,1,1"],
                 ["serve", ours, "--mean", "0.5,0.5,0.5"]):  # fmt: skip
        res = run(*args)
        assert res.exit_code == 2 and len(res.output.splitlines()) == 1, (args, res.output)
        assert "says how to feed an ONNX file another tool wrote" in res.output and "leave it out" in res.output
