"""cifar10:SPLIT resolution. No network here: the binary reader is tested on an archive
built in the test, in the official layout, and the download on a local file URL."""

import hashlib
import io
import tarfile

import numpy as np
import pytest

from aft_export.data import datasets
from aft_export.data.datasets import load_labelled
from aft_export.errors import AFTExportError


def _binary_archive(path, n_train=4, n_test=3):
    rng = np.random.default_rng(0)

    def batch(n):
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        pixels = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        return np.concatenate([labels[:, None], pixels], axis=1).tobytes(), labels, pixels

    expected = {}
    with tarfile.open(path, "w:gz") as tar:
        names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
        for name in names:
            blob, labels, pixels = batch(n_test if name == "test_batch.bin" else n_train)
            expected[name] = (labels, pixels)
            info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return expected


def test_binary_layout_is_decoded_planar_rgb(tmp_path):
    archive = tmp_path / "c.tar.gz"
    expected = _binary_archive(archive)
    data = datasets._decode_batches(archive, "test")
    labels, pixels = expected["test_batch.bin"]
    assert data.images.shape == (3, 32, 32, 3) and data.classes[0] == "airplane"
    assert np.array_equal(data.labels, labels)
    # record layout: 1024 red, then 1024 green, then 1024 blue, row-major
    assert data.images[0, 0, 1, 0] == pixels[0, 1] and data.images[0, 0, 0, 1] == pixels[0, 1024]
    assert datasets._decode_batches(archive, "train").images.shape == (20, 32, 32, 3)


def test_archive_with_wrong_checksum_is_refused(tmp_path):
    archive = tmp_path / "c.tar.gz"
    _binary_archive(archive)
    with pytest.raises(AFTExportError, match="does not match the CIFAR-10 binary md5"):
        datasets.read_cifar10_binary(archive, "test")


