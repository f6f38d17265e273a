import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
CIFAR10_FILES = ("train.tar", "test.tar")

# every line the command line prints is checked: one that names a parameter as text, not as data,
# is a bug (a message that lost its parameters on the way; aft_export.cli.words.in_words), here and
# in every `aft-export` the tests start
os.environ["AFT_EXPORT_STRICT_WORDS"] = "1"


def cifar10_dir() -> Path:
    """CIFAR-10 tars: $AFT_CIFAR10_DIR, else ../shared/data/cifar10 beside the repo."""
    return Path(os.environ.get("AFT_CIFAR10_DIR", REPO.parent / "shared" / "data" / "cifar10"))


def in_ci() -> bool:
    """CI sets CI (GitHub Actions, GitLab, Buildkite, ... and .ci/run): there the data is
    part of the setup, so a missing data set is a failure, never a skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skip with ``reason``; under CI, which provides every dependency and data set the tests need
    (.ci/run), fail instead: what CI provides is never silently skipped. The one home of "import it, or
    skip, but fail under CI" (:func:`need_module`, the CIFAR-10 fixture, tests/rtx.py, tests/servekit.py,
    tests/byo/publicpkgs.py)."""
    if in_ci():
        pytest.fail(f"{reason}; CI provides it, so this fails instead of skipping (unset CI to skip locally)",
                    pytrace=False)  # fmt: skip
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cifar10() -> Path:
    path = cifar10_dir()
    missing = [name for name in CIFAR10_FILES if not (path / name).is_file()]
    if missing:
        unavailable(f"CIFAR-10 not found: {', '.join(missing)} missing in {path} (set AFT_CIFAR10_DIR)")
    return path


OPENVINO_INSTALL = "pip install -e '.[test]' (it pins openvino)"


def need_module(name: str, install: str) -> ModuleType:
    """The module ``name``; where it is missing, :func:`unavailable` with the install line."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"needs {name} ({type(exc).__name__}: {exc}): {install}")


def need_openvino():
    """The ``openvino`` module (see :func:`need_module`)."""
    return need_module("openvino", OPENVINO_INSTALL)


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
    export_checkpoint(ckpt, ours, ExportOptions(target="portable", images=0, simplify=False), log=lambda *a: None)
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


def written_by(opts) -> str:
    """What of an export's options decides the file it writes: all of them less the
    verification's (images, data, tolerance), which change nothing in it."""
    import dataclasses

    from aft_export.exporting.exporter import ExportOptions

    return repr(dataclasses.replace(opts, images=0, data=None, verify_atol=ExportOptions.verify_atol))


