"""AFT cores against a direct float64 evaluation of the formula in shared/docs/AFT.md.

The reference builds the full pair-wise bias ``w[t, t']`` for each variant and
evaluates ``sigmoid(Q) * sum exp(K + w) V / sum exp(K + w)`` literally, in float64
(where ``exp(50 + ...)`` does not overflow). The fp32 layers must match it to a
relative error of 1e-5, also for keys around |K| = 50 where a naive fp32 ``exp``
overflows.
"""

import pytest
import torch

from aft_export.layers.aft import (
    AFTConv,
    AFTFull,
    AFTLocal,
    AFTSimple,
    aft_conv_core,
    aft_full_core,
    aft_local_core,
    aft_simple_core,
    local_bias_mask,
)
from aft_export.layers.cores import local_tiling

RTOL = 1e-5


def reference(q, k, v, w):
    """Literal formula. q, k, v: (B, T, d) float64; w: (T, T) or per-channel (d, T, T)."""
    q, k, v, w = (t.double() for t in (q, k, v, w))
    b, t, d = v.shape
    wc = w.expand(d, t, t) if w.dim() == 2 else w  # (d, T, T)
    y = torch.empty(b, t, d, dtype=torch.float64)
    for c in range(d):
        # e[b, t, t'] = exp(K[b, t', c] + w[c, t, t'])
        e = torch.exp(k[:, None, :, c] + wc[c][None])
        y[:, :, c] = (e * v[:, None, :, c]).sum(-1) / e.sum(-1)
    return torch.sigmoid(q) * y


def conv_bias_matrix(kernel, grid):
    """The (heads, T, T) bias of AFT-conv: kernel value inside the window, 0 outside."""
    heads, ks, _ = kernel.shape
    h, w = grid
    t = h * w
    out = torch.zeros(heads, t, t, dtype=torch.float64)
    r = ks // 2
    for i in range(t):
        yi, xi = divmod(i, w)
        for j in range(t):
            yj, xj = divmod(j, w)
            dy, dx = yj - yi, xj - xi
            if abs(dy) <= r and abs(dx) <= r:
                out[:, i, j] = kernel[:, dy + r, dx + r].double()
    return out


def local_bias_matrix(band, grid, window):
    """The (T, T) bias of AFT-local from its banded parameter (T, 2 sr - 1, 2 sc - 1):
    the value for offset (dr, dc) inside the window and on the grid, 0 everywhere else."""
    h, w = grid
    sr, sc = min(window, h), min(window, w)
    t = h * w
    out = torch.zeros(t, t, dtype=torch.float64)
    for i in range(t):
        yi, xi = divmod(i, w)
        for j in range(t):
            yj, xj = divmod(j, w)
            dy, dx = yj - yi, xj - xi
            if abs(dy) < window and abs(dx) < window:
                out[i, j] = band[i, dy + sr - 1, dx + sc - 1].double()
    return out


def rel_err(got, want):
    return ((got.double() - want).abs().max() / want.abs().max()).item()


def make_qkv(b, t, d, k_scale, seed, k_dim=None):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, d, generator=g)
    k = torch.randn(b, t, k_dim or d, generator=g) * k_scale
    v = torch.randn(b, t, d, generator=g)
    return q, k, v


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
def test_full_matches_formula(k_scale):
    q, k, v = make_qkv(2, 12, 5, k_scale, seed=1)
    w = torch.randn(12, 12, generator=torch.Generator().manual_seed(2)) * 2
    got = aft_full_core(q, k, v, w)
    assert torch.isfinite(got).all()
    assert rel_err(got, reference(q, k, v, w)) <= RTOL


def test_full_large_keys_naive_exp_overflows():
    """The test inputs really are hard: the naive fp32 form is not finite on them."""
    q, k, v = make_qkv(1, 8, 4, 50.0, seed=3)
    k[0, 0, 0] = 95.0  # exp(95) = inf in fp32
    naive = torch.exp(k).sum()
    assert not torch.isfinite(naive)
    w = torch.zeros(8, 8)
    assert rel_err(aft_full_core(q, k, v, w), reference(q, k, v, w)) <= RTOL


