"""The portable form of an exported graph: one file every conforming ONNX runtime reads.

The default export is made for TensorRT 10.3+: opset 18 with each AFT layer as a
``com.aft`` node whose body is a model-local function. ONNX Runtime runs that, but
OpenVINO does not inline model-local functions of a custom domain ("No conversion rule
found for operations: com.aft.AFTConv"), and the ONNX reference evaluator
(``onnx.reference``) implements ``DequantizeLinear`` from opset 19 on only, so it cannot
load an int8 graph of opset 18. The portable form is, on top of the exported graph:

* model-local functions inlined (as in the TensorRT 8 form, :func:`aft_export.artifacts.graph.inline_functions`,
  which keeps every node's module metadata): only standard ``ai.onnx`` ops remain;
* opset 19, through ONNX's version converter: the lowest opset >= 19 (the reference
  evaluator's ``DequantizeLinear``) that ONNX Runtime 1.18+ (opset <= 21), OpenVINO and
  TensorRT 10.3+/TensorRT-RTX (opset <= 20) all read; quantising a portable file keeps its
  opset, so its int8 ``DequantizeLinear`` is version 19;
* IR version 9, the IR of opset 19 (ONNX 1.14), which every one of those reads;
* each fused projection split back into one MatMul per part, and each merged product of the AFT
  core back into two (:func:`aft_export.exporting.rewrite.split_fused_projections`,
  :func:`~aft_export.exporting.rewrite.unmerge_shared_products`): the CPU readers run them faster
  than the fused products and their splits.

What it does not do, unlike ``tensorrt8``: go down to opset 17 (reductions with ``axes``
attributes, Constants as tensors, ``Shape`` without start/end, no ``CastLike`` or
``LayerNormalization``): those are TensorRT 8's parser's needs, and every runtime above
reads the opset-19 ops as written. The numerics are the exported graph's (the exporter
verifies the result against PyTorch).
"""

from __future__ import annotations

from aft_export.errors import AFTExportError, Named, said
from aft_export.artifacts.graph import inline_functions
from aft_export.exporting.rewrite import split_fused_projections, unmerge_shared_products

OPSET = 19
IR_VERSION = 9  # ONNX 1.14's IR, the first with opset 19


def to_portable(model, rewrites: bool = True):
    """A new ModelProto: ``model`` (opset 18, com.aft functions) with the functions inlined,
    only standard ops, converted to opset 19 (``rewrites`` False: without the CPU readers' rewrites,
    to measure them: benchmarks/portable_rewrites.py)."""
    import onnx

    out = inline_functions(model)
    if rewrites:
        split_fused_projections(out)
        unmerge_shared_products(out)
    bad = sorted({f"{n.domain}::{n.op_type}" for n in out.graph.node if n.domain not in ("", "ai.onnx")})
    if bad:
        raise AFTExportError(f"the portable form cannot hold custom ops without a function body: {bad}")
    del out.functions[:]
    keep = [o for o in out.opset_import if o.domain in ("", "ai.onnx")]
    del out.opset_import[:]
    out.opset_import.extend(keep)
    version = keep[0].version if keep else OPSET
    if version > OPSET:
        raise AFTExportError(said("the portable form is opset {OPSET}; this graph is opset {version}: leave "
                                  "{opset} out with {target_set}", "export",
                                  target_set=Named('target', 'portable'), OPSET=OPSET, version=version))  # fmt: skip
    if version < OPSET:
        props = list(out.metadata_props)
        meta = {i: list(n.metadata_props) for i, n in enumerate(out.graph.node)}
        names = [n.name for n in out.graph.node]
        converted = onnx.version_converter.convert_version(out, OPSET)
        if [n.name for n in converted.graph.node] == names:  # the converter keeps 18 -> 19 node for node
            for i, node in enumerate(converted.graph.node):
                if not node.metadata_props:
                    node.metadata_props.extend(meta[i])
        if not converted.metadata_props:
            converted.metadata_props.extend(props)
        out = converted
    out.ir_version = IR_VERSION
    return out
