"""The ``com.aft`` ONNX ops: one node per AFT layer, with a model-local function body.

How a layer becomes one node (torch 2.13 / onnxscript 0.7):

* the layer calls an ``aft::*`` custom op (:mod:`aft_export.layers.ops`);
* the exporter's ``custom_translation_table`` maps that op to a small Python
  translation that emits ``com.aft::AFT<Variant>`` as a plain node. The exporter
  inlines every local *function* it sees (its version-conversion pass runs an inliner
  unconditionally), so the node must not be a function call while it exports;
  emitting it needs an ONNX schema, which :func:`registered_schemas` registers for
  the duration of the export only;
* afterwards :func:`attach_functions` gives each layer its own model-local function,
  named after the variant and the layer (``com.aft::AFTFull.blocks.0.mixer``), whose
  body nodes and values are named after the layer too (``blocks.0.mixer/Exp_3``).
  ONNX Runtime runs the file unmodified; TensorRT's parser inlines each body under
  those names, so every layer's tensors can be looked up by name
  (``IParser.get_layer_output_tensor``) and TensorRT's layer names say which AFT layer
  they belong to.

Why one function per layer, and not one per variant (or overloads of one name): TensorRT's
parser keys model-local functions by name alone (onnx-tensorrt ModelImporter.cpp
``importLocalFunctions``: ``localFunctions().insert({function.name(), function})``, the
first of a name wins; domain and ``overload`` are not read) and names the inlined layers
after the body's node names. A body shared by every layer therefore gave the same node
names to every layer ("A node named n30 already exists, the output tensors of this new
instance will not be queryable"), and overloads of one name would run the first body for
every node (checked with TensorRT-RTX 1.7's parser: an overload computing Sigmoid ran as
the first overload's Relu). The price: the op type names the layer, so a TensorRT plugin
cannot take every layer of a variant over by one name; the variant is the op type's
first dotted part (:func:`aft_export.artifacts.graph.aft_kind`) and the node's ``aft.module_type``.

Every body is the factorised, max-subtracted computation of shared/docs/AFT.md:
no intermediate has ``B*T*T*d`` elements.
"""

from __future__ import annotations

import contextlib

import onnx
import onnxscript
import torch
from onnx.defs import OpSchema
from onnxscript import FLOAT
from onnxscript import opset18 as op

from aft_export.artifacts.graph import DOMAIN, aft_kind, node_module
from aft_export.layers import ops  # noqa: F401  (registers torch.ops.aft.*)
from aft_export.options import MIN_OPSET

VERSION = 1
_aft = onnxscript.values.Opset(domain=DOMAIN, version=VERSION)
# Each op's version in the com.aft domain: AFTLocal 2 takes the banded bias
# (T, 2 sr - 1, 2 sc - 1) and a ``grid`` attribute (version 1 took a dense (T, T) bias).
# A model imports the domain at the highest; an op resolves to its newest version at or below it.
OP_VERSIONS = {"AFTFull": 1, "AFTLocal": 2, "AFTSimple": 1, "AFTConv": 1}
DOMAIN_VERSION = max(OP_VERSIONS.values())


@onnxscript.script(_aft, default_opset=op)
def AFTFull(q: FLOAT, k: FLOAT, v: FLOAT, w: FLOAT) -> FLOAT:
    """q, k, v: (B, T, d); w: (T, T). Returns (B, T, d)."""
    k_max = op.ReduceMax(k, op.Constant(value_ints=[1]), keepdims=1)  # (B, 1, d)
    ek = op.Exp(op.Sub(k, k_max))
    w_max = op.ReduceMax(w, op.Constant(value_ints=[1]), keepdims=1)  # (T, 1)
    ew = op.Exp(op.Sub(w, w_max))
    # numerator and denominator as one product: ew @ [eK * V | eK], then split (ew is
    # packed once, one larger MatMul; each output column is the same sum as before)
    both = op.MatMul(ew, op.Concat(op.Mul(ek, v), ek, axis=-1))  # (B, T, 2d)
    # (B, T, 2, d) and a Gather of each half: static shapes for shape inference, and no
    # Split (TensorRT 8 wants its sizes as weights)
    halves = op.Reshape(both, op.Constant(value_ints=[0, 0, 2, -1]))
    num = op.Gather(halves, op.Constant(value_int=0), axis=2)
    den = op.Gather(halves, op.Constant(value_int=1), axis=2)
    return op.Mul(op.Sigmoid(q), op.Div(num, den))


