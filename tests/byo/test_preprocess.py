import json

import pytest

from aft_export.data.images import Preprocessing
from aft_export.data.preprocess import resolve
from aft_export.errors import AFTExportError
from tests.byo.publicpkgs import need


def test_flags_alone():
    p = resolve(input_size=32, mean="0.5,0.5,0.5", std="0.25, 0.25, 0.25")
    assert p == Preprocessing(32, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), None)
    assert p.class_names(3) == ["0", "1", "2"]


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_file_with_a_classes_file_beside_it_and_flags_override(tmp_path, suffix):
    (tmp_path / "names.txt").write_text("# CIFAR-like\ncat\n\ndog\nbird\n")
    data = {"input_size": [3, 64, 64], "mean": [0.1, 0.2, 0.3], "std": [0.4, 0.5, 0.6], "classes_file": "names.txt"}
    path = tmp_path / f"pre{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        need("yaml")
        path.write_text("input_size: [3, 64, 64]\nmean: [0.1, 0.2, 0.3]\nstd: [0.4, 0.5, 0.6]\n"
                        "classes_file: names.txt\n")
    p = resolve(path)
    assert (p.input_size, p.mean, p.std, p.classes) == (64, (0.1, 0.2, 0.3), (0.4, 0.5, 0.6), ("cat", "dog", "bird"))
    assert resolve(path, input_size=48, mean="0,0,0").input_size == 48
    assert resolve(path, mean="0,0,0").mean == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("kwargs, message", [
    ({"mean": "0.5,0.5,0.5", "std": "1,1,1"}, "give `input_size`"),
    ({"input_size": 32}, "give `mean`, `std` .*ImageNet-trained models use 0.485"),
    ({"input_size": 32, "mean": "0.5,0.5", "std": "1,1,1"}, "`mean` takes three numbers"),
    ({"input_size": 32, "mean": "a,b,c", "std": "1,1,1"}, "`mean` takes three numbers"),
    ({"input_size": 32, "mean": "0,0,0", "std": "1,0,1"}, "`std` must be positive"),
    ({"input_size": 0, "mean": "0,0,0", "std": "1,1,1"}, "`input_size` must be a whole number"),
    ({"input_size": 32.5, "mean": "0,0,0", "std": "1,1,1"}, "whole number"),
])  # fmt: skip
def test_bad_preprocessing_is_one_clear_error(kwargs, message):
    with pytest.raises(AFTExportError, match=message):
        resolve(**kwargs)


def test_class_names_must_match_the_outputs_and_not_repeat(tmp_path):
    names = tmp_path / "c.txt"
    names.write_text("a\nb\n")
    p = resolve(input_size=8, mean="0,0,0", std="1,1,1", classes=names)
    assert p.class_names(2) == ["a", "b"]
    with pytest.raises(AFTExportError, match="2 class names for a model with 10 outputs"):
        p.class_names(10)
    names.write_text("a\na\n")
    with pytest.raises(AFTExportError, match="class names repeat"):
        resolve(input_size=8, mean="0,0,0", std="1,1,1", classes=names)


def test_bad_files(tmp_path):
    unknown = tmp_path / "u.json"
    unknown.write_text(json.dumps({"input_size": 8, "mean": [0, 0, 0], "std": [1, 1, 1], "resize": "bilinear"}))
    with pytest.raises(AFTExportError, match=r"unknown keys \['resize'\]"):
        resolve(unknown)
    broken = tmp_path / "b.json"
    broken.write_text("{input_size: 8")
    with pytest.raises(AFTExportError, match="not valid JSON"):
        resolve(broken)
    with pytest.raises(AFTExportError, match="does not exist"):
        resolve(tmp_path / "missing.json")
    listing = tmp_path / "l.json"
    listing.write_text("[1, 2]")
    with pytest.raises(AFTExportError, match="must hold a mapping"):
        resolve(listing)
