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
from aft_export.layers.cores import (aft_conv_core, aft_full_core, aft_local_core, aft_simple_core,
                                     conv_kernel_from_params, local_band_from_dense, local_band_valid,
                                     local_bias_mask)  # fmt: skip

__all__ = [
    "AFTConv",
    "AFTLayer",
    "AFTFull",
    "AFTLocal",
    "AFTSimple",
    "aft_conv_core",
    "aft_full_core",
    "aft_local_core",
    "aft_simple_core",
    "conv_kernel_from_params",
    "local_band_from_dense",
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
    """AFT-local: the full bias kept inside a window of size ``s``, **0** outside.

    Only the bias inside the window is a parameter: ``w`` has shape
    ``(T, 2 sr - 1, 2 sc - 1)``, the bias of each target position for each offset
    ``(dr, dc)`` of its window (``sr = min(s, H)``, ``sc = min(s, W)``); offsets that
    leave the grid are held at 0. A 1-D sequence (``grid=None``) is the grid ``(1, T)``.
    Checkpoints written before the banded operator stored a dense ``(T, T)`` ``w``; it
    is converted when loaded (:meth:`upgrade_state`, called by ``load_state_dict`` and by
    :func:`aft_export.models.checkpoint.load_checkpoint`), dropping only the entries outside the
    window, which were masked out and never used.
    """

    def __init__(
        self, dim: int, num_tokens: int, window: int, grid: tuple[int, int] | None = None
    ) -> None:
        super().__init__(dim)
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.num_tokens = num_tokens
        self.window = window
        self.grid = tuple(grid) if grid is not None else (1, num_tokens)
        if self.grid[0] * self.grid[1] != num_tokens:
            raise ValueError(f"grid {self.grid} does not hold {num_tokens} tokens")
        valid = local_band_valid(self.grid, window)
        self.w = nn.Parameter(torch.zeros(valid.shape))
        # a float mask: multiplying by a bool buffer exports through a dtype conversion that
        # torch 2.11's ONNX decomposition refuses ("Expected same OpOverload packet")
        self.register_buffer("valid", valid, persistent=False)

    def bias(self) -> Tensor:
        """(T, 2 sr - 1, 2 sc - 1): the window's bias, 0 for offsets off the grid."""
        return self.w * self.valid

    def upgrade_state(self, state: dict, prefix: str = "") -> bool:
        """Convert a dense ``(T, T)`` ``w`` in ``state`` (the layout before the banded
        operator) to the banded one, in place. Returns whether anything was converted."""
        old = state.get(prefix + "w")
        if old is None or old.dim() != 2 or tuple(old.shape) != (self.num_tokens, self.num_tokens):
            return False
        state[prefix + "w"] = local_band_from_dense(old, self.grid, self.window)
        return True

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        self.upgrade_state(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def mix(self, q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int] | None) -> Tensor:
        if self.use_custom_op:
            return ops.aft_local(q, k, v, self.bias(), self.window, list(self.grid))
        return aft_local_core(q, k, v, self.w, self.grid)  # masks off-grid offsets row by row


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


# our four layers, the variants of the operator (AFT.md); a subclass of one computes that variant
VARIANTS: tuple[type[AFTLayer], ...] = (AFTFull, AFTLocal, AFTSimple, AFTConv)


def variant_class(module: nn.Module) -> type[AFTLayer] | None:
    """Which of :data:`VARIANTS` ``module`` is, or derives from (None: none of ours)."""
    return next((c for c in type(module).__mro__ if c in VARIANTS), None)
