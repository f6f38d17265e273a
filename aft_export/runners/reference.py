"""The ONNX reference evaluator (``onnx.reference.ReferenceEvaluator``): the spec's own
implementation of every op, in NumPy. Slow (a zoo model takes about 0.1-1 s per image
batch), so it is a judge of what a graph means, not a way to serve it.

The reference implements ``DequantizeLinear`` from opset 19 on only; a graph of an older
opset (the default export is opset 18, ``tensorrt8`` 17) has no implementation of its
``DequantizeLinear`` there. ``DequantizeLinear``-13 and -19 define the same computation
for the types both take (int8, uint8, int32 inputs with a float scale,
``y = (x - zero_point) * scale``); 19 only adds float8 inputs and float16/bfloat16
scales. So for such a graph the runner lends the opset-19 implementation to the older
version and says so in :attr:`ReferenceRunner.notes`; the portable target (opset 19)
needs no such help.
"""

from __future__ import annotations

import numpy as np

from aft_export.errors import AFTExportError
from aft_export.runners.base import ModelInfo, Runner
from aft_export.runners.ort import GraphSignature, check_signature, open_graph

FIRST_DEQUANTIZE = 19  # the first opset whose DequantizeLinear onnx.reference implements


def _opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _dequantize_13():
    from onnx.reference.ops.op_dequantize_linear import DequantizeLinear_19

    class DequantizeLinear(DequantizeLinear_19):
        """DequantizeLinear-10/13: the opset-19 implementation (the same definition for
        int8/uint8/int32 with a float scale)."""

        op_domain = ""

        def _run(self, x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=None):
            # a class given as a new op takes the newest schema's attributes; block_size (21)
            # and output_dtype (23) do not exist at 13, so they hold their defaults here
            return DequantizeLinear_19._run(self, x, x_scale, x_zero_point, axis=1 if axis is None else axis)

    return DequantizeLinear


class ReferenceRunner(Runner):
    backend = "onnx-reference"

    def __init__(self, source, info: ModelInfo | None = None, preprocessing=None) -> None:
        """``source``: a path or a ModelProto; ``info``: what to feed a graph a stage made
        itself; ``preprocessing``: how to feed a file another tool wrote
        (:func:`~aft_export.runners.ort.onnx_info`)."""
        from onnx.reference import ReferenceEvaluator

        graph = open_graph(source, info, external_data=True, preprocessing=preprocessing)
        model, where, info = graph.model, graph.where, graph.info
        super().__init__(graph.name, info)
        check_signature(GraphSignature(model), info, where, metadata=graph.from_metadata)
        self.notes: list[str] = []
        new_ops = []
        uses_dq = any(n.op_type == "DequantizeLinear" for n in model.graph.node) or any(
            n.op_type == "DequantizeLinear" for f in model.functions for n in f.node)  # fmt: skip
        if uses_dq and _opset(model) < FIRST_DEQUANTIZE:
            new_ops.append(_dequantize_13())
            self.notes.append(f"opset {_opset(model)}: DequantizeLinear run with the reference's opset-19 "
                              f"implementation (the same definition for int8)")  # fmt: skip
        try:
            self.session = ReferenceEvaluator(model, new_ops=new_ops or None)
        except Exception as exc:  # noqa: BLE001 - the reference raises many types for a graph it cannot take
            raise AFTExportError(f"the ONNX reference evaluator cannot load {where}: "
                                 f"{str(exc).splitlines()[0][:300]}") from None  # fmt: skip
        self.input_name = self.session.input_names[0]
        self.output_name = self.session.output_names[0]
        first = GraphSignature(model).get_inputs()[0].shape
        self.fixed_batch = first[0] if first and isinstance(first[0], int) else None

    def run(self, feeds):
        outs = self.session.run(None, {k: np.ascontiguousarray(v) for k, v in feeds.items()})
        return dict(zip(self.session.output_names, outs))