class TinyExports:
    """Tiny untrained models (``tests.export.test_exporter.make_ckpt``: seeded) and their ONNX
    exports with verification off, each made once per session and copied to where a test asks
    for it (many modules read the same ones). A copy holds what the test's own ``make_ckpt`` and
    ``export_checkpoint`` would have written there: the checkpoint's file name is part of the key
    (an export records it as ``source_checkpoint``), an export of one checkpoint file is the same
    bytes whatever its own name, and the only thing that differs between two makings of a
    checkpoint, the temporary name inside its zip (so its sha256), differs between any two runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[tuple, Path] = {}
        self.sources: dict[Path, tuple[str, str]] = {}  # a checkpoint handed out -> (its file name, model)

    def _get(self, key: tuple, filename: str, make) -> Path:
        if key not in self.made:
            d = self.root / str(len(self.made))
            d.mkdir()
            self.made[key] = make(d / filename)
        return self.made[key]

    def ckpt(self, path: Path, name: str) -> Path:
        """``make_ckpt(path, name)``."""
        from tests.export.test_exporter import make_ckpt

        src = self._get(("ckpt", path.name, name), path.name, lambda p: make_ckpt(p, name))
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, path)
        self.sources[Path(path)] = (path.name, name)
        return path

    def _key(self, ckpt: Path, opts) -> tuple:
        """An export's key: its checkpoint and :func:`written_by` its options."""
        return ("onnx", *self.sources[Path(ckpt)], written_by(opts))

    def export(self, ckpt: Path, out: Path, **options) -> Path:
        """``export_checkpoint(ckpt, out, ExportOptions(images=0, **options))`` of a
        checkpoint from :meth:`ckpt`."""
        from aft_export.exporting.exporter import ExportOptions, export_checkpoint

        filename, name = self.sources[Path(ckpt)]
        opts = ExportOptions(images=0, **options)
        src_ckpt = self._get(("ckpt", filename, name), filename, None)

        def make(p: Path) -> Path:
            export_checkpoint(src_ckpt, p, opts, log=lambda *a: None)
            return p

        src = self._get(self._key(ckpt, opts), "model.onnx", make)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out)
        return out

    def export_verified(self, ckpt: Path, out: Path, options):
        """``export_checkpoint(ckpt, out, options)``, run here whatever the cache holds (the
        exporter and its verification are what the caller tests); its file is kept for a later
        :meth:`export` of the same checkpoint and options. Returns the ExportResult."""
        from aft_export.exporting.exporter import export_checkpoint

        result = export_checkpoint(ckpt, out, options)
        self._get(self._key(ckpt, options), "model.onnx", lambda p: Path(shutil.copyfile(out, p)))
        return result


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory) -> TinyExports:
    return TinyExports(tmp_path_factory.mktemp("tiny"))


class ZooExports:
    """The zoo's checkpoints (models/*.pt) exported with verification off, each model and set of
    options once per session (test_conformance, test_build and test_zoo read the same exports),
    copied to where a test asks for it: the bytes ``export_checkpoint`` writes there (an export's
    bytes do not depend on its own file name)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[tuple[str, str], Path] = {}

    @staticmethod
    def _key(model: str, opts) -> tuple:
        """An export's key: its model and :func:`written_by` its options."""
        return model, written_by(opts)

    def export(self, model: str, out: Path, **options) -> Path:
        """``export_checkpoint(models/<model>.pt, out, ExportOptions(images=0, **options))``."""
        from aft_export.exporting.exporter import ExportOptions, export_checkpoint

        opts = ExportOptions(images=0, **options)
        key = self._key(model, opts)
        if key not in self.made:
            path = self.root / f"{len(self.made)}.{model}.onnx"
            export_checkpoint(REPO / "models" / f"{model}.pt", path, opts, log=lambda *a: None)
            self.made[key] = path
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.made[key], out)
        return out

    def export_verified(self, model: str, out: Path, options):
        """``export_checkpoint(models/<model>.pt, out, options)``, run here whatever the cache
        holds (the exporter and its verification are what the caller tests); its file is kept
        for a later :meth:`export` of the same model and options. Returns the ExportResult."""
        from aft_export.exporting.exporter import export_checkpoint

        result = export_checkpoint(REPO / "models" / f"{model}.pt", out, options)
        key = self._key(model, options)
        if key not in self.made:
            self.made[key] = Path(shutil.copyfile(out, self.root / f"{len(self.made)}.{model}.onnx"))
        return result


@pytest.fixture(scope="session")
def zoo_onnx(tmp_path_factory) -> ZooExports:
    return ZooExports(tmp_path_factory.mktemp("zoo-onnx"))


@pytest.fixture(scope="session")
def served_onnx(tmp_path_factory, tiny_onnx):
    """The serving tests' artifacts, exported once per session: a tiny AFT-conv as
    ``conv.onnx`` (dynamic batch) and ``conv.b2.onnx`` (a fixed batch of 2)."""
    root = tmp_path_factory.mktemp("served")
    ckpt = tiny_onnx.ckpt(root / "conv.pt", "aft_conv_test")
    dynamic, fixed = root / "conv.onnx", root / "conv.b2.onnx"
    tiny_onnx.export(ckpt, dynamic)
    tiny_onnx.export(ckpt, fixed, batch_dim="2")
    return dynamic, fixed
