import numpy as np
import pytest
import torch

from aft_export import load_checkpoint
from aft_export.models.checkpoint import FORMAT_VERSION, save_checkpoint
from aft_export.errors import AFTExportError
from aft_export.models import create_model

CLASSES = [f"c{i}" for i in range(10)]


@pytest.fixture
def model():
    torch.manual_seed(0)
    return create_model("aft_conv_test").eval()


@pytest.fixture
def ckpt(tmp_path, model):
    path = tmp_path / "m.pt"
    save_checkpoint(path, model, CLASSES, model_name="aft_conv_test",
                    provenance={"epochs": 3, "seed": 0, "metrics": {"test_top1": 12.5}})  # fmt: skip
    return path


def test_every_source_loads_to_one_model_meta_with_one_preprocessing_type(ckpt, tmp_path):
    """A checkpoint and a registry config with weights load through one ModelSource to one
    (module, ModelMeta); the preprocessing they carry is the type calibration and a model
    trained elsewhere use too."""
    from aft_export.models.checkpoint import CheckpointMeta, ModelMeta
    from aft_export.data.images import CIFAR10_MEAN, CIFAR10_STD, Preprocessing
    from aft_export.models.sources import CheckpointSource, ModelSource, load_model, open_source

    source = open_source(str(ckpt))
    assert isinstance(source, ModelSource) and source == CheckpointSource(str(ckpt)) and source.inputs == (str(ckpt),)
    model, meta = load_model(source)
    assert isinstance(meta, ModelMeta) and CheckpointMeta is ModelMeta and meta.prepare is None
    assert meta.preprocessing == Preprocessing(32, CIFAR10_MEAN, CIFAR10_STD, tuple(CLASSES))
    import aft_export.data.calibration as calibration

    assert calibration.CalibrationSet.__annotations__["preprocess"] == "Preprocessing"  # one name, documented
    assert not hasattr(calibration, "Preprocess") and meta.preprocessing.size == 32
    plain = tmp_path / "plain.pt"
    torch.save(model.state_dict(), plain)
    _, plain_meta = load_model(str(plain), config="aft_conv_test")
    assert plain_meta.config == meta.config and plain_meta.classes == [str(i) for i in range(10)]
    with pytest.raises(AFTExportError, match="is a plain state_dict; say which architecture"):
        load_model(str(plain))


def _same_outputs(a, b):
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        return torch.equal(a(x), b(x))


def test_round_trip(ckpt, model):
    loaded, meta = load_checkpoint(ckpt)
    assert not loaded.training
    assert _same_outputs(loaded, model)
    assert meta.config == model.cfg
    assert meta.classes == CLASSES
    assert meta.input_size == (3, 32, 32)
    assert meta.model_name == "aft_conv_test"
    assert meta.format_version == FORMAT_VERSION
    assert meta.provenance["metrics"]["test_top1"] == 12.5
    assert len(meta.sha256) == 64


def test_file_is_readable_with_weights_only(ckpt):
    payload = torch.load(ckpt, weights_only=True)
    assert payload["format"] == "aft-export-checkpoint"
    assert set(payload) >= {"config", "classes", "input_size", "mean", "std", "provenance",
                            "state_dict", "format_version"}  # fmt: skip


@pytest.mark.parametrize("prefix", ["", "module.", "_orig_mod.", "module._orig_mod."])
def test_plain_state_dict_with_wrapper_prefixes(tmp_path, model, prefix):
    path = tmp_path / "sd.pth"
    torch.save({prefix + k: v for k, v in model.state_dict().items()}, path)
    loaded, meta = load_checkpoint(path, config="aft_conv_test")
    assert _same_outputs(loaded, model)
    assert meta.config.variant == "conv"


def test_safetensors_state_dict(tmp_path, model):
    from safetensors.torch import save_file

    path = tmp_path / "sd.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    loaded, _ = load_checkpoint(path, config="aft_conv_test")
    assert _same_outputs(loaded, model)


def test_plain_state_dict_needs_a_config(tmp_path, model):
    path = tmp_path / "sd.pt"
    torch.save(model.state_dict(), path)
    with pytest.raises(AFTExportError, match="plain state_dict.*`config=NAME`"):
        load_checkpoint(path)


def test_a_config_is_for_a_plain_state_dict_and_never_ignored(ckpt, tmp_path):
    """A checkpoint that records its architecture takes a `config` that agrees with it; another
    one is said (the command-line's ``--config`` with it: exit 2), not silently dropped."""
    assert load_checkpoint(ckpt, config="aft_conv_test")[1].config.variant == "conv"
    with pytest.raises(AFTExportError, match=r"records its architecture \(aft_conv_test\); `config` \(aft_full_test\)"):
        load_checkpoint(ckpt, config="aft_full_test")
    from click.testing import CliRunner

    from aft_export.cli import main

    res = CliRunner().invoke(main, ["info", str(ckpt), "--config", "aft_full_test"])
    assert res.exit_code == 2 and "leave it out" in res.output and "Traceback" not in res.output


