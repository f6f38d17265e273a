"""fp16: an fp16 graph, and the fp16 rest of an int8 graph; fp32 inputs and outputs either
way; and every NaN or Inf an fp16 value takes on the calibration images (counted inside the
graph, per batch).

What stays fp32 is one fixed rule per layer kind
(:data:`aft_export.artifacts.fp32_rule.FP32_RULE`: the AFT core and LayerNorm), the same for an
fp16 graph and for an int8 graph's rest; it lives a floor below, where TensorRT 8's per-layer
precision flags (:mod:`aft_export.tensorrt.nvtools`) read it too.

The int8 graph's fp16 rest is written at opset 19, where ``QuantizeLinear`` takes fp16 and
``DequantizeLinear`` returns fp16 through fp16 scales (opset 18 takes fp32 only and would need
a Cast on each side of every Q/DQ pair): TensorRT 10.3+ and TensorRT-RTX parse it into
fp16 dequantisations that feed the int8 layers directly (docs/quantize.md has both forms'
parsed networks side by side).
"""

from __future__ import annotations

import numpy as np

from aft_export.data.images import Preprocessing
from aft_export.errors import AFTExportError, Named, said
from aft_export.artifacts.fp32_rule import FP32_KINDS, FP32_RULE, fp32_nodes
from aft_export.artifacts.graph import aft_kind, node_module, toposort, with_outputs
from aft_export.quantization import runs
from aft_export.quantization.placement import quiet_ort_quantizer


# ops whose opset-19 schema differs from their opset-18 one only by types our graphs never
# hold (float8) or by attributes and modes whose defaults keep the opset-18 meaning (AveragePool:
# dilations, default 1)
SAME_AT_19 = ("AveragePool", "Cast", "CastLike", "Constant", "DequantizeLinear", "Equal", "Identity", "If",
              "Loop", "Pad", "QuantizeLinear", "Reshape", "Resize", "Scan", "Shape", "Size")  # fmt: skip


def _blocked_ops(kinds: tuple[str, ...]) -> list[str]:
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST

    return list(DEFAULT_OP_BLOCK_LIST) + [t for k in FP32_RULE if k.name in kinds for t in k.op_types]


def _rule_record(model, kinds: tuple[str, ...], nodes: list[str]) -> dict:
    present = {aft_kind(n) or n.op_type for n in model.graph.node}  # only what the model holds is listed
    modules = {(node_module(n) or ("", ""))[1] for n in model.graph.node}
    rule = [k for k in FP32_RULE if k.name in kinds and not (k.only_where_present and not set(k.modules) & modules)]
    return {"fp32_rule": [k.name for k in rule], "fp32_op_types": sorted({t for k in rule for t in k.op_types} & present),
            "fp32_modules": [m for k in rule for m in k.modules], "fp32_nodes": nodes, "io": "fp32"}  # fmt: skip


