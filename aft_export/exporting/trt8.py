"""The TensorRT 8 form of an exported graph (JetPack 5.1: TensorRT 8.5; JetPack 6.0: 8.6).

TensorRT 8's ONNX parser reads an opset-18 graph with functions in ways that fail or,
worse, compute something else without an error (see :mod:`aft_export.trtcheck.rules`,
which names the parser source of each):

* model-local functions are not imported (9.0+): the com.aft bodies are inlined;
* it parses up to opset 17 and reads reduction axes from the attribute only: the graph
  is converted to opset 17 (ONNX's version converter), axes become attributes;
* ``Constant`` ``value_int(s)`` is read as 0 / empty: every Constant becomes a tensor;
* ``Shape`` ``start``/``end`` are ignored: they become a ``Slice`` of the full shape;
* ``CastLike`` has no importer: it becomes a ``Cast`` to the type it names;
* 8.5 has no ``LayerNormalization``: it is decomposed (mean, variance, normalise, affine)
  in float, every new node keeping the module metadata of the one it replaces.

Each step keeps the numerics (the exporter verifies the result against PyTorch), and
the result is checked against the 8.5/8.6 rules by ``aft-export check``.
"""

from __future__ import annotations

import numpy as np

from aft_export.errors import AFTExportError
from aft_export.artifacts.graph import constant_values, inline_functions

OPSET = 17
IR_VERSION = 8  # the IR of ONNX 1.12/1.13, which TensorRT 8.5/8.6's parsers are built with


def to_tensorrt8(model):
    """A new ModelProto: ``model`` (opset 18, functions) in the form TensorRT 8.5/8.6 parse."""
    out = inline_functions(model)
    if any(n.domain not in ("", "ai.onnx") for n in out.graph.node):
        bad = sorted({f"{n.domain}::{n.op_type}" for n in out.graph.node if n.domain not in ("", "ai.onnx")})
        raise AFTExportError(f"the TensorRT 8 form cannot hold custom ops without a function body: {bad}")
    del out.functions[:]
    _keep_default_opset(out)
    _constants_as_tensors(out)
    _to_opset17(out)
    _shape_slices(out)
    _castlike_to_cast(out)
    _decompose_layernorm(out)
    _prune(out)
    out.ir_version = IR_VERSION
    return out


