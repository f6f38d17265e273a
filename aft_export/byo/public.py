"""The public packages' AFT layers, one registry entry each: what it becomes, why it may be
refused, and how our layer is built from it (:data:`PUBLIC_LAYERS`).

:mod:`aft_export.byo.swap` finds the layers in a model, asks an entry's refusal before
the probe and its builder after it. A new public layer is one :func:`register` call
(and, where it is to be found by its parameters too, its package's entry of
:data:`LAYOUTS`). What each maps to, and why the refused ones are refused, is the table
in :mod:`aft_export.byo.swap`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from aft_export.errors import AFTExportError
from aft_export.layers.aft import AFTConv, AFTFull, AFTLayer, AFTLocal, AFTSimple
from aft_export.layers.cores import local_band_from_dense, local_bias_mask

AFT_PYTORCH = "aft_pytorch.aft_pytorch"
COMVEX = "comvex.aft.model"
LABML = "labml_nn.transformers.aft"


@dataclass
class Call:
    """What a layer was called with during the probe."""

    args: tuple
    kwargs: dict


# ----------------------------------------------------------------------------
# Adapters: their calling convention around our layer
# ----------------------------------------------------------------------------


class GridArgs(nn.Module):
    """comvex ``AFTConv`` is called as ``layer(x, H, W)``; ours takes ``grid=(H, W)``."""

    def __init__(self, aft: AFTConv) -> None:
        super().__init__()
        self.aft = aft

    def forward(self, x: Tensor, H: int, W: int) -> Tensor:  # their argument names
        return self.aft(x, (H, W))


class SequenceFirst(nn.Module):
    """labml-nn ``AFTLocal`` takes keyword ``query, key, value`` of shape (T, B, d) and a
    mask; the swap checked that the three are one tensor and the mask is all True."""

    def __init__(self, aft: AFTLocal) -> None:
        super().__init__()
        self.aft = aft

    def forward(self, *, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.aft(query.transpose(0, 1)).transpose(0, 1)  # (T, B, d) -> (B, T, d) -> back


def _comvex_mode(module: nn.Module) -> str:
    if not getattr(module, "use_position_bias", True):
        return "simple"
    return "local" if getattr(module, "position_bias_mask", None) is not None else "full"


def _comvex_conv_kernel(module: nn.Module) -> Tensor:
    """``exp(w) - 1`` per head as comvex computes it in eval mode (one BatchNorm shared
    by every head, with its running statistics)."""
    bn = module.w_norm
    with torch.no_grad():
        w = torch.nn.functional.batch_norm(module.w, bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                           training=False, eps=bn.eps)  # fmt: skip
        return torch.exp(w)[:, 0] - 1.0  # (heads, k, k)


# ----------------------------------------------------------------------------
# Building our layers from theirs
# ----------------------------------------------------------------------------


def _linear(src: nn.Linear) -> nn.Linear:
    out = nn.Linear(src.in_features, src.out_features, bias=src.bias is not None)
    with torch.no_grad():
        out.weight.copy_(src.weight)
        if src.bias is not None:
            out.bias.copy_(src.bias)
    return out


def _with_projections(layer: AFTLayer, q: nn.Linear, k: nn.Linear, v: nn.Linear, out: nn.Linear) -> AFTLayer:
    """Our layer with their four projections (any hidden width, with or without biases)."""
    layer.to_q, layer.to_k, layer.to_v, layer.proj = _linear(q), _linear(k), _linear(v), _linear(out)
    layer.dim = q.in_features
    return layer.eval()


def _seq_len(call: Call, where: str, seq_first: bool = False) -> int:
    x = call.kwargs.get("query") if seq_first else (call.args[0] if call.args else None)
    if not isinstance(x, Tensor) or x.dim() != 3:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise AFTExportError(f"{where} is called with input {shape}; the exporter maps "
                             f"layers that take (B, T, d) tokens")  # fmt: skip
    return int(x.shape[0] if seq_first else x.shape[1])


# A builder takes their layer (their class, or a module with its parameter layout), where
# it is ("AFT layer PATH (SOURCE)", for errors) and the call the probe saw, and returns our
# layer (or an adapter around it) with its description.
Builder = Callable[[nn.Module, str, Call], tuple[nn.Module, str]]


def _aft_pytorch_tokens(module: nn.Module, where: str, call: Call) -> int:
    """aft-pytorch's full and local layers: the token count, within what ``wbias`` holds."""
    t = _seq_len(call, where)
    if t > module.wbias.shape[0]:
        raise AFTExportError(f"{where} is called with {t} tokens; its wbias holds {module.wbias.shape[0]}")
    return t


