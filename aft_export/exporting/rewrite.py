"""Graph rewrites that let ONNX Runtime run an exported graph faster, in standard ONNX ops.

Each rewrite keeps the computation (the same products and sums, reordered or batched
differently) and the module metadata of the nodes it touches:

* :func:`gelu_for_fusion`: torch exports ``GELU`` as ``Mul(0.5, 1 + erf(x / sqrt 2))``
  then ``Mul(x, .)``; ONNX Runtime's ``GeluFusion`` (onnxruntime/core/optimizer/
  gelu_fusion.cc) only matches ``Mul(x, 1 + erf(x / sqrt 2))`` then ``Mul(., 0.5)`` (or
  ``0.5 * x`` first), so the exported chain ran as five element-wise ops. The rewrite
  swaps the two Muls' operands: the product is the same up to the order of a
  multiplication by 0.5, which is exact in floating point. ONNX Runtime then runs one
  fused ``Gelu`` (and ``BiasGelu`` after a bias add); the file keeps standard ops.
* :func:`merge_shared_matmuls`: the AFT core's numerator ``ew @ (eK * V)`` and
  denominator ``ew @ eK`` read the same left operand; one MatMul on the two right
  operands concatenated along the channel axis, then a Split, packs ``ew`` once and
  runs one larger product. In the custom op form the com.aft bodies already compute it
  so (:mod:`aft_export.exporting.functions`); this pass does the same in the decomposed
  form, for MatMuls owned by an AFT module whose right operands are computed (never
  weights: the projections stay separate nodes for quantisation to choose from).

Both are good for TensorRT too (standard ops it parses; fewer, larger products), so
they are applied for every export target.

* :func:`split_fused_projections`, for the portable form only (the CPU's): torch's exporter
  fuses the q/k/v projections that read one value into one MatMul on their concatenated
  weights, then a ``Split``. OpenVINO's CPU plugin runs that Split (a ``VariadicSplit`` on the
  last axis) in a reference kernel, and ONNX Runtime copies the parts; one MatMul per part, its
  weight sliced at export, computes the same products with no copy. ``python
  benchmarks/portable_rewrites.py`` times the portable files with and without both rewrites on every
  CPU reader (docs/runtimes.md); TensorRT's parser reads either.
* :func:`unmerge_shared_products`, for the portable form too: the merged numerator and denominator
  product above (``MatMul(ew, Concat(eK V, eK))``, then a ``Split``, or the AFT-full body's
  ``Reshape`` and two ``Gather`` s) back as two MatMuls on ``ew``: the CPU readers ran the two
  products faster than the merged one and its split (OpenVINO's ``Gather`` in a reference kernel).
  TensorRT's files keep the merged product (their target is the default export's).
"""

from __future__ import annotations

import numpy as np

from aft_export.artifacts.graph import AFT_LAYER_TYPES, constant_values, node_module, props, set_props


def _wiring(model) -> tuple[dict, dict, dict[str, list], set[str]]:
    """What a rewrite reads of the graph: its constants' values, each tensor's producer and readers, and
    the graph's outputs."""
    producer = {o: n for n in model.graph.node for o in n.output}
    return constant_values(model), producer, _consumers(model), {o.name for o in model.graph.output}


def _replace_nodes(model, replace: dict[int, list]) -> None:
    """Each node whose id ``replace`` holds by those nodes, in its place (an empty list: removed)."""
    out = [n for node in model.graph.node for n in replace.get(id(node), [node])]
    del model.graph.node[:]
    model.graph.node.extend(out)


def _consumers(model) -> dict[str, list]:
    found: dict[str, list] = {}
    for node in model.graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _scalar(values: dict, name: str, want: float, rtol: float = 1e-4) -> bool:
    v = values.get(name)
    return v is not None and v.size == 1 and bool(np.isclose(float(np.ravel(v)[0]), want, rtol=rtol, atol=0))


def _other(node, name: str) -> str | None:
    """The other input of a binary node, given one of its inputs."""
    if len(node.input) != 2:
        return None
    a, b = node.input
    return b if a == name else (a if b == name else None)


def gelu_for_fusion(model) -> int:
    """Reorder every exported erf-GELU so ONNX Runtime fuses it (see the module docstring).
    Returns the number of GELUs rewritten; edits ``model`` in place."""
    values = constant_values(model)
    consumers = _consumers(model)
    outputs = {o.name for o in model.graph.output}
    producer = {o: n for n in model.graph.node for o in n.output}
    count = 0

    def only_consumer(name: str, op_type: str):
        users = consumers.get(name, [])
        if len(users) != 1 or users[0].op_type != op_type or name in outputs:
            return None
        return users[0]

    for erf in [n for n in model.graph.node if n.op_type == "Erf"]:
        scale = producer.get(erf.input[0])
        if scale is None or scale.op_type not in ("Div", "Mul") or len(scale.input) != 2:
            continue
        x = scale.input[0]
        if not (_scalar(values, scale.input[1], np.sqrt(2.0)) if scale.op_type == "Div"
                else _scalar(values, scale.input[1], 1 / np.sqrt(2.0))):  # fmt: skip
            continue
        add = only_consumer(erf.output[0], "Add")
        if add is None or not _scalar(values, _other(add, erf.output[0]) or "", 1.0):
            continue
        half = only_consumer(add.output[0], "Mul")  # torch: Mul(0.5, 1 + erf)
        if half is None:
            continue
        half_const = _other(half, add.output[0])
        if half_const is None or not _scalar(values, half_const, 0.5):
            continue
        last = only_consumer(half.output[0], "Mul")  # torch: Mul(x, .)
        if last is None or _other(last, half.output[0]) != x:
            continue
        # ORT's pattern 2: Mul(x, 1 + erf) then Mul(., 0.5); the values keep their names
        half.input[:] = [x, add.output[0]]
        last.input[:] = [half.output[0], half_const]
        count += 1
    return count


