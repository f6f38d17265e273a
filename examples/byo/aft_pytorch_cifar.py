"""A CIFAR-10 classifier built from aft-pytorch's layers, as its users write one.

aft-pytorch (pip install aft-pytorch) gives AFTFull, AFTLocal and AFTSimple with a
hidden width and a maximum sequence length; here 64 tokens (32x32 images, patch 4)
run through layers made for up to 80, with hidden width 48 inside a 64-wide model.
(Its AFTLocal maps too, but rebuilds its bias element by element in Python on every
call, seconds per training step on a CPU, so this example trains AFTFull and AFTSimple.)
"""

import torch
from aft_pytorch import AFTFull, AFTSimple
from torch import nn

DIM, HIDDEN, MAX_SEQLEN = 64, 48, 80


class Block(nn.Module):
    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(DIM), attn
        self.norm2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class AFTNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.GELU(), nn.Conv2d(32, DIM, 4, 4))
        self.pos = nn.Parameter(torch.randn(1, 64, DIM) * 0.02)
        self.blocks = nn.ModuleList([
            Block(AFTFull(MAX_SEQLEN, DIM, HIDDEN)),
            Block(AFTFull(MAX_SEQLEN, DIM, HIDDEN)),
            Block(AFTSimple(MAX_SEQLEN, DIM, HIDDEN)),
        ])  # fmt: skip
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, num_classes)

    def forward(self, x):  # (B, 3, 32, 32)
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos  # (B, 64, DIM)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(1))


def build() -> AFTNet:
    return AFTNet()
