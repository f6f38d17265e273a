"""An ONNX graph as TensorRT's ONNX parser will read it.

The parser (onnx-tensorrt ``ModelImporter``) walks the graph node by node; a node whose
op type names a model-local function is imported by inlining the body (TensorRT 9.0+;
functions are looked up by name alone, the first of a name winning); every value is
either a *tensor* or *weights*: initializers and ``Constant`` outputs are weights, and
many importers insist that some inputs be weights (axes, kernel sizes, Q/DQ scales).
:class:`GraphView` gives the rules exactly that: the (inlined) nodes in order, each
value's type, shape and, for weights, its value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from aft_export.artifacts.graph import inline_functions, inlined_origin, node_module

# ONNX element type -> the names onnx-tensorrt's operator table uses
TYPE_NAMES = {1: "FP32", 2: "UINT8", 3: "INT8", 5: "INT16", 6: "INT32", 7: "INT64", 9: "BOOL", 10: "FP16",
              11: "DOUBLE", 16: "BF16", 17: "FP8", 18: "FP8", 19: "FP8", 20: "FP8", 21: "UINT4", 22: "INT4",
              23: "FP4", 8: "STRING"}  # fmt: skip

Dim = "int | str | None"  # a static size, a symbolic one (dynamic), or unknown


@dataclass
class GraphView:
    model: object  # onnx.ModelProto, inlined where the parser inlines
    source: object  # the model as given (its functions, before inlining)
    opset: int
    ir_version: int
    inlined: bool
    nodes: list = field(default_factory=list)
    types: dict[str, int] = field(default_factory=dict)  # value -> ONNX elem type
    shapes: dict[str, list] = field(default_factory=dict)  # value -> dims (int, symbol str, or None)
    weights: dict[str, np.ndarray | None] = field(default_factory=dict)  # weights -> value (None if not loaded)
    producer: dict = field(default_factory=dict)
    consumers: dict = field(default_factory=dict)
    graph_inputs: set = field(default_factory=set)

    @classmethod
    def read(cls, model, inline: bool) -> GraphView:
        import onnx
        from onnx import numpy_helper

        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        work = inline_functions(model, match_name_only=True) if inline and len(model.functions) else model
        try:
            inferred = onnx.shape_inference.infer_shapes(work, strict_mode=False, data_prop=True)
        except Exception:  # noqa: BLE001 - an invalid graph: check what can be read
            inferred = work
        view = cls(work, model, opset, model.ir_version, inline and bool(len(model.functions)), list(work.graph.node))
        for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
            tt = v.type.tensor_type
            if tt.elem_type:
                view.types[v.name] = tt.elem_type
            if tt.HasField("shape"):
                view.shapes[v.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                       for d in tt.shape.dim]  # fmt: skip
        view.graph_inputs = {i.name for i in work.graph.input}
        for t in work.graph.initializer:
            view.types[t.name] = t.data_type
            view.shapes[t.name] = list(t.dims)
            view.weights[t.name] = _array(t, numpy_helper)
        for node in view.nodes:
            for out in node.output:
                view.producer[out] = node
            for name in node.input:
                if name:
                    view.consumers.setdefault(name, []).append(node)
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                value = _constant_value(node, numpy_helper)
                view.weights[node.output[0]] = value
                if value is not None:
                    view.types.setdefault(node.output[0], _elem_type(value))
                    view.shapes.setdefault(node.output[0], list(value.shape))
        return view

    # ------------------------------------------------------------------ queries

    def is_weights(self, name: str) -> bool:
        return name in self.weights

    def value(self, name: str) -> np.ndarray | None:
        return self.weights.get(name)

    def type_name(self, name: str) -> str | None:
        t = self.types.get(name)
        return TYPE_NAMES.get(t, f"type {t}") if t else None

    def rank(self, name: str) -> int | None:
        dims = self.shapes.get(name)
        return None if dims is None else len(dims)

    def attr(self, node, name: str, default=None):
        import onnx

        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def has_attr(self, node, name: str) -> bool:
        return any(a.name == name for a in node.attribute)

    def where(self, node) -> dict:
        """What a report says about a node: its name, op, PyTorch module and, for a node
        inlined from a function body, the function and the calling node."""
        mod = node_module(node)
        origin = inlined_origin(node)
        return {"node": node.name, "op_type": node.op_type, "module": mod[0] if mod else "",
                "function": None if origin is None else {
                    "name": origin["function"], "overload": origin["overload"], "domain": origin["domain"],
                    "call": origin["call"]}}  # fmt: skip


def _array(tensor, numpy_helper) -> np.ndarray | None:
    if tensor.data_location == 1 and not tensor.raw_data:  # external data that was not loaded
        return None
    try:
        return numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 - a type numpy cannot hold (fp8, int4): the rules need dtype only
        return None


def _constant_value(node, numpy_helper) -> np.ndarray | None:
    for a in node.attribute:
        if a.name == "value":
            return _array(a.t, numpy_helper)
        if a.name == "value_float":
            return np.array(a.f, np.float32)
        if a.name == "value_floats":
            return np.array(list(a.floats), np.float32)
        if a.name == "value_int":
            return np.array(a.i, np.int64)
        if a.name == "value_ints":
            return np.array(list(a.ints), np.int64)
    return None


def _elem_type(value: np.ndarray) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(value.dtype)