def _convert(model, nodes: list[str], kinds: tuple[str, ...], also_blocked: tuple[str, ...] = ()):
    """``model`` in fp16 but ``nodes``, the op types of the fixed rule's ``kinds`` and
    ``also_blocked`` (benchmarks/int8_rest_forms.py: Q/DQ kept fp32, the opset-18 form)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    with quiet_ort_quantizer():
        converted = convert_float_to_float16(model, keep_io_types=True,
                                             op_block_list=_blocked_ops(kinds) + list(also_blocked),
                                             node_block_list=nodes)  # fmt: skip
    drop_round_trips(converted)
    toposort(converted)  # the converter appends the input casts after their readers
    return converted


def drop_round_trips(model) -> int:
    """Remove the fp32 -> fp16 -> fp32 cast pairs ONNX Runtime's converter writes between two
    nodes it keeps in fp32 (it casts every kept node's outputs to fp16 and its inputs back):
    without this, a decomposed AFT core or LayerNorm kept "in fp32" would round each of its
    values to fp16 on the way to the next. The readers of the second cast read the fp32 value
    itself. Returns the number of round trips removed."""
    from onnx import TensorProto

    producer = {o: n for n in model.graph.node for o in n.output}
    outputs = {o.name for o in model.graph.output}
    # the converter types every value it casts (it casts only values shape inference typed)
    types = {v.name: v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.value_info]}

    def cast_to(node) -> int | None:
        return next((a.i for a in node.attribute if a.name == "to"), None) if node.op_type == "Cast" else None

    rename, removed = {}, 0
    for node in list(model.graph.node):
        first = producer.get(node.input[0]) if cast_to(node) == TensorProto.FLOAT else None
        if first is None or cast_to(first) != TensorProto.FLOAT16 or node.output[0] in outputs:
            continue
        # a round trip only where the first cast reads fp32 (not an fp16 value, nor an int one from Shape)
        if types.get(first.input[0]) == TensorProto.FLOAT and first.input[0] not in outputs:
            rename[node.output[0]] = first.input[0]
            model.graph.node.remove(node)
            removed += 1
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
    read = {i for n in model.graph.node for i in n.input} | outputs
    for node in [n for n in model.graph.node if cast_to(n) == TensorProto.FLOAT16 and n.output[0] not in read]:
        model.graph.node.remove(node)
    kept = {o for n in model.graph.node for o in n.output}
    for vi in [v for v in model.graph.value_info if v.name in rename or (v.name not in kept and v.name not in read)]:
        model.graph.value_info.remove(vi)
    return removed


def to_fp16(model, core: list[str], keep_fp32: list[str] = (), kinds: tuple[str, ...] = FP32_KINDS):
    """An fp16 graph: everything in fp16 but what :data:`FP32_RULE` (``kinds`` of it) and
    ``keep_fp32`` (node names) keep in fp32. Returns the graph and its recipe entries."""
    nodes = list(dict.fromkeys(fp32_nodes(model, core, kinds) + list(keep_fp32)))
    return _convert(model, nodes, kinds), _rule_record(model, kinds, nodes)


def int8_rest_to_fp16(qmodel, core: list[str], keep_fp32: list[str] = (), kinds: tuple[str, ...] = FP32_KINDS):
    """An int8 graph (Q/DQ, the rest fp32) with its rest in fp16, as :func:`to_fp16` keeps it,
    at opset 19: activations enter ``QuantizeLinear`` in fp16 and ``DequantizeLinear`` returns
    fp16 through fp16 scales. Returns the graph and its recipe entries."""
    work = type(qmodel)()
    work.CopyFrom(qmodel)
    upgrade_to_opset_19(work)
    nodes = list(dict.fromkeys(fp32_nodes(work, core, kinds) + list(keep_fp32)))
    converted = _convert(work, nodes + _qdq_feeding(work, nodes), kinds)
    scales = _scale_error(qmodel, converted)
    return converted, {**_rule_record(work, kinds, nodes), "opset": 19,
                       "scales": "fp16", "scale_max_relative_error": scales}  # fmt: skip


def _qdq_feeding(model, fp32: list[str]) -> list[str]:
    """The Q/DQ pairs whose values only fp32 nodes read (the AFT core's own int8 MatMuls with
    ``quantize_aft_core``, a node kept fp32 that reads a quantised value): they stay fp32 too, so
    each such DequantizeLinear feeds its layer directly, with no cast between."""
    keep = set(fp32)
    readers: dict[str, list] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    dq = [n for n in model.graph.node if n.op_type == "DequantizeLinear"
          and readers.get(n.output[0]) and all(r.name in keep for r in readers[n.output[0]])]  # fmt: skip
    names = {n.name for n in dq}
    producer = {o: n for n in model.graph.node for o in n.output}
    for node in dq:
        q = producer.get(node.input[0])
        if q is not None and q.op_type == "QuantizeLinear" and all(r.name in names for r in readers[q.output[0]]):
            names.add(q.name)
    return [n.name for n in model.graph.node if n.name in names]


def upgrade_to_opset_19(model) -> None:
    """Declare opset 19 (IR 9 at least) for the graph and its functions, in place. Every op the
    graph or a function uses must mean at 19 what it meant before (:data:`SAME_AT_19`, or a
    schema unchanged since); anything else is refused rather than silently reinterpreted."""
    from onnx import defs

    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if current > 19:
        raise AFTExportError(said("the graph is opset {current}; an fp16 rest is written at opset 19: export at "
                                  "opset 18 or 19, or keep the rest in fp32 ({rest_precision_set})", "quantize",
                                  rest_precision_set=Named('rest_precision', 'fp32'), current=current))  # fmt: skip
    changed = set()
    nodes = list(model.graph.node) + [n for f in model.functions for n in f.node]
    for op in {n.op_type for n in nodes if n.domain in ("", "ai.onnx")}:
        try:
            then, now = (defs.get_schema(op, current).since_version, defs.get_schema(op, 19).since_version)
        except defs.SchemaError:
            continue  # not a default-domain op at that opset: the checker decides
        if then != now and op not in SAME_AT_19:
            changed.add(op)
    if changed:
        raise AFTExportError(said("{value} change meaning between opset {current} and 19, where an fp16 rest is "
                                  "written; keep the rest in fp32 ({rest_precision_set})", "quantize",
                                  rest_precision_set=Named('rest_precision', 'fp32'),
                                  value=', '.join(sorted(changed)), current=current))  # fmt: skip
    for imports in [model.opset_import] + [f.opset_import for f in model.functions]:
        for o in imports:
            if o.domain in ("", "ai.onnx"):
                o.version = 19
    model.ir_version = max(model.ir_version, 9)


def _scale_error(before, after) -> float:
    """The largest relative change of a Q/DQ scale from fp32 to fp16. Scales too small for
    fp16's normal range (a channel of near-zero weights) would lose their precision there:
    such a graph is refused, with the way out."""
    from onnx import numpy_helper

    scales = {n.input[1] for n in after.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")}
    # the scales only: converting every weight of both graphs would hold the model twice more
    old = {t.name: numpy_helper.to_array(t) for t in before.graph.initializer if t.name in scales}
    new = {t.name: numpy_helper.to_array(t) for t in after.graph.initializer if t.name in scales}
    worst = 0.0
    for node in after.graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear") or node.input[1] not in old:
            continue
        a = old[node.input[1]].astype(np.float64)
        b = new[node.input[1]].astype(np.float64)
        if not (np.isfinite(b).all() and (b > 0).all()):
            raise AFTExportError(said("the scale of {name} is not a positive fp16 number; keep the rest in fp32 "
                                      "({rest_precision_set})", "quantize",
                                      rest_precision_set=Named('rest_precision', 'fp32'), name=node.name))  # fmt: skip
        err = float(np.max(np.abs(b - a) / a)) if a.size else 0.0
        if err > 1e-3:  # fp16 rounds a normal number by at most 2**-11 of it
            raise AFTExportError(said("the scale of {name} ({value:.3g}) is below fp16's normal range and would "
                                      "change by {value2:.2g}%; keep the rest in fp32 ({rest_precision_set}) or "
                                      "the node out of int8 ({exclude})", "quantize",
                                      rest_precision_set=Named('rest_precision', 'fp32'), name=node.name,
                                      value=float(a.min()), value2=100 * err))  # fmt: skip
        worst = max(worst, err)
    return float(f"{worst:.3g}")


def nonfinite_count(arr: np.ndarray) -> int:
    """How many of ``arr``'s values are NaN or +-Inf (0 for integers). fp16 is told by its bits
    (exponent all ones), which NumPy counts ~10x faster than ``isfinite`` on half floats; the
    probe reads every fp16 value of every calibration image."""
    if arr.dtype == np.float16:
        bits = np.ascontiguousarray(arr).view(np.uint16)
        return int(np.count_nonzero((bits & 0x7C00) == 0x7C00))
    if np.issubdtype(arr.dtype, np.floating):
        return int(arr.size - np.count_nonzero(np.isfinite(arr)))
    return 0


def nonfinite(model, prep: Preprocessing, tensors: np.ndarray, batch: int = 64) -> list[dict]:
    """Every fp16 value (and the output) that took NaN/Inf on the calibration images,
    with how often. The values are graph outputs of the probe, so ONNX Runtime must
    materialise each in fp16 (on the CPU it otherwise computes fp16 chains in fp32 and
    drops the casts between, hiding an overflow); each run is a chunk of the batch
    whose values fit in CALIBRATION_FETCH_BYTES, reduced to a count per value at once."""
    from onnx import TensorProto

    values = [v.name for v in model.graph.value_info if v.type.tensor_type.elem_type == TensorProto.FLOAT16]
    values += [o.name for o in model.graph.output if o.name not in values]
    producer = {o: n for n in model.graph.node for o in n.output}
    bad: dict[str, int] = {}

    def count(fetched):
        for name, arr in fetched.items():
            c = nonfinite_count(arr)
            if c:
                bad[name] = bad.get(name, 0) + c

    feed = runs.reader(model, tensors, batch)
    runs.stream(runs.runner(with_outputs(model, values), prep), feed, values, count)
    report = []
    for name, count in bad.items():
        node = producer.get(name)
        mod = node_module(node) if node is not None else None
        report.append({"value": name, "node": node.name if node is not None else "", "count": count,
                       "module": mod[0] if mod else ""})  # fmt: skip
    return report


# names this module exported before the rule moved to aft_export.artifacts.fp32_rule: they keep working, with a
# DeprecationWarning, until the release that drops renamed names (the two tuples, used by nothing, go then)
_OLD_NAMES = {
    "Fp32Kind": ("is now aft_export.artifacts.fp32_rule.Fp32Kind", lambda: __import__(
        "aft_export.artifacts.fp32_rule", fromlist=["Fp32Kind"]).Fp32Kind),
    "FP16_KEEP_FP32_OPS": ("is unused: derive it from aft_export.artifacts.fp32_rule.FP32_RULE",
                           lambda: tuple(t for k in FP32_RULE if k.name != "aft_core" for t in k.op_types)),
    "FP16_KEEP_FP32_MODULES": ("is unused: derive it from aft_export.artifacts.fp32_rule.FP32_RULE",
                               lambda: tuple(m for k in FP32_RULE for m in k.modules)),
}  # fmt: skip


def __getattr__(name: str):
    if name in _OLD_NAMES:
        import warnings

        from aft_export.version import RENAMED_UNTIL

        said, value = _OLD_NAMES[name]
        warnings.warn(f"aft_export.quantization.fp16.{name} {said}; the old name goes in aft-export {RENAMED_UNTIL}",
                      DeprecationWarning, stacklevel=2)  # fmt: skip
        return value()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
