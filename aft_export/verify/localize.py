"""Where an artifact diverges: the first graph node whose output leaves tolerance.

An fp16 or int8 graph is made from an fp32 export, and keeps that export's value
names for every node it did not add (Casts, Q/DQ). Both graphs are run with every
shared value exposed as an output, on the same images, and each value is compared
with its fp32 counterpart in the artifact's execution order. The first one whose
relative error (max abs difference over the reference's max abs) exceeds the
precision's limit (:data:`aft_export.verify.compare.INTERMEDIATE_REL`) is where the divergence
starts; the exporter's node metadata names the PyTorch module it came from. A node without
that metadata (another tool's file, or one rewritten by a tool that drops it) takes the
module of the reference's node that produces the same value (the reference is always our
export, which carries it); a module known from neither is None, never ``""`` (the root). The
artifact runs on the backend it failed on; the fp32 reference in ONNX Runtime on the CPU.
"""

from __future__ import annotations

import numpy as np

from aft_export.verify.compare import INTERMEDIATE_REL, relative_error
from aft_export.errors import AFTExportError
from aft_export.artifacts.graph import module_by_output, node_module, with_outputs
from aft_export.artifacts.onnxio import load_onnx
from aft_export.runners import ModelInfo, OrtRunner, onnx_runner
from aft_export.runtimes import DEFAULT_BACKEND

SKIP_OPS = ("QuantizeLinear", "DequantizeLinear", "Cast")
_INFO = ModelInfo([], (0, 0, 0), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))  # the graphs are fed directly


def localize(reference, artifact, images: np.ndarray, precision: str, limit: float | None = None,
             backend: str = DEFAULT_BACKEND) -> dict:  # fmt: skip
    """Compare every shared intermediate value of ``artifact`` with the fp32 ``reference``
    (paths or ModelProtos) on ``images``; returns the first divergent node and the worst."""
    import onnx

    whole = ("localisation", "the comparison above stands, without the node where it diverges")
    ref = reference if isinstance(reference, onnx.ModelProto) else load_onnx(reference, whole=whole)
    art = artifact if isinstance(artifact, onnx.ModelProto) else load_onnx(artifact, whole=whole)
    limit = INTERMEDIATE_REL.get(precision, 1e-4) if limit is None else limit
    ref_values = {o for n in ref.graph.node for o in n.output}
    ref_modules = module_by_output(ref)
    order = [(n, o) for n in art.graph.node if n.op_type not in SKIP_OPS for o in n.output if o in ref_values]
    if not order:
        raise AFTExportError("the artifact shares no intermediate values with the reference graph")
    names = list(dict.fromkeys(o for _, o in order))
    x = np.ascontiguousarray(images[:16], dtype=np.float32)
    ref_runner = OrtRunner(with_outputs(ref, names), info=_INFO)
    art_runner = onnx_runner(with_outputs(art, names), backend, info=_INFO)
    got_ref = ref_runner.run({ref_runner.input_name: x})
    got_art = art_runner.run({art_runner.input_name: x})
    rows = []
    for node, value in order:
        r, a = got_ref.get(value), got_art.get(value)
        if r is None or a is None or not np.issubdtype(np.asarray(r).dtype, np.floating):
            continue
        r64, a64 = np.asarray(r, np.float64), np.asarray(a, np.float64)
        if r64.shape != a64.shape:
            continue
        finite = np.isfinite(a64)
        rel = relative_error(r64, a64)
        mod = node_module(node) or ref_modules.get(value)
        rows.append({"node": node.name, "op_type": node.op_type, "value": value,
                     "module": mod[0] if mod else None, "module_type": mod[1] if mod else None,
                     "max_abs": float(np.abs(np.where(finite, a64, 0.0) - r64).max()) if r64.size else 0.0,
                     "rel": rel, "nonfinite": int((~finite).sum()),
                     "diverged": bool(rel > limit or (~finite).any())})  # fmt: skip
    first = next((r for r in rows if r["diverged"]), None)
    worst = sorted(rows, key=lambda r: -r["rel"])[:5]
    return {"limit_rel": limit, "compared": len(rows), "first": first, "worst": worst, "nodes": rows}
