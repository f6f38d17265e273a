"""Q/DQ placement: ONNX Runtime's QDQ quantiser on precomputed ranges, with TensorRT's
explicit-quantisation settings, then one Q -> DQ pair per consumer.

Only ``MatMul``/``Gemm``/``Conv`` are quantised (:data:`QUANTIZED_OP_TYPES`; ``quantize_op_types``
names others), at their inputs only; which nodes stay float is :func:`select`'s choice: the
AFT core, and what the options keep out by name, by regular expression over node names and
by op type.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from aft_export.errors import AFTExportError, Named, said
from aft_export.artifacts.graph import toposort
from aft_export.options import QUANTIZED_OP_TYPES, QuantizeOptions
from aft_export.readers import as_typed, matching


def op_types(opts: QuantizeOptions) -> tuple[str, ...]:
    """The op types an int8 run quantises: ``quantize_op_types``, else :data:`QUANTIZED_OP_TYPES`."""
    return tuple(opts.quantize_op_types) or QUANTIZED_OP_TYPES


@dataclass
class Selection:
    """Which nodes an int8 graph keeps out of int8, and why (the recipe records it)."""

    op_types: tuple[str, ...]
    exclude: list[str]  # every node kept out of int8: the core, then each option's nodes, once each
    by_regex: dict[str, list[str]]  # exclude_regex pattern -> the nodes it matched
    by_op_type: dict[str, list[str]]  # exclude_op_types op type -> its nodes
    keep_fp32: dict[str, list[str]]  # keep_fp32 pattern -> the nodes it matched
    stem: list[str] = field(default_factory=list)  # the stem kept out of int8 (`stem_fp32`)

    def fp32_nodes(self) -> list[str]:
        return list(dict.fromkeys(n for names in self.keep_fp32.values() for n in names))

    def record(self) -> dict:
        """The op types, and each choice given with how many nodes it matched."""
        chosen = {"exclude_regex": self.by_regex, "exclude_op_types": self.by_op_type, "keep_fp32": self.keep_fp32}
        return {"op_types": list(self.op_types),
                **{k: {p: len(v) for p, v in c.items()} for k, c in chosen.items() if c},
                **({"stem_fp32": list(self.stem)} if self.stem else {})}  # fmt: skip


def keep_fp32_nodes(model, opts: QuantizeOptions) -> dict[str, list[str]]:
    """``keep_fp32`` pattern -> the graph's nodes it matches; a pattern that matches none is an error."""
    names = [n.name for n in model.graph.node]
    found = {p: matching(names, p, "keep_fp32") for p in opts.keep_fp32}
    _no_match("keep_fp32", found, names)
    return found


def check_exclude(model, opts: QuantizeOptions) -> None:
    """Every ``exclude`` name is a node of the graph (int8 and fp16 alike: a misspelt name would
    keep nothing out, silently)."""
    names = [n.name for n in model.graph.node]
    have = set(names)
    unknown = [n for n in opts.exclude if n not in have]
    if unknown:
        raise AFTExportError(said("{exclude} names nodes the graph does not have: {value}; give node names as the "
                                  "graph has them, e.g. {value2!r}", "quantize", value=', '.join(unknown[:5]),
                                  value2=names[0]))  # fmt: skip


def select(model, opts: QuantizeOptions, core: list[str]) -> Selection:
    """The nodes an int8 run keeps in floating point: the AFT core (unless
    ``quantize_aft_core``), ``exclude`` (exact names), ``exclude_regex``, ``exclude_op_types``,
    ``keep_fp32`` and, with ``stem_fp32``, the stem (the graph's first node of a quantised op type: the
    layer on the image's channels). A name, pattern or op type that matches no node of the graph is a user
    error naming its option, as is an op type to quantise that no node has."""
    check_exclude(model, opts)
    names = [n.name for n in model.graph.node]
    types = op_types(opts)
    present = {n.op_type for n in model.graph.node}
    missing = [t for t in types if t not in present]
    if opts.quantize_op_types and missing:
        raise AFTExportError(said("{quantize_op_types} names {value}, which no node of the graph is; the graph has "
                                  "{value2}", "quantize", value=', '.join(missing),
                                  value2=', '.join(sorted(present))))  # fmt: skip
    by_regex = {p: matching(names, p, "exclude_regex") for p in opts.exclude_regex}
    _no_match("exclude_regex", by_regex, names)
    by_op_type = {t: [n.name for n in model.graph.node if n.op_type == t] for t in opts.exclude_op_types}
    for t, found in by_op_type.items():
        if t not in types or not found:
            why = (said("it is not quantised ({quantize_op_types}: {value})", "quantize", value=', '.join(types)) if t not in types
                   else "no node of the graph is one")  # fmt: skip
            raise AFTExportError(said("{exclude_op_types} names {t}, but {why}; name a quantised op type the graph "
                                      "has", "quantize", t=t, why=why))
    keep = keep_fp32_nodes(model, opts)
    excluded = ([] if opts.quantize_aft_core else list(core)) + list(opts.exclude)
    for group in (by_regex, by_op_type, keep):
        excluded += [n for found in group.values() for n in found]
    stem = [n.name for n in model.graph.node if n.op_type in types][:1] if opts.stem_fp32 else []
    return Selection(types, list(dict.fromkeys(excluded + stem)), by_regex, by_op_type, keep, stem)


