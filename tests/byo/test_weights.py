import argparse
import os

import pytest
import torch
from torch import nn

from aft_export.errors import AFTExportError
from aft_export.models.weights import load_weights, read_weights_file, select_state_dict, strip_prefixes
from tests.conftest import need_module


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
        self.head = nn.Linear(3, 2)


def _net(seed):
    torch.manual_seed(seed)
    return Net()


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("layout", ["bare", "model", "state_dict", "nested", "model_state_dict"])
def test_layouts_training_code_writes(tmp_path, layout):
    state = _net(1).state_dict()
    payload = {"bare": state, "model": {"model": state, "epoch": 9, "optimizer": {"lr": 0.1}},
               "state_dict": {"state_dict": state}, "nested": {"model": {"state_dict": state}, "epoch": 3},
               "model_state_dict": {"model_state_dict": state}}[layout]  # fmt: skip
    torch.save(payload, tmp_path / "w.pt")
    fresh = _net(2)
    load_weights(fresh, tmp_path / "w.pt", log_fn=lambda *a: None)
    assert _same(fresh, _net(1))


@pytest.mark.parametrize("prefix", ["module.", "model.", "_orig_mod.", "module._orig_mod."])
def test_wrapper_prefixes_are_stripped(tmp_path, prefix):
    torch.save({"model": {prefix + k: v for k, v in _net(1).state_dict().items()}}, tmp_path / "w.pth")
    fresh = _net(2)
    load_weights(fresh, tmp_path / "w.pth", log_fn=lambda *a: None)
    assert _same(fresh, _net(1))


def test_a_prefix_the_model_itself_has_is_kept():
    state = {"model.weight": torch.zeros(1), "model.bias": torch.zeros(1)}
    assert strip_prefixes(state, expected={"model.weight", "model.bias"}) == state
    assert set(strip_prefixes(state, expected={"weight", "bias"})) == {"weight", "bias"}


def test_ema_is_not_taken_silently_and_weights_key_chooses(tmp_path):
    model_sd, ema_sd = _net(1).state_dict(), _net(3).state_dict()
    torch.save({"model": model_sd, "model_ema": ema_sd}, tmp_path / "w.pt")
    notes = []
    fresh = _net(2)
    selected = load_weights(fresh, tmp_path / "w.pt", log_fn=notes.append)
    assert selected.key == "model" and _same(fresh, _net(1))
    assert notes == ["weights: 'model' of w.pt (it also holds ['model_ema'], not used; `weights_key` chooses)"]
    load_weights(fresh, tmp_path / "w.pt", key="model_ema", log_fn=notes.append)
    assert _same(fresh, _net(3))


def test_an_ema_alone_is_used_and_said(tmp_path):
    torch.save({"ema": _net(3).state_dict(), "epoch": 1}, tmp_path / "w.pt")
    notes = []
    fresh = _net(2)
    load_weights(fresh, tmp_path / "w.pt", log_fn=notes.append)
    assert _same(fresh, _net(3)) and "an EMA copy" in notes[0]


def test_deit_style_namespace_of_arguments_is_allowed(tmp_path):
    args = argparse.Namespace(model="aft_tiny", lr=5e-4, epochs=300)
    torch.save({"model": _net(1).state_dict(), "args": args, "epoch": 299}, tmp_path / "deit.pth")
    payload = read_weights_file(tmp_path / "deit.pth")
    assert payload["args"].lr == 5e-4
    fresh = _net(2)
    load_weights(fresh, tmp_path / "deit.pth", log_fn=lambda *a: None)
    assert _same(fresh, _net(1))