def _shape(model, name: str, inferred) -> list | None:
    for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        if v.name == name and v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
            return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in v.type.tensor_type.shape.dim]  # fmt: skip
    return None


def merge_shared_matmuls(model) -> int:
    """In AFT modules, fuse pairs of MatMuls that share the left operand and whose right
    operands are computed tensors of one shape: ``MatMul(a, Concat(b1, b2, axis=-1))``
    then ``Split`` into the two original outputs. Returns the number of pairs merged;
    edits ``model`` in place."""
    import onnx
    from onnx import helper

    inits = {t.name for t in model.graph.initializer}
    consts = set(constant_values(model))
    nodes = list(model.graph.node)
    groups: dict[tuple, list[int]] = {}
    for i, node in enumerate(nodes):
        mod = node_module(node)
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or mod is None:
            continue
        if mod[1] not in AFT_LAYER_TYPES or node.input[1] in inits or node.input[1] in consts:
            continue
        groups.setdefault((node.input[0], mod[0]), []).append(i)
    pairs = [g for g in groups.values() if len(g) == 2]
    if not pairs:
        return 0
    inferred = onnx.shape_inference.infer_shapes(model)
    replace: dict[int, list] = {}  # node index -> the nodes that stand in its place
    for i, j in pairs:
        first, second = nodes[i], nodes[j]
        s1, s2 = _shape(model, first.input[1], inferred), _shape(model, second.input[1], inferred)
        if not s1 or s1 != s2 or not isinstance(s1[-1], int) or s1[-1] < 1 or len(s1) < 2:
            continue
        base = first.name or first.output[0]
        cat, prod, sizes = f"{base}/merged_rhs", f"{base}/merged", f"{base}/split_sizes"
        new = [
            helper.make_node("Concat", [first.input[1], second.input[1]], [cat], name=f"{base}/concat", axis=-1),
            helper.make_node("MatMul", [first.input[0], cat], [prod], name=f"{base}/matmul"),
            helper.make_node("Constant", [], [sizes], name=sizes,
                             value=helper.make_tensor(sizes, onnx.TensorProto.INT64, [2], [s1[-1], s1[-1]])),
            helper.make_node("Split", [prod, sizes], [first.output[0], second.output[0]], name=f"{base}/split",
                             axis=-1),
        ]  # fmt: skip
        for n in new:
            set_props(n, props(first))
        # both right operands exist by the later of the two MatMuls: the merged nodes go there
        replace[i], replace[j] = [], new
    out = []
    for i, node in enumerate(nodes):
        for n in replace.get(i, [node]):
            copy = type(n)()
            copy.CopyFrom(n)
            out.append(copy)
    del model.graph.node[:]
    model.graph.node.extend(out)
    return len(replace) // 2


def optimize_for_runtime(model) -> dict[str, int]:
    """Every rewrite above, in place; how many places each changed."""
    return {"gelu_reordered": gelu_for_fusion(model), "matmuls_merged": merge_shared_matmuls(model)}


