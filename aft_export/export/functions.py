"""The ``com.aft`` ONNX ops: one node per AFT layer, with a model-local function body.

How a layer becomes one node (torch 2.13 / onnxscript 0.7):

* the layer calls an ``aft::*`` custom op (:mod:`aft_export.layers.ops`);
* the exporter's ``custom_translation_table`` maps that op to a small Python
  translation that emits ``com.aft::AFT<Variant>`` as a plain node. The exporter
  inlines every local *function* it sees (its version-conversion pass runs an inliner
  unconditionally), so the node must not be a function call while it exports;
  emitting it needs an ONNX schema, which :func:`registered_schemas` registers for
  the duration of the export only;
* afterwards :func:`attach_functions` adds the bodies below as model-local
  functions, so ONNX Runtime runs the file unmodified and TensorRT's parser inlines
  them (or a plugin of the same name takes over, TensorRT >= 10.7).

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

from aft_export.graph import DOMAIN
from aft_export.layers import ops  # noqa: F401  (registers torch.ops.aft.*)
from aft_export.options import MIN_OPSET

VERSION = 1
_aft = onnxscript.values.Opset(domain=DOMAIN, version=VERSION)


@onnxscript.script(_aft, default_opset=op)
def AFTFull(q: FLOAT, k: FLOAT, v: FLOAT, w: FLOAT) -> FLOAT:
    """q, k, v: (B, T, d); w: (T, T). Returns (B, T, d)."""
    k_max = op.ReduceMax(k, op.Constant(value_ints=[1]), keepdims=1)  # (B, 1, d)
    ek = op.Exp(op.Sub(k, k_max))
    w_max = op.ReduceMax(w, op.Constant(value_ints=[1]), keepdims=1)  # (T, 1)
    ew = op.Exp(op.Sub(w, w_max))
    num = op.MatMul(ew, op.Mul(ek, v))
    den = op.MatMul(ew, ek)
    return op.Mul(op.Sigmoid(q), op.Div(num, den))


@onnxscript.script(_aft, default_opset=op)
def AFTLocal(q: FLOAT, k: FLOAT, v: FLOAT, w: FLOAT) -> FLOAT:
    """As AFTFull; ``w`` is zero outside the window (the node's ``window`` attribute)."""
    k_max = op.ReduceMax(k, op.Constant(value_ints=[1]), keepdims=1)
    ek = op.Exp(op.Sub(k, k_max))
    w_max = op.ReduceMax(w, op.Constant(value_ints=[1]), keepdims=1)
    ew = op.Exp(op.Sub(w, w_max))
    num = op.MatMul(ew, op.Mul(ek, v))
    den = op.MatMul(ew, ek)
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

    The two Conv nodes get a literal ``kernel_shape`` in :func:`attach_functions`, one
    body per kernel size (see there)."""
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


FUNCTIONS = {"AFTFull": AFTFull, "AFTLocal": AFTLocal, "AFTSimple": AFTSimple, "AFTConv": AFTConv}
_INPUTS = {"AFTFull": "qkvw", "AFTLocal": "qkvw", "AFTSimple": "qkv", "AFTConv": ("q", "k", "v", "kernel")}
_ATTRS = {"AFTLocal": {"window": OpSchema.AttrType.INT},
          "AFTConv": {"heads": OpSchema.AttrType.INT, "kernel_size": OpSchema.AttrType.INT}}  # fmt: skip


def _schema(name: str) -> OpSchema:
    param = OpSchema.FormalParameter
    return OpSchema(
        name, DOMAIN, VERSION,
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
                onnx.defs.get_schema(name, VERSION, DOMAIN)
            except onnx.defs.SchemaError:
                onnx.defs.register_schema(_schema(name))
                added.append(name)
        yield
    finally:
        for name in added:
            onnx.defs.deregister_schema(name, VERSION, DOMAIN)


def translation_table() -> dict:
    """``custom_translation_table`` for torch.onnx.export: aft::* -> one com.aft node."""
    aft = onnxscript.values.Opset(DOMAIN, VERSION)

    def full(q, k, v, w):
        return aft.AFTFull(q, k, v, w)

    def local(q, k, v, w, window: int):
        return aft.AFTLocal(q, k, v, w, window=window)

    def simple(q, k, v):
        return aft.AFTSimple(q, k, v)

    def conv(q, k, v, kernel):
        heads, ks = kernel.shape[0], kernel.shape[1]
        return aft.AFTConv(q, k, v, kernel, heads=int(heads), kernel_size=int(ks))

    aft_ops = torch.ops.aft  # registered by aft_export.layers.ops
    return {aft_ops.full.default: full, aft_ops.local.default: local, aft_ops.simple.default: simple,
            aft_ops.conv.default: conv}  # fmt: skip


def _conv_overload(node) -> str:
    """``k<kernel_size>``: AFT-conv gets one body per kernel size (see attach_functions)."""
    ks = next((a.i for a in node.attribute if a.name == "kernel_size"), 0)
    if ks < 1:
        raise ValueError(f"AFTConv node {node.name or '?'} has no kernel_size attribute")
    return f"k{ks}"


def _body(name: str, overload: str, opset: int) -> onnx.FunctionProto:
    proto = FUNCTIONS[name].to_function_proto()
    # The bodies are written against opset 18; the ops they use only gained types
    # in later opsets, so they import the model's own version (the checker requires
    # it, and every export is verified numerically against PyTorch).
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = opset
    # the node may carry attributes the body does not need (window, kernel_size):
    # declare them so checkers accept the node
    declared = set(proto.attribute)
    for attr in _ATTRS.get(name, {}):
        if attr not in declared:
            proto.attribute.append(attr)
    if overload:
        # TensorRT's parser up to 10.3 reads a computed-weight Conv's kernel size from its
        # kernel_shape attribute only (onnx-tensorrt 10.4 changelog: "fixed kernel shape
        # inference in multi-input convolutions"), and no version resolves a reference to
        # the caller's attribute there; so the size is a literal, one body per size. The
        # body is an ONNX overload of AFTConv: the node keeps the op type a plugin of the
        # same name would take over.
        proto.overload = overload
        ks = int(overload[1:])
        for node in proto.node:
            if node.op_type == "Conv":
                node.attribute.append(onnx.helper.make_attribute("kernel_shape", [ks, ks]))
    return proto


def attach_functions(model: onnx.ModelProto) -> list[str]:
    """Add the body of every com.aft op used in ``model`` as a model-local function."""
    present = {(f.domain, f.name, f.overload) for f in model.functions}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), MIN_OPSET)
    used = set()
    for node in model.graph.node:
        if node.domain != DOMAIN:
            continue
        if node.op_type == "AFTConv":
            node.overload = _conv_overload(node)
        used.add(node.op_type)
        if (DOMAIN, node.op_type, node.overload) not in present:
            model.functions.append(_body(node.op_type, node.overload, opset))
            present.add((DOMAIN, node.op_type, node.overload))
    if used and not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(DOMAIN, VERSION))
    if used and model.ir_version < 10:
        model.ir_version = 10  # function overloads
    return sorted(used)
