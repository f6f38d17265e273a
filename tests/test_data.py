import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from aft_export.data.images import load_image, normalize, normalize_array
from aft_export.data.datasets import load_labelled
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


def test_a_tar_is_indexed_once_per_process_until_it_changes(tmp_path, monkeypatch):
    """The second read of a tar takes its index from the process's (no header read again) and
    decodes the same images; a tar rewritten on disk is read anew, never from a stale index;
    a tar of more members than the index keeps is read every time."""
    import os

    import aft_export.data.images as images

    root = tmp_path / "split"
    _make_folder(root)
    tar_path = tmp_path / "split.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname="split")
    monkeypatch.setattr(images, "_tar_index", type(images._tar_index)())
    reads = []
    real = tarfile.TarFile.getmembers
    monkeypatch.setattr(tarfile.TarFile, "getmembers", lambda self: reads.append(1) or real(self))
    first = load_labelled(tar_path, 8)
    read_first = len(reads)
    again = load_labelled(tar_path, 8)
    assert read_first == 1 and len(reads) == read_first  # indexed once
    assert np.array_equal(first.images, again.images) and np.array_equal(first.labels, again.labels)
    # rewritten in place with one class less: a new key (size, modification time), read anew
    (root / "cat" / "0.png").unlink()
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname="split")
    os.utime(tar_path, ns=(1, 1))  # whatever the clock's resolution
    changed = load_labelled(tar_path, 8)
    assert len(reads) == read_first + 1 and len(changed) == len(first) - 1
    monkeypatch.setattr(images, "TAR_INDEX_MAX_MEMBERS", 2)  # too many members to keep
    monkeypatch.setattr(images, "_tar_index", type(images._tar_index)())
    before = len(reads)
    load_labelled(tar_path, 8)
    load_labelled(tar_path, 8)
    assert len(reads) == before + 2 and not images._tar_index


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


def _resize_then_crop(img: Image.Image, size: int) -> np.ndarray:
    """The preprocessing's definition, written out: shorter side to ``size``, centre crop."""
    w, h = img.size
    scale = size / min(w, h)
    nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
    left, top = (nw - size) // 2, (nh - size) // 2
    return np.asarray(img.resize((nw, nh), Image.BICUBIC).crop((left, top, left + size, top + size)))


@pytest.mark.parametrize("w, h", [(12, 10), (33, 31), (31, 33), (640, 480), (375, 500), (257, 255), (1000, 20)])
@pytest.mark.parametrize("size", [17, 32])
def test_ordinary_images_are_resized_then_cropped_exactly(w, h, size):
    img = Image.fromarray(np.random.default_rng(w * h).integers(0, 256, (h, w, 3), dtype=np.uint8))
    assert np.array_equal(load_image(_png(img), size), _resize_then_crop(img, size))


@pytest.mark.parametrize("w, h", [(100000, 1), (1, 100000), (5000, 7)])
def test_a_strip_costs_its_crop_not_its_resized_whole(w, h, monkeypatch):
    """A 1 x 100000 strip for a 32-pixel model would be resized to 32 x 3,200,000 first;
    no image is ever resized to more than 64 times the model's input."""
    sizes = []
    resize = Image.Image.resize

    def recorded(self, size, *args, **kwargs):
        sizes.append(size)
        return resize(self, size, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "resize", recorded)
    ramp = (np.arange(w * h) % 256).astype(np.uint8).reshape(h, w)
    out = load_image(_png(Image.fromarray(np.stack([ramp] * 3, axis=-1))), 32)
    assert out.shape == (32, 32, 3) and sizes
    assert max(a * b for a, b in sizes) <= 64 * 32 * 32


def _claiming_png(w: int, h: int) -> bytes:
    """A PNG header that says ``w x h`` pixels, with almost no data behind it."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 8)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("w, h, message", [
    (9000, 9000, r"is 9000x9000 \(81 Mpx\), more pixels than aft-export decodes for a 32x32 model \(64 Mpx\)"),
    (20000, 20000, "claims more pixels than aft-export decodes"),  # PIL's own bomb error, below ours
])  # fmt: skip
def test_an_image_claiming_absurdly_many_pixels_is_refused_before_decoding(w, h, message, monkeypatch):
    from PIL import ImageFile

    def never(self):
        raise AssertionError("decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", never)
    with pytest.raises(AFTExportError, match=message):
        load_image(_claiming_png(w, h), 32, name="claims.png")


def test_the_pixel_bound_grows_with_large_inputs():
    from aft_export.data.images import MAX_IMAGE_PIXELS, max_image_pixels

    assert max_image_pixels(32) == max_image_pixels(256) == MAX_IMAGE_PIXELS == 64 * 2**20
    assert max_image_pixels(512) == 1024 * 512 * 512


def test_a_truncated_tar_is_one_clear_error(tmp_path):
    root = tmp_path / "split"
    _make_folder(root, n_per_class=20)
    tar_path = tmp_path / "split.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname="split")
    data = tar_path.read_bytes()
    tar_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(AFTExportError, match="cannot read tar .* damaged or truncated; re-download or re-create it"):
        load_labelled(tar_path, 8)


def test_normalize_array_is_normalize_bit_for_bit_without_torch():
    """The NumPy form the Triton Python backend uses (no torch there) gives eval's tensor exactly."""
    images = np.random.default_rng(0).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    ours = normalize_array(images, mean, std)
    assert ours.dtype == np.float32 and ours.flags["C_CONTIGUOUS"]
    assert np.array_equal(ours, normalize(images, mean, std).numpy())


def test_decode_then_model_input_is_load_image_then_normalize_for_bytes_and_paths(tmp_path):
    """One decode-and-feed for calibration, predict and the Triton model: the same batch as
    load_image on each image then normalize, from encoded bytes or a path; errors name the image."""
    import io

    from PIL import Image

    from aft_export.data.images import decode_pixels, model_input
    from aft_export.errors import AFTExportError

    rng = np.random.default_rng(1)
    blobs = []
    for i, size in enumerate((48, 32)):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (size, size + 8 * i, 3), dtype=np.uint8)).save(buf, "PNG")
        blobs.append(buf.getvalue())
    (tmp_path / "b.png").write_bytes(blobs[1])
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    want = normalize(np.stack([load_image(b, 32) for b in blobs]), mean, std).numpy()
    got = model_input(decode_pixels([("first", blobs[0]), ("", str(tmp_path / "b.png"))], 32), mean, std)
    assert got.shape == (2, 3, 32, 32) and got.dtype == np.float32 and np.array_equal(got, want)
    with pytest.raises(AFTExportError, match="the broken one"):
        decode_pixels([("the broken one", b"not an image")], 32)


def test_the_format_tables_answer_what_code_asks_of_a_format():
    """data.formats: each input format says whether it is pixels, each output format whether a Softmax makes
    it; a name no table has is neither (code asks the table, never compares names)."""
    from aft_export.data.formats import (FORMATS, OUTPUT_FORMATS, OUTPUTS, gives_probabilities, input_format,
                                         takes_pixels)

    assert [n for n in FORMATS if takes_pixels(n)] == ["uint8-nhwc", "float-nchw"] and not takes_pixels("normalized")
    assert OUTPUT_FORMATS == ("logits", "probabilities") and str(OUTPUTS["logits"]) == "logits"
    assert gives_probabilities("probabilities") and not gives_probabilities("logits")
    assert not takes_pixels("rgb") and not gives_probabilities(None) and input_format("uint8-nhwc").layout == "NHWC"
