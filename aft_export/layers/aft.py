"""Attention Free Transformer mixing layers (Zhai et al., arXiv 2105.14103).

The modules own the Q/K/V and output projections and the position-bias parameters;
the computation in between is one of the stable cores of :mod:`aft_export.layers.cores`
(the formula and the stability argument are there), called directly, or through the
``aft::*`` custom ops of :mod:`aft_export.layers.ops` while the ONNX exporter traces the
model, so that each layer becomes one ``com.aft`` node.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from aft_export.layers import ops
from aft_export.layers.cores import (aft_conv_core, aft_full_core, aft_simple_core, conv_kernel_from_params,
                                     local_bias_mask)  # fmt: skip

__all__ = [
    "AFTConv",
    "AFTLayer",
    "AFTFull",
    "AFTLocal",
    "AFTSimple",
    "aft_conv_core",
    "aft_full_core",
    "aft_simple_core",
    "conv_kernel_from_params",
    "local_bias_mask",
]


# ----------------------------------------------------------------------------
# Modules: projections + parameters around a core.
# ----------------------------------------------------------------------------


class AFTLayer(nn.Module):
    """Q/K/V projections and the output projection shared by every variant."""

    # Set by the ONNX exporter: route the core through the ``aft::*`` custom ops so
    # that each layer becomes one ``com.aft`` node. Eager results are identical.
    use_custom_op: bool = False

    def __init__(self, dim: int, k_dim: int | None = None, qkv_bias: bool = True) -> None:
        super().__init__()
        self.dim = dim
        self.to_q = nn.Linear(dim, dim, bias=qkv_bias)
        self.to_k = nn.Linear(dim, k_dim or dim, bias=qkv_bias)
        self.to_v = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor, grid: tuple[int, int] | None = None) -> Tensor:
        """x: (B, T, d); grid: the (H, W) token map, needed by AFT-conv only."""
        return self.proj(self.mix(self.to_q(x), self.to_k(x), self.to_v(x), grid))

    def mix(self, q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int] | None) -> Tensor:
        raise NotImplementedError  # pragma: no cover


class AFTFull(AFTLayer):
    """AFT-full: a learned ``(T, T)`` bias, or its rank-``r`` factorisation ``u v^T``."""

    def __init__(self, dim: int, num_tokens: int, rank: int | None = None) -> None:
        super().__init__(dim)
        self.num_tokens = num_tokens
        self.rank = rank
        if rank is None:
            self.w = nn.Parameter(torch.zeros(num_tokens, num_tokens))
        else:
            # u v^T starts near zero so a fresh layer behaves like AFT-simple.
            self.u = nn.Parameter(torch.randn(num_tokens, rank) * (0.1 / math.sqrt(rank)))
            self.v = nn.Parameter(torch.randn(num_tokens, rank) * 0.1)

    def bias(self) -> Tensor:
        return self.w if self.rank is None else self.u @ self.v.t()

    def mix(self, q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int] | None) -> Tensor:
        if self.use_custom_op:
            return ops.aft_full(q, k, v, self.bias())
        return aft_full_core(q, k, v, self.bias())


class AFTLocal(AFTLayer):
    """AFT-local: the full bias kept inside a window of size ``s``, **0** outside."""

    def __init__(
        self, dim: int, num_tokens: int, window: int, grid: tuple[int, int] | None = None
    ) -> None:
        super().__init__(dim)
        self.num_tokens = num_tokens
        self.window = window
        self.grid = grid
        self.w = nn.Parameter(torch.zeros(num_tokens, num_tokens))
        # a float mask: multiplying by a bool buffer exports through a dtype conversion that
        # torch 2.11's ONNX decomposition refuses ("Expected same OpOverload packet")
        self.register_buffer("mask", local_bias_mask(num_tokens, window, grid).float(), persistent=False)

    def bias(self) -> Tensor:
        return self.w * self.mask  # zero (not -inf) outside the window

    def mix(self, q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int] | None) -> Tensor:
        if self.use_custom_op:
            return ops.aft_local(q, k, v, self.bias(), self.window)
        return aft_full_core(q, k, v, self.bias())


class AFTSimple(AFTLayer):
    """AFT-simple: no position bias, O(T d)."""

    def mix(self, q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int] | None) -> Tensor:
        if self.use_custom_op:
            return ops.aft_simple(q, k, v)
        return aft_simple_core(q, k, v)


class AFTConv(AFTLayer):
    """AFT-conv: multi-head, a re-parameterised ``k x k`` kernel per head.

    The token grid comes from the caller at run time, so the layer works at any
    resolution. ``K`` has one value per head and position.
    """

    def __init__(self, dim: int, heads: int, kernel_size: int) -> None:
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd, got {kernel_size}")
        super().__init__(dim, k_dim=heads)
        self.heads = heads
        self.kernel_size = kernel_size
        self.raw_kernel = nn.Parameter(torch.randn(heads, kernel_size, kernel_size))
        self.gamma = nn.Parameter(torch.zeros(heads))
        self.beta = nn.Parameter(torch.zeros(heads))

    def kernel(self) -> Tensor:
        return conv_kernel_from_params(self.raw_kernel, self.gamma, self.beta)

    def mix(self, q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int] | None) -> Tensor:
        if grid is None:
            side = math.isqrt(q.shape[1])
            if side * side != q.shape[1]:
                raise ValueError("AFTConv on a non-square token count needs grid=(H, W)")
            grid = (side, side)
        if self.use_custom_op:
            b, (h, w), d = q.shape[0], grid, q.shape[2]
            y = ops.aft_conv(q.reshape(b, h, w, d), k.reshape(b, h, w, self.heads),
                             v.reshape(b, h, w, d), self.kernel())  # fmt: skip
            return y.reshape(b, h * w, d)
        return aft_conv_core(q, k, v, self.kernel(), grid)
