"""Classifiers built as users build them, for --model-def in the byo tests.

Small on purpose: hidden_dim != dim and T < max_seqlen wherever a layer has them.
Each factory takes no arguments and seeds its own initialisation.
"""

from __future__ import annotations

import torch
from torch import nn

from aft_export.layers import AFTConv, AFTFull, AFTLocal, AFTSimple
from tests.byo.publicpkgs import comvex_aft, need

IMG = 32  # 32x32 images; patch 8 -> a 4x4 grid, T = 16
DIM, HIDDEN, MAX_SEQ = 24, 16, 20


class Block(nn.Module):
    """Pre-norm residual block around any token mixer taking (B, T, d)."""

    def __init__(self, mixer: nn.Module, dim: int = DIM) -> None:
        super().__init__()
        self.norm1, self.mixer, self.norm2 = nn.LayerNorm(dim), mixer, nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TokenClassifier(nn.Module):
    """Patch embedding + position embedding + blocks + mean pooling + head."""

    def __init__(self, mixers: list[nn.Module], dim: int = DIM, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, 8, 8)
        self.pos = nn.Parameter(torch.randn(1, (IMG // 8) ** 2, dim) * 0.5)
        self.blocks = nn.ModuleList(Block(m, dim) for m in mixers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos  # (B, T, d)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(1))


def _randomise_biases(model: nn.Module) -> nn.Module:
    """Position biases far from their near-zero init, as after training."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("wbias", "pos_bias", ".w", ".u", ".v")):
                p.normal_(0, 1)
    return model


def aft_pytorch_classifier() -> nn.Module:
    """aft-pytorch's three layers, max_seqlen 20 > T 16, hidden 16 != dim 24."""
    apt = need("aft_pytorch")
    torch.manual_seed(0)
    mixers = [apt.AFTFull(MAX_SEQ, DIM, HIDDEN), apt.AFTLocal(MAX_SEQ, DIM, HIDDEN, s=3),
              apt.AFTSimple(MAX_SEQ, DIM, HIDDEN)]  # fmt: skip
    return _randomise_biases(TokenClassifier(mixers))


def comvex_config(mode: str = "full", **kw):
    aft = comvex_aft()
    base = {"image_size": IMG, "image_channel": 3, "patch_size": 8, "num_layers": 2, "dim": DIM, "num_classes": 10,
                "hidden_dim": HIDDEN, "aft_mode": mode, "position_bias_dim": 8, "ff_expand_scale": 2,
                "local_window_size": None if mode in ("full", "simple") else 3, "heads": 4}  # fmt: skip
    if mode == "simple":  # AFTBackbone passes use_position_bias itself, over the AFTSimple partial's False
        base["use_position_bias"] = False
    base.update(kw)
    return aft.AFTConfig(**base)


def comvex_classifier() -> nn.Module:
    """comvex's AFTWithLinearClassifier, AFT-full (rank 8 position bias, hidden 16 != dim 24)."""
    aft = comvex_aft()
    torch.manual_seed(0)
    return _randomise_biases(aft.AFTWithLinearClassifier(comvex_config("full")))


def labml_classifier(causal: bool = False) -> nn.Module:
    """labml-nn's AFTLocal inside the user's own block, sequence-first, with a mask."""
    labml_aft = need("labml_nn.transformers.aft")

    class LabmlMixer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.aft = labml_aft.AFTLocal(DIM, MAX_SEQ, local_window_size=3)

        def forward(self, x):  # (B, T, d)
            t = x.shape[1]
            z = x.transpose(0, 1)  # labml takes (T, B, d)
            mask = torch.ones(t, t, 1, dtype=torch.bool)  # (T, T', B): every position sees every other
            if causal:  # as in labml's text models: t sees t' <= t
                mask = torch.tril(torch.ones(t, t, dtype=torch.bool))[..., None]
            return self.aft(query=z, key=z, value=z, mask=mask).transpose(0, 1)

    torch.manual_seed(0)
    return _randomise_biases(TokenClassifier([LabmlMixer(), LabmlMixer()]))


class OwnArchitecture(nn.Module):
    """A user's own design with our layers in shapes no registry config has: a conv stem to a
    non-square 8x4 grid, AFT-conv with 6 heads and kernel 5 on it, a class token, then
    AFT-full with a rank-3 bias, AFT-local with a 1-D window and AFT-simple on 33 tokens,
    and a two-layer head on the class token."""

    def __init__(self) -> None:
        super().__init__()
        d = 36
        self.stem = nn.Sequential(nn.Conv2d(3, 18, 3, 2, 1), nn.BatchNorm2d(18), nn.ReLU(),
                                  nn.Conv2d(18, d, (2, 4), (2, 4)))  # 32x32 -> 8x4 tokens
        self.conv_mix = AFTConv(d, heads=6, kernel_size=5)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.5)
        self.full = AFTFull(d, num_tokens=33, rank=3)
        self.local = AFTLocal(d, num_tokens=33, window=4)
        self.simple = AFTSimple(d)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(d, 20), nn.Tanh(), nn.Linear(20, 10))

    def forward(self, x):
        x = self.stem(x)  # (B, 36, 8, 4)
        grid = (x.shape[2], x.shape[3])
        t = x.flatten(2).transpose(1, 2)  # (B, 32, d)
        t = t + self.conv_mix(t, grid)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1)  # (B, 33, d)
        t = t + self.full(t)
        t = t + self.local(t)
        t = t + self.simple(t)
        return self.head(self.norm(t[:, 0]))


def own_architecture() -> nn.Module:
    torch.manual_seed(0)
    model = OwnArchitecture()
    with torch.no_grad():
        model.conv_mix.gamma.normal_(0, 1)
        model.conv_mix.beta.normal_(0, 1)
        model.local.w.normal_(0, 1)
    return model


def plain_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def not_a_module():
    return [1, 2, 3]


def raises():
    raise ValueError("depth must be positive")


def comvex_local_classifier() -> nn.Module:
    """comvex AFT-local: cannot run (mask_fill_), so it is refused by path."""
    return comvex_aft().AFTWithLinearClassifier(comvex_config("local"))
