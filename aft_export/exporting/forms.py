"""An exported graph in each export target's form: the default form (``tensorrt``: opset 18,
one ``com.aft`` node per AFT layer, model-local functions) is the one every other form is made
from, by :func:`aft_export.exporting.trt8.to_tensorrt8` and :func:`aft_export.exporting.portable.to_portable`.

The exporter ends with :func:`to_target`; ``aft-export quantize`` takes the same step when it is
asked for another target than its fp32 file's (``QuantizeOptions.target``), so that the int8 file
for a CPU can be made from the default export. Only that direction exists: a ``tensorrt8`` or
``portable`` graph has its functions inlined (and ``tensorrt8`` its LayerNorms decomposed, at
opset 17), which nothing here undoes, and a conversion between those two would give a graph the
exporter never writes (:func:`conversion_problem` says why, for the caller's message).
"""

from __future__ import annotations

from aft_export.errors import AFTExportError
from aft_export.exporting.portable import to_portable
from aft_export.exporting.trt8 import to_tensorrt8
from aft_export.artifacts.onnxio import check_graph, read_metadata, set_metadata
from aft_export.options import DEFAULT_TARGET, TARGET_OPSETS, TARGETS

SOURCE_OPSET = 18  # the opset the exporter converts from (ExportOptions: the other targets are exported at 18)


def to_target(proto, target: str):
    """The default target's graph (opset 18, com.aft functions, as
    :func:`aft_export.exporting.exporter.export_graph` makes it before its last step) in ``target``'s
    form, checked, its metadata naming the target and its opset: the step the exporter ends with."""
    if target not in TARGETS:
        raise AFTExportError(f"unknown export target {target!r}; choose one of {TARGETS}")
    if target == DEFAULT_TARGET:
        return proto
    out = {"tensorrt8": to_tensorrt8, "portable": to_portable}[target](proto)
    props = read_metadata(out)
    props.update({"export_target": target, "opset": str(TARGET_OPSETS[target])})
    set_metadata(out, props)
    check_graph(out)
    return out


def conversion_problem(model, source: str, target: str) -> str | None:
    """Why ``model``, a graph of the ``source`` target, cannot be put in ``target``'s form by
    :func:`to_target` (None: it can, or it is in that form already). Said as the reason only: the
    caller adds what to do (export with that target)."""
    if source == target:
        return None
    if source != DEFAULT_TARGET:
        how = ("functions inlined, LayerNorm decomposed, opset 17" if source == "tensorrt8" else
               "functions inlined, opset 19")  # fmt: skip
        return f"a {source} graph ({how}) is made once, from the {DEFAULT_TARGET} form, and not converted again"
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset != SOURCE_OPSET:
        return (f"the {target} form is made from the {DEFAULT_TARGET} form at opset {SOURCE_OPSET}, as the exporter "
                f"makes it; this graph is opset {opset}")  # fmt: skip
    return None
