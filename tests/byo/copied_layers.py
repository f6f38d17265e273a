"""AFT layers as users copy them into their own code, for recognition by what a layer computes.

``AFTFull`` has the parameter names and shapes of aft-pytorch's ``AFTFull`` (aft-pytorch
0.2.2, MIT licence, https://github.com/rish-16/aft-pytorch: ``to_q``, ``to_k``, ``to_v``
``dim -> hidden_dim``, ``project`` back, a ``(max_seqlen, max_seqlen)`` ``wbias``) and
computes what it computes, AFT-full (docs/AFT.md), with its raw ``exp``. It is written here
from the formula, not copied, and lives in another module under no public path, as a
user's copy would. ``TransposedBias`` has the same parameters but mixes with the
transposed bias: the same shapes, another computation (a look-alike).
"""

from __future__ import annotations

import torch
from torch import nn

from tests.byo.user_models import DIM, HIDDEN, MAX_SEQ, TokenClassifier, _randomise_biases


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
