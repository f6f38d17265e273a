
import numpy as np
import pytest
import torch

from aft_export import load_checkpoint
from aft_export.errors import AFTExportError
from aft_export.models.training import TrainConfig, augment, lr_at, split_indices, train
from tests.test_machine_paths import machine_paths



def test_split_is_seeded_disjoint_and_complete():
    tr, va = split_indices(1000, 0.1, seed=3)
    assert len(va) == 100 and len(tr) == 900
    assert set(tr).isdisjoint(va) and set(tr) | set(va) == set(range(1000))
    tr2, va2 = split_indices(1000, 0.1, seed=3)
    assert np.array_equal(va, va2)
    assert not np.array_equal(va, split_indices(1000, 0.1, seed=4)[1])


def test_augment_crops_and_flips_within_the_image():
    batch = torch.arange(2 * 6 * 6 * 3, dtype=torch.int64).remainder(250).add(1).to(torch.uint8)
    batch = batch.reshape(2, 6, 6, 3)
    out = augment(batch, torch.Generator().manual_seed(0), pad=2)
    assert out.shape == batch.shape and out.dtype == torch.uint8
    for i in range(2):  # every non-padding pixel of the output comes from the input image
        values = set(out[i].flatten().tolist()) - {0}
        assert values <= set(batch[i].flatten().tolist())


def test_lr_schedule_warms_up_then_decays():
    lrs = [lr_at(s, 100, 10, 1.0) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    assert 0.01 < lrs[-1] < 0.0105 and lr_at(100, 100, 10, 1.0) == pytest.approx(0.01)  # down to 1% of the base


@pytest.fixture
def make_cfg(cifar10):
    def make(tmp_path, name, **kw):
        base = dict(model="aft_conv_test", data=str(cifar10 / "test.tar"), output=str(tmp_path / name),
                    epochs=2, batch_size=64, images=640, seed=1, threads=1, progress=False)  # fmt: skip
        base.update(kw)
        return TrainConfig(**base)

    return make


def test_train_writes_a_loadable_checkpoint(tmp_path, make_cfg):
    result = train(make_cfg(tmp_path, "full.pt"))
    metrics = result.metrics
    assert result.output == str(tmp_path / "full.pt") and result.passed
    model, meta = load_checkpoint(tmp_path / "full.pt")
    assert meta.provenance["epochs"] == 2 and meta.provenance["seed"] == 1
    assert meta.provenance["metrics"]["val_top1"] == metrics["val_top1"] is not None
    assert meta.classes[0] == "airplane"
    # the data by its name, the checkpoint by its file name: no path of this machine travels in it
    tc = meta.provenance["train_config"]
    assert meta.provenance["data"] == tc["data"] == "cifar10:test" and tc["output"] == "full.pt"
    assert machine_paths((tmp_path / "full.pt").read_bytes()) == []
    # a finished run keeps no optimizer state: the zoo files stay small
    assert "train_state" not in torch.load(tmp_path / "full.pt", weights_only=True)
    assert [p.name for p in tmp_path.iterdir()] == ["full.pt"]  # no temporary files left


def test_resume_from_epoch_checkpoint_matches_uninterrupted(tmp_path, monkeypatch, make_cfg):
    import aft_export.models.training as tr

    straight = make_cfg(tmp_path, "a.pt")
    train(straight)

    # Interrupt after the first epoch's checkpoint is written.
    real_save, calls = tr.save_checkpoint, []

    def save_then_stop(*args, **kwargs):
        real_save(*args, **kwargs)
        calls.append(1)
        if kwargs.get("train_state") is not None:
            raise KeyboardInterrupt

    monkeypatch.setattr(tr, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train(make_cfg(tmp_path, "b.pt"))
    monkeypatch.setattr(tr, "save_checkpoint", real_save)
    assert torch.load(tmp_path / "b.pt", weights_only=True)["train_state"]["epoch"] == 1
    train(make_cfg(tmp_path, "b.pt", resume=str(tmp_path / "b.pt")))

    a, _ = load_checkpoint(tmp_path / "a.pt")
    b, meta_b = load_checkpoint(tmp_path / "b.pt")
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    assert meta_b.provenance["epochs"] == 2


def test_resume_refuses_a_finished_checkpoint(tmp_path, make_cfg):
    train(make_cfg(tmp_path, "done.pt", epochs=1))
    with pytest.raises(AFTExportError, match="no training state"):
        train(make_cfg(tmp_path, "more.pt", resume=str(tmp_path / "done.pt")))


def test_class_count_mismatch_is_a_clear_error(tmp_path, make_cfg):
    root = tmp_path / "two"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        from PIL import Image

        Image.new("RGB", (32, 32)).save(root / cls / "0.png")
    with pytest.raises(AFTExportError, match="has 2 classes but aft_conv_test has 10 outputs"):
        train(make_cfg(tmp_path, "x.pt", data=str(root), images=None))


def test_bad_options(tmp_path, make_cfg):
    with pytest.raises(AFTExportError, match="epochs"):
        make_cfg(tmp_path, "x.pt", epochs=0)
    with pytest.raises(AFTExportError, match="output directory"):
        train(make_cfg(tmp_path, "missing/x.pt"))
