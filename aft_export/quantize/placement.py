"""Q/DQ placement: ONNX Runtime's QDQ quantiser on precomputed ranges, with TensorRT's
explicit-quantisation settings, then one Q -> DQ pair per consumer.

Only ``MatMul``/``Gemm``/``Conv`` are quantised (:data:`QUANTIZED_OP_TYPES`), at their
inputs only; which nodes stay float is the caller's ``exclude`` list.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path

from aft_export.graph import toposort
from aft_export.options import QuantizeOptions

QUANTIZED_OP_TYPES = ("MatMul", "Gemm", "Conv")


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

    extra = {
        "ActivationSymmetric": True,  # zero-point 0, as TensorRT requires
        "WeightSymmetric": True,
        # Q/DQ at the inputs of the int8 layers only, as TensorRT's explicit quantisation
        # places them; a quantised projection output would feed int8-rounded keys to the
        # AFT core's exp, which is exactly what keeping the core in float is meant to avoid.
        "OpTypesToExcludeOutputQuantization": list(QUANTIZED_OP_TYPES),
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
                op_types_to_quantize=list(QUANTIZED_OP_TYPES), per_channel=opts.per_channel,
                reduce_range=opts.weight_bits == 7, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                nodes_to_exclude=exclude, calibrate_method=ort_method(opts.method), extra_options=extra,
                calibration_cache_path=str(ranges),
            )  # fmt: skip
        qmodel = onnx.load(str(dst))
    qdq_per_consumer(qmodel)
    return qmodel


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


def quantized_nodes(model) -> list[str]:
    """The MatMul/Gemm/Conv nodes that compute in int8: their inputs come from DequantizeLinear."""
    dq_outputs = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return [n.name for n in model.graph.node if n.op_type in QUANTIZED_OP_TYPES
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
