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

__all__ = ["aft_conv_core", "aft_full_core", "aft_local_core", "aft_simple_core", "conv_kernel_from_params",
           "local_band_from_dense", "local_band_valid", "local_bias_mask", "local_tiling", "skew"]


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
        local = F.conv2d(img, weight, padding=ks // 2, groups=ch)  # (B, ch, H, W)
        # the global sums as a 4-D reduction, (B, ch, 1, 1): OpenVINO's CPU plugin scales a
        # 3-D (B, ch, 1) ReduceSum by a (1, ch, 1) constant wrongly for batch > 1 (it fuses
        # the Mul into the reduction and indexes the constant by batch); the 4-D form is the
        # custom body's and every runtime computes it alike (tests/runners/test_openvino.py)
        glob = img.sum(dim=(2, 3), keepdim=True)
        scale = outside.repeat_interleave(ch_per_head)[None, :, None, None]
        return (local + scale * glob).reshape(b, ch, t).transpose(1, 2)

    num = mix(ekv, dh)  # (B, T, d)
    den = mix(ek, 1).repeat_interleave(dh, dim=2)  # (B, T, d)
    return torch.sigmoid(q) * (num / den)


def aft_local_core(q: Tensor, k: Tensor, v: Tensor, w: Tensor, grid: tuple[int, int]) -> Tensor:
    """AFT-local on a ``grid = (H, W)`` token map, computed banded (never ``T x T``).

    q, k, v: (B, T, d); w: (T, 2 sr - 1, 2 sc - 1), the bias of each target position
    for the offsets ``(dr, dc)`` of its window (``sr = min(s, H)``, ``sc = min(s, W)``);
    entries for offsets that leave the grid are ignored. Outside the window the bias is 0, so with
    ``m[t] = max(0, max w[t])`` (the row maximum over every ``t'``)::

        num[t] = sum_window (exp(w - m) - exp(-m)) eK V + exp(-m) * sum_t' eK V
        den[t] = sum_window (exp(w - m) - exp(-m)) eK   + exp(-m) * sum_t' eK

    the identity AFT-conv uses, with position-specific weights. The window sums run on
    tiles of ``R x C`` targets (:func:`local_tiling`): each tile's weights, skewed into
    a ``(R C, Lr Lc)`` matrix over the tile's halo of sources, multiply the halo's
    values in one batched matmul. Work is ``O(T Lr Lc d)`` = ``O(T s^2 d)``; one tile
    row is processed at a time (its weights too), so the extra memory is ``O(T d)``.
    """
    b, t, d = v.shape
    h, wd = grid
    kr, kc = w.shape[1], w.shape[2]
    (nr, rr, lr, pr, cr), (nc, cc, lc, pc, ccol) = local_tiling(grid, ((kr + 1) // 2, (kc + 1) // 2))
    ek = (k - k.amax(dim=1, keepdim=True)).exp_()  # (B, T, d), in (0, 1]
    n = b * 2 * d
    # eK V and eK side by side on the grid, batch and channels last, zero-padded so that
    # every tile's halo is in range: (Hp, Wp, B, 2, d)
    hp, wp = (nr - 1) * rr + lr, (nc - 1) * cc + lc
    x = torch.stack([ek * v, ek], dim=2)  # (B, T, 2, d)
    del ek
    x = x.reshape(b, h, wd, 2 * d).permute(1, 2, 0, 3).reshape(h, wd, n)
    xp = F.pad(x, (0, 0, pc, wp - wd - pc, pr, hp - h - pr))  # (Hp, Wp, N)
    del x
    xsum = xp.sum(dim=(0, 1))  # (B * 2d,): the global sums

    # which window offsets of each grid row / column stay on the grid
    ok_r = _window_sources(h, (kr + 1) // 2, v.device)[1].to(w.dtype)  # (H, Kr)
    ok_c = _window_sources(wd, (kc + 1) // 2, v.device)[1].to(w.dtype)  # (W, Kc)
    w4 = w.reshape(h, wd, kr, kc)

    q4 = q.reshape(b, h, wd, d)
    rows = []
    group = max(1, (rr * cc * nc) // (lr * lc))  # tiles per matmul: a halo no larger than a row's targets
    for i in range(nr):  # one row of tiles at a time
        r0, r1 = i * rr, min(i * rr + rr, h)
        # this row's weights, 0 off the grid; m = max(0, max w) per target is the max over every t'
        wi = w4[r0:r1] * (ok_r[r0:r1, None, :, None] * ok_c[None, :, None, :])  # (R', W, Kr, Kc)
        m = wi.flatten(2).amax(dim=2).clamp(min=0.0)[..., None, None]  # (R', W, 1, 1)
        glob = torch.exp(-m)  # weight of every position outside the window
        ai = torch.exp(wi - m) - glob  # 0 where w = 0
        ai = F.pad(ai, (0, 0, 0, 0, 0, nc * cc - wd, 0, rr - (r1 - r0))).reshape(rr, nc, cc, kr, kc)
        gi = F.pad(glob.reshape(r1 - r0, wd), (0, nc * cc - wd, 0, rr - (r1 - r0)), value=1.0)
        gi = gi.reshape(rr, nc, cc).transpose(0, 1).reshape(nc, rr * cc, 1)
        # [a, b, a + dr, b + dc] = A[a, b, dr, dc] (skewed), cropped to the halo
        ai = skew(ai.permute(1, 2, 4, 0, 3))[..., cr:cr + lr]  # (nc, C, Kc, R, Lr)
        ai = skew(ai.permute(0, 3, 4, 1, 2))[..., ccol:ccol + lc]  # (nc, R, Lr, C, Lc)
        ai = ai.transpose(2, 3).reshape(nc, rr * cc, lr * lc)
        src = xp[i * rr:i * rr + lr]
        outs = []
        for j0 in range(0, nc, group):
            j1 = min(j0 + group, nc)
            halo = torch.stack([src[:, j * cc:j * cc + lc] for j in range(j0, j1)]).reshape(j1 - j0, lr * lc, n)
            outs.append(torch.baddbmm(gi[j0:j1] * xsum, ai[j0:j1], halo))  # (G, R C, N)
        out = torch.cat(outs).reshape(nc, rr, cc, b, 2, d).transpose(0, 1).reshape(rr, nc * cc, b, 2, d)
        out = out[:r1 - r0, :wd]
        rows.append(torch.sigmoid(q4[:, r0:r1]) * (out[..., 0, :] / out[..., 1, :]).permute(2, 0, 1, 3))
    del xp
    return torch.cat(rows, dim=1).reshape(b, t, d)


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


# Per-target cost of a tile, in multiply-adds per channel, beside its sources: writing
# the output, the global term, and the fixed cost of a small matmul (tuned on CPU).
_TILE_TARGET_COST = 32
_TILE_COST = 2048


def _axis_tiling(size: int, reach: int, tile: int) -> tuple[int, int, int, int, int]:
    """(tiles, tile, halo, pad_before, crop) along one axis for a ``tile``-long tile."""
    if tile >= size:  # one tile: the halo is the whole axis, nothing is padded
        return 1, size, size, 0, reach
    n = -(-size // tile)
    return n, tile, tile + 2 * reach, reach, 0


def local_tiling(grid: tuple[int, int], reach: tuple[int, int]):
    """The tiles AFT-local computes on, per axis: ``(n, R, L, pad, crop)``.

    ``n`` tiles of ``R`` targets; each tile's sources are a halo of ``L`` positions of
    the grid padded by ``pad`` zeros before it (``L = R + 2 (s - 1)``, or the whole axis
    for a single tile); ``crop`` is where the halo starts in a skewed weight row
    (:func:`skew`). ``reach = (sr, sc)``: the window half-sizes, at most the grid's.
    Tiles are at least ``s - 1`` long (so the halo is at most three tiles), and chosen
    to minimise the multiply-adds plus a per-tile overhead.
    """
    h, w = grid
    sr, sc = reach
    best = None
    for rr in range(max(sr - 1, 1), h + 1):
        ar = _axis_tiling(h, sr - 1, rr)
        for cc in range(max(sc - 1, 1), w + 1):
            ac = _axis_tiling(w, sc - 1, cc)
            targets = ar[0] * ar[1] * ac[0] * ac[1]
            cost = targets * (ar[2] * ac[2] + _TILE_TARGET_COST) + ar[0] * ac[0] * _TILE_COST
            if best is None or cost < best[0]:
                best = (cost, ar, ac)
    return best[1], best[2]


def skew(x: Tensor) -> Tensor:
    """(..., R, K) -> (..., R, R + K - 1) with ``out[..., a, a + j] = x[..., a, j]``, 0 elsewhere."""
    *lead, r, k = x.shape
    length = r + k - 1
    x = F.pad(x, (0, length + 1 - k)).reshape(*lead, r * (length + 1))[..., : r * length]
    return x.reshape(*lead, r, length)


def _window_sources(size: int, reach: int, device=None) -> tuple[Tensor, Tensor]:
    """Along one grid axis: the source position of each target's window offset
    ``-(reach - 1) .. reach - 1``, ``(size, 2 reach - 1)``, and whether it is on the grid."""
    src = torch.arange(size, device=device)[:, None] + torch.arange(1 - reach, reach, device=device)
    return src, (src >= 0) & (src < size)


def local_band_valid(grid: tuple[int, int], window: int) -> Tensor:
    """(T, 2 sr - 1, 2 sc - 1) float mask: 1 where a target's window offset stays on the grid."""
    h, w = grid
    sr, sc = min(window, h), min(window, w)
    ok_r, ok_c = _window_sources(h, sr)[1], _window_sources(w, sc)[1]
    valid = ok_r[:, None, :, None] & ok_c[None, :, None, :]  # (H, W, Kr, Kc)
    return valid.reshape(h * w, 2 * sr - 1, 2 * sc - 1).float()


def local_band_from_dense(w: Tensor, grid: tuple[int, int], window: int) -> Tensor:
    """A dense ``(T, T)`` AFT-local bias (the layout before the banded operator) ->
    the banded ``(T, 2 sr - 1, 2 sc - 1)`` one. Entries outside the window were never
    used (they were masked) and are dropped; offsets off the grid become 0."""
    h, wd = grid
    sr, sc = min(window, h), min(window, wd)
    rows = _window_sources(h, sr)[0].clamp(0, h - 1)  # (H, Kr)
    cols = _window_sources(wd, sc)[0].clamp(0, wd - 1)  # (W, Kc)
    src = rows[:, None, :, None] * wd + cols[None, :, None, :]  # (H, W, Kr, Kc)
    band = w.gather(1, src.reshape(h * wd, -1)).reshape(h * wd, 2 * sr - 1, 2 * sc - 1)
    return band * local_band_valid(grid, window).to(band.dtype)


def conv_kernel_from_params(raw: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """The paper's re-parameterisation ``gamma * (w - mean) / std + beta``, per head."""
    mean = raw.mean(dim=(1, 2), keepdim=True)
    std = raw.std(dim=(1, 2), keepdim=True)
    return gamma[:, None, None] * (raw - mean) / (std + eps) + beta[:, None, None]
