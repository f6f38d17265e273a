"""Find the AFT layers in any ``nn.Module`` and swap public implementations for ours.

The exporter turns each of *our* layers (:mod:`aft_export.layers.aft`) into one
``com.aft`` node computing the stable, factorised operator. A model trained with other
code has other layers; this module

1. **finds** every AFT mixing layer: ours wherever they sit, and those of the public
   packages ``aft-pytorch``, ``comvex`` (``comvex.aft``) and ``labml-nn``
   (``labml_nn.transformers.aft``), recognised by class (the packages need not be
   importable here); and, **by what they compute**, any module with the parameter names
   and shapes of one of those layers (aft-pytorch's ``to_q``, ``to_k``, ``to_v``,
   ``project`` and ``wbias``; comvex's ``Q``, ``K``, ``V``, ``out_linear``, ``u`` and ``v``;
   labml-nn's ``query``, ``key``, ``value``, ``output``, ``pos_bias`` and ``local_mask``),
   whatever its class or module path (a copy of ``AFTFull`` in the user's own file): our
   layer built from it must give its outputs on the calls the probe saw and on seeded
   random tokens (within 1e-4), or it is a *look-alike* and stays as it is
   (plain ONNX ops), reported with the difference;
2. **refuses by module path** what cannot become our operator, with the reason;
3. **probes** the model once on an example batch to learn what each layer sees
   (sequence length, token grid, masks), since a public layer's parameters say only
   its maximum sequence length;
4. **builds** our layer for each public one (its entry in :data:`aft_export.byo.public.PUBLIC_LAYERS`,
   which also holds its refusal), mapping the weights (``hidden_dim != dim``,
   bias layouts, head layouts, ``T < max_seqlen``), and installs it in a copy of the
   model, in an adapter where their calling convention differs from ours;
5. the swapped copy is then **verified** against the original
   (:mod:`aft_export.byo.verify`): logits within 1e-4 where the original is finite,
   finite where the original overflows.

What each public layer maps to, and what is refused (read from the packages' code):

=============================  ============================================================
aft-pytorch ``AFTFull``        ``AFTFull`` (dense bias ``wbias[:T, :T]``)
aft-pytorch ``AFTLocal``       ``AFTLocal`` (window ``s`` on the 1-D sequence)
aft-pytorch ``AFTSimple``      ``AFTSimple``
aft-pytorch ``AFTConv``        refused: a stub without parameters whose forward raises
comvex ``AFTFull``             ``AFTFull`` with rank ``position_bias_dim`` (``u v^T``)
comvex ``AFTSimple``           refused: computes ``sigmoid(Q) * softmax_t(K) * V`` with no
                               sum over positions, which is not AFT-simple
comvex ``AFTLocal``            refused: calls ``Tensor.mask_fill_``, which does not exist
comvex ``AFTConv``             ``AFTConv`` while its kernel ``exp(w) - 1`` is zero (as
                               built); refused otherwise: its windowed term convolves
                               ``K * V``, not ``exp(K) * V``, so it is not AFT-conv
labml-nn ``AFTLocal``          ``AFTLocal`` where called with an all-True mask and one
                               input for query, key and value; refused where causal
=============================  ============================================================
"""

from __future__ import annotations

import contextlib
import copy
import io
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from aft_export.byo.public import LAYOUTS, PUBLIC_LAYERS, Call, PublicLayer, public_class
from aft_export.errors import AFTExportError, said
from aft_export.layers.aft import VARIANTS, AFTConv, AFTLayer, variant_class
from aft_export.verify.compare import SWAP_MAX_ABS, SwapAgreement, swap_agreement


@dataclass
class LayerReport:
    """One AFT layer found in the model and what became of it."""

    path: str
    source: str  # "aft-export AFTFull", "aft-pytorch AFTLocal", "comvex AFTGeneral (full)", ...
    action: str  # "ours" (kept), "mapped" (swapped for ours), "unused" (never called), "look-alike" (kept as it is)
    to: str = ""  # our layer, e.g. "AFTFull(dim=24, hidden=16, T=16)"
    reason: str = ""


