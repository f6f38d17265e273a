"""Graph utilities shared by export, quantisation and parity.

Every node of an exported graph carries two metadata entries that say which PyTorch
module it came from:

* ``aft.module``: the module path in the model (``blocks.0.mixer.to_q``; ``""`` for
  the classifier itself);
* ``aft.module_type``: that module's class name (``Linear``, ``AFTFull``, ...).

The exporter records a lot more per node (the FX node, a stack trace with the
paths of the machine that exported it); we keep these two, which is what a user
debugging a divergence needs, and what quantisation needs to find the AFT core.
onnxsim drops node metadata and fuses or renames some nodes, so the exporter
restores the entries afterwards through the value names the nodes produce.
"""

from __future__ import annotations

import ast

DOMAIN = "com.aft"  # the custom domain of the AFT ops (aft_export/exporting/functions.py)
MODULE_KEY = "aft.module"
MODULE_TYPE_KEY = "aft.module_type"
AFT_LAYER_TYPES = ("AFTFull", "AFTLocal", "AFTSimple", "AFTConv")


def aft_kind(node) -> str | None:
    """The AFT variant (``AFTFull``, ...) of a ``com.aft`` node, None for any other node.
    Each layer's op type is its own function's name, ``<variant>.<layer>``
    (aft_export/exporting/functions.py); a node written before that has the variant alone."""
    if node.domain != DOMAIN:
        return None
    kind = node.op_type.split(".", 1)[0]
    return kind if kind in AFT_LAYER_TYPES else None


def props(proto) -> dict[str, str]:
    """The metadata_props of a model or a node, as a dict."""
    return {p.key: p.value for p in proto.metadata_props}


def set_props(proto, values: dict[str, str]) -> None:
    """Replace the metadata_props of a model or a node (sorted by key: deterministic files)."""
    del proto.metadata_props[:]
    for key in sorted(values):
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, values[key]


def node_module(node) -> tuple[str, str] | None:
    """(module path, module class name) of a node, or None if unknown."""
    found = props(node)
    if MODULE_KEY in found:
        return found[MODULE_KEY], found.get(MODULE_TYPE_KEY, "")
    return None


def compact_node_metadata(model) -> None:
    """Replace the exporter's per-node metadata with ``aft.module``/``aft.module_type``.

    The exporter's ``name_scopes`` list ends with the op's own name, preceded by the
    module scopes from the root; ``class_hierarchy`` runs in parallel with classes.
    """
    for node in model.graph.node:
        found = props(node)
        compact = {}
        try:
            scopes = ast.literal_eval(found.get("pkg.torch.onnx.name_scopes", "[]"))
            classes = ast.literal_eval(found.get("pkg.torch.onnx.class_hierarchy", "[]"))
        except (ValueError, SyntaxError):
            scopes, classes = [], []
        if len(scopes) >= 2 and len(classes) >= 2:
            compact = {MODULE_KEY: scopes[-2], MODULE_TYPE_KEY: classes[-2].rsplit(".", 1)[-1]}
        set_props(node, compact)


def module_by_output(model) -> dict[str, tuple[str, str]]:
    """Value name -> (module, type) for every node output that has a known module."""
    table = {}
    for node in model.graph.node:
        mod = node_module(node)
        if mod is not None:
            for out in node.output:
                table[out] = mod
    return table


def restore_node_metadata(model, table: dict[str, tuple[str, str]]) -> None:
    """Give nodes without module metadata, in this order of trust, the module of the
    value they produce; of a parameter they read (initializers keep names such as
    ``blocks.0.mixer.to_q.bias``: rewritten nodes, e.g. MatMul+Add turned into Gemm,
    still read them); of the nearest consumer that has one (fused nodes feed the
    module they serve); else of their producer."""

    def put(node, mod):
        set_props(node, {MODULE_KEY: mod[0], MODULE_TYPE_KEY: mod[1]})

    types = {module: kind for module, kind in table.values()}
    inits = {t.name for t in model.graph.initializer}

    def by_parameter(node):
        for name in node.input:
            if name in inits and "." in name:
                module = name.rsplit(".", 1)[0]
                if module in types:
                    return module, types[module]
        return None

    nodes = list(model.graph.node)
    for node in nodes:
        if node_module(node) is None:
            mod = next((table[o] for o in node.output if o in table), None) or by_parameter(node)
            if mod is not None:
                put(node, mod)
    consumers: dict[str, list] = {}
    producer = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
        for name in node.output:
            producer[name] = node
    for node in reversed(nodes):  # consumers come later in topological order
        if node_module(node) is None:
            for out in node.output:
                mod = next((node_module(c) for c in consumers.get(out, []) if node_module(c)), None)
                if mod is not None:
                    put(node, mod)
                    break
    for node in nodes:
        if node_module(node) is None:
            mod = next((node_module(producer[i]) for i in node.input if i in producer
                        and node_module(producer[i])), None)  # fmt: skip
            if mod is not None:
                put(node, mod)


