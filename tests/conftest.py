import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CIFAR10_FILES = ("train.tar", "test.tar")


def cifar10_dir() -> Path:
    """CIFAR-10 tars: $AFT_CIFAR10_DIR, else ../shared/data/cifar10 beside the repo."""
    return Path(os.environ.get("AFT_CIFAR10_DIR", REPO.parent / "shared" / "data" / "cifar10"))


def in_ci() -> bool:
    """CI sets CI (GitHub Actions, GitLab, Buildkite, ... and .ci/run): there the data is
    part of the setup, so a missing data set is a failure, never a skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def cifar10() -> Path:
    path = cifar10_dir()
    missing = [name for name in CIFAR10_FILES if not (path / name).is_file()]
    if missing:
        reason = f"CIFAR-10 not found: {', '.join(missing)} missing in {path} (set AFT_CIFAR10_DIR)"
        if in_ci():
            pytest.fail(f"{reason}; CI runs every test that needs the data, so this fails instead of "
                        f"skipping (unset CI to skip them locally)", pytrace=False)  # fmt: skip
        pytest.skip(reason)
    return path


OPENVINO_INSTALL = "pip install -e '.[test]' (it pins openvino)"


def need_openvino():
    """The ``openvino`` module; where it is missing a skip with the install line, and under
    CI (whose test extra pins it) a failure."""
    try:
        import openvino
    except ImportError as exc:
        reason = f"needs OpenVINO ({type(exc).__name__}: {exc}): {OPENVINO_INSTALL}"
        if in_ci():
            pytest.fail(f"{reason}; CI installs OpenVINO, so this fails instead of skipping", pytrace=False)
        pytest.skip(reason)
    return openvino


@pytest.fixture(scope="session")
def served_onnx(tmp_path_factory):
    """The serving tests' artifacts, exported once per session: a tiny AFT-conv as
    ``conv.onnx`` (dynamic batch) and ``conv.b2.onnx`` (a fixed batch of 2)."""
    from aft_export.export.exporter import ExportOptions, export_checkpoint
    from tests.export.test_exporter import make_ckpt

    root = tmp_path_factory.mktemp("served")
    ckpt = make_ckpt(root / "conv.pt", "aft_conv_test")
    dynamic, fixed = root / "conv.onnx", root / "conv.b2.onnx"
    export_checkpoint(ckpt, dynamic, ExportOptions(verify_images=0), log=lambda *a: None)
    export_checkpoint(ckpt, fixed, ExportOptions(verify_images=0, batch="2"), log=lambda *a: None)
    return dynamic, fixed