class Exploit:
    """Unpickling this would create the marker file (code execution)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_pickled_code_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"model": _net(1).state_dict(), "hook": Exploit(str(marker))}, tmp_path / "evil.pt")
    with pytest.raises(AFTExportError, match=r"refused to load .*pickled Python objects \(posix.mkdir\).*nothing was "
                                             r"executed"):  # fmt: skip
        load_weights(_net(2), tmp_path / "evil.pt")
    assert not marker.exists()


class TrainConfig:
    """A harmless config object, as some training scripts save: still a class to unpickle."""

    lr = 0.1


def test_other_classes_than_namespace_stay_refused(tmp_path):
    torch.save({"model": _net(1).state_dict(), "cfg": TrainConfig()}, tmp_path / "p.pt")
    with pytest.raises(AFTExportError, match=r"pickled Python objects \(tests.byo.test_weights.TrainConfig\)"):
        read_weights_file(tmp_path / "p.pt")


def test_no_state_dict_lists_the_top_level_keys(tmp_path):
    torch.save({"weights_v2": {"a": 1}, "epoch": 3, "optimizer": {"lr": 0.1}}, tmp_path / "w.pt")
    with pytest.raises(AFTExportError, match=r"top-level keys are \['weights_v2', 'epoch', 'optimizer'\]; name the "
                                             r"one with the weights with `weights_key`"):  # fmt: skip
        load_weights(_net(2), tmp_path / "w.pt")
    with pytest.raises(AFTExportError, match=r"no top-level key 'ema'; its keys are \['weights_v2', 'epoch'"):
        select_state_dict(read_weights_file(tmp_path / "w.pt"), "w.pt", key="ema")


def test_weights_that_do_not_fit_name_missing_and_unexpected_keys(tmp_path):
    state = _net(1).state_dict()
    del state["head.bias"]
    state["extra.weight"] = torch.zeros(2)
    state["body.0.weight"] = torch.zeros(5, 4)
    torch.save(state, tmp_path / "w.pt")
    with pytest.raises(AFTExportError, match=r"do not fit the model: missing keys \['head.bias'\]; unexpected keys "
                                             r"\['extra.weight'\]; shape mismatch \['body.0.weight \(5, 4\) vs model "
                                             r"\(3, 4\)'\]"):  # fmt: skip
        load_weights(_net(2), tmp_path / "w.pt")


def test_safetensors(tmp_path):
    st = need_module("safetensors.torch", "pip install -e '.[test]'")
    st.save_file({"module." + k: v.contiguous() for k, v in _net(1).state_dict().items()},
                 str(tmp_path / "w.safetensors"))  # fmt: skip
    fresh = _net(2)
    load_weights(fresh, tmp_path / "w.safetensors")
    assert _same(fresh, _net(1))


@pytest.mark.parametrize("content, message", [(b"", "is empty"), (b"\x80\x02garbage", "corrupt")])
def test_empty_and_corrupt_files(tmp_path, content, message):
    (tmp_path / "w.pt").write_bytes(content)
    with pytest.raises(AFTExportError, match=message):
        read_weights_file(tmp_path / "w.pt")


def test_registry_checkpoints_in_deit_layout_load_too(tmp_path):
    """The issue's report: `export ckpt --config NAME` refused {"model": state_dict}."""
    from aft_export.models.checkpoint import load_checkpoint
    from aft_export.models import create_model

    torch.manual_seed(0)
    model = create_model("aft_simple_test").eval()
    torch.save({"model": {"module." + k: v for k, v in model.state_dict().items()},
                "args": argparse.Namespace(epochs=3), "epoch": 2}, tmp_path / "deit.pth")  # fmt: skip
    loaded, _ = load_checkpoint(tmp_path / "deit.pth", config="aft_simple_test")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))


def test_our_aft_local_weights_of_earlier_releases_are_converted(tmp_path):
    """A user model with our AFTLocal, trained before the banded operator, saved its bias
    as a dense (T, T) matrix; it loads as the band (the window's entries, the rest was
    masked out and never used)."""
    from aft_export.layers import AFTLocal
    from aft_export.layers.cores import local_band_from_dense

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.local = AFTLocal(8, num_tokens=6, window=2)

    torch.manual_seed(0)
    old = {k: v.clone() for k, v in Net().state_dict().items()}
    old["local.w"] = torch.randn(6, 6)
    torch.save({"model": old}, tmp_path / "old.pth")
    model = Net()
    load_weights(model, tmp_path / "old.pth")
    assert model.local.w.shape == (6, 1, 3)
    assert torch.equal(model.local.w.detach(), local_band_from_dense(old["local.w"], (1, 6), 2))
    # the window |t - t'| < 2 of the dense matrix, offset by offset
    assert model.local.w[3, 0, 0] == old["local.w"][3, 2] and model.local.w[3, 0, 2] == old["local.w"][3, 4]
