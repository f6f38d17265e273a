"""The AFT mixing cores as ``torch.library`` custom ops, one per variant.

``torch.export`` sees each as a single opaque op, which the ONNX exporter then
translates to one ``com.aft`` node (see :mod:`aft_export.exporting.functions`). Eagerly
they run the same stable cores as the layers. AFT-conv takes ``Q, K, V`` on the
token grid, ``(B, H, W, C)``, so the grid size is part of the tensor shapes and can
stay dynamic.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aft_export.layers.cores import aft_conv_core, aft_full_core, aft_local_core, aft_simple_core


@torch.library.custom_op("aft::full", mutates_args=())
def aft_full(q: Tensor, k: Tensor, v: Tensor, w: Tensor) -> Tensor:
    return aft_full_core(q, k, v, w)


@torch.library.custom_op("aft::local", mutates_args=())
def aft_local(q: Tensor, k: Tensor, v: Tensor, w: Tensor, window: int, grid: list[int]) -> Tensor:
    """q, k, v: (B, T, d); w: (T, 2 sr - 1, 2 sc - 1), the banded bias (0 off the grid);
    ``window`` and ``grid = [H, W]`` are recorded on the node."""
    return aft_local_core(q, k, v, w, (grid[0], grid[1]))


@torch.library.custom_op("aft::simple", mutates_args=())
def aft_simple(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return aft_simple_core(q, k, v)


@torch.library.custom_op("aft::conv", mutates_args=())
def aft_conv(q: Tensor, k: Tensor, v: Tensor, kernel: Tensor) -> Tensor:
    """q, v: (B, H, W, d); k: (B, H, W, heads); kernel: (heads, ks, ks)."""
    b, h, w, d = v.shape
    y = aft_conv_core(q.reshape(b, h * w, d), k.reshape(b, h * w, -1), v.reshape(b, h * w, d), kernel, (h, w))
    return y.reshape(b, h, w, d)


for _op in (aft_full, aft_simple, aft_conv):
    _op.register_fake(lambda q, *args: torch.empty_like(q))
aft_local.register_fake(lambda q, k, v, w, window, grid: torch.empty_like(q))