def _aft_pytorch_dims(module: nn.Module) -> tuple[int, int]:
    return module.to_q.in_features, module.to_q.out_features


def _aft_pytorch_layer(ours: AFTLayer, module: nn.Module) -> AFTLayer:
    return _with_projections(ours, module.to_q, module.to_k, module.to_v, module.project)


def _build_aft_pytorch_full(module: nn.Module, where: str, call: Call) -> tuple[nn.Module, str]:
    t = _aft_pytorch_tokens(module, where, call)
    dim, hidden = _aft_pytorch_dims(module)
    ours = _aft_pytorch_layer(AFTFull(dim, t), module)
    with torch.no_grad():
        ours.w.copy_(module.wbias[:t, :t])
    return ours, f"AFTFull(dim={dim}, hidden={hidden}, T={t}, dense bias)"


def _build_aft_pytorch_local(module: nn.Module, where: str, call: Call) -> tuple[nn.Module, str]:
    """Its forward rebuilds wbias with zeros outside |t - t'| < s; ours masks the same window."""
    t = _aft_pytorch_tokens(module, where, call)
    dim, hidden = _aft_pytorch_dims(module)
    ours = _aft_pytorch_layer(AFTLocal(dim, t, window=int(module.s)), module)
    with torch.no_grad():  # the dense bias's window, as our banded (T, 1, 2s - 1) bias
        ours.w.copy_(local_band_from_dense(module.wbias[:t, :t], ours.grid, ours.window))
    return ours, f"AFTLocal(dim={dim}, hidden={hidden}, T={t}, window={module.s})"


def _build_aft_pytorch_simple(module: nn.Module, where: str, call: Call) -> tuple[nn.Module, str]:
    t = _seq_len(call, where)
    dim, hidden = _aft_pytorch_dims(module)
    return _aft_pytorch_layer(AFTSimple(dim), module), f"AFTSimple(dim={dim}, hidden={hidden}, T={t})"


def _build_comvex_general(module: nn.Module, where: str, call: Call) -> tuple[nn.Module, str]:
    """Full: the only mode its refusal lets through."""
    t = _seq_len(call, where)
    rank = module.u.shape[1]
    dim, hidden = module.Q.in_features, module.Q.out_features
    ours = _with_projections(AFTFull(dim, t, rank=rank), module.Q, module.K, module.V, module.out_linear)
    with torch.no_grad():
        ours.u.copy_(module.u[:t])
        ours.v.copy_(module.v[:t])
    return ours, f"AFTFull(dim={dim}, hidden={hidden}, T={t}, rank={rank})"


def _build_comvex_conv(module: nn.Module, where: str, call: Call) -> tuple[nn.Module, str]:
    """Kernel zero: the only state its refusal lets through."""
    heads, ks = module.heads, module.w.shape[-1]
    dim, hidden = module.Q.in_features, module.Q.out_features
    conv = AFTConv(hidden, heads, ks)
    with torch.no_grad():  # kernel() = gamma * (...) + beta = 0, as comvex's exp(w) - 1 = 0
        conv.raw_kernel.copy_(module.w[:, 0])
        conv.gamma.zero_()
        conv.beta.zero_()
    ours = _with_projections(conv, module.Q, module.K, module.V, module.out_linear)
    return GridArgs(ours), f"AFTConv(dim={dim}, hidden={hidden}, heads={heads}, kernel={ks}, kernel zero)"


