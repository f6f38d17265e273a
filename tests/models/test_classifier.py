import pytest
import torch

from aft_export.errors import AFTExportError
from aft_export.models import ModelConfig, count_params, create_model, get_config, list_models


@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_runs(name):
    torch.manual_seed(0)
    model = create_model(name).eval()
    cfg = model.cfg
    with torch.no_grad():
        y = model(torch.randn(1, cfg.in_chans, cfg.img_size, cfg.img_size))
    assert y.shape == (1, cfg.num_classes)
    assert torch.isfinite(y).all()


# The paper's table (AFT.md): parameter counts of the ImageNet models, in millions.
@pytest.mark.parametrize(
    "name, millions",
    [("aft_full_tiny_224", 6.3), ("aft_full_small_224", 22.6),
     ("aft_conv_tiny_224", 5.4), ("aft_conv_small_224", 22.5)],
)  # fmt: skip
def test_imagenet_configs_match_paper_sizes(name, millions):
    assert abs(count_params(create_model(name)) / 1e6 - millions) < 0.06


def test_registry_has_every_variant_at_every_scale():
    names = set(list_models())
    for variant in ("full", "local", "simple", "conv"):
        assert f"aft_{variant}_cifar" in names
        assert f"aft_{variant}_test" in names


@pytest.mark.parametrize("size", [16, 48, 64])
def test_conv_models_take_other_resolutions(size):
    model = create_model("aft_conv_test").eval()
    with torch.no_grad():
        assert model(torch.randn(2, 3, size, size)).shape == (2, 10)
        assert model(torch.randn(1, 3, size, size + 8)).shape == (1, 10)


@pytest.mark.parametrize("name", ["aft_full_test", "aft_local_test", "aft_simple_test"])
def test_position_embedded_models_refuse_other_sizes(name):
    model = create_model(name).eval()
    with pytest.raises(AFTExportError, match=r"position embedding for 32x32 inputs and cannot take 48x48"):
        model(torch.randn(1, 3, 48, 48))


def test_bad_channel_count_and_patch_multiple():
    model = create_model("aft_conv_test").eval()
    with pytest.raises(AFTExportError, match=r"expected input \(N, 3, H, W\)"):
        model(torch.randn(1, 1, 32, 32))
    with pytest.raises(AFTExportError, match="not a multiple of the patch size 8"):
        model(torch.randn(1, 3, 36, 36))


def test_unknown_config_name_suggests_close_match():
    with pytest.raises(AFTExportError, match="unknown model config 'aft_conv_cifr'.*aft_conv_cifar"):
        get_config("aft_conv_cifr")


@pytest.mark.parametrize(
    "kwargs, message",
    [(dict(variant="nope"), "unknown AFT variant"),
     (dict(variant="full", img_size=30), "not a multiple of patch_size"),
     (dict(variant="local"), "window"),
     (dict(variant="conv", dim=10, heads=3), "not divisible by heads")],
)  # fmt: skip
def test_config_validation(kwargs, message):
    with pytest.raises(AFTExportError, match=message):
        ModelConfig(**kwargs)


def test_config_dict_round_trip_and_unknown_fields():
    cfg = get_config("aft_local_cifar")
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(AFTExportError, match="unknown fields"):
        ModelConfig.from_dict({**cfg.to_dict(), "bogus": 1})


def test_drop_path_only_in_training():
    model = create_model("aft_simple_test", drop_path=0.5)
    x = torch.randn(4, 3, 32, 32)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(x), model(x))