@onnxscript.script(_aft, default_opset=op)
def AFTSimple(q: FLOAT, k: FLOAT, v: FLOAT) -> FLOAT:
    """q, k, v: (B, T, d). A per-channel softmax over positions, then pooling."""
    k_max = op.ReduceMax(k, op.Constant(value_ints=[1]), keepdims=1)
    ek = op.Exp(op.Sub(k, k_max))
    num = op.ReduceSum(op.Mul(ek, v), op.Constant(value_ints=[1]), keepdims=1)  # (B, 1, d)
    den = op.ReduceSum(ek, op.Constant(value_ints=[1]), keepdims=1)
    return op.Mul(op.Sigmoid(q), op.Div(num, den))


@onnxscript.script(_aft, default_opset=op)
def AFTConv(q: FLOAT, k: FLOAT, v: FLOAT, kernel: FLOAT, heads: int) -> FLOAT:
    """q, v: (B, H, W, d); k: (B, H, W, heads); kernel: (heads, ks, ks), odd ks.

    The two Conv nodes get the layer's literal ``kernel_shape`` in :func:`attach_functions`
    (see ``_body``)."""
    k_max = op.ReduceMax(k, op.Constant(value_ints=[1, 2]), keepdims=1)  # (B, 1, 1, h)
    ek = op.Exp(op.Sub(k, k_max))  # (B, H, W, h)
    m = op.Relu(op.ReduceMax(kernel, op.Constant(value_ints=[1, 2]), keepdims=1))  # max(0, max w): (h, 1, 1)
    outside = op.Exp(op.Neg(m))  # weight of positions outside the window
    weight = op.Unsqueeze(op.Sub(op.Exp(op.Sub(kernel, m)), outside), op.Constant(value_ints=[1]))
    outside_c = op.Reshape(outside, op.Constant(value_ints=[1, -1, 1, 1]))  # (1, h, 1, 1)
    sum_axes = op.Constant(value_ints=[2, 3])

    # denominator on (B, h, H, W)
    ek_c = op.Transpose(ek, perm=[0, 3, 1, 2])
    den = op.Add(op.Conv(ek_c, weight, group=heads, auto_pad="SAME_UPPER"),
                 op.Mul(outside_c, op.ReduceSum(ek_c, sum_axes, keepdims=1)))  # fmt: skip

    # numerator on (B * dh, h, H, W): heads as channels, each with its own kernel
    h = op.Shape(k, start=3)
    v5 = op.Reshape(v, op.Concat(op.Shape(v, start=0, end=3), h, op.Constant(value_ints=[-1]), axis=0))
    ekv = op.Mul(op.Unsqueeze(ek, op.Constant(value_ints=[4])), v5)  # (B, H, W, h, dh)
    x = op.Transpose(ekv, perm=[0, 4, 3, 1, 2])  # (B, dh, h, H, W)
    x4 = op.Reshape(x, op.Concat(op.Constant(value_ints=[-1]), h, op.Shape(v, start=1, end=3), axis=0))
    num4 = op.Add(op.Conv(x4, weight, group=heads, auto_pad="SAME_UPPER"),
                  op.Mul(outside_c, op.ReduceSum(x4, sum_axes, keepdims=1)))  # fmt: skip
    num = op.Transpose(op.Reshape(num4, op.Shape(x)), perm=[0, 3, 4, 2, 1])  # (B, H, W, h, dh)
    den5 = op.Unsqueeze(op.Transpose(den, perm=[0, 2, 3, 1]), op.Constant(value_ints=[4]))  # (B,H,W,h,1)
    y = op.Reshape(op.Div(num, den5), op.Shape(v))
    return op.Mul(op.Sigmoid(q), y)