def _no_match(option: str, found: dict[str, list[str]], names: list[str]) -> None:
    """A pattern that matches no node, or every node, is said so: it would keep nothing out, or
    leave the graph as it was (an empty pattern matches every name)."""
    empty = [p for p, v in found.items() if not v]
    if empty:
        raise AFTExportError(said("{option} pattern {value} matches no node of the graph (matched from the start "
                                  "of the name, as re.match; names look like {value2!r}); correct the pattern or "
                                  "leave it out", "quantize", option=Named(option), value=as_typed(empty[0]),
                                  value2=names[0]))  # fmt: skip
    every = [p for p, v in found.items() if len(set(v)) == len(set(names))]
    if every:
        raise AFTExportError(said("{option} pattern {value} matches every node of the graph ({value2}), so the "
                                  "graph would be left as it is; give a pattern that matches only the nodes to "
                                  "keep (from the start of the name: names look like {value3!r})", "quantize",
                                  option=Named(option), value=as_typed(every[0]), value2=len(set(names)),
                                  value3=names[0]))  # fmt: skip


@contextlib.contextmanager
def quiet_ort_quantizer():
    """ORT's quantiser logs advice (pre-processing) at WARNING level on every call."""
    import io

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # and prints progress notes
            yield
    finally:
        root.setLevel(level)


def ort_method(name: str):
    """ONNX Runtime's CalibrationMethod for a method of options.METHODS."""
    from onnxruntime.quantization import CalibrationMethod

    return {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
            "percentile": CalibrationMethod.Percentile}[name]  # fmt: skip


def ort_quantize(model, opts: QuantizeOptions, exclude: list[str], ranges: Path):
    """ORT's QDQ quantiser on precomputed ranges, with TensorRT's explicit-quantisation settings."""
    import onnx
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    types = list(op_types(opts))

    extra = {
        "ActivationSymmetric": True,  # zero-point 0, as TensorRT requires
        "WeightSymmetric": True,
        # Q/DQ at the inputs of the int8 layers only, as TensorRT's explicit quantisation
        # places them; a quantised projection output would feed int8-rounded keys to the
        # AFT core's exp, which is exactly what keeping the core in float is meant to avoid.
        "OpTypesToExcludeOutputQuantization": types,
        # Biases stay float: TensorRT's DequantizeLinear takes int8 (fp8/int4) inputs only,
        # and the INT32 bias DequantizeLinear that ORT writes by default is refused
        # (onnx-tensorrt issue 850; ORT's own guidance for its TensorRT provider).
        "QuantizeBias": False,
    }
    with tempfile.TemporaryDirectory(prefix="aft-quant-") as tmp:
        src, dst = Path(tmp) / "in.onnx", Path(tmp) / "out.onnx"
        onnx.save(model, str(src))
        with quiet_ort_quantizer():
            quantize_static(
                str(src), str(dst), calibration_data_reader=None, quant_format=QuantFormat.QDQ,
                op_types_to_quantize=types, per_channel=opts.per_channel,
                reduce_range=opts.weight_bits == 7, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                nodes_to_exclude=exclude, calibrate_method=ort_method(opts.method), extra_options=extra,
                calibration_cache_path=str(ranges),
            )  # fmt: skip
        qmodel = onnx.load(str(dst))
    unquantize_inputs(qmodel, exclude)
    qdq_per_consumer(qmodel)
    return qmodel


