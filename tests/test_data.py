import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from aft_export.data import load_image, normalize
from aft_export.datasets import load_labelled
from aft_export.errors import AFTExportError



def _png(img: Image.Image, fmt="PNG") -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def test_rgb_image_of_the_right_size_is_untouched():
    pixels = np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    out = load_image(_png(Image.fromarray(pixels)), 8)
    assert out.dtype == np.uint8 and np.array_equal(out, pixels)


@pytest.mark.parametrize("mode", ["L", "P", "RGBA", "LA", "CMYK"])
def test_other_8bit_modes_become_rgb(mode):
    img = Image.new(mode, (10, 10))
    out = load_image(_png(img, "TIFF" if mode == "CMYK" else "PNG"), 10)
    assert out.shape == (10, 10, 3)


def test_rgba_is_composited_on_black():
    img = Image.new("RGBA", (4, 4), (255, 255, 255, 0))  # fully transparent white
    assert load_image(_png(img), 4).max() == 0


def test_16bit_is_refused_clearly():
    img = Image.fromarray(np.full((6, 6), 40000, dtype=np.uint16))
    with pytest.raises(AFTExportError, match="16-bit or float.*convert it to 8-bit RGB"):
        load_image(_png(img), 6, name="deep.png")


def test_resize_shorter_side_then_centre_crop():
    img = Image.new("RGB", (40, 20))
    img.paste((255, 0, 0), (0, 0, 10, 20))  # red left quarter is cropped away
    out = load_image(_png(img), 16)
    assert out.shape == (16, 16, 3)
    assert out[:, :, 0].max() < 40


def test_truncated_image_is_refused():
    blob = _png(Image.new("RGB", (32, 32), (9, 9, 9)), "JPEG")
    with pytest.raises(AFTExportError, match="cannot read image broken.jpg"):
        load_image(blob[: len(blob) // 3], 32, name="broken.jpg")


def _make_folder(root: Path, n_per_class=3):
    for ci, cls in enumerate(["cat", "ant", "bee"]):
        (root / cls).mkdir(parents=True)
        for i in range(n_per_class):
            Image.new("RGB", (8, 8), (ci * 50, i, 0)).save(root / cls / f"{i}.png")


def test_image_folder_directory_and_tar_agree(tmp_path):
    root = tmp_path / "split"
    _make_folder(root)
    (root / "notes.txt").write_text("ignored")
    from_dir = load_labelled(root, 8)
    tar_path = tmp_path / "split.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname="split")
    from_tar = load_labelled(tar_path, 8)
    assert from_dir.classes == from_tar.classes == ["ant", "bee", "cat"]  # sorted, like ImageFolder
    assert np.array_equal(from_dir.labels, from_tar.labels)
    assert np.array_equal(from_dir.images, from_tar.images)
    assert from_dir.images[from_dir.labels == 2][:, 0, 0, 0].tolist() == [0, 0, 0]  # "cat" is red 0


def test_empty_missing_and_wrong_sources(tmp_path):
    with pytest.raises(AFTExportError, match="does not exist"):
        load_labelled(tmp_path / "none", 8)
    (tmp_path / "empty").mkdir()
    with pytest.raises(AFTExportError, match="no images found"):
        load_labelled(tmp_path / "empty", 8)
    bogus = tmp_path / "file.bin"
    bogus.write_bytes(b"x" * 1000)
    with pytest.raises(AFTExportError, match="neither an ImageFolder directory nor a tar"):
        load_labelled(bogus, 8)


def test_cifar_test_split_subset(cifar10):
    data = load_labelled(cifar10 / "test.tar", 32, limit=500)
    assert data.images.shape == (500, 32, 32, 3)
    assert len(data.classes) == 10 and data.classes[0] == "airplane"
    assert len(np.unique(data.labels)) == 10  # the subset spans classes


def test_normalize_layout_and_values():
    img = np.zeros((1, 2, 2, 3), dtype=np.uint8)
    img[..., 1] = 255
    x = normalize(img, (0.5, 0.5, 0.5), (0.5, 0.25, 1.0))
    assert x.shape == (1, 3, 2, 2)
    assert x[0, 0, 0, 0].item() == -1.0 and x[0, 1, 0, 0].item() == 2.0 and x[0, 2, 0, 0].item() == -0.5
