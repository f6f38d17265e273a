"""A user's own architecture around aft-export's layers, in shapes no registry config has:
a convolutional stem to a non-square 8x4 token grid, AFT-conv (6 heads, kernel 5) on it,
then a class token and AFT-full (rank 4), AFT-local (1-D window 5) and AFT-simple on 33 tokens,
and a two-layer head on the class token."""

import torch
from torch import nn

from aft_export.layers import AFTConv, AFTFull, AFTLocal, AFTSimple

D = 48


class OwnNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1), nn.BatchNorm2d(24), nn.GELU(),
                                  nn.Conv2d(24, D, (2, 4), (2, 4)))  # 32x32 -> 8x4 tokens
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(4))
        self.conv_mix = AFTConv(D, heads=6, kernel_size=5)
        self.cls = nn.Parameter(torch.zeros(1, 1, D))
        self.full = AFTFull(D, num_tokens=33, rank=4)
        self.local = AFTLocal(D, num_tokens=33, window=5)
        self.simple = AFTSimple(D)
        self.mlp = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.head = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 32), nn.Tanh(), nn.Linear(32, num_classes))

    def forward(self, x):
        x = self.stem(x)  # (B, D, 8, 4)
        grid = (x.shape[2], x.shape[3])
        t = x.flatten(2).transpose(1, 2)  # (B, 32, D)
        t = t + self.conv_mix(self.norms[0](t), grid)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1)  # (B, 33, D)
        t = t + self.full(self.norms[1](t))
        t = t + self.local(self.norms[2](t))
        t = t + self.simple(self.norms[3](t))
        t = t + self.mlp(t)
        return self.head(t[:, 0])


def build() -> OwnNet:
    return OwnNet()