def local_function(geometry: str, opset: int) -> onnx.FunctionProto:
    """The AFTLocal (version 2) body for one grid and window, ``geometry = g<H>x<W>s<s>``.

    q, k, v: (B, T, d) with ``T = H W``; w: (T, 2 sr - 1, 2 sc - 1), the bias of each
    target for each offset of its window (``sr = min(s, H)``, ``sc = min(s, W)``), 0 for
    offsets off the grid. The banded computation of
    :func:`aft_export.layers.cores.aft_local_core`, with every tile in one batched MatMul:
    with ``m = max(0, max w)`` per target, ``A = exp(w - m) - exp(-m)`` skewed into a
    ``(R C, Lr Lc)`` matrix per tile of ``R x C`` targets (pads and reshapes), times the
    tile's halo of ``eK V`` and ``eK`` (two Gathers with literal indices), plus
    ``exp(-m)`` times their global sums. Every size is a literal: shapes are static but
    for the batch. Work ``O(T Lr Lc d)``, intermediates ``O(T d)`` (at most nine halos' worth)
    and ``O(T Lr Lc)`` for the weights (a function of the initializers only).
    """
    import numpy as np

    from aft_export.layers.cores import local_tiling

    h, wd, window = (int(x) for x in geometry[1:].replace("x", " ").replace("s", " ").split())
    sr, sc = min(window, h), min(window, wd)
    kr, kc = 2 * sr - 1, 2 * sc - 1
    (nr, rr, lr, pr, cr), (nc, cc, lc, pc, ccol) = local_tiling((h, wd), (sr, sc))
    hp, wp = (nr - 1) * rr + lr, (nc - 1) * cc + lc
    t = h * wd
    nodes: list = []
    count = [0]

    def const(values, dtype=np.int64) -> str:
        count[0] += 1
        name = f"c{count[0]}"
        arr = np.asarray(values, dtype=dtype)
        nodes.append(onnx.helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(arr, name)))
        return name

    def node(op_type, inputs, **attrs) -> str:
        count[0] += 1
        name = f"{op_type.lower()}{count[0]}"
        nodes.append(onnx.helper.make_node(op_type, list(inputs), [name], **attrs))
        return name

    def skew(x, lead, r, k, crop, length):
        """(*lead, r, k) -> (*lead, r, length): out[.., a, a + j - crop] = x[.., a, j]"""
        full = r + k - 1
        x = node("Pad", [x, const([0] * (len(lead) + 2) + [0] * (len(lead) + 1) + [full + 1 - k])])
        x = node("Reshape", [x, const([*lead, r * (full + 1)])])
        x = node("Slice", [x, const([0]), const([r * full]), const([-1])])
        x = node("Reshape", [x, const([*lead, r, full])])
        if crop or length != full:
            x = node("Slice", [x, const([crop]), const([crop + length]), const([-1])])
        return x

    # eK V and eK, stabilised by the max of K over positions
    k_max = node("ReduceMax", ["k", const([1])], keepdims=1)
    ek = node("Exp", [node("Sub", ["k", k_max])])
    x = node("Concat", [node("Mul", [ek, "v"]), ek], axis=2)  # (B, T, 2d)
    xsum = node("Reshape", [node("ReduceSum", [x, const([1])], keepdims=0), const([-1])])  # (B * 2d,)
    xg = node("Transpose", [node("Reshape", [x, const([0, h, wd, -1])])], perm=[1, 2, 0, 3])  # (H, W, B, 2d)
    xg = node("Reshape", [xg, const([h, wd, -1])])  # (H, W, N)
    if (hp, wp) != (h, wd):
        xg = node("Pad", [xg, const([pr, pc, 0, hp - h - pr, wp - wd - pc, 0])])
    rows = np.arange(nr)[:, None] * rr + np.arange(lr)  # (nr, Lr): each tile row's halo
    cols = np.arange(nc)[:, None] * cc + np.arange(lc)
    halo = node("Gather", [node("Gather", [xg, const(rows)], axis=0), const(cols)], axis=2)  # (nr, Lr, nc, Lc, N)
    halo = node("Reshape", [node("Transpose", [halo], perm=[0, 2, 1, 3, 4]), const([nr, nc, lr * lc, -1])])

    # the weights: exp(w - m) - exp(-m), skewed onto each tile's halo
    m = node("Relu", [node("ReduceMax", ["w", const([1, 2])], keepdims=1)])  # (T, 1, 1)
    g = node("Exp", [node("Neg", [m])])  # weight of every position outside the window
    a = node("Reshape", [node("Sub", [node("Exp", [node("Sub", ["w", m])]), g]), const([h, wd, kr, kc])])
    if (nr * rr, nc * cc) != (h, wd):
        a = node("Pad", [a, const([0, 0, 0, 0, nr * rr - h, nc * cc - wd, 0, 0])])
    a = node("Transpose", [node("Reshape", [a, const([nr, rr, nc, cc, kr, kc])])], perm=[0, 2, 3, 5, 1, 4])
    a = skew(a, [nr, nc, cc, kc], rr, kr, cr, lr)  # (nr, nc, C, Kc, R, Lr)
    a = node("Transpose", [a], perm=[0, 1, 4, 5, 2, 3])  # (nr, nc, R, Lr, C, Kc)
    a = skew(a, [nr, nc, rr, lr], cc, kc, ccol, lc)  # (nr, nc, R, Lr, C, Lc)
    a = node("Reshape", [node("Transpose", [a], perm=[0, 1, 2, 4, 3, 5]), const([nr, nc, rr * cc, lr * lc])])
    g = node("Reshape", [g, const([h, wd])])
    if (nr * rr, nc * cc) != (h, wd):
        g = node("Pad", [g, const([0, 0, nr * rr - h, nc * cc - wd]), const(1.0, np.float32)])
    g = node("Transpose", [node("Reshape", [g, const([nr, rr, nc, cc])])], perm=[0, 2, 1, 3])
    g = node("Reshape", [g, const([nr, nc, rr * cc, 1])])

    out = node("Add", [node("MatMul", [a, halo]), node("Mul", [g, xsum])])  # (nr, nc, R C, N)
    out = node("Transpose", [node("Reshape", [out, const([nr, nc, rr, cc, -1])])], perm=[0, 2, 1, 3, 4])
    out = node("Reshape", [out, const([nr * rr, nc * cc, -1])])
    if (nr * rr, nc * cc) != (h, wd):
        out = node("Slice", [out, const([0, 0]), const([h, wd]), const([0, 1])])
    shape = node("Concat", [const([t]), node("Shape", ["k"], start=0, end=1), const([2]),
                            node("Shape", ["k"], start=2, end=3)], axis=0)  # fmt: skip
    out = node("Transpose", [node("Reshape", [out, shape])], perm=[1, 0, 2, 3])  # (B, T, 2, d)
    num = node("Gather", [out, const(0)], axis=2)
    den = node("Gather", [out, const(1)], axis=2)
    nodes.append(onnx.helper.make_node("Mul", [node("Sigmoid", ["q"]), node("Div", [num, den])], ["y"]))
    return onnx.helper.make_function(
        DOMAIN, "AFTLocal", ["q", "k", "v", "w"], ["y"], nodes,
        [onnx.helper.make_opsetid("", opset)], attributes=list(_ATTRS["AFTLocal"]),
    )  # fmt: skip