def test_missing_empty_truncated_corrupt(tmp_path, ckpt):
    with pytest.raises(AFTExportError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(AFTExportError, match="is empty"):
        load_checkpoint(empty)
    truncated = tmp_path / "trunc.pt"
    truncated.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    with pytest.raises(AFTExportError, match="corrupt or truncated"):
        load_checkpoint(truncated)
    # Random bytes reach many corners of the unpickler (empty stack, bad opcodes, bad
    # zip headers); every one of them must come out as the same clear error. Seeded, so a
    # failure reproduces; one blob starts with a pickle protocol header to get past it.
    rng = np.random.default_rng(0)
    garbage = tmp_path / "garbage.pt"
    for i in range(200):
        blob = rng.integers(0, 256, size=int(rng.integers(1, 4096)), dtype=np.uint8).tobytes()
        if i % 2:
            blob = b"\x80\x02" + blob
        garbage.write_bytes(blob)
        with pytest.raises(AFTExportError, match="corrupt"):
            load_checkpoint(garbage)


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))  # would create the marker file if unpickled


def test_pickled_code_is_refused_without_running(tmp_path, model):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"state_dict": model.state_dict(), "payload": _Evil(str(marker))}, path)
    with pytest.raises(AFTExportError, match="refused to load .*pickled Python objects"):
        load_checkpoint(path, config="aft_conv_test")
    assert not marker.exists()


def test_key_mismatch_names_first_offending_keys(tmp_path, model):
    state = model.state_dict()
    state["blocks.0.extra"] = torch.zeros(1)
    del state["head.weight"]
    path = tmp_path / "sd.pt"
    torch.save(state, path)
    with pytest.raises(AFTExportError, match=r"missing keys \['head.weight'\].*unexpected keys \['blocks.0.extra'\]"):
        load_checkpoint(path, config="aft_conv_test")


def test_shape_mismatch_names_keys(tmp_path):
    path = tmp_path / "sd.pt"
    torch.save(create_model("aft_conv_test", dim=32, heads=4).state_dict(), path)
    with pytest.raises(AFTExportError, match=r"shape mismatch \['patch_embed"):
        load_checkpoint(path, config="aft_conv_test")


def test_unknown_config_for_state_dict(tmp_path, model):
    path = tmp_path / "sd.pt"
    torch.save(model.state_dict(), path)
    with pytest.raises(AFTExportError, match="unknown model config 'resnet50'"):
        load_checkpoint(path, config="resnet50")


def test_newer_format_version_is_refused(tmp_path, ckpt):
    payload = torch.load(ckpt, weights_only=True)
    payload["format_version"] = FORMAT_VERSION + 1
    path = tmp_path / "future.pt"
    torch.save(payload, path)
    with pytest.raises(AFTExportError, match="format version 2.*Upgrade"):
        load_checkpoint(path)


def test_save_refuses_objects_that_would_need_unpickling(tmp_path, model):
    with pytest.raises(TypeError, match="plain data"):
        save_checkpoint(tmp_path / "x.pt", model, CLASSES, provenance={"when": object()})
    assert list(tmp_path.iterdir()) == []


def test_save_is_atomic_and_checks_directory(tmp_path, model):
    with pytest.raises(AFTExportError, match="does not exist"):
        save_checkpoint(tmp_path / "no" / "x.pt", model, CLASSES)
    path = tmp_path / "x.pt"
    save_checkpoint(path, model, CLASSES)
    save_checkpoint(path, model, CLASSES)  # overwrite in place
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"]


def test_class_count_must_match(tmp_path, model):
    with pytest.raises(AFTExportError, match="3 class names for a 10-class model"):
        save_checkpoint(tmp_path / "x.pt", model, ["a", "b", "c"])


def test_dense_local_bias_of_earlier_releases_loads(tmp_path):
    """AFT-local checkpoints written before the banded operator hold a dense (T, T) bias,
    used only inside the window: they load, converted, and compute the same logits."""
    from aft_export.layers.cores import local_bias_mask

    torch.manual_seed(3)
    model = create_model("aft_local_test").eval()
    with torch.no_grad():
        for block in model.blocks:
            block.mixer.w.normal_(0.0, 1.0)
    path = tmp_path / "new.pt"
    save_checkpoint(path, model, CLASSES, model_name="aft_local_test")
    payload = torch.load(path, weights_only=True)
    cfg = model.cfg
    mask = local_bias_mask(cfg.num_tokens, cfg.window, cfg.grid)
    for i, block in enumerate(model.blocks):  # the old layout: (T, T), noise outside the window
        mixer = block.mixer
        dense = torch.randn(cfg.num_tokens, cfg.num_tokens)
        h, w = cfg.grid
        s = min(cfg.window, h)
        for t in range(cfg.num_tokens):
            for u in range(cfg.num_tokens):
                if mask[t, u]:
                    dr, dc = u // w - t // w, u % w - t % w
                    dense[t, u] = mixer.w[t, dr + s - 1, dc + s - 1]
        payload["state_dict"][f"blocks.{i}.mixer.w"] = dense
    old = tmp_path / "old.pt"
    torch.save(payload, old)
    loaded, _ = load_checkpoint(old)
    assert loaded.blocks[0].mixer.w.shape == model.blocks[0].mixer.w.shape
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(loaded(x), model(x), rtol=1e-5, atol=1e-6)