@dataclass
class SwapPlan:
    layers: list[LayerReport] = field(default_factory=list)
    replacements: dict[str, nn.Module] = field(default_factory=dict)

    @property
    def aft_layers(self) -> int:
        """Layers that become one com.aft node each: ours, kept or mapped."""
        return sum(r.action in ("ours", "mapped") for r in self.layers)

    @property
    def variants(self) -> list[str]:
        """full, local, simple, conv: of the layers that become com.aft nodes ("AFTFull(...)": full)."""
        return sorted({_variant(r.to.split("(")[0]) for r in self.layers if r.action in ("ours", "mapped")})

    def to_dict(self) -> dict:
        return {"aft_layers": self.aft_layers, "layers": [asdict(r) for r in self.layers]}


# ----------------------------------------------------------------------------
# Recognising layers by their parameters (then proving them by what they compute)
# ----------------------------------------------------------------------------

def _layout(module: nn.Module) -> list[PublicLayer]:
    """The public layers whose parameter layout ``module`` has, as registry entries, most
    specific first; [] if none. Each package's layout is one entry of
    :data:`aft_export.byo.public.LAYOUTS`: the names of its q, k, v (``d -> h``) and output
    (``h -> d``) projections, and which of its layers the other parameters make. Ours and the
    public classes recognised by class are not asked."""
    if isinstance(module, AFTLayer) or public_class(module) is not None:
        return []
    for layout in LAYOUTS:
        linears = [getattr(module, n, None) for n in layout.projections]
        if not all(isinstance(m, nn.Linear) for m in linears):
            continue
        q, k, v, out = linears
        d, h = q.in_features, q.out_features
        if any((m.in_features, m.out_features) != (d, h) for m in (k, v)) or \
                (out.in_features, out.out_features) != (h, d):  # fmt: skip
            continue
        expected = {f"{n}.{w}" for n, m in zip(layout.projections, linears) for w in ("weight", "bias")
                    if getattr(m, w, None) is not None}  # fmt: skip
        params = dict(module.named_parameters())  # only here: every module of a model is asked
        found = layout.layers(module, params, set(params) - expected)
        if found:
            return [PUBLIC_LAYERS[layout.package, name] for name in found]
    return []


def _prove(module: nn.Module, ours: nn.Module, calls: list[Call], seed: int = 0) -> SwapAgreement:
    """``ours`` against ``module`` on the calls the probe recorded and, for a one-tensor
    call, seeded random tokens of that shape: :func:`~aft_export.verify.compare.swap_agreement`
    (failed, with the error, where ours cannot take or give what theirs does)."""
    inputs = [(c.args, c.kwargs) for c in calls[:2]]
    first = calls[0]
    if len(first.args) == 1 and not first.kwargs and isinstance(first.args[0], Tensor):
        x = first.args[0]
        noise = torch.randn((8, *x.shape[1:]), generator=torch.Generator().manual_seed(seed), dtype=x.dtype)
        inputs.append(((noise,), {}))
    want, got = [], []
    try:
        with torch.no_grad(), quiet_stdout():
            for args, kwargs in inputs:  # one row per leading index (batch, or tokens sequence-first)
                theirs, mine = module(*args, **kwargs).float(), ours(*args, **kwargs).float()
                want.append(theirs.reshape(len(theirs), -1))
                got.append(mine.reshape(len(theirs), -1))
        return swap_agreement(torch.cat(want).numpy(), torch.cat(got).numpy(), SWAP_MAX_ABS)
    except Exception as exc:  # noqa: BLE001 - their layer takes or returns something ours does not
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return SwapAgreement.failed(f"{type(exc).__name__}: {first_line}")


def _variant(layer: str) -> str:
    """full, local, simple or conv, of our layer's name ("AFTFull")."""
    return layer.removeprefix("AFT").lower()


