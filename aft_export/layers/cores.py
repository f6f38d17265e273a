"""Attention Free Transformer mixing layers (Zhai et al., arXiv 2105.14103).

For every target position ``t`` and channel ``c``::

    Y[t,c] = sigmoid(Q[t,c]) * sum_t' exp(K[t',c] + w[t,t']) V[t',c]
                             / sum_t' exp(K[t',c] + w[t,t'])

The module is split in two so that exporters can swap the middle: the
``aft_*_core`` functions below take ``Q, K, V`` and the position bias and return
``Y``; the ``nn.Module`` classes own the projections and the parameters.

Every core is computed in the factorised form ``exp(w) @ (exp(K) * V)`` (never
a ``(B, T, T, d)`` tensor) and stabilised by subtracting the maximum of ``K`` over
positions (per batch and channel) and the maximum of ``w`` over ``t'`` (per row
``t``). Both shifts are constant along the summed axis, so they cancel between
numerator and denominator. After the shifts the denominator is at least
``exp(w[t, argmax K] - max_t' w[t, t'])``, so it can only underflow in fp32 when a
single row of ``w`` spans more than ~87, which no trained model gets near.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["aft_conv_core", "aft_full_core", "aft_simple_core", "conv_kernel_from_params", "local_bias_mask"]


# ----------------------------------------------------------------------------
# Cores: (Q, K, V, bias) -> Y. Pure functions of tensors, no parameters.
# ----------------------------------------------------------------------------


def aft_full_core(q: Tensor, k: Tensor, v: Tensor, w: Tensor) -> Tensor:
    """AFT with a dense ``(T, T)`` position bias. q, k, v: (B, T, d); w: (T, T)."""
    k_max = k.amax(dim=1, keepdim=True)  # (B, 1, d): max over t', per batch/channel
    ek = torch.exp(k - k_max)  # (B, T, d), in (0, 1]
    w_max = w.amax(dim=1, keepdim=True)  # (T, 1): max over t', per target row t
    ew = torch.exp(w - w_max)  # (T, T), in (0, 1]
    num = torch.matmul(ew, ek * v)  # (B, T, d)
    den = torch.matmul(ew, ek)  # (B, T, d)
    return torch.sigmoid(q) * (num / den)


def aft_simple_core(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """AFT with no position bias: a per-channel softmax over positions, then pooling."""
    weights = torch.softmax(k, dim=1)  # (B, T, d), stable by construction
    context = (weights * v).sum(dim=1, keepdim=True)  # (B, 1, d)
    return torch.sigmoid(q) * context


def aft_conv_core(
    q: Tensor, k: Tensor, v: Tensor, kernel: Tensor, grid: tuple[int, int]
) -> Tensor:
    """AFT-conv on a ``grid = (H, W)`` token map.

    q, v: (B, T, d) with d = heads * dh, head-major channels; k: (B, T, heads);
    kernel: (heads, k, k), the effective bias ``w`` (not ``exp(w) - 1``). Outside the
    kernel window the bias is 0, so with ``m = max(0, max w)`` per head::

        num = conv(eK V, exp(w - m) - exp(-m)) + exp(-m) * sum_t' eK V
        den = conv(eK,   exp(w - m) - exp(-m)) + exp(-m) * sum_t' eK

    which for ``m = 0`` is exactly the paper's ``exp(w) - 1`` kernel plus global sums.
    """
    b, t, d = v.shape
    heads, ks, _ = kernel.shape
    dh = d // heads
    h, w_ = grid
    k_max = k.amax(dim=1, keepdim=True)  # (B, 1, heads)
    ek = torch.exp(k - k_max)  # (B, T, heads)
    ekv = ek.repeat_interleave(dh, dim=2) * v  # (B, T, d)

    m = kernel.flatten(1).amax(dim=1).clamp(min=0.0)  # (heads,)
    outside = torch.exp(-m)  # (heads,): weight of positions outside the window
    conv_w = torch.exp(kernel - m[:, None, None]) - outside[:, None, None]  # (heads, k, k)

    def mix(x: Tensor, ch_per_head: int) -> Tensor:
        # x: (B, T, heads * ch_per_head) -> same shape, windowed + global sums
        ch = x.shape[2]
        img = x.transpose(1, 2).reshape(b, ch, h, w_)
        weight = conv_w.repeat_interleave(ch_per_head, dim=0).unsqueeze(1)  # (ch, 1, k, k)
        local = F.conv2d(img, weight, padding=ks // 2, groups=ch).reshape(b, ch, t)
        glob = img.reshape(b, ch, t).sum(dim=2, keepdim=True)  # (B, ch, 1)
        scale = outside.repeat_interleave(ch_per_head)[None, :, None]
        return (local + scale * glob).transpose(1, 2)

    num = mix(ekv, dh)  # (B, T, d)
    den = mix(ek, 1).repeat_interleave(dh, dim=2)  # (B, T, d)
    return torch.sigmoid(q) * (num / den)


# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------


def local_bias_mask(num_tokens: int, window: int, grid: tuple[int, int] | None) -> Tensor:
    """Boolean (T, T) mask of pairs inside the AFT-local window.

    On a 1-D sequence the window is ``|t - t'| < s``; on an image grid it is the
    2-D square window ``|row - row'| < s and |col - col'| < s``.
    """
    idx = torch.arange(num_tokens)
    if grid is None:
        return (idx[:, None] - idx[None, :]).abs() < window
    _, gw = grid
    rows, cols = idx // gw, idx % gw
    near_r = (rows[:, None] - rows[None, :]).abs() < window
    near_c = (cols[:, None] - cols[None, :]).abs() < window
    return near_r & near_c


def conv_kernel_from_params(raw: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """The paper's re-parameterisation ``gamma * (w - mean) / std + beta``, per head."""
    mean = raw.mean(dim=(1, 2), keepdim=True)
    std = raw.std(dim=(1, 2), keepdim=True)
    return gamma[:, None, None] * (raw - mean) / (std + eps) + beta[:, None, None]
