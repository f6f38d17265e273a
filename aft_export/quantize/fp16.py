"""fp16 mixed precision: the graph in fp16 except the AFT core and LayerNormalization
(overflow and underflow risks), fp32 inputs and outputs; and every NaN or Inf an fp16
value takes on the calibration images (counted inside the graph, per batch)."""

from __future__ import annotations

import numpy as np

from aft_export.calib import Preprocess
from aft_export.graph import AFT_LAYER_TYPES, aft_kind, node_module, with_outputs
from aft_export.options import QuantizeOptions
from aft_export.quantize import runs
from aft_export.quantize.placement import quiet_ort_quantizer

FP16_KEEP_FP32_OPS = ("LayerNormalization",)
# the same, for graphs where LayerNorm is decomposed (the TensorRT 8 form): by PyTorch module
FP16_KEEP_FP32_MODULES = ("LayerNorm",)


def to_fp16(model, core: list[str], opts: QuantizeOptions):
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    blocked_ops = list(DEFAULT_OP_BLOCK_LIST) + list(FP16_KEEP_FP32_OPS) + list(AFT_LAYER_TYPES)
    norms = [n.name for n in model.graph.node if (node_module(n) or ("", ""))[1] in FP16_KEEP_FP32_MODULES]
    exclude = list(dict.fromkeys(core + norms + list(opts.exclude)))
    with quiet_ort_quantizer():
        converted = convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked_ops,
                                             node_block_list=exclude)  # fmt: skip
    present = {aft_kind(n) or n.op_type for n in model.graph.node}  # only what the model holds is listed
    recipe = {"fp32_op_types": sorted((set(FP16_KEEP_FP32_OPS) | set(AFT_LAYER_TYPES)) & present),
              "fp32_modules": list(FP16_KEEP_FP32_MODULES), "fp32_nodes": exclude, "io": "fp32"}  # fmt: skip
    return converted, recipe


def nonfinite(model, prep: Preprocess, tensors: np.ndarray, batch: int = 64) -> list[dict]:
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
            c = int((~np.isfinite(arr)).sum()) if np.issubdtype(arr.dtype, np.floating) else 0
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