def _our_desc(module: AFTLayer, call: Call | None) -> str:
    name = type(module).__name__
    base = getattr(variant_class(module), "__name__", name)
    dims = f"dim={module.to_q.in_features}"
    if isinstance(module, AFTConv):
        return f"{base}({dims}, heads={module.heads}, kernel={module.kernel_size})" + (
            "" if name == base else f" as {name}")
    t = call.args[0].shape[1] if call and call.args and isinstance(call.args[0], Tensor) else "?"
    return f"{base}({dims}, T={t})" + ("" if name == base else f" as {name}")


# ----------------------------------------------------------------------------
# Probe, plan, apply
# ----------------------------------------------------------------------------


@contextlib.contextmanager
def quiet_stdout():
    """Some public layers print on every call (comvex's AFTConv prints shapes per head)."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def _probe(model: nn.Module, layers: dict[str, nn.Module], example: Tensor) -> dict[str, list[Call]]:
    """Run the model once; record each layer's calls. A failure names the layer it happened in."""
    calls: dict[str, list[Call]] = {p: [] for p in layers}
    running: list[str] = []
    handles = []
    for path, module in layers.items():
        def pre(mod, args, kwargs, path=path):
            calls[path].append(Call(args, dict(kwargs)))
            running.append(path)

        def post(mod, args, kwargs, out, path=path):
            running.pop()

        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(module.register_forward_hook(post, with_kwargs=True))
    try:
        with torch.no_grad(), quiet_stdout():
            model(example)
    except Exception as exc:  # noqa: BLE001 - the user's model raised on the example input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        where = ""
        if running:
            path = running[-1]
            where = f" in AFT layer {path} ({_describe_module(layers[path])})"
        raise AFTExportError(
            said("the model fails on an input of shape {value}{where}: {value2}: {first}; check {input_size} and "
                 "that the layer's shape is one it supports", None, value=tuple(example.shape), where=where,
                 value2=type(exc).__name__, first=first)
        ) from exc
    finally:
        for h in handles:
            h.remove()
    return calls


def _describe_module(module: nn.Module) -> str:
    pub = public_class(module)
    if pub:
        return pub[0].source
    if isinstance(module, AFTLayer):
        return f"aft-export {type(module).__name__}"
    cls = type(module)
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if cls.__module__.startswith("_aft_user_") and file:  # loaded from a file by a model_def FILE.py:FACTORY
        return f"{cls.__qualname__} in {Path(file).name}"
    return f"{cls.__module__}.{cls.__qualname__}"