FUNCTIONS = {"AFTFull": AFTFull, "AFTLocal": local_function, "AFTSimple": AFTSimple, "AFTConv": AFTConv}
_INPUTS = {"AFTFull": "qkvw", "AFTLocal": "qkvw", "AFTSimple": "qkv", "AFTConv": ("q", "k", "v", "kernel")}
_ATTRS = {"AFTLocal": {"window": OpSchema.AttrType.INT, "grid": OpSchema.AttrType.INTS},
          "AFTConv": {"heads": OpSchema.AttrType.INT, "kernel_size": OpSchema.AttrType.INT}}  # fmt: skip


def _schema(name: str) -> OpSchema:
    param = OpSchema.FormalParameter
    return OpSchema(
        name, DOMAIN, OP_VERSIONS[name],
        inputs=[param(n, "T") for n in _INPUTS[name]],
        outputs=[param("y", "T")],
        type_constraints=[("T", ["tensor(float)", "tensor(float16)"], "float tensors")],
        attributes=[OpSchema.Attribute(a, t, "", required=False) for a, t in _ATTRS.get(name, {}).items()],
    )  # fmt: skip


@contextlib.contextmanager
def registered_schemas():
    """Register the com.aft schemas for the duration of an export, then remove them."""
    added = []
    try:
        for name in FUNCTIONS:
            try:
                found = onnx.defs.get_schema(name, OP_VERSIONS[name], DOMAIN)
            except onnx.defs.SchemaError:
                found = None
            if found is None or found.since_version != OP_VERSIONS[name]:
                onnx.defs.register_schema(_schema(name))
                added.append(name)
        yield
    finally:
        for name in added:
            onnx.defs.deregister_schema(name, OP_VERSIONS[name], DOMAIN)


def translation_table() -> dict:
    """``custom_translation_table`` for torch.onnx.export: aft::* -> one com.aft node."""
    aft = onnxscript.values.Opset(DOMAIN, DOMAIN_VERSION)

    def full(q, k, v, w):
        return aft.AFTFull(q, k, v, w)

    def local(q, k, v, w, window: int, grid: list[int]):
        return aft.AFTLocal(q, k, v, w, window=int(window), grid=[int(g) for g in grid])

    def simple(q, k, v):
        return aft.AFTSimple(q, k, v)

    def conv(q, k, v, kernel):
        heads, ks = kernel.shape[0], kernel.shape[1]
        return aft.AFTConv(q, k, v, kernel, heads=int(heads), kernel_size=int(ks))

    aft_ops = torch.ops.aft  # registered by aft_export.layers.ops
    return {aft_ops.full.default: full, aft_ops.local.default: local, aft_ops.simple.default: simple,
            aft_ops.conv.default: conv}  # fmt: skip


def _conv_geometry(node) -> str:
    """``k<kernel_size>``: the literal kernel size an AFT-conv body is written for."""
    ks = next((a.i for a in node.attribute if a.name == "kernel_size"), 0)
    if ks < 1:
        raise ValueError(f"AFTConv node {node.name or '?'} has no kernel_size attribute")
    return f"k{ks}"


