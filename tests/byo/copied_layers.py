"""AFT layers as users copy them into their own code, for recognition by what a layer computes.

``AFTFull`` has the parameter names and shapes of aft-pytorch's ``AFTFull`` (aft-pytorch
0.2.2, MIT licence, https://github.com/rish-16/aft-pytorch: ``to_q``, ``to_k``, ``to_v``
``dim -> hidden_dim``, ``project`` back, a ``(max_seqlen, max_seqlen)`` ``wbias``) and
computes what it computes, AFT-full (docs/AFT.md), with its raw ``exp``. It is written here
from the formula, not copied, and lives in another module under no public path, as a
user's copy would. ``TransposedBias`` has the same parameters but mixes with the
transposed bias: the same shapes, another computation (a look-alike).

comvex's and labml-nn's layers are pasted as a user pastes them (:func:`pasted`): their
own methods, installed from the pinned packages, under another class name and module, so
that no public class is in the layer's MRO; nothing of theirs is copied into this file.
"""

from __future__ import annotations

import torch
from torch import nn

from tests.byo.user_models import (DIM, HIDDEN, MAX_SEQ, TokenClassifier, _randomise_biases, comvex_classifier,
                                   labml_classifier)  # fmt: skip


class AFTFull(nn.Module):
    """Y_t = sigmoid(Q_t) * sum_t' exp(K_t' + w_tt') V_t' / sum_t' exp(K_t' + w_tt'), as
    aft-pytorch writes it: exp(w) @ (exp(K) * V) over exp(w) @ exp(K)."""

    def __init__(self, max_seqlen: int, dim: int, hidden_dim: int = 64) -> None:
        super().__init__()
        self.to_q = nn.Linear(dim, hidden_dim)
        self.to_k = nn.Linear(dim, hidden_dim)
        self.to_v = nn.Linear(dim, hidden_dim)
        self.project = nn.Linear(hidden_dim, dim)
        self.wbias = nn.Parameter(torch.empty(max_seqlen, max_seqlen))
        nn.init.xavier_uniform_(self.wbias)

    def bias(self, t: int) -> torch.Tensor:
        return self.wbias[:t, :t]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.exp(self.bias(x.shape[1])).unsqueeze(0)
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        return self.project(torch.sigmoid(q) * (w @ (torch.exp(k) * v)) / (w @ torch.exp(k)))


class TransposedBias(AFTFull):
    """The same parameters; position t weighs t' by w[t', t], not w[t, t']: not AFT-full."""

    def bias(self, t: int) -> torch.Tensor:
        return self.wbias[:t, :t].t()


def copied_classifier() -> nn.Module:
    """Two copied AFTFull layers (max_seqlen 20 > T 16, hidden 16 != dim 24)."""
    torch.manual_seed(0)
    return _randomise_biases(TokenClassifier([AFTFull(MAX_SEQ, DIM, HIDDEN), AFTFull(MAX_SEQ, DIM, HIDDEN)]))


def lookalike_classifier() -> nn.Module:
    """A copied AFTFull, then a look-alike (blocks.1.mixer)."""
    torch.manual_seed(0)
    return _randomise_biases(TokenClassifier([AFTFull(MAX_SEQ, DIM, HIDDEN), TransposedBias(MAX_SEQ, DIM, HIDDEN)]))


def pasted(layer: nn.Module) -> nn.Module:
    """``layer`` as a paste of its class's source into a user's module makes it: the same
    methods and parameters, class ``My<Name>`` in ``my_project.layers``, a plain nn.Module."""
    cls = type(layer)
    body = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    body.update(__module__="my_project.layers", __qualname__=f"My{cls.__name__}")
    layer.__class__ = type(f"My{cls.__name__}", (nn.Module,), body)
    return layer


def _paste_all(model: nn.Module, name: str) -> nn.Module:
    layers = [m for m in model.modules() if type(m).__name__ == name]
    assert layers, f"no {name} in {type(model).__name__}"
    for layer in layers:
        pasted(layer)
    return model


def pasted_comvex_classifier() -> nn.Module:
    """comvex's AFT-full classifier with its two AFTGeneral layers pasted."""
    return _paste_all(comvex_classifier(), "AFTGeneral")


def pasted_labml_classifier() -> nn.Module:
    """labml-nn's AFTLocal (all-True mask) in the user's block, both layers pasted."""
    return _paste_all(labml_classifier(), "AFTLocal")
