"""comvex's paper-shaped AFTWithLinearClassifier configs, built from the installed package with
random weights. End to end through ONNX Runtime the small configs run in test_export.py; the
224px paper shapes (T = 196, dim 192, rank 128; 32 heads, kernel 11) are checked here through
the swap on one image, at 3 of their 12 identical layers, so the suite stays fast: comvex's own
AFT-full materialises a (B, T, T, d) tensor, 13 s for one image through all 12 layers on two
cores (a full export of AFT_Full_tiny takes about three minutes). The refusal below builds
all 12."""

import pytest
import torch

from aft_export.byo.swap import apply_swap, plan_swap
from aft_export.byo.verify import verify_swap
from aft_export.errors import AFTExportError
from tests.byo.publicpkgs import comvex_aft


def _random(model):
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("w_norm.weight") and not name.endswith("w_norm.bias"):
                p.normal_(0, 0.05 if p.dim() > 1 else 0.5)
    return model.eval()


@pytest.mark.parametrize("config, op, layers", [("AFT_Full_tiny", "AFTFull(dim=192, hidden=192, T=196, rank=128)", 3),
                                                ("AFT_Conv_tiny_32_11", "AFTConv(dim=192, hidden=192, heads=32, kernel=11",
                                                 3)])  # fmt: skip
def test_paper_configs_map_every_layer_and_reproduce_the_logits(config, op, layers):
    aft = comvex_aft()
    torch.manual_seed(0)
    cfg = getattr(aft.AFTConfig, config)(num_classes=10)
    assert cfg.num_layers == 12  # the paper's depth; every layer has the same shape
    cfg.num_layers = layers
    model = _random(aft.AFTWithLinearClassifier(cfg))
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    plan = plan_swap(model, x)
    assert [r.action for r in plan.layers] == ["mapped"] * layers
    assert all(r.to.startswith(op) for r in plan.layers)
    report = verify_swap(model, apply_swap(model, plan), x, batch=1)
    assert report.passed and report.max_abs < 1e-4


def test_a_trained_conv_config_is_refused_naming_every_layer():
    aft = comvex_aft()
    model = aft.AFTWithLinearClassifier(aft.AFTConfig.AFT_Conv_tiny_32_11(num_classes=10)).eval()
    with torch.no_grad():
        for layer in model.layers:
            layer.attn_block.w_norm.weight.fill_(0.3)
    with pytest.raises(AFTExportError) as err:
        plan_swap(model, torch.randn(1, 3, 224, 224))
    assert all(f"layers.{i}.attn_block (comvex AFTConv)" in str(err.value) for i in range(12))