def unquantize_inputs(model, exclude: list[str]) -> int:
    """Let every node kept out of int8 read its activations unrounded. ORT's QDQ quantiser
    quantises a value once for all its readers, so a node kept out (``exclude`` and the other
    choices) that shares its input with a quantised one (``side`` and ``qkv`` both reading a
    LayerNorm) would read the dequantised, int8-rounded value. Such an input is pointed back at
    the value the QuantizeLinear reads; a Q/DQ pair left unread is removed. Returns the number
    of inputs restored."""
    producer = {o: n for n in model.graph.node for o in n.output}
    keep, restored = set(exclude), 0
    for node in model.graph.node:
        if node.name not in keep:
            continue
        for i, name in enumerate(node.input):
            dq = producer.get(name)
            q = producer.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
            if q is not None and q.op_type == "QuantizeLinear":
                node.input[i] = q.input[0]
                restored += 1
    dropped: set[str] = set()  # the scales and zero points of the pairs removed
    for _ in range(2):  # the DequantizeLinear nodes no one reads, then their QuantizeLinear
        read = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
        for node in [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")
                     and n.output[0] not in read]:  # fmt: skip
            dropped.update(node.input[1:])
            model.graph.node.remove(node)
    read = {i for n in model.graph.node for i in n.input}
    for t in [t for t in model.graph.initializer if t.name in dropped and t.name not in read]:
        model.graph.initializer.remove(t)
    return restored


def qdq_per_consumer(model) -> int:
    """Give every layer that reads a quantised activation its own Q -> DQ pair, with
    its own copies of the scale and zero point.

    ORT's quantiser writes one QuantizeLinear for a value that several layers read
    (AFT-conv's ``to_q``, ``to_k`` and ``to_v`` all read the same LayerNorm output).
    ONNX Runtime fuses ``Q -> DQ -> MatMul`` into ``MatMulIntegerToFloat`` only where
    the Q feeds that one chain; with the Q shared, the three projections ran as
    float MatMuls that dequantised their int8 weights on every call (slower than
    fp32 at batch 1). Duplicate Q nodes with the same inputs would be merged back by
    ORT's common-subexpression elimination, hence the copied scale and zero point.
    The values are unchanged (same scale, same rounding); TensorRT fuses each pair
    into its layer as before. Returns the number of Q -> DQ pairs added."""
    inits = {t.name: t for t in model.graph.initializer}
    consumers: dict[str, list] = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    outputs = {o.name for o in model.graph.output}
    nodes, tensors, added = [], [], 0
    for q in [n for n in model.graph.node if n.op_type == "QuantizeLinear"]:
        dqs = [n for n, _ in consumers.get(q.output[0], []) if n.op_type == "DequantizeLinear"]
        uses = [(dq, user, i) for dq in dqs for user, i in consumers.get(dq.output[0], [])]
        if len(uses) < 2 or len(dqs) != len(consumers.get(q.output[0], [])) or any(
            dq.output[0] in outputs for dq in dqs
        ) or not all(name in inits for name in q.input[1:3]):
            continue
        for k, (dq, user, i) in enumerate(uses[1:], start=1):
            new_q, new_dq = type(q)(), type(dq)()
            new_q.CopyFrom(q)
            new_dq.CopyFrom(dq)
            new_q.name, new_dq.name = f"{q.name}_{k}", f"{dq.name}_{k}"
            new_q.output[0], new_dq.output[0] = f"{q.output[0]}_{k}", f"{dq.output[0]}_{k}"
            new_dq.input[0] = new_q.output[0]
            for j in (1, 2):
                copy = type(inits[q.input[j]])()
                copy.CopyFrom(inits[q.input[j]])
                copy.name = f"{q.input[j]}_{k}"
                tensors.append(copy)
                new_q.input[j] = new_dq.input[j] = copy.name
            user.input[i] = new_dq.output[0]
            nodes += [new_q, new_dq]
            added += 1
        for dq in dqs[1:]:  # the first DQ now feeds the first use only
            if not any(name == dq.output[0] for n in model.graph.node for name in n.input):
                model.graph.node.remove(dq)
    if added:
        model.graph.initializer.extend(tensors)
        model.graph.node.extend(nodes)
        toposort(model)
    return added


def quantized_nodes(model, types: tuple[str, ...] = QUANTIZED_OP_TYPES) -> list[str]:
    """The nodes of the quantised op types that compute in int8: their inputs come from DequantizeLinear."""
    dq_outputs = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return [n.name for n in model.graph.node if n.op_type in types
            and any(i in dq_outputs for i in n.input)]  # fmt: skip


def restore_functions_and_metadata(out, source) -> None:
    """ORT's quantiser keeps the graph; make sure functions, opset imports for the
    custom domain and the file metadata survive as in the source."""
    have = {(f.domain, f.name, f.overload) for f in out.functions}
    for f in source.functions:
        if (f.domain, f.name, f.overload) not in have:
            out.functions.append(f)
    domains = {o.domain for o in out.opset_import}
    for o in source.opset_import:
        if o.domain not in domains:
            out.opset_import.append(o)
