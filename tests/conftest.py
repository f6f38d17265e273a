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
def foreign(tmp_path_factory, cifar10):
    """An ONNX file another tool wrote: ONNX Runtime's own quantiser (quantize_static, the settings
    its docs give for TensorRT: QDQ, symmetric int8, float biases, MatMul/Conv/Gemm) run on our
    portable export of a tiny CIFAR-10 model, with our metadata stripped (the quantiser copies it
    through). Returns the paths: ``ckpt``, ``ours`` (the portable fp32 export), ``copied`` (the
    quantiser's file, our metadata still in it) and ``theirs`` (the same graph, stripped)."""
    import onnx
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from aft_export.models.checkpoint import save_checkpoint
    from aft_export.data.images import CIFAR10_MEAN, CIFAR10_STD, normalize
    from aft_export.data.datasets import CIFAR10_CLASSES, load_labelled
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.models import create_model

    root = tmp_path_factory.mktemp("foreign")
    torch.manual_seed(5)
    ckpt = root / "m.pt"
    save_checkpoint(ckpt, create_model("aft_conv_test"), CIFAR10_CLASSES, model_name="aft_conv_test")
    ours = root / "m.portable.onnx"
    data = str(cifar10 / "test.tar")
    export_checkpoint(ckpt, ours, ExportOptions(target="portable", verify_images=0, simplify=False), log=lambda *a: None)
    images = load_labelled(data, 32, limit=32)
    x = normalize(images.images, CIFAR10_MEAN, CIFAR10_STD).numpy()

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"image": x[i : i + 8]} for i in range(0, len(x), 8)])

        def get_next(self):
            return next(self.batches, None)

    copied = root / "m.ortq.onnx"
    quantize_static(str(ours), str(copied), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    op_types_to_quantize=["MatMul", "Conv", "Gemm"],
                    extra_options={"ActivationSymmetric": True, "QuantizeBias": False})  # fmt: skip
    model = onnx.load(str(copied))
    assert {p.key for p in model.metadata_props} >= {"classes", "mean", "std"}  # ORT's quantiser copied ours
    del model.metadata_props[:]
    theirs = root / "theirs.onnx"
    onnx.save(model, str(theirs))
    return {"ckpt": ckpt, "ours": ours, "copied": copied, "theirs": theirs, "data": data}


@pytest.fixture(scope="session")
def served_onnx(tmp_path_factory):
    """The serving tests' artifacts, exported once per session: a tiny AFT-conv as
    ``conv.onnx`` (dynamic batch) and ``conv.b2.onnx`` (a fixed batch of 2)."""
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from tests.export.test_exporter import make_ckpt

    root = tmp_path_factory.mktemp("served")
    ckpt = make_ckpt(root / "conv.pt", "aft_conv_test")
    dynamic, fixed = root / "conv.onnx", root / "conv.b2.onnx"
    export_checkpoint(ckpt, dynamic, ExportOptions(verify_images=0), log=lambda *a: None)
    export_checkpoint(ckpt, fixed, ExportOptions(verify_images=0, batch="2"), log=lambda *a: None)
    return dynamic, fixed
