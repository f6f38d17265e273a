"""Calibration data: sources, seeded sampling, the evaluation transform, bad images."""

import tarfile

import numpy as np
import pytest
from PIL import Image

from aft_export.data.calibration import CalibrationReader, load_calibration
from aft_export.data.images import Preprocessing
from aft_export.data.images import normalize
from aft_export.data.datasets import load_labelled
from aft_export.errors import AFTExportError

PREP = Preprocessing(32, (0.5, 0.4, 0.3), (0.2, 0.25, 0.3))


def _image(path, size=(40, 36), mode="RGB", seed=0):
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(arr).convert(mode).save(path)


@pytest.fixture
def folder(tmp_path):
    """An ImageFolder with mixed sizes and modes (RGB, L, RGBA, CMYK via JPEG)."""
    root = tmp_path / "imgs"
    for i, (cls, mode, ext) in enumerate([("cat", "RGB", "png"), ("cat", "L", "png"), ("dog", "RGBA", "png"),
                                          ("dog", "CMYK", "jpg"), ("dog", "RGB", "jpg")]):  # fmt: skip
        (root / cls).mkdir(parents=True, exist_ok=True)
        _image(root / cls / f"{i}.{ext}", size=(40 + i, 33 + 2 * i), mode=mode, seed=i)
    return root


def test_same_transform_as_evaluation(folder):
    """Calibration tensors equal what evaluation feeds the model for the same images."""
    cset = load_calibration(folder, PREP, count=5, progress=False)
    data = load_labelled(folder, PREP.size)  # the evaluation/training loader
    expected = normalize(data.images, PREP.mean, PREP.std).numpy()
    np.testing.assert_array_equal(cset.tensors, expected)
    assert cset.tensors.shape == (5, 3, 32, 32) and cset.tensors.dtype == np.float32


def test_seeded_sampling_and_record(folder):
    a = load_calibration(folder, PREP, count=3, seed=1, progress=False)
    b = load_calibration(folder, PREP, count=3, seed=1, progress=False)
    c = load_calibration(folder, PREP, count=3, seed=2, progress=False)
    assert a.sha256 == b.sha256 and a.sha256 != c.sha256
    rec = a.record()
    assert rec["count"] == 3 and rec["seed"] == 1 and rec["sha256"] == a.sha256
    assert rec["preprocess"] == {"size": 32, "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.25, 0.3]}


def test_fewer_images_than_asked(folder):
    with pytest.raises(AFTExportError, match="has 5 images but 9 were asked for.*`allow_fewer`"):
        load_calibration(folder, PREP, count=9, progress=False)
    cset = load_calibration(folder, PREP, count=9, allow_fewer=True, progress=False)
    assert len(cset) == 5 and cset.record()["requested"] == 9


def test_empty_and_missing_sources(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(AFTExportError, match="holds no images"):
        load_calibration(tmp_path / "empty", PREP, progress=False)
    with pytest.raises(AFTExportError, match="does not exist"):
        load_calibration(tmp_path / "nope", PREP, progress=False)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(AFTExportError, match="not a directory of images"):
        load_calibration(tmp_path / "notes.txt", PREP, progress=False)


def test_unlabelled_folder_and_tar(tmp_path, folder):
    flat = tmp_path / "flat"
    flat.mkdir()
    for i in range(4):
        _image(flat / f"{i}.png", seed=10 + i)
    assert len(load_calibration(flat, PREP, count=4, progress=False)) == 4
    tar_path = tmp_path / "imgs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(folder, arcname="imgs")
    from_tar = load_calibration(tar_path, PREP, count=5, progress=False)
    np.testing.assert_array_equal(from_tar.tensors, load_calibration(folder, PREP, count=5, progress=False).tensors)


def test_bad_images_are_named(tmp_path):
    root = tmp_path / "bad"
    root.mkdir()
    _image(root / "good.png")
    full = tmp_path / "full.png"
    _image(full)
    (root / "truncated.png").write_bytes(full.read_bytes()[:100])
    with pytest.raises(AFTExportError, match="truncated.png"):
        load_calibration(root, PREP, count=2, progress=False)
    (root / "truncated.png").unlink()
    Image.fromarray(np.full((8, 8), 40000, dtype=np.uint16)).save(root / "deep.png")
    with pytest.raises(AFTExportError, match="deep.png.*16-bit"):
        load_calibration(root, PREP, count=2, progress=False)


def test_npy_and_npz(tmp_path):
    raw = np.random.default_rng(0).integers(0, 256, size=(6, 32, 32, 3), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", raw)
    got = load_calibration(tmp_path / "raw.npy", PREP, count=6, progress=False)
    np.testing.assert_array_equal(got.tensors, normalize(raw, PREP.mean, PREP.std).numpy())
    pre = np.random.default_rng(1).standard_normal((4, 3, 32, 32)).astype(np.float32)
    np.savez(tmp_path / "pre.npz", images=pre, other=np.zeros(2))
    np.testing.assert_array_equal(load_calibration(tmp_path / "pre.npz", PREP, count=4, progress=False).tensors, pre)
    np.save(tmp_path / "wrong.npy", np.zeros((4, 3, 16, 16), np.float32))
    with pytest.raises(AFTExportError, match="16x16, the model takes 32x32"):
        load_calibration(tmp_path / "wrong.npy", PREP, count=4, progress=False)
    np.save(tmp_path / "odd.npy", np.zeros((4, 5), np.int32))
    with pytest.raises(AFTExportError, match="neither uint8 images"):
        load_calibration(tmp_path / "odd.npy", PREP, count=4, progress=False)
    np.savez(tmp_path / "two.npz", a=raw, b=raw)
    with pytest.raises(AFTExportError, match="name the calibration one 'images'"):
        load_calibration(tmp_path / "two.npz", PREP, count=4, progress=False)


def test_cifar10_tar(cifar10):
    cset = load_calibration(cifar10 / "test.tar", PREP, count=16, seed=3, progress=False)
    assert cset.tensors.shape == (16, 3, 32, 32)


def test_reader_is_rewindable():
    x = np.arange(10 * 3 * 2 * 2, dtype=np.float32).reshape(10, 3, 2, 2)
    reader = CalibrationReader(x, "image", batch_size=4)
    first = [b["image"].copy() for b in reader]
    assert [len(b) for b in first] == [4, 4, 2] and len(reader) == 3
    assert reader.get_next() is None
    reader.rewind()
    np.testing.assert_array_equal(reader.get_next()["image"], first[0])
    with pytest.raises(AFTExportError):
        CalibrationReader(x, batch_size=0)


def test_preprocess_from_metadata():
    meta = {"input_size": "[3, 32, 32]", "mean": "[0.1, 0.2, 0.3]", "std": "[0.5, 0.5, 0.5]"}
    assert Preprocessing.from_metadata(meta) == Preprocessing(32, (0.1, 0.2, 0.3), (0.5, 0.5, 0.5))
    with pytest.raises(AFTExportError, match="give `input_size`, `mean`, `std`"):
        Preprocessing.from_metadata({}, path="m.onnx")
    assert Preprocessing.from_metadata({}, 64, (0, 0, 0), (1, 1, 1)).size == 64
    with pytest.raises(AFTExportError, match="std > 0"):
        Preprocessing.from_metadata({}, 64, (0, 0, 0), (1, 0, 1))