def name_nodes(model) -> None:
    """Give every unnamed node a unique, deterministic name (tools key on names)."""
    seen = {n.name for n in model.graph.node if n.name}
    for i, node in enumerate(model.graph.node):
        if not node.name:
            name = f"{node.op_type}_{i}"
            while name in seen:
                name += "_"
            node.name = name
            seen.add(name)


def aft_core_nodes(model) -> list[str]:
    """Names of the nodes that compute the AFT mixing itself (exps, the products or
    convolutions on them, reductions, division): the custom-domain nodes in the
    custom op form, the nodes owned directly by an AFT module (not by its q/k/v/out
    projections) in the decomposed form.

    A projection can end up owned by the AFT module itself: the exporter fuses
    ``to_q``/``to_k``/``to_v`` into one ``MatMul`` (+ bias ``Add``, ``Split``) and
    records the module that holds all three. Such a node is a projection, not the
    core (see :func:`aft_projection_nodes`): in the custom form only the custom-domain
    node is the core, in the decomposed form every other node the module owns."""
    custom = {node_module(n)[0] for n in model.graph.node if n.domain == DOMAIN and node_module(n)}
    projections = set(aft_projection_nodes(model))
    names = []
    for node in model.graph.node:
        mod = node_module(node)
        if node.domain == DOMAIN:
            names.append(node.name)
        elif (mod is not None and mod[1] in AFT_LAYER_TYPES and mod[0] not in custom
              and node.name not in projections):  # fmt: skip
            names.append(node.name)
    return names


def aft_projection_nodes(model) -> list[str]:
    """Nodes an AFT module owns directly that compute its input projections: a
    ``MatMul``/``Gemm`` with a constant weight whose other input comes from outside
    the module, and the bias ``Add`` and ``Split`` that only read such projections."""
    consts = {t.name for t in model.graph.initializer}
    consts |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    producer = {o: n for n in model.graph.node for o in n.output}
    found: set[str] = set()
    for node in model.graph.node:  # topological order: producers first
        mod = node_module(node)
        if mod is None or mod[1] not in AFT_LAYER_TYPES or node.domain == DOMAIN:
            continue
        data = [i for i in node.input if i and i not in consts]
        if node.op_type in ("MatMul", "Gemm") and len(data) == 1 and len(node.input) - len(data) >= 1:
            src = producer.get(data[0])
            if src is None or node_module(src) != mod:
                found.add(node.name)
        elif node.op_type in ("Add", "Split") and data and all(
            i in producer and producer[i].name in found for i in data
        ):
            found.add(node.name)
    return [n.name for n in model.graph.node if n.name in found]


def constant_values(model) -> dict:
    """Every value the graph holds as a constant, by name: its initializers and the outputs of its
    ``Constant`` nodes (a ``value`` tensor, or ``value_float(s)``, ``value_int(s)``), as NumPy arrays."""
    import numpy as np
    from onnx import numpy_helper

    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    scalars = {"value_float": lambda a: np.array(a.f, np.float32), "value_floats": lambda a: np.array(a.floats, np.float32),
               "value_int": lambda a: np.array(a.i, np.int64), "value_ints": lambda a: np.array(a.ints, np.int64)}  # fmt: skip
    for node in model.graph.node:
        if node.op_type != "Constant" or not node.attribute:
            continue
        first = node.attribute[0]
        if first.name == "value":
            values[node.output[0]] = numpy_helper.to_array(first.t)
        elif first.name in scalars:
            values[node.output[0]] = scalars[first.name](first)
    return values