def _build_labml_local(module: nn.Module, where: str, call: Call) -> tuple[nn.Module, str]:
    t = _seq_len(call, where, seq_first=True)
    q, k, v, mask = (call.kwargs.get(n) for n in ("query", "key", "value", "mask"))
    if not (k is q and v is q) and not (torch.equal(q, k) and torch.equal(q, v)):
        raise AFTExportError(f"{where} is called with different query, key and value "
                             f"tensors; the exporter maps self-mixing layers only")  # fmt: skip
    if mask is None or not bool(mask.all()):
        causal = mask is not None and mask.shape[0] == mask.shape[1] and bool(
            (mask[..., 0] == torch.ones(t, t, dtype=torch.bool).tril()).all())
        what = "a causal mask (position t sees t' <= t only)" if causal else "a mask that hides positions"
        raise AFTExportError(f"{where} is called with {what}, as in a text model; it maps "
                             f"to com.aft only where called with an all-True mask (bidirectional)")  # fmt: skip
    s = int(module.local_window_size)
    if not torch.equal(module.local_mask[:t, :t].bool(), local_bias_mask(t, s, None)):
        raise AFTExportError(f"{where} has a local_mask that is not the window "
                             f"|t - t'| < {s}; it cannot become AFT-local")  # fmt: skip
    d = module.query.in_features
    ours = _with_projections(AFTLocal(d, t, window=s), module.query, module.key, module.value, module.output)
    with torch.no_grad():
        ours.w.copy_(local_band_from_dense(module.pos_bias[:t, :t], ours.grid, ours.window))
    return SequenceFirst(ours), f"AFTLocal(dim={d}, T={t}, window={s}, sequence-first)"


# ----------------------------------------------------------------------------
# Refusing layers by what they are (judged from the layer alone; "" if it can map)
# ----------------------------------------------------------------------------


def _comvex_activation(module: nn.Module) -> str:
    act = getattr(module, "query_act_fnc", None)
    if act is not None and type(act) is not nn.Sigmoid:
        return f"its query activation is {type(act).__name__}, not AFT's sigmoid"
    return ""


def _refuse_comvex_general(module: nn.Module) -> str:
    mode = _comvex_mode(module)
    if mode == "local":
        return ("comvex's AFTLocal calls Tensor.mask_fill_, which does not exist, so the layer cannot run "
                "in PyTorch and there is no trained behaviour to reproduce")  # fmt: skip
    if mode == "simple":
        return ("comvex's AFTSimple (use_position_bias=False) computes sigmoid(Q) * softmax_t(K) * V with no "
                "sum over positions; that is not AFT-simple, so no com.aft node computes it")  # fmt: skip
    return ""


def _refuse_comvex_conv(module: nn.Module) -> str:
    ks = module.w.shape[-1]
    if ks % 2 == 0:
        return f"its kernel size {ks} is even; AFT-conv needs an odd kernel (padding k//2 keeps the grid)"
    if _comvex_conv_kernel(module).abs().max().item() != 0.0:
        return ("comvex's AFTConv convolves K * V and K (not exp(K) * V and exp(K)) in its windowed term, "
                "so with a non-zero kernel exp(w) - 1 it is not AFT-conv; only its initial state (kernel "
                "zero) maps")  # fmt: skip
    return ""


def _never(module: nn.Module) -> str:
    return ""


# ----------------------------------------------------------------------------
# The registry: one entry per public layer
# ----------------------------------------------------------------------------

PACKAGES = {AFT_PYTORCH: "aft-pytorch", COMVEX: "comvex", LABML: "labml-nn"}


@dataclass(frozen=True)
class PublicLayer:
    """One public AFT layer: where it lives, our layer it becomes, why one may be refused
    and how ours is built from it. ``refuse`` is asked before the probe, ``build`` after
    it (never for a refused layer); ``variant`` is its AFT variant from the layer alone."""

    module: str  # the package module that defines the class
    name: str  # the class's qualified name
    ours: str  # our layer it becomes ("AFTFull", ...)
    build: Builder | None  # None: always refused
    refuse: Callable[[nn.Module], str] = _never
    variant: Callable[[nn.Module], str] | None = None  # None: that of ``ours``

    @property
    def source(self) -> str:
        return f"{PACKAGES[self.module]} {self.name}"

    def refusal(self, module: nn.Module) -> str:
        """Why ``module`` cannot become our operator ("" if it can)."""
        return self.refuse(module) or ("" if self.build else f"{self.source} has no mapping to com.aft")


PUBLIC_LAYERS: dict[tuple[str, str], PublicLayer] = {}