def split_fused_projections(model) -> int:
    """Replace each ``MatMul`` by a constant 2-D weight (then, or not, an ``Add`` of a constant 1-D bias)
    that only a ``Split`` on the last axis reads by one ``MatMul`` (and ``Add``) per part, on the
    weight's (and bias's) columns of that part, writing the Split's outputs; node metadata kept.
    Returns the number of Splits removed; edits ``model`` in place."""
    from onnx import helper, numpy_helper

    values, producer, readers, graph_outputs = _wiring(model)

    def only_reader(name: str, node) -> bool:
        return name not in graph_outputs and [id(r) for r in readers.get(name, [])] == [id(node)]

    replace: dict[int, list] = {}
    added = []
    for split in [n for n in model.graph.node if n.op_type == "Split" and n.domain in ("", "ai.onnx")]:
        attrs = {a.name: helper.get_attribute_value(a) for a in split.attribute}
        if attrs.get("axis", 0) != -1:
            continue
        add = producer.get(split.input[0])
        matmul, bias = add, None
        if add is not None and add.op_type == "Add":
            operands = [(producer.get(i), i) for i in add.input]
            found = [(n, i) for n, i in operands if n is not None and n.op_type == "MatMul"]
            other = [i for i in add.input if i in values]
            if len(found) != 1 or len(other) != 1 or not only_reader(found[0][1], add):
                continue
            matmul, bias = found[0][0], values[other[0]]
        else:
            add = None
        if matmul is None or matmul.op_type != "MatMul" or matmul.input[1] not in values:
            continue
        weight = values[matmul.input[1]]
        if weight.ndim != 2 or (bias is not None and bias.shape != (weight.shape[1],)):
            continue
        if not only_reader((add or matmul).output[0], split):
            continue
        parts = len(split.output)
        sizes = values.get(split.input[1]) if len(split.input) > 1 and split.input[1] else None
        if sizes is None:
            if weight.shape[1] % parts:
                continue
            sizes = [weight.shape[1] // parts] * parts
        sizes = [int(v) for v in sizes]
        if sum(sizes) != weight.shape[1] or len(sizes) != parts:
            continue
        ends = np.cumsum([0, *sizes])
        nodes = []
        for j, out in enumerate(split.output):
            w_name = f"{matmul.input[1]}/part{j}"
            added.append(numpy_helper.from_array(np.ascontiguousarray(weight[:, ends[j]:ends[j + 1]]), w_name))
            mm = helper.make_node("MatMul", [matmul.input[0], w_name], [out if add is None else f"{out}/matmul"],
                                  name=f"{matmul.name}/part{j}")  # fmt: skip
            set_props(mm, props(matmul))
            nodes.append(mm)
            if add is not None:
                b_name = f"{out}/bias"
                added.append(numpy_helper.from_array(np.ascontiguousarray(bias[ends[j]:ends[j + 1]]), b_name))
                plus = helper.make_node("Add", [mm.output[0], b_name], [out], name=f"{add.name}/part{j}")
                set_props(plus, props(add))
                nodes.append(plus)
        replace[id(split)] = nodes
        replace[id(matmul)] = []
        if add is not None:
            replace[id(add)] = []
    if not replace:
        return 0
    _replace_nodes(model, replace)
    model.graph.initializer.extend(added)
    read = {i for n in model.graph.node for i in n.input} | graph_outputs
    for t in [t for t in model.graph.initializer if t.name not in read]:
        model.graph.initializer.remove(t)
    return sum(1 for nodes in replace.values() if nodes)


def unmerge_shared_products(model) -> int:
    """Replace each ``MatMul(a, Concat(b1, b2, axis=-1))`` whose product only a two-way ``Split`` on the
    last axis reads, or only a ``Reshape`` to ``[0, 0, 2, -1]`` read by a ``Gather`` of index 0 and one of
    index 1 on axis 2 (the AFT-full body), by ``MatMul(a, b1)`` and ``MatMul(a, b2)`` writing those outputs;
    node metadata kept. Returns the number of products split; edits ``model`` in place."""
    from onnx import helper

    values, producer, readers, graph_outputs = _wiring(model)

    def read_by(name: str) -> list:
        return [] if name in graph_outputs else readers.get(name, [])

    def attr(node, name, default=None):
        return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)

    replace: dict[int, list] = {}
    for matmul in [n for n in model.graph.node if n.op_type == "MatMul" and n.domain in ("", "ai.onnx")]:
        cat = producer.get(matmul.input[1])
        if cat is None or cat.op_type != "Concat" or len(cat.input) != 2 or attr(cat, "axis") != -1:
            continue
        if len(read_by(cat.output[0])) != 1:
            continue
        users = read_by(matmul.output[0])
        if len(users) != 1:
            continue
        user, outputs, gone = users[0], None, []
        if user.op_type == "Split" and attr(user, "axis") == -1 and len(user.output) == 2:
            sizes = values.get(user.input[1]) if len(user.input) > 1 and user.input[1] else None
            if sizes is None or len(set(int(v) for v in sizes)) == 1:  # equal halves: each one operand's width
                outputs, gone = list(user.output), [user]
        elif user.op_type == "Reshape" and [int(v) for v in values.get(user.input[1], [])] == [0, 0, 2, -1]:
            gathers = read_by(user.output[0])
            index = {int(values[g.input[1]]): g for g in gathers if g.op_type == "Gather" and attr(g, "axis") == 2
                     and g.input[1] in values and values[g.input[1]].ndim == 0}  # fmt: skip
            if len(gathers) == 2 and sorted(index) == [0, 1]:
                outputs, gone = [index[0].output[0], index[1].output[0]], [user, *gathers]
        if outputs is None:
            continue
        parts = [helper.make_node("MatMul", [matmul.input[0], cat.input[j]], [outputs[j]], name=f"{matmul.name}/part{j}")
                 for j in (0, 1)]  # fmt: skip
        for n in parts:
            set_props(n, props(matmul))
        replace[id(matmul)] = parts
        for n in (cat, *gone):
            replace[id(n)] = []
    # each product goes where its matmul was (the later of its operands is ready there)
    _replace_nodes(model, replace)
    return sum(1 for nodes in replace.values() if nodes)