def with_outputs(model, names: list[str]):
    """A copy of ``model`` that also outputs the given intermediate values."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    present = {o.name for o in copy.graph.output}
    for name in names:
        if name not in present:
            copy.graph.output.append(onnx.ValueInfoProto(name=name))
    return copy


def toposort(model) -> None:
    """Sort the graph's nodes topologically, keeping the original order among ready
    nodes (some converters append the Casts they insert at the end)."""
    graph = model.graph
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending = list(graph.node)
    ordered = []
    while pending:
        rest = []
        for node in pending:
            if all(i in available for i in node.input):
                ordered.append(node)
                available.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise ValueError(f"graph has a cycle or a missing input at node {rest[0].name}")
        pending = rest
    nodes = [type(n)() for n in ordered]
    for dst, src in zip(nodes, ordered):
        dst.CopyFrom(src)
    del graph.node[:]
    graph.node.extend(nodes)


ORIGIN_KEY = "aft.inlined_from"  # "<call node>|<domain>|<function>|<overload>" on every inlined node


def inline_functions(model, match_name_only: bool = False):
    """A copy of ``model`` with every call of a model-local function replaced by the body,
    the way TensorRT's parser imports it (onnx-tensorrt ``LocalFunctionImporter``): body
    values are scoped by the calling node (``<call>/<value>``), attribute references are
    resolved from the call (or the function's defaults), nested calls are inlined too.
    Each inlined node keeps the calling node's module metadata and records where it came
    from under :data:`ORIGIN_KEY`.

    ``match_name_only`` looks functions up by name alone, the first one of a name winning,
    as TensorRT does (its table of local functions is keyed by the name; domain and
    overload are ignored); otherwise by (domain, name, overload), as ONNX defines it.
    """
    import onnx

    functions: dict = {}
    for f in model.functions:
        key = f.name if match_name_only else (f.domain, f.name, f.overload)
        functions.setdefault(key, f)

    def lookup(node):
        return functions.get(node.op_type if match_name_only else (node.domain, node.op_type, node.overload))

    def expand(node, origin_prefix: str) -> list:
        f = lookup(node)
        if f is None:
            return [node]
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in f.node for a in n.attribute):
            raise ValueError(f"function {f.name} has subgraphs; aft-export cannot inline it")
        scope = node.name or f"{node.op_type}_{id(node)}"
        rename = {formal: actual for formal, actual in zip(f.input, node.input)}
        rename.update({formal: actual for formal, actual in zip(f.output, node.output)})
        given = {a.name: a for a in node.attribute}
        defaults = {a.name: a for a in f.attribute_proto}
        origin = f"{origin_prefix}{scope}|{f.domain}|{f.name}|{f.overload}"
        out = []
        for i, body in enumerate(f.node):
            new = onnx.NodeProto()
            new.CopyFrom(body)
            new.name = f"{scope}/{body.name or f'{body.op_type}_{i}'}"
            new.input[:] = [rename.get(v, f"{scope}/{v}") if v else "" for v in body.input]
            new.output[:] = [rename.get(v, f"{scope}/{v}") if v else "" for v in body.output]
            attrs = []
            for a in body.attribute:
                if a.ref_attr_name:
                    src = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                    if src is None:
                        continue  # an optional attribute the caller left out
                    a2 = onnx.AttributeProto()
                    a2.CopyFrom(src)
                    a2.name = a.name
                    attrs.append(a2)
                else:
                    attrs.append(a)
            del new.attribute[:]
            new.attribute.extend(attrs)
            meta = props(node)
            meta[ORIGIN_KEY] = origin
            set_props(new, meta)
            out.extend(expand(new, origin + ">") if lookup(new) is not None else [new])
        return out

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    nodes = [n for node in model.graph.node for n in expand(node, "")]
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    used = {(n.domain, n.op_type) for n in nodes}
    kept = [f for f in model.functions if (f.domain, f.name) in used]
    del copy.functions[:]
    copy.functions.extend(kept)
    return copy


def inlined_origin(node) -> dict | None:
    """Where an inlined node came from: the calling node, and the function's domain,
    name and overload (the innermost call, for nested ones)."""
    value = props(node).get(ORIGIN_KEY)
    if not value:
        return None
    call, domain, name, overload = value.rsplit(">", 1)[-1].split("|")
    return {"call": call, "domain": domain, "function": name, "overload": overload}


def activation_bytes_per_image(model, input_size) -> tuple[int, int]:
    """(largest intermediate value, input + outputs) in bytes for one image, from
    ONNX shape inference with the batch set to 1 and the input's spatial size set to
    ``input_size`` (C, H, W); values whose shape stays unknown are left out, so this is
    a lower bound on what one image needs."""
    import math

    import onnx
    from onnx import TensorProto, helper

    # the graph without its large initializers (weights: their shapes are enough; the
    # small ones, such as Reshape's target shapes, stay for shape inference to read)
    probe = onnx.ModelProto()
    probe.ir_version = model.ir_version
    probe.opset_import.extend(model.opset_import)
    probe.functions.extend(model.functions)
    probe.graph.node.extend(model.graph.node)
    probe.graph.input.extend(model.graph.input)
    probe.graph.output.extend(model.graph.output)
    for t in model.graph.initializer:
        if math.prod(t.dims) > 1024:
            probe.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            probe.graph.initializer.append(t)
    first = probe.graph.input[0].type.tensor_type.shape.dim
    for dim, size in zip(first, (1, *input_size)):
        dim.ClearField("dim_param")
        dim.dim_value = size
    for out in probe.graph.output:  # the batch dimension of the outputs too
        dims = out.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].ClearField("dim_param")
            dims[0].dim_value = 1
    try:
        inferred = onnx.shape_inference.infer_shapes(probe)
    except Exception:  # noqa: BLE001 - a graph shape inference cannot follow: no estimate
        return 0, 0

    def nbytes(vi) -> int:
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in t.shape.dim]
        if not t.HasField("shape") or 0 in dims:
            return 0
        size = helper.tensor_dtype_to_np_dtype(t.elem_type).itemsize if t.elem_type != TensorProto.UNDEFINED else 0
        return math.prod(dims) * size

    weights = {t.name for t in model.graph.initializer}
    largest = max([nbytes(v) for v in inferred.graph.value_info if v.name not in weights] + [0])
    io = nbytes(inferred.graph.input[0]) + sum(nbytes(o) for o in inferred.graph.output)
    return largest, io


# int8 weights a CPU without VNNI can take: its int8 dot product (x86 vpmaddubsw) adds two u8 x s8
# products in a saturating 16-bit sum, and 2 x 255 x 64 = 32640 fits in 32767 where 2 x 255 x 65
# does not. ONNX Runtime's 7-bit weights (reduce_range) are [-64, 64]; full-range ones [-127, 127].
PAIR_SAFE_INT8 = 64


def int8_weight_bits(model, base_dir: str | None = None) -> int | None:
    """7 when every int8 constant the graph dequantises or multiplies (an initializer or a ``Constant``
    feeding ``DequantizeLinear``, the weights of a Q/DQ graph, or an int8 operand of a QOperator node,
    :data:`INT8_OPERANDS`; whoever wrote it) is within
    [-:data:`PAIR_SAFE_INT8`, :data:`PAIR_SAFE_INT8`], 8 when one is outside, None when the graph
    holds no int8 constant there. Weights in external data are read from ``base_dir``; where they
    cannot be read they count as 8 bits (not shown to be safe)."""
    import onnx

    constants = {t.name: t for t in model.graph.initializer}
    bodies = [model.graph.node, *(f.node for f in model.functions)]
    for nodes in bodies:
        for node in nodes:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                value = next((a.t for a in node.attribute if a.name == "value"), None)
                if value is not None:
                    constants.setdefault(node.output[0], value)
    ranges = []
    for nodes in bodies:
        for node in nodes:
            for i in INT8_OPERANDS.get(node.op_type, ()):
                if i < len(node.input) and node.input[i] in constants:
                    tensor = constants[node.input[i]]
                    if tensor.data_type == onnx.TensorProto.INT8:
                        ranges.append(_pair_safe(tensor, base_dir))
    if not ranges:
        return None
    return 7 if all(ranges) else 8


# the operands that hold int8 weights: Q/DQ graphs dequantise them; QOperator graphs (ONNX Runtime's
# quantiser in that form) multiply them directly
INT8_OPERANDS = {"DequantizeLinear": (0,), "QLinearConv": (0, 3), "QLinearMatMul": (0, 3), "ConvInteger": (0, 1),
                 "MatMulInteger": (0, 1)}  # fmt: skip


def _pair_safe(tensor, base_dir: str | None) -> bool:
    """Whether an int8 constant is within [-PAIR_SAFE_INT8, PAIR_SAFE_INT8] (False where its external
    data cannot be read: not shown to be safe)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    external = tensor.data_location == onnx.TensorProto.EXTERNAL
    try:
        if external and not base_dir:
            raise OSError("no directory to read external data from")
        values = numpy_helper.to_array(tensor, base_dir or "")
    except (OSError, ValueError):
        return False
    return bool(values.size == 0 or np.abs(values.astype(np.int16)).max() <= PAIR_SAFE_INT8)
