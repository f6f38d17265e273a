"""What aft-export ships is recorded by its name: a run's record names no install path."""

import shutil

from aft_export.models.resources import bundled_name, default_calibration, default_checkpoint


def test_a_bundled_file_is_named_by_its_place_in_the_repository(tmp_path):
    assert bundled_name(default_checkpoint()) == "bundled:models/aft_conv_cifar.pt"
    assert bundled_name(str(default_calibration())) == "bundled:calibration/cifar10.json"
    # a copy elsewhere, a file that is not there, a folder of ours: the user's own, named as they gave it
    copy = shutil.copy(default_calibration(), tmp_path / "cifar10.json")
    assert bundled_name(copy) is None
    assert bundled_name(default_checkpoint().with_name("no_such_model.pt")) is None
    assert bundled_name(default_checkpoint().parent) is None


def test_the_manifest_names_what_it_was_given_by_default():
    from pathlib import Path

    from aft_export.workflow.pipeline import _named

    where = str(default_checkpoint())
    manifest = {"inputs": {"checkpoint": where}, "eval": [{"artifact": where, "top1": 90.0}],
                "rows": ({"artifact": Path(where), "runtime": "torch"},), "other": "x/" + where}
    assert _named(manifest, {where: "bundled:models/aft_conv_cifar.pt"}) == {
        "inputs": {"checkpoint": "bundled:models/aft_conv_cifar.pt"},
        "eval": [{"artifact": "bundled:models/aft_conv_cifar.pt", "top1": 90.0}],
        "rows": [{"artifact": "bundled:models/aft_conv_cifar.pt", "runtime": "torch"}], "other": "x/" + where}