def test_full_factorised_bias_is_u_vT():
    layer = AFTFull(dim=6, num_tokens=10, rank=3)
    with torch.no_grad():
        layer.u.normal_()
        layer.v.normal_()
    w = layer.bias()
    assert torch.allclose(w, layer.u @ layer.v.t())
    q, k, v = make_qkv(2, 10, 6, 50.0, seed=4)
    assert rel_err(layer.mix(q, k, v, None), reference(q, k, v, w.detach())) <= RTOL


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
@pytest.mark.parametrize("grid,window", [(None, 2), ((4, 5), 2), ((12, 11), 2), ((9, 10), 3), ((3, 4), 6)])
def test_local_matches_formula_with_zero_outside_window(k_scale, grid, window):
    """Single-tile and multi-tile (padded) grids, a 1-D sequence, a window wider than the
    grid. Offsets that leave the grid hold noise here: the layer must ignore them."""
    t = 20 if grid is None else grid[0] * grid[1]
    layer = AFTLocal(dim=4, num_tokens=t, window=window, grid=grid)
    assert layer.w.shape == (t, 2 * min(window, layer.grid[0]) - 1, 2 * min(window, layer.grid[1]) - 1)
    with torch.no_grad():
        layer.w.normal_(0.0, 1.0)
    w = local_bias_matrix(layer.w.detach(), layer.grid, window)  # 0, not -inf, outside
    q, k, v = make_qkv(2, t, 4, k_scale, seed=5)
    got = layer.mix(q, k, v, None)
    assert torch.isfinite(got).all()
    assert rel_err(got, reference(q, k, v, w)) <= RTOL


def test_local_tiles_cover_the_window():
    """Tiles are at least s - 1 long (a halo of at most three tiles) or one tile per axis,
    and the chosen tiling of a large grid is banded: far fewer sources per target than T."""
    for grid, s in [((8, 8), 3), ((14, 14), 7), ((64, 64), 7), ((12, 11), 2), ((1, 50), 4)]:
        for (n, r, length, pad, crop), size in zip(local_tiling(grid, (min(s, grid[0]), min(s, grid[1]))), grid):
            reach = min(s, size) - 1
            if n == 1:
                assert (r, length, pad, crop) == (size, size, 0, reach)
            else:
                assert r >= max(reach, 1) and length == r + 2 * reach and pad == reach and crop == 0
                assert n * r >= size > (n - 1) * r
    (_, _, lr, _, _), (_, _, lc, _, _) = local_tiling((64, 64), (7, 7))
    assert lr * lc <= 400 < 4096


def test_local_loads_dense_checkpoint_bias():
    """A state dict from before the banded operator holds a dense (T, T) ``w`` (used only
    inside the window): it loads, converted, and the layer computes the same function."""
    grid, window, t = (5, 6), 2, 30
    old = torch.randn(t, t, generator=torch.Generator().manual_seed(21))  # noise outside the window too
    layer = AFTLocal(dim=4, num_tokens=t, window=window, grid=grid)
    state = {k: v for k, v in layer.state_dict().items() if k != "w"}
    layer.load_state_dict({**state, "w": old})
    assert layer.w.shape == (t, 3, 3)
    q, k, v = make_qkv(2, t, 4, 1.0, seed=22)
    want = reference(q, k, v, torch.where(local_bias_mask(t, window, grid), old, torch.zeros(())))
    assert rel_err(layer.mix(q, k, v, None), want) <= RTOL


def largest_tensor(fn) -> int:
    """The element count of the largest tensor any torch function returns while ``fn`` runs."""
    biggest = 0

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            nonlocal biggest
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                biggest = max(biggest, out.numel())
            return out

    with Spy():
        fn()
    return biggest


def test_local_never_builds_TxT():
    """Peak intermediate size of the banded core stays O(B T d) on a grid of 32 x 32."""
    b, grid, d, window = 2, (32, 32), 8, 3
    t = grid[0] * grid[1]
    q, k, v = make_qkv(b, t, d, 1.0, seed=23)
    w = torch.randn(t, 2 * window - 1, 2 * window - 1)
    biggest = largest_tensor(lambda: aft_local_core(q, k, v, w, grid))
    assert biggest >= b * t * d  # the spy saw the core's own output
    assert biggest <= 3 * b * t * d
    assert biggest < t * t


