"""The layer swap against the public packages' own outputs and AFT.md's float64 formula."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aft_export.byo.swap import apply_swap, find_layers, plan_swap
from aft_export.byo.verify import verify_swap
from aft_export.errors import AFTExportError
from aft_export.layers import AFTConv, AFTFull, AFTLocal, AFTSimple
from tests.byo import user_models
from tests.byo.publicpkgs import comvex_aft, need

B, T, DIM, HIDDEN, MAX_SEQ = 3, 12, 20, 12, 16  # T < max_seqlen, hidden != dim


def aft_f64(q, k, v, w):
    """AFT.md, term by term in float64: sigmoid(Q) * sum exp(K[t'] + w[t,t']) V[t'] / sum exp(K[t'] + w[t,t']).
    q, k, v: (B, T, d); w: (T, T) or (T, T, d)."""
    q, k, v, w = (t.double() for t in (q, k, v, w))
    w = w[..., None] if w.dim() == 2 else w
    e = torch.exp(k[:, None, :, :] + w[None])  # (B, T, T', d)
    return torch.sigmoid(q) * (e * v[:, None]).sum(2) / e.sum(2)


def lin64(layer, x):
    return F.linear(x.double(), layer.weight.double(), None if layer.bias is None else layer.bias.double())


def window(t, s):
    i = torch.arange(t)
    return ((i[:, None] - i[None, :]).abs() < s).double()


def swapped(module, x):
    plan = plan_swap(module, x)
    return plan, apply_swap(module, plan)


def tokens(seed=0, t=T, d=DIM, scale=1.0):
    return torch.randn(B, t, d, generator=torch.Generator().manual_seed(seed)) * scale


# ---------------------------------------------------------------- aft-pytorch

@pytest.mark.parametrize("name", ["AFTFull", "AFTLocal", "AFTSimple"])
def test_aft_pytorch_layers_map_with_hidden_dim_and_short_sequences(name):
    apt = need("aft_pytorch")
    torch.manual_seed(0)
    layer = getattr(apt, name)(MAX_SEQ, DIM, HIDDEN, **({"s": 4} if name == "AFTLocal" else {})).eval()
    x = tokens()
    with torch.no_grad():
        want = layer(x)  # their own output (AFTLocal also zeroes its bias outside the window here)
        plan, ours = swapped(layer, x)
        got = ours(x)
    assert [r.action for r in plan.layers] == ["mapped"] and type(ours).__name__ == name
    assert (ours.to_q.in_features, ours.to_q.out_features, ours.proj.out_features) == (DIM, HIDDEN, DIM)
    assert (got - want).abs().max().item() < 1e-5
    if name == "AFTSimple":
        w = torch.zeros(T, T)
    else:
        w = layer.wbias[:T, :T].detach() * (window(T, 4) if name == "AFTLocal" else 1.0)
    ref = lin64(layer.project, aft_f64(lin64(layer.to_q, x), lin64(layer.to_k, x), lin64(layer.to_v, x), w))
    assert (got.double() - ref).abs().max().item() < 1e-5


def test_aft_pytorch_overflow_becomes_finite_and_matches_the_formula():
    apt = need("aft_pytorch")
    torch.manual_seed(0)
    layer = apt.AFTFull(MAX_SEQ, DIM, HIDDEN).eval()
    with torch.no_grad():
        layer.to_k.bias.fill_(95.0)  # K ~ 95: exp(K) overflows fp32 (max ~3.4e38 = e^88.7)
    x = tokens()
    with torch.no_grad():
        want = layer(x)
        _, ours = swapped(layer, x)
        got = ours(x)
    assert not torch.isfinite(want).all()  # the original overflows ...
    assert torch.isfinite(got).all()  # ... ours does not
    ref = lin64(layer.project, aft_f64(lin64(layer.to_q, x), lin64(layer.to_k, x), lin64(layer.to_v, x),
                                       layer.wbias[:T, :T].detach()))  # fmt: skip
    assert (got.double() - ref).abs().max().item() < 1e-4
    report = verify_swap(layer, ours, torch.cat([x, x]))
    assert report.passed and report.original_nonfinite_images == 2 * B and report.swapped_nonfinite_values == 0


def test_verify_swap_fails_a_wrong_mapping():
    apt = need("aft_pytorch")
    torch.manual_seed(0)
    layer = apt.AFTFull(MAX_SEQ, DIM, HIDDEN).eval()
    x = tokens()
    _, ours = swapped(layer, x)
    with torch.no_grad():
        ours.w.add_(0.5 * torch.randn(T, T))  # a bias mapped wrongly
    report = verify_swap(layer, ours, x)
    assert not report.passed and report.max_abs > 1e-3


def test_aft_pytorch_conv_stub_is_refused_by_path():
    model = nn.Sequential(nn.Identity(), need("aft_pytorch.aft_pytorch").AFTConv())  # not re-exported
    with pytest.raises(AFTExportError, match=r"1 \(aft-pytorch AFTConv\): .*stub"):
        plan_swap(model, tokens())


def test_a_layer_seeing_two_token_counts_is_refused():
    apt = need("aft_pytorch")

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = apt.AFTSimple(MAX_SEQ, DIM, HIDDEN)

        def forward(self, x):
            return self.mix(x).mean(1) + self.mix(x[:, :4]).mean(1)

    with pytest.raises(AFTExportError, match=r"mix \(aft-pytorch AFTSimple\) is called with inputs of shapes"):
        plan_swap(Twice().eval(), tokens())


def test_max_seqlen_shorter_than_the_sequence_names_the_layer():
    apt = need("aft_pytorch")
    model = nn.Sequential(nn.Identity(), apt.AFTFull(8, DIM, HIDDEN)).eval()
    with pytest.raises(AFTExportError, match=r"fails on an input of shape \(3, 12, 20\) in AFT layer 1 "
                                             r"\(aft-pytorch AFTFull\)"):  # fmt: skip
        plan_swap(model, tokens())


def test_a_subclass_that_overrides_forward_is_refused():
    apt = need("aft_pytorch")

    class Tweaked(apt.AFTSimple):
        def forward(self, x):
            return 2 * super().forward(x)

    class Kept(apt.AFTSimple):
        pass

    with pytest.raises(AFTExportError, match="Tweaked subclasses aft-pytorch AFTSimple and overrides forward"):
        plan_swap(Tweaked(MAX_SEQ, DIM, HIDDEN).eval(), tokens())
    assert plan_swap(Kept(MAX_SEQ, DIM, HIDDEN).eval(), tokens()).aft_layers == 1


# ---------------------------------------------------------------- comvex

def test_comvex_full_maps_to_the_rank_factorised_bias():
    aft = comvex_aft()
    torch.manual_seed(0)
    layer = aft.AFTFull(dim=DIM, max_seq_len=T, hidden_dim=HIDDEN, position_bias_dim=5).eval()
    with torch.no_grad():
        layer.u.normal_(0, 1)
        layer.v.normal_(0, 1)
    x = tokens()
    with torch.no_grad():
        want = layer(x)
        _plan, ours = swapped(layer, x)
        got = ours(x)
    assert type(ours) is AFTFull and ours.rank == 5 and ours.to_q.bias is None  # comvex: use_bias=False
    assert (got - want).abs().max().item() < 1e-5
    w = (layer.u @ layer.v.t()).detach()
    ref = lin64(layer.out_linear, aft_f64(lin64(layer.Q, x), lin64(layer.K, x), lin64(layer.V, x), w))
    assert (got.double() - ref).abs().max().item() < 1e-5


def test_comvex_full_below_max_seq_len_cannot_run_and_says_where():
    aft = comvex_aft()
    model = nn.Sequential(aft.AFTFull(dim=DIM, max_seq_len=MAX_SEQ, hidden_dim=HIDDEN)).eval()
    with pytest.raises(AFTExportError, match=r"in AFT layer 0 \(comvex AFTGeneral\): RuntimeError"):
        plan_swap(model, tokens())


@pytest.mark.parametrize("mode, message", [
    ("local", "mask_fill_, which does not exist"),
    ("simple", r"sigmoid\(Q\) \* softmax_t\(K\) \* V with no sum over positions"),
])  # fmt: skip
def test_comvex_local_and_simple_are_refused_with_their_paths(mode, message):
    aft = comvex_aft()
    model = aft.AFTWithLinearClassifier(user_models.comvex_config(mode)).eval()
    with pytest.raises(AFTExportError, match=rf"layers.0.attn_block \(comvex AFTGeneral\): .*{message}.*; "
                                             rf"layers.1.attn_block \(comvex AFTGeneral\)"):  # fmt: skip
        plan_swap(model, torch.randn(2, 3, 32, 32))


def test_comvex_simple_really_is_not_aft_simple():
    """The refusal's claim, checked: comvex's output differs from AFT-simple's formula."""
    aft = comvex_aft()
    torch.manual_seed(0)
    layer = aft.AFTSimple(dim=DIM, max_seq_len=T, hidden_dim=HIDDEN).eval()
    x = tokens()
    ref = lin64(layer.out_linear, aft_f64(lin64(layer.Q, x), lin64(layer.K, x), lin64(layer.V, x), torch.zeros(T, T)))
    with torch.no_grad():
        assert (layer(x).double() - ref).abs().max().item() > 1e-2


def conv_bias(kernel, grid):
    """AFT-conv as a dense per-head bias (T, T, heads): kernel value inside the window, 0 outside."""
    _heads, ks, _ = kernel.shape
    h, w = grid
    r, c = torch.arange(h * w) // w, torch.arange(h * w) % w
    dr, dc = r[None, :] - r[:, None] + ks // 2, c[None, :] - c[:, None] + ks // 2  # (T, T') kernel indices
    inside = (dr >= 0) & (dr < ks) & (dc >= 0) & (dc < ks)
    dense = kernel[:, dr.clamp(0, ks - 1), dc.clamp(0, ks - 1)]  # (heads, T, T')
    return (dense * inside).permute(1, 2, 0).double()


def test_comvex_conv_as_built_maps_and_a_trained_one_is_refused():
    aft = comvex_aft()
    torch.manual_seed(0)
    grid, heads = (4, 4), 4
    layer = aft.AFTConv(dim=DIM, heads=heads, local_window_size=3, max_seq_len=16, hidden_dim=HIDDEN).eval()

    class Caller(nn.Module):  # comvex's AFTLayer calls it as layer(x, H, W)
        def __init__(self):
            super().__init__()
            self.attn = layer

        def forward(self, x):
            return self.attn(x, *grid)

    model = Caller().eval()
    x = tokens(t=16)
    with torch.no_grad():
        want = model(x)
        plan, ours = swapped(model, x)
        got = ours(x)
    assert plan.layers[0].to.startswith("AFTConv(") and isinstance(ours.attn.aft, AFTConv)
    assert (got - want).abs().max().item() < 1e-5
    dh = HIDDEN // heads
    k = lin64(layer.K, x).repeat_interleave(dh, dim=2)  # one K per head, shared by its channels
    w = conv_bias(torch.zeros(heads, 3, 3), grid).repeat_interleave(dh, dim=2)
    ref = lin64(layer.out_linear, aft_f64(lin64(layer.Q, x), k, lin64(layer.V, x), w))
    assert (got.double() - ref).abs().max().item() < 1e-5
    with torch.no_grad():  # trained: the shared BatchNorm gives a non-zero kernel
        layer.w_norm.weight.fill_(0.5)
    with pytest.raises(AFTExportError, match=r"attn \(comvex AFTConv\): .*convolves K \* V and K"):
        plan_swap(model, x)


def test_comvex_conv_with_an_even_kernel_is_an_unsupported_shape():
    aft = comvex_aft()
    layer = aft.AFTConv(dim=DIM, heads=4, local_window_size=2, max_seq_len=16, hidden_dim=HIDDEN).eval()
    with pytest.raises(AFTExportError, match=r"\(root\) \(comvex AFTConv\): its kernel size 2 is even"):
        plan_swap(layer, tokens(t=16))


def test_comvex_query_activation_other_than_sigmoid_is_refused():
    aft = comvex_aft()
    layer = aft.AFTFull(dim=DIM, max_seq_len=T, hidden_dim=HIDDEN, query_act_fnc_name="GELU").eval()
    with pytest.raises(AFTExportError, match="query activation is GELU, not AFT's sigmoid"):
        plan_swap(layer, tokens())


# ---------------------------------------------------------------- labml-nn

def test_labml_local_with_an_all_true_mask_maps():
    model = user_models.labml_classifier().eval()
    x = torch.randn(4, 3, 32, 32)
    plan, ours = swapped(model, x)
    assert [r.path for r in plan.layers] == ["blocks.0.mixer.aft", "blocks.1.mixer.aft"]
    layer = model.blocks[0].mixer.aft
    assert plan.layers[0].to == "AFTLocal(dim=24, T=16, window=3, sequence-first)" and layer.pos_bias.shape[0] > 16
    assert verify_swap(model, ours, x).max_abs < 1e-5
    z = tokens(t=16, d=24)  # the layer alone vs the formula, sequence-first
    with torch.no_grad():
        got = ours.blocks[0].mixer.aft(query=z.transpose(0, 1), key=z.transpose(0, 1), value=z.transpose(0, 1))
    w = layer.pos_bias[:16, :16].detach() * window(16, 3)
    ref = lin64(layer.output, aft_f64(lin64(layer.query, z), lin64(layer.key, z), lin64(layer.value, z), w))
    assert (got.transpose(0, 1).double() - ref).abs().max().item() < 1e-5


def test_labml_local_with_a_causal_mask_is_refused_by_path():
    with pytest.raises(AFTExportError, match=r"blocks.0.mixer.aft \(labml-nn AFTLocal\) is called with a causal mask"):
        plan_swap(user_models.labml_classifier(causal=True).eval(), torch.randn(2, 3, 32, 32))


def test_labml_local_without_a_mask_cannot_run_and_says_where():
    labml = need("labml_nn.transformers.aft")

    class NoMask(nn.Module):
        def __init__(self):
            super().__init__()
            self.aft = labml.AFTLocal(DIM, MAX_SEQ, 3)

        def forward(self, x):
            return self.aft(query=x, key=x, value=x)

    with pytest.raises(AFTExportError, match=r"in AFT layer aft \(labml-nn AFTLocal\)"):
        plan_swap(NoMask().eval(), tokens())


# ---------------------------------------------------------------- ours, and none

def test_our_layers_are_recognised_wherever_they_sit():
    model = user_models.own_architecture().eval()
    layers = find_layers(model)
    assert {p: type(m) for p, m in layers.items()} == {"conv_mix": AFTConv, "full": AFTFull, "local": AFTLocal,
                                                        "simple": AFTSimple}  # fmt: skip
    plan = plan_swap(model, torch.randn(2, 3, 32, 32))
    assert plan.aft_layers == 4 and not plan.replacements
    assert [r.action for r in plan.layers] == ["ours"] * 4


def test_no_aft_layer_plans_nothing():
    plan = plan_swap(user_models.plain_cnn().eval(), torch.randn(2, 3, 32, 32))
    assert plan.aft_layers == 0 and plan.layers == []


def test_every_refused_layer_is_named_in_one_error():
    aft = comvex_aft()
    model = nn.ModuleDict({"a": need("aft_pytorch.aft_pytorch").AFTConv(), "b": nn.Sequential(aft.AFTLocal(dim=8, max_seq_len=4, hidden_dim=8,
                                                                               local_window_size=2))})  # fmt: skip
    with pytest.raises(AFTExportError) as err:
        plan_swap(model, tokens())
    text = str(err.value)
    assert "a (aft-pytorch AFTConv)" in text and "b.0 (comvex AFTGeneral)" in text and "\n" not in text


def test_layer_variants_by_class_before_any_probe():
    from aft_export.byo.swap import layer_variants

    assert layer_variants(user_models.own_architecture()) == ["conv", "full", "local", "simple"]
    assert layer_variants(user_models.aft_pytorch_classifier()) == ["full", "local", "simple"]
    assert layer_variants(user_models.comvex_classifier()) == ["full"]
    assert layer_variants(user_models.plain_cnn()) == []


# ---------------------------------------------------------------- the registry

def test_every_public_layer_is_one_entry_that_maps_or_refuses():
    """One entry per public layer: a builder, or a refusal for every layer of its class;
    what it becomes is one of ours; its package is named; a second entry for it is refused."""
    from aft_export.byo.public import PUBLIC_LAYERS, PublicLayer, register

    assert {(e.module, e.name) for e in PUBLIC_LAYERS.values()} == set(PUBLIC_LAYERS)
    for entry in PUBLIC_LAYERS.values():
        assert entry.ours in ("AFTFull", "AFTLocal", "AFTSimple", "AFTConv")
        assert entry.source.split()[0] in ("aft-pytorch", "comvex", "labml-nn")
        if entry.build is None:
            assert entry.refusal(nn.Module())  # refused whatever its state
    first = next(iter(PUBLIC_LAYERS.values()))
    with pytest.raises(ValueError, match="registered twice"):
        register(first)
    with pytest.raises(ValueError, match="no package"):
        register(PublicLayer("elsewhere.aft", "AFTFull", "AFTFull", first.build))
    assert len(PUBLIC_LAYERS) == 7


def test_a_subclass_of_a_public_layer_finds_its_entry():
    """By class through the MRO: a user's subclass that keeps forward maps as its base."""
    apt = need("aft_pytorch")

    class Mine(apt.AFTSimple):
        pass

    torch.manual_seed(0)
    layer = Mine(MAX_SEQ, DIM, HIDDEN).eval()
    plan = plan_swap(layer, tokens())
    assert [(r.source, r.action) for r in plan.layers] == [("aft-pytorch AFTSimple", "mapped")]