def find_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Every AFT mixing layer in ``model``: ours and the public packages' by class, and any
    module with the parameter layout of a public layer (:func:`_layout`), to be proven.

    Layers inside a found layer are not searched (ours hold only Linears)."""
    found: dict[str, nn.Module] = {}
    for path, module in model.named_modules():
        if any(path.startswith(p + ".") for p in found):
            continue
        if isinstance(module, AFTLayer) or public_class(module) is not None or _layout(module):
            found[path] = module
    return found


def layer_variants(model: nn.Module) -> list[str]:
    """The AFT variants of the layers in ``model``, by class alone (before any probe)."""
    found = set()
    for module in find_layers(model).values():
        pub = public_class(module)
        if pub is None and not isinstance(module, AFTLayer):
            continue  # recognised by its parameters only: its variant is known once it is proven
        if pub is None:
            name = getattr(variant_class(module), "__name__", "")
        else:
            entry = pub[0]
            name = entry.variant(module) if entry.variant else entry.ours
        if name in {c.__name__ for c in VARIANTS}:
            found.add(_variant(name))
    return sorted(found)


def plan_swap(model: nn.Module, example: Tensor) -> SwapPlan:
    """Find, refuse, probe and build; nothing in ``model`` changes. Raises one error that
    names every refused layer."""
    layers = find_layers(model)
    plan = SwapPlan()
    refusals = []
    for path, module in layers.items():
        pub = public_class(module)
        if pub is None:
            continue
        entry, cls = pub
        why = entry.refusal(module)
        if not why and type(module) is not cls and type(module).forward is not cls.forward:
            why = f"{type(module).__name__} subclasses {entry.source} and overrides forward"
        if why:
            refusals.append(f"{path or '(root)'} ({entry.source}): {why}")
    if refusals:
        raise AFTExportError("cannot export these AFT layers as com.aft: " + "; ".join(refusals))
    calls = _probe(model, layers, example)
    for path, module in layers.items():
        pub = public_class(module)
        source = _describe_module(module)
        seen = calls[path]
        if not seen:
            plan.layers.append(LayerReport(path, source, "unused", reason="never called by forward"))
            continue
        if isinstance(module, AFTLayer):
            plan.layers.append(LayerReport(path, source, "ours", _our_desc(module, seen[0])))
            continue
        shapes = {tuple(x.shape) for c in seen for x in list(c.args[:1]) + [c.kwargs.get("query")]
                  if isinstance(x, Tensor)}  # fmt: skip
        if pub is None:  # by its parameters: mapped only where ours computes what it computes
            _by_layout(plan, path, module, source, seen, several=len(shapes) > 1)
            continue
        if len(shapes) > 1:
            raise AFTExportError(f"AFT layer {path} ({source}) is called with inputs of shapes {sorted(shapes)}; "
                                 f"one com.aft node per layer needs one token count")  # fmt: skip
        replacement, desc = pub[0].build(module, f"AFT layer {path} ({source})", seen[0])
        plan.replacements[path] = replacement
        plan.layers.append(LayerReport(path, source, "mapped", desc.split(" as ")[0]))
    return plan


def _by_layout(plan: SwapPlan, path: str, module: nn.Module, source: str, seen: list[Call],
               several: bool = False) -> None:  # fmt: skip
    """A module with a public layer's parameter layout: each candidate layer (aft-pytorch's
    local before full, as their parameters are the same) is built and proven on the recorded
    calls; the first that agrees is mapped, else the module is a look-alike, kept as it is."""
    candidates = _layout(module)
    if several:
        plan.layers.append(LayerReport(path, source, "look-alike", candidates[-1].source,
                                       reason="it is called with several token counts; one com.aft node per "
                                              "layer needs one"))  # fmt: skip
        return
    tried = []
    for entry in candidates:
        try:
            replacement, desc = entry.build(module, f"AFT layer {path} ({entry.source})", seen[0])
        except AFTExportError as exc:
            tried.append((entry, SwapAgreement.failed(str(exc))))
            continue
        proof = _prove(module, replacement, seen)
        if proof.passed:
            plan.replacements[path] = replacement
            proven = (f"{source} (the parameters of {entry.source}, proven on {proof.inputs} "
                      f"inputs: max abs {proof.max_abs:.2g})")
            plan.layers.append(LayerReport(path, proven, "mapped", desc.split(" as ")[0]))
            return
        tried.append((entry, proof))
    entry, proof = min(tried, key=lambda item: item[1].max_abs)
    ours = entry.ours
    why = proof.error or (f"max abs difference {proof.max_abs:.3g} from our {ours} on "
                          f"{proof.inputs} probe inputs (limit {proof.atol:g})"
                          + (f", {proof.swapped_nonfinite_values} non-finite values"
                             if proof.swapped_nonfinite_values else ""))  # fmt: skip
    plan.layers.append(LayerReport(path, source, "look-alike", entry.source, reason=why))


def apply_swap(model: nn.Module, plan: SwapPlan) -> nn.Module:
    """A deep copy of ``model`` with the plan's layers installed (the original is untouched)."""
    swapped = copy.deepcopy(model)
    for path, replacement in plan.replacements.items():
        if not path:
            swapped = replacement
            continue
        parent_path, _, name = path.rpartition(".")
        parent = swapped.get_submodule(parent_path) if parent_path else swapped
        setattr(parent, name, copy.deepcopy(replacement))
    return swapped.eval()