def _local_geometry(node) -> str:
    """``g<H>x<W>s<window>``: the grid and window an AFT-local body is written for."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    grid, window = list(attrs.get("grid", [])), attrs.get("window", 0)
    if len(grid) != 2 or min(grid) < 1 or window < 1:
        raise ValueError(f"AFTLocal node {node.name or '?'} needs attributes grid=[H, W] and window >= 1 "
                         f"(a version-1 node with a dense bias has neither)")
    return f"g{grid[0]}x{grid[1]}s{window}"


def _body(kind: str, geometry: str, opset: int) -> onnx.FunctionProto:
    """The body of one ``kind`` (AFTFull, ...) for one geometry, unnamed (see _scope)."""
    if kind == "AFTLocal":
        return local_function(geometry, opset)
    proto = FUNCTIONS[kind].to_function_proto()
    # The bodies are written against opset 18; the ops they use only gained types
    # in later opsets, so they import the model's own version (the checker requires
    # it, and every export is verified numerically against PyTorch).
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = opset
    # the node may carry attributes the body does not need (window, kernel_size):
    # declare them so checkers accept the node
    declared = set(proto.attribute)
    for attr in _ATTRS.get(kind, {}):
        if attr not in declared:
            proto.attribute.append(attr)
    if kind == "AFTConv":
        # TensorRT's parser up to 10.3 reads a computed-weight Conv's kernel size from its
        # kernel_shape attribute only (onnx-tensorrt 10.4 changelog: "fixed kernel shape
        # inference in multi-input convolutions"), and no version resolves a reference to
        # the caller's attribute there; so the size is a literal in the layer's own body.
        ks = int(geometry[1:])
        for node in proto.node:
            if node.op_type == "Conv":
                node.attribute.append(onnx.helper.make_attribute("kernel_shape", [ks, ks]))
    return proto


def _scope(body: onnx.FunctionProto, name: str, layer: str) -> None:
    """Name the function ``name`` and its nodes and inner values after ``layer``: TensorRT
    names each inlined layer after its node (and each tensor after its value)."""
    body.name = name
    body.domain = DOMAIN
    body.overload = ""
    formal = set(body.input) | set(body.output)
    rename = {}
    for i, node in enumerate(body.node):
        node.name = f"{layer}/{node.op_type}_{i}"
        for j, out in enumerate(node.output):
            if out and out not in formal:
                rename[out] = node.output[j] = f"{layer}/{out}"
        node.input[:] = [rename.get(v, v) for v in node.input]


def layer_function_name(kind: str, layer: str) -> str:
    """The function (and op type) of one AFT layer: ``AFTFull.blocks.0.mixer``."""
    return f"{kind}.{layer}"


def attach_functions(model: onnx.ModelProto) -> list[str]:
    """Give every com.aft node of ``model`` its own model-local function, named after its
    variant and layer (the module path in the node's ``aft.module`` metadata, else the
    node's name). Returns the variants used. Nodes that already call a function of the
    model are left as they are."""
    present = {f.name for f in model.functions if f.domain == DOMAIN}
    taken = set(present)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), MIN_OPSET)
    used = set()
    for i, node in enumerate(model.graph.node):
        if node.domain != DOMAIN:
            continue
        kind = aft_kind(node)
        if kind is None:
            raise ValueError(f"{DOMAIN} node {node.name or i} has op type {node.op_type}, not one of {list(FUNCTIONS)}")
        used.add(kind)
        if node.op_type in present:
            continue
        geometry = _conv_geometry(node) if kind == "AFTConv" else _local_geometry(node) if kind == "AFTLocal" else ""
        mod = node_module(node)
        layer = (mod[0] if mod and mod[0] else "") or node.name or f"{kind}_{i}"
        unique, n = layer, 1
        while layer_function_name(kind, unique) in taken:
            n += 1
            unique = f"{layer}_{n}"
        name = layer_function_name(kind, unique)
        body = _body(kind, geometry, opset)
        _scope(body, name, unique)
        model.functions.append(body)
        taken.add(name)
        node.op_type, node.overload = name, ""
    domain = [o for o in model.opset_import if o.domain == DOMAIN]
    if used and not domain:
        model.opset_import.append(onnx.helper.make_opsetid(DOMAIN, DOMAIN_VERSION))
    elif "AFTLocal" in used and domain[0].version < OP_VERSIONS["AFTLocal"]:
        domain[0].version = OP_VERSIONS["AFTLocal"]
    return sorted(used)
