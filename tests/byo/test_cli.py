"""The bring-your-own flags, through the command line: the API turns them into one model source
(:func:`aft_export.api._user_model`), the command line only declares them."""

import json

import pytest
from click.testing import CliRunner

from aft_export.api import _user_model
from aft_export.byo.spec import UserModel
from aft_export.cli import main
from aft_export.errors import AFTExportError
from aft_export.models.sources import ModelSource, open_source

NONE = dict(model_def=None, weights=None, weights_key=None, preprocess=None, input_size=None, mean=None, std=None,
            classes=None)  # fmt: skip


def test_no_model_def_is_no_user_model_but_its_flags_alone_are_an_error(tmp_path):
    assert _user_model(**NONE) is None
    with pytest.raises(AFTExportError, match="^`weights`, `input_size` describe a model trained elsewhere; give "
                                             "`model_def` too$"):  # fmt: skip
        _user_model(**{**NONE, "weights": "w.pt", "input_size": 32})
    said = CliRunner().invoke(main, ["parity", str(tmp_path / "m.onnx"), "--data", str(tmp_path), "--weights", "w.pt",
                                     "--input-size", "32"])  # fmt: skip
    assert said.exit_code == 2 and said.stderr == (
        "error: --weights, --input-size describe a model trained elsewhere; give --model-def too\n")


def test_flags_make_one_model_source_passed_on_in_memory(tmp_path):
    """The flags become one UserModel, a ModelSource like a checkpoint: no spec file is written
    to hand it on; the positional argument is the weights (export) or an artifact (parity)."""
    (tmp_path / "names.txt").write_text("a\nb\n")
    flags = {**NONE, "model_def": "tests/byo/user_models.py:plain_cnn", "weights_key": "ema", "input_size": 16,
             "mean": "0.1,0.2,0.3", "std": "0.5,0.5,0.5", "classes": str(tmp_path / "names.txt")}  # fmt: skip
    user = _user_model(**{**flags, "weights": "w.pt"})
    assert isinstance(user, UserModel) and isinstance(user, ModelSource)
    assert user.weights == "w.pt" and user.weights_key == "ema"
    assert user.preprocessing.classes == ("a", "b") and user.preprocessing.input_size == 16
    twice = CliRunner().invoke(main, ["export", "x.pt", "-o", str(tmp_path / "x.onnx"), "--model-def",
                                      flags["model_def"], "--weights", "w.pt", "--input-size", "16", "--mean", "0,0,0",
                                      "--std", "1,1,1"])  # fmt: skip
    assert twice.exit_code == 2 and twice.stderr == "error: give the weights once: x.pt or --weights w.pt\n"
    nothing = CliRunner().invoke(main, ["export", "-o", str(tmp_path / "x.onnx")])
    assert nothing.exit_code == 2 and nothing.stderr == (
        "error: give a CHECKPOINT to export, or --model-def and --weights for a model trained elsewhere\n")


def test_the_pipeline_takes_a_checkpoint_or_a_model_def_not_both(tmp_path):
    """The API's words (`a checkpoint`, where the command line said CHECKPOINT before it was the API)."""
    both = CliRunner().invoke(main, ["pipeline", "c.pt", "-o", str(tmp_path / "run"), "--model-def",
                                     "tests/byo/user_models.py:plain_cnn", "--input-size", "16", "--mean", "0,0,0",
                                     "--std", "1,1,1"])  # fmt: skip
    assert both.exit_code == 2 and both.stderr == "error: give either a checkpoint (c.pt) or --model-def, not both\n"
    assert not (tmp_path / "run").exists()


def test_a_spec_file_is_a_model_source_once_byo_is_imported(tmp_path):
    spec = tmp_path / "m.yaml"
    spec.write_text("model_def: net.py:build\nweights: w.pt\ninput_size: 8\nmean: [0, 0, 0]\nstd: [1, 1, 1]\n")
    user = open_source(str(spec))
    assert isinstance(user, UserModel) and user.spec == str(spec) and user.path == str(spec)
    assert user.inputs == (str(spec), f"{tmp_path}/w.pt", f"{tmp_path}/net.py")


def test_a_preprocess_file_that_is_a_whole_spec_needs_no_model_def_flag(tmp_path):
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps({"model_def": "net.py:build", "weights": "w.pt", "input_size": 8,
                                "mean": [0, 0, 0], "std": [1, 1, 1]}))  # fmt: skip
    user = _user_model(**{**NONE, "preprocess": str(spec)})
    assert user.model_def == f"{tmp_path}/net.py:build" and user.weights == f"{tmp_path}/w.pt"


def test_the_pipeline_takes_a_user_model_in_memory_but_needs_a_file_to_name_its_run(tmp_path):
    from aft_export.options import PipelineOptions
    from aft_export.workflow.pipeline import run_pipeline

    user = _user_model(**{**NONE, "model_def": "tests.byo.user_models:own_architecture", "input_size": 32,
                          "mean": "0,0,0", "std": "1,1,1"})  # fmt: skip
    with pytest.raises(AFTExportError, match="has none; give `weights`"):
        run_pipeline(user, PipelineOptions(output=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()