def _prune(model) -> None:
    """Drop nodes and initializers nothing reads any more (the Constants that held
    reduction axes before they became attributes)."""
    needed = {o.name for o in model.graph.output}
    keep = []
    for node in reversed(list(model.graph.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    del model.graph.node[:]
    model.graph.node.extend(keep)
    inits = [t for t in model.graph.initializer if t.name in needed]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)


def _keep_default_opset(model) -> None:
    keep = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    del model.opset_import[:]
    model.opset_import.extend(keep)


def _constants_as_tensors(model) -> None:
    """``Constant(value_int(s)/value_float(s))`` -> ``Constant(value=tensor)``."""
    from onnx import helper, numpy_helper

    for node in model.graph.node:
        if node.op_type != "Constant" or not node.attribute or node.attribute[0].name == "value":
            continue
        a = node.attribute[0]
        make = {"value_int": lambda: np.array(a.i, np.int64), "value_ints": lambda: np.array(list(a.ints), np.int64),
                "value_float": lambda: np.array(a.f, np.float32),
                "value_floats": lambda: np.array(list(a.floats), np.float32)}.get(a.name)  # fmt: skip
        if make is None:
            raise AFTExportError(f"Constant {node.name} uses {a.name}, which TensorRT 8 cannot read")
        del node.attribute[:]
        node.attribute.append(helper.make_attribute("value", numpy_helper.from_array(make())))


_REDUCE_AXES_ATTR = ("ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                     "ReduceLogSumExp", "ReduceSumSquare")  # fmt: skip


def _to_opset17(model) -> None:
    """Opset 18 -> 17 for the ops that changed in 18 and that a classifier uses: the
    reductions take ``axes`` as an attribute again, Split loses ``num_outputs``, Pad must not
    name ``axes``. Any
    other op whose opset-18 definition differs from 17's is refused by name (ONNX's own
    version converter has no 18 -> 17 adapter for Split and leaves ReduceMean's
    ``noop_with_empty_axes`` behind)."""
    import onnx
    from onnx import helper

    values = constant_values(model)
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in _REDUCE_AXES_ATTR:
            attrs = {a.name: a for a in node.attribute}
            noop = attrs.pop("noop_with_empty_axes", None)
            if noop is not None and noop.i:
                raise AFTExportError(f"{node.op_type} {node.name}: noop_with_empty_axes=1 has no opset-17 form")
            if len(node.input) > 1 and node.input[1]:
                axes = values.get(node.input[1])
                if axes is None:
                    raise AFTExportError(f"{node.op_type} {node.name}: its axes are computed; TensorRT 8 needs them "
                                         f"constant")  # fmt: skip
                del node.input[1:]
                attrs["axes"] = helper.make_attribute("axes", [int(a) for a in np.ravel(axes)])
            del node.attribute[:]
            node.attribute.extend(attrs.values())
        elif node.op_type == "Split":
            if len(node.input) < 2 or not node.input[1]:
                raise AFTExportError(f"Split {node.name} splits by num_outputs; export it with split sizes")
            keep = [a for a in node.attribute if a.name != "num_outputs"]
            del node.attribute[:]
            node.attribute.extend(keep)
        elif node.op_type == "Pad":
            # Pad-18 only added the optional ``axes`` input; without it, it is Pad-13
            if len(node.input) > 3 and node.input[3]:
                raise AFTExportError(f"Pad {node.name} pads selected axes; TensorRT 8 needs pads for every axis")
        elif onnx.defs.get_schema(node.op_type, 18, node.domain).since_version == 18:
            raise AFTExportError(f"{node.op_type} {node.name}: the opset-18 definition of {node.op_type} has no "
                                 f"opset-17 form here; TensorRT 8 cannot take this graph")  # fmt: skip
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = OPSET


def _const(name: str, value: np.ndarray, like):
    from onnx import helper, numpy_helper

    node = helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(value))
    node.metadata_props.extend(like.metadata_props)
    return node


def _replace(model, old, new_nodes: list) -> None:
    nodes = list(model.graph.node)
    i = nodes.index(old)
    del model.graph.node[:]
    model.graph.node.extend(nodes[:i] + new_nodes + nodes[i + 1 :])


def _shape_slices(model) -> None:
    """``Shape(x, start, end)`` -> ``Slice(Shape(x), start, end, axes=0)``."""
    from onnx import helper

    for node in [n for n in model.graph.node if n.op_type == "Shape"]:
        attrs = {a.name: a.i for a in node.attribute}
        if "start" not in attrs and "end" not in attrs:
            continue
        base = node.name or node.output[0]
        full = f"{base}/full"
        new = [helper.make_node("Shape", [node.input[0]], [full], name=full),
               _const(f"{base}/start", np.array([attrs.get("start", 0)], np.int64), node),
               _const(f"{base}/end", np.array([attrs.get("end", np.iinfo(np.int64).max)], np.int64), node),
               _const(f"{base}/axes", np.array([0], np.int64), node),
               helper.make_node("Slice", [full, f"{base}/start", f"{base}/end", f"{base}/axes"], list(node.output),
                                name=base)]  # fmt: skip
        new[0].metadata_props.extend(node.metadata_props)
        new[-1].metadata_props.extend(node.metadata_props)
        _replace(model, node, new)


def _castlike_to_cast(model) -> None:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    for node in model.graph.node:
        if node.op_type == "CastLike":
            to = types.get(node.input[1])
            if not to:
                raise AFTExportError(f"CastLike {node.name}: the type of {node.input[1]} is unknown")
            node.op_type = "Cast"
            del node.input[1:]
            del node.attribute[:]
            node.attribute.append(onnx.helper.make_attribute("to", to))


def _decompose_layernorm(model) -> None:
    """``LayerNormalization(x, scale, bias)`` over axes ``axis..-1`` -> ReduceMean, Sub,
    Mul, ReduceMean, Add(eps), Sqrt, Div, Mul(scale), Add(bias); only output Y is used."""
    import onnx
    from onnx import helper

    inferred = onnx.shape_inference.infer_shapes(model)
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in list(inferred.graph.value_info) +
             list(inferred.graph.input) if v.type.tensor_type.HasField("shape")}  # fmt: skip
    for node in [n for n in model.graph.node if n.op_type == "LayerNormalization"]:
        if any(node.output[1:]):
            raise AFTExportError(f"LayerNormalization {node.name} uses its mean/inv-std outputs; cannot decompose it")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        rank = ranks.get(node.input[0])
        if rank is None:
            raise AFTExportError(f"LayerNormalization {node.name}: the rank of {node.input[0]} is unknown")
        axis = attrs.get("axis", -1)
        axes = list(range(axis % rank, rank))
        eps = float(attrs.get("epsilon", 1e-5))
        x, y = node.input[0], node.output[0]
        p = node.name or y

        def n(op, inputs, out, **kw):
            made = helper.make_node(op, inputs, [out], name=out if out != y else f"{p}/y", **kw)
            made.metadata_props.extend(node.metadata_props)
            return made

        new = [n("ReduceMean", [x], f"{p}/mean", axes=axes, keepdims=1),
               n("Sub", [x, f"{p}/mean"], f"{p}/d"),
               n("Mul", [f"{p}/d", f"{p}/d"], f"{p}/d2"),
               n("ReduceMean", [f"{p}/d2"], f"{p}/var", axes=axes, keepdims=1),
               _const(f"{p}/eps", np.array(eps, np.float32), node),
               n("Add", [f"{p}/var", f"{p}/eps"], f"{p}/var_eps"),
               n("Sqrt", [f"{p}/var_eps"], f"{p}/std"),
               n("Div", [f"{p}/d", f"{p}/std"], f"{p}/norm" if len(node.input) > 1 else y)]  # fmt: skip
        if len(node.input) > 1 and node.input[1]:
            has_bias = len(node.input) > 2 and bool(node.input[2])
            new.append(n("Mul", [f"{p}/norm", node.input[1]], f"{p}/scaled" if has_bias else y))
            if has_bias:
                new.append(n("Add", [f"{p}/scaled", node.input[2]], y))
        _replace(model, node, new)