def test_download_checks_md5_and_leaves_nothing_on_failure(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    dest = tmp_path / "cache" / "file.bin"
    with pytest.raises(AFTExportError, match="corrupt: md5"):
        datasets.download(src.as_uri(), dest, "0" * 32)
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    datasets.download(src.as_uri(), dest, hashlib.md5(b"payload").hexdigest())
    assert dest.read_bytes() == b"payload"


def test_unreachable_download_says_what_to_do(tmp_path):
    with pytest.raises(AFTExportError, match="cannot download .* set AFT_CIFAR10_DIR"):
        datasets.download((tmp_path / "missing").as_uri(), tmp_path / "x", "0" * 32)


def test_named_set_uses_local_tars_first(cifar10, monkeypatch):
    monkeypatch.setenv("AFT_CIFAR10_DIR", str(cifar10))
    data = load_labelled("cifar10:test", 32, limit=20)
    assert datasets.resolve("cifar10:test") == str(cifar10 / "test.tar")
    assert len(data) == 20 and data.source == "cifar10:test"  # what it records: the set by its name, not the tar
    with pytest.raises(AFTExportError, match="unknown data set 'cifar10:val'"):
        load_labelled("cifar10:val", 32)


def test_a_subset_of_a_tar_reads_only_its_images(cifar10, monkeypatch):
    """load_labelled(limit=N) on a tar reads N images' bytes, not the set's 10,000, and takes the
    same images, labels and classes as a full read subset afterwards."""
    from aft_export.data import images
    from aft_export.data.images import iter_tar, subset_indices

    read, real = [], images._read_member
    monkeypatch.setattr(images, "_read_member", lambda tar, m, path: read.append(m.name) or real(tar, m, path))
    data = load_labelled(cifar10 / "test.tar", 32, limit=20)
    taken = list(read)
    assert len(taken) == 20 and len(data) == 20
    every = list(iter_tar(cifar10 / "test.tar"))
    chosen = [every[i] for i in subset_indices(len(every), 20)]
    assert [f"{cifar10 / 'test.tar'}:{n}" for n in taken] == [label for _, label, _ in chosen]
    assert data.classes == sorted({c for c, _, _ in every}) and len(data.classes) == 10
    assert [data.classes[i] for i in data.labels] == [c for c, _, _ in chosen]


def _checkout(root):
    (root / "aft_export").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "aft-export"\n')
    return root


def test_shared_beside_the_checkout_of_the_current_directory(tmp_path, monkeypatch):
    """A wheel used inside a clone finds ../shared beside that clone; any other folder's
    ../shared is never read."""
    clone = _checkout(tmp_path / "clone")
    (tmp_path / "clone" / "docs").mkdir()
    monkeypatch.delenv("AFT_CIFAR10_DIR", raising=False)
    monkeypatch.chdir(clone / "docs")
    assert tmp_path / "shared" / "data" / "cifar10" in datasets.local_dirs()
    monkeypatch.chdir(tmp_path)  # not a checkout
    assert tmp_path / "shared" / "data" / "cifar10" not in datasets.local_dirs()
    (tmp_path / "clone" / "pyproject.toml").write_text('[project]\nname = "other"\n')
    monkeypatch.chdir(clone)
    assert tmp_path / "shared" / "data" / "cifar10" not in datasets.local_dirs()


def test_a_named_set_found_nowhere_lists_every_place_tried(tmp_path, monkeypatch):
    monkeypatch.setenv("AFT_CIFAR10_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("AFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(datasets, "CIFAR10_URL", (tmp_path / "nowhere.tar.gz").as_uri())
    monkeypatch.setattr(datasets, "checkouts", lambda: [])  # no ../shared beside a checkout (ours has one)
    with pytest.raises(datasets.DataNotFound) as caught:
        datasets.resolve("cifar10:test")
    tried = caught.value.tried
    assert tried == [f"no test.tar in {tmp_path / 'empty'}",
                     "no aft-export checkout here to have ../shared/data/cifar10 beside it", tried[-1]]
    assert tried[-1].startswith(f"the download into {tmp_path / 'cache'} failed (URLError")
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("cifar10:test was not found: no test.tar in ")
    assert not list((tmp_path / "cache").iterdir())  # no partial download left


def test_artifacts_name_data_by_name_or_relative_to_themselves(tmp_path, cifar10, monkeypatch):
    monkeypatch.setenv("AFT_CIFAR10_DIR", str(cifar10))
    label = datasets.data_label
    assert label("cifar10:train", tmp_path) == "cifar10:train"
    assert label(str(cifar10 / "test.tar"), tmp_path) == "cifar10:test"  # where the named set resolves to
    (tmp_path / "data").mkdir()
    (tmp_path / "models").mkdir()
    assert label(str(tmp_path / "data" / "x.tar"), tmp_path / "models") == "../data/x.tar"
    monkeypatch.chdir(tmp_path)
    assert label("data/x.tar", "models") == "../data/x.tar"  # relative to the artifact, not to here
    assert label(str(tmp_path / "data"), "/") == "data"  # nothing shared but the root: the name alone


def test_one_rule_for_the_data_a_command_verifies_with(tmp_path):
    """Given data wins; else the test data the checkpoint names (its test set before its training
    data, a path relative to the checkpoint where it exists); else cifar10:test. A named set stays
    its name, never the path it resolves to."""
    from types import SimpleNamespace

    (tmp_path / "imgs").mkdir()
    meta = SimpleNamespace(path=str(tmp_path / "m.pt"),
                           provenance={"data": "cifar10:train", "metrics": {"test_data": "imgs"}})  # fmt: skip
    rule = datasets.verification_data
    assert rule("given.tar", meta) == ("given.tar", "given")
    assert rule(None, meta) == (str(tmp_path / "imgs"), "checkpoint")
    meta.provenance = {"data": "cifar10:train", "metrics": {"test_data": "missing"}}
    assert rule(None, meta) == ("cifar10:train", "checkpoint")
    meta.provenance = {"train_config": {"test_data": "/nowhere/test.tar"}}
    assert rule(None, meta) == (datasets.DEFAULT_DATA, "default") == ("cifar10:test", "default")
    assert rule(None) == rule("", None) == ("cifar10:test", "default")
