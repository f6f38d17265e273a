import json

import pytest

from aft_export.cli.byo import model_source_from, user_model_from
from aft_export.byo.spec import UserModel
from aft_export.errors import AFTExportError
from aft_export.models.sources import CheckpointSource, ModelSource, open_source

FLAGS = {"model_def": None, "weights": None, "weights_key": None, "preprocess": None, "byo_input_size": None,
         "byo_mean": None, "byo_std": None, "classes": None}  # fmt: skip


def test_no_model_def_is_no_user_model_but_its_flags_alone_are_an_error():
    assert user_model_from(FLAGS) is None
    with pytest.raises(AFTExportError, match="--weights, --input-size describe a model trained elsewhere; give "
                                             "--model-def too"):  # fmt: skip
        user_model_from({**FLAGS, "weights": "w.pt", "byo_input_size": 32})


def test_flags_make_one_model_source_passed_on_in_memory(tmp_path):
    """The flags become one UserModel, a ModelSource like a checkpoint: no spec file is written
    to hand it on; the positional argument is the weights (export) or an artifact (parity)."""
    (tmp_path / "names.txt").write_text("a\nb\n")
    flags = {**FLAGS, "model_def": "tests/byo/user_models.py:plain_cnn", "weights_key": "ema", "byo_input_size": 16,
             "byo_mean": "0.1,0.2,0.3", "byo_std": "0.5,0.5,0.5", "classes": str(tmp_path / "names.txt")}  # fmt: skip
    user, rest = model_source_from(str(tmp_path / "w.pt"), flags, role="weights")
    assert isinstance(user, UserModel) and isinstance(user, ModelSource) and rest is None
    assert user.weights == str(tmp_path / "w.pt") and user.weights_key == "ema"
    assert user.preprocessing.classes == ("a", "b") and user.preprocessing.input_size == 16
    assert user.inputs == (str(tmp_path / "w.pt"), "tests/byo/user_models.py") and user.path == user.weights
    same, artifact = model_source_from("m.onnx", {**flags, "weights": "w.pt"}, role="artifact")
    assert artifact == "m.onnx" and same.weights == "w.pt"
    with pytest.raises(AFTExportError, match="give the weights once"):
        model_source_from("x.pt", {**flags, "weights": "w.pt"}, role="weights")
    ckpt, rest = model_source_from("c.pt", FLAGS, config="aft_conv_cifar")
    assert ckpt == CheckpointSource("c.pt", "aft_conv_cifar") and rest is None


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
    user = user_model_from({**FLAGS, "preprocess": str(spec)})
    assert user.model_def == f"{tmp_path}/net.py:build" and user.weights == f"{tmp_path}/w.pt"


def test_the_pipeline_takes_a_user_model_in_memory_but_needs_a_file_to_name_its_run(tmp_path):
    from aft_export.options import PipelineOptions
    from aft_export.workflow.pipeline import run_pipeline

    user, _ = model_source_from(None, {**FLAGS, "model_def": "tests.byo.user_models:own_architecture",
                                       "byo_input_size": 32, "byo_mean": "0,0,0", "byo_std": "1,1,1"})  # fmt: skip
    with pytest.raises(AFTExportError, match="has none; give `weights`"):
        run_pipeline(user, PipelineOptions(output=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()
