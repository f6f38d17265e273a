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


def _with_and_without_drop_path(rate: float):
    """aft_simple_test with stochastic depth ``rate``, and a twin with the same weights and none."""
    torch.manual_seed(0)
    model = create_model("aft_simple_test", drop_path=rate)
    plain = create_model("aft_simple_test")
    plain.load_state_dict(model.state_dict())
    return model, plain


def test_drop_path_is_the_identity_in_eval_mode():
    model, plain = _with_and_without_drop_path(0.5)
    x = torch.randn(8, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model.eval()(x), plain.eval()(x))


def test_drop_path_draws_one_mask_per_sample_in_training():
    """One image repeated 64 times in a batch. Without drop-path every row is the same in
    training too; with it each sample keeps or drops each residual branch on its own draw.
    aft_simple_test has depth 2 and rates rise linearly from 0, so only the last block's two
    branches (rate 0.5) are ever dropped: exactly 2**2 = 4 distinct outputs."""
    model, plain = _with_and_without_drop_path(0.5)
    x = torch.randn(1, 3, 32, 32).expand(64, -1, -1, -1)
    torch.manual_seed(1)
    with torch.no_grad():
        same = plain.train()(x)
        out = model.train()(x)
    assert torch.allclose(same, same[:1].expand_as(same), rtol=0, atol=1e-7)
    patterns = []  # rows that agree to 1e-7 are one keep/drop pattern (patterns differ by > 1e-6)
    for row in out:
        if not any(torch.allclose(row, p, rtol=0, atol=1e-7) for p in patterns):
            patterns.append(row)
    assert len(patterns) == 4


def test_drop_path_keeps_the_expected_value_of_a_residual_branch():
    """The last block (rate 0.5) with its MLP branch zeroed is ``x + drop_path(f(x))``: each
    sample gets either ``x`` (dropped) or ``x + f(x) / (1 - p)`` (kept), so the mean over
    samples is the eval-mode block ``x + f(x)`` within binomial noise."""
    rate, n = 0.5, 4000
    model, _ = _with_and_without_drop_path(rate)
    block, grid = model.blocks[-1], model.cfg.grid
    assert block.drop_path.p == rate
    with torch.no_grad():
        block.mlp.fc2.weight.zero_()
        block.mlp.fc2.bias.zero_()
        x = torch.randn(1, model.cfg.num_tokens, model.cfg.dim)
        branch = block.eval()(x, grid) - x  # f(x), (1, T, d)
        torch.manual_seed(2)
        delta = block.train()(x.expand(n, -1, -1), grid) - x  # (n, T, d)
    dropped = delta.abs().amax(dim=(1, 2)) == 0
    kept = delta[~dropped]
    assert torch.allclose(kept, (branch / (1 - rate)).expand_as(kept), rtol=1e-5, atol=1e-6)
    keep_rate = 1 - dropped.double().mean().item()
    sigma = (rate * (1 - rate) / n) ** 0.5
    assert abs(keep_rate - (1 - rate)) < 4 * sigma  # each sample kept with probability 1 - p
    # E[x + drop_path(f(x))] = x + f(x): the mean is the eval-mode output
    tol = 4 * sigma / (1 - rate) * branch.abs().max().item()
    assert torch.allclose(delta.mean(0), branch[0], rtol=0, atol=tol)