def test_local_window_shapes():
    m1 = local_bias_mask(6, 2, None)
    assert m1[0].tolist() == [True, True, False, False, False, False]
    m2 = local_bias_mask(9, 2, (3, 3))  # 2-D: neighbours in a 3x3 square
    assert m2[4].all()  # the centre sees every cell
    assert m2[0].nonzero().flatten().tolist() == [0, 1, 3, 4]


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
def test_simple_matches_formula(k_scale):
    q, k, v = make_qkv(3, 9, 5, k_scale, seed=6)
    got = aft_simple_core(q, k, v)
    assert rel_err(got, reference(q, k, v, torch.zeros(9, 9))) <= RTOL


@pytest.mark.parametrize("k_scale", [1.0, 50.0])
@pytest.mark.parametrize("kernel_scale", [0.5, 3.0])
def test_conv_matches_formula(k_scale, kernel_scale):
    heads, dh, grid, ks = 3, 2, (5, 4), 3
    t, d = grid[0] * grid[1], heads * dh
    g = torch.Generator().manual_seed(7)
    kernel = torch.randn(heads, ks, ks, generator=g) * kernel_scale
    q, kh, v = make_qkv(2, t, d, k_scale, seed=8, k_dim=heads)
    got = aft_conv_core(q, kh, v, kernel, grid)
    # reference: K and w broadcast from heads to their channels (head-major layout)
    k_full = kh.repeat_interleave(dh, dim=2)
    w_full = conv_bias_matrix(kernel, grid).repeat_interleave(dh, dim=0)
    assert rel_err(got, reference(q, k_full, v, w_full)) <= RTOL


def test_conv_fresh_layer_is_aft_simple():
    """gamma = beta = 0 at init, so exp(w) - 1 = 0 and AFT-conv reduces to AFT-simple."""
    layer = AFTConv(dim=8, heads=2, kernel_size=3)
    assert torch.all(layer.kernel() == 0)
    q, kh, v = make_qkv(2, 16, 8, 1.0, seed=9, k_dim=2)
    got = layer.mix(q, kh, v, (4, 4))
    want = aft_simple_core(q, kh.repeat_interleave(4, dim=2), v)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)


def test_conv_reparameterised_kernel():
    layer = AFTConv(dim=4, heads=2, kernel_size=3)
    with torch.no_grad():
        layer.gamma.fill_(2.0)
        layer.beta.fill_(0.5)
    kern = layer.kernel().detach()
    raw = layer.raw_kernel.detach()
    z = (raw - raw.mean(dim=(1, 2), keepdim=True)) / raw.std(dim=(1, 2), keepdim=True)
    assert torch.allclose(kern, 2.0 * z + 0.5, atol=1e-4)


def test_conv_takes_any_grid():
    layer = AFTConv(dim=8, heads=4, kernel_size=3)
    for grid in [(2, 2), (3, 7), (8, 8)]:
        x = torch.randn(2, grid[0] * grid[1], 8)
        assert layer(x, grid).shape == x.shape


@pytest.mark.parametrize("cls", [AFTFull, AFTLocal, AFTSimple, AFTConv])
def test_gradients_finite_with_large_keys(cls):
    t, d = 16, 8
    kwargs = {
        AFTFull: dict(num_tokens=t),
        AFTLocal: dict(num_tokens=t, window=2, grid=(4, 4)),
        AFTSimple: {},
        AFTConv: dict(heads=2, kernel_size=3),
    }[cls]
    layer = cls(dim=d, **kwargs)
    x = (torch.randn(2, t, d) * 30).requires_grad_()
    layer(x, (4, 4)).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters() if p.grad is not None)
    assert torch.isfinite(x.grad).all()


def test_full_never_builds_btTd():
    """Peak intermediate size stays O(B T d + T^2): trace the core and check every tensor."""
    b, t, d = 2, 32, 16
    q, k, v = make_qkv(b, t, d, 1.0, seed=10)
    w = torch.randn(t, t)
    biggest = largest_tensor(lambda: (aft_full_core(q, k, v, w),
                                      aft_conv_core(q, k[..., :4], v, torch.randn(4, 3, 3), (4, 8))))
    # the spy saw the cores run: their own (B, T, d) output passed through it, so a spy
    # that records nothing cannot pass the bounds below by measuring 0
    assert biggest >= b * t * d
    assert biggest <= max(b * t * d, t * t)
    assert biggest < b * t * t * d / 8
