import json

import pytest

from aft_export.byo.cli import spec_file, user_model_from
from aft_export.byo.spec import read_spec
from aft_export.errors import AFTExportError

FLAGS = {"model_def": None, "weights": None, "weights_key": None, "preprocess": None, "byo_input_size": None,
         "byo_mean": None, "byo_std": None, "classes": None}  # fmt: skip


def test_no_model_def_is_no_user_model_but_its_flags_alone_are_an_error():
    assert user_model_from(FLAGS) is None
    with pytest.raises(AFTExportError, match="--weights, --input-size describe a model trained elsewhere; give "
                                             "--model-def too"):  # fmt: skip
        user_model_from({**FLAGS, "weights": "w.pt", "byo_input_size": 32})


def test_flags_round_trip_through_a_spec_file(tmp_path):
    (tmp_path / "names.txt").write_text("a\nb\n")
    user = user_model_from({**FLAGS, "model_def": "tests/byo/user_models.py:plain_cnn", "weights": str(tmp_path / "w.pt"),
                            "weights_key": "ema", "byo_input_size": 16, "byo_mean": "0.1,0.2,0.3",
                            "byo_std": "0.5,0.5,0.5", "classes": str(tmp_path / "names.txt")})  # fmt: skip
    with spec_file(user) as path:
        data = json.loads(path.read_text())
        back = read_spec(path)
    assert data["weights_key"] == "ema" and data["classes"] == ["a", "b"]
    assert back.preprocessing == user.preprocessing and back.weights_key == "ema"
    assert back.weights == str((tmp_path / "w.pt").resolve())
    assert back.model_def.endswith("tests/byo/user_models.py:plain_cnn") and back.model_def.startswith("/")


def test_a_preprocess_file_that_is_a_whole_spec_needs_no_model_def_flag(tmp_path):
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps({"model_def": "net.py:build", "weights": "w.pt", "input_size": 8,
                                "mean": [0, 0, 0], "std": [1, 1, 1]}))  # fmt: skip
    user = user_model_from({**FLAGS, "preprocess": str(spec)})
    assert user.model_def == f"{tmp_path}/net.py:build" and user.weights == f"{tmp_path}/w.pt"