def register(entry: PublicLayer) -> None:
    key = (entry.module, entry.name)
    if key in PUBLIC_LAYERS:
        raise ValueError(f"public layer {entry.source} is registered twice")
    if entry.module not in PACKAGES:
        raise ValueError(f"public layer {entry.name}: no package is known for module {entry.module!r}")
    PUBLIC_LAYERS[key] = entry


register(PublicLayer(AFT_PYTORCH, "AFTFull", "AFTFull", _build_aft_pytorch_full))
register(PublicLayer(AFT_PYTORCH, "AFTLocal", "AFTLocal", _build_aft_pytorch_local))
register(PublicLayer(AFT_PYTORCH, "AFTSimple", "AFTSimple", _build_aft_pytorch_simple))
register(PublicLayer(AFT_PYTORCH, "AFTConv", "AFTConv", None, lambda m: (
    "aft-pytorch's AFTConv is a stub with no parameters whose forward raises NotImplementedError")))
register(PublicLayer(COMVEX, "AFTGeneral", "AFTFull", _build_comvex_general,
                     lambda m: _comvex_activation(m) or _refuse_comvex_general(m),
                     variant=lambda m: "AFT" + _comvex_mode(m).capitalize()))
register(PublicLayer(COMVEX, "AFTConv", "AFTConv", _build_comvex_conv,
                     lambda m: _comvex_activation(m) or _refuse_comvex_conv(m)))
register(PublicLayer(LABML, "AFTLocal", "AFTLocal", _build_labml_local))


# ----------------------------------------------------------------------------
# Recognising layers by class
# ----------------------------------------------------------------------------


def public_class(module: nn.Module) -> tuple[PublicLayer, type] | None:
    """The registry's entry for the public AFT class ``module`` is, or derives from, and
    that class."""
    for cls in type(module).__mro__:
        entry = PUBLIC_LAYERS.get((cls.__module__, cls.__qualname__))
        if entry is not None:
            return entry, cls
    return None


# ----------------------------------------------------------------------------
# Recognising layers by their parameters: one entry per package layout
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """A package's parameter layout. ``projections``: the names of its q, k and v (``d -> h``) and
    output (``h -> d``) Linears. ``layers``: which of its layers (:data:`PUBLIC_LAYERS` names, most
    specific first) a module with those projections is, from the module, its parameters and the
    parameters besides the projections' (``()``: none)."""

    package: str
    projections: tuple[str, str, str, str]
    layers: Callable[[nn.Module, dict[str, Tensor], set[str]], tuple[str, ...]]


def _window(value) -> bool:
    """A window size a layer may have: a whole number >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _square(x) -> bool:
    return isinstance(x, Tensor) and x.dim() == 2 and x.shape[0] == x.shape[1]


def _aft_pytorch_layers(module: nn.Module, params: dict[str, Tensor], extra: set[str]) -> tuple[str, ...]:
    """A square ``wbias``: full, or local (first) where a window ``s`` is set too; nothing else: simple."""
    if extra == {"wbias"} and _square(params["wbias"]):
        return ("AFTLocal", "AFTFull") if _window(getattr(module, "s", None)) else ("AFTFull",)
    return () if extra else ("AFTSimple",)


def _comvex_layers(module: nn.Module, params: dict[str, Tensor], extra: set[str]) -> tuple[str, ...]:
    """A rank-r position bias ``u v^T``: ``AFTGeneral`` (full)."""
    ok = extra == {"u", "v"} and params["u"].dim() == 2 and params["u"].shape == params["v"].shape
    return ("AFTGeneral",) if ok else ()


def _labml_layers(module: nn.Module, params: dict[str, Tensor], extra: set[str]) -> tuple[str, ...]:
    """A square ``pos_bias``, a ``local_mask`` of its shape and a ``local_window_size``: ``AFTLocal``."""
    ok = extra == {"pos_bias", "local_mask"} and _square(params["pos_bias"]) and \
        params["local_mask"].shape == params["pos_bias"].shape and _window(getattr(module, "local_window_size", None))
    return ("AFTLocal",) if ok else ()


LAYOUTS: tuple[Layout, ...] = (
    Layout(AFT_PYTORCH, ("to_q", "to_k", "to_v", "project"), _aft_pytorch_layers),
    Layout(COMVEX, ("Q", "K", "V", "out_linear"), _comvex_layers),
    Layout(LABML, ("query", "key", "value", "output"), _labml_layers),
)
