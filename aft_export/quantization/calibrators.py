"""Calibration: activation ranges from the calibration images, one class per method.

A :class:`Calibrator` is given the graph, the activations to calibrate and the method's
options, and computes ``{name: (lo, hi)}`` from passes over a
:class:`aft_export.data.calibration.CalibrationReader`, batch by batch in memory that does not grow
with the number of images (:mod:`aft_export.quantization.ranges`, :func:`aft_export.quantization.runs.stream`).
:func:`calibrate` picks the method's class (:data:`CALIBRATORS`, one per
``options.METHODS``) and saves the ranges in ONNX Runtime's calibration-cache format,
which its QDQ quantiser reads (:mod:`aft_export.quantization.placement`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aft_export.data.calibration import CalibrationReader
from aft_export.data.images import Preprocessing
from aft_export.errors import AFTExportError
from aft_export.fileio import atomic_write
from aft_export.artifacts.graph import with_outputs
from aft_export.options import QuantizeOptions
from aft_export.quantization import runs
from aft_export.quantization.placement import QUANTIZED_OP_TYPES, op_types, ort_method
from aft_export.quantization.ranges import ENTROPY_BINS, AbsHistogram, MinMax, entropy_threshold, fixed_abs_histogram


def calibration_tensors(model, types: tuple[str, ...] = QUANTIZED_OP_TYPES) -> list[str]:
    """The activations whose ranges the quantiser reads: every float input of a
    node of the quantised op types ``types`` that is not an initializer and that shape inference types (the
    inputs ONNX Runtime's calibrators pick; the outputs they also pick are never
    quantised here, since OpTypesToExcludeOutputQuantization names every such op)."""
    import onnx
    from onnx import TensorProto

    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.input)
             + list(inferred.graph.output)}  # fmt: skip
    inits = {t.name for t in model.graph.initializer}
    names: dict[str, None] = {}
    for node in model.graph.node:
        if node.op_type not in types:
            continue
        for name in node.input:
            vi = typed.get(name)
            if (name and name not in inits and vi is not None and vi.type.HasField("tensor_type")
                    and vi.type.tensor_type.elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16)):  # fmt: skip
                names[name] = None
    return list(names)


def reduced(model, names: list[str], reductions: tuple[str, ...]):
    """A copy of ``model`` that also outputs, per value in ``names``, each reduction
    over the whole batch (scalars): ``min``, ``max`` or ``absmax``. What a run hands back
    is then a few numbers per value, never the values themselves. Returns the model and
    ``{(name, reduction): output}``. (Only for fp32 values: ONNX Runtime's CPU computes
    an fp16 value that is not a graph output in fp32, so its reduction would not see
    an fp16 overflow.)"""
    import onnx
    from onnx import TensorProto, helper

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    graph = probe.graph
    outputs = {}
    for i, name in enumerate(names):
        def node(op, inputs, suffix, **attrs):
            out = f"aft_probe::{i}::{suffix}"
            graph.node.append(helper.make_node(op, inputs, [out], name=out, **attrs))
            return out

        x = node("Cast", [name], "f32", to=TensorProto.FLOAT)
        for r in reductions:
            if r == "min":
                out = node("ReduceMin", [x], "min", keepdims=0)
            elif r == "max":
                out = node("ReduceMax", [x], "max", keepdims=0)
            else:
                out = node("ReduceMax", [node("Abs", [x], "abs")], "absmax", keepdims=0)
            outputs[(name, r)] = out
            graph.output.append(onnx.ValueInfoProto(name=out))
    return probe, outputs


class Calibrator:
    """One calibration method. ``ranges`` makes its passes over ``feed`` (each rewinds it)
    and gives ``{name: (lo, hi)}`` for every name, in the order of ``names``."""

    method = ""  # its name in options.METHODS

    def __init__(self, model, names: list[str], opts: QuantizeOptions, prep: Preprocessing) -> None:
        self.model, self.names, self.opts, self.prep = model, names, opts, prep

    def ranges(self, feed: CalibrationReader) -> dict[str, tuple[float, float]]:
        raise NotImplementedError  # pragma: no cover

    def _pass(self, graph, fetch, consume, feed: CalibrationReader) -> None:
        """One pass of the images through ``graph`` (unoptimised: the probes' outputs stay as written)."""
        runs.stream(runs.runner(graph, self.prep, optimize=False), feed, fetch, consume)


class MinMaxCalibrator(Calibrator):
    """The running minimum and maximum, reduced inside the graph: a run hands back two numbers per tensor."""

    method = "minmax"

    def ranges(self, feed):
        stats = {n: MinMax() for n in self.names}
        probe, outs = reduced(self.model, self.names, ("min", "max"))

        def merge(fetched):
            for n in self.names:
                stats[n].update_range(fetched[outs[(n, "min")]], fetched[outs[(n, "max")]])

        self._pass(probe, outs.values(), merge, feed)
        return {n: s.result() for n, s in stats.items()}


class PercentileCalibrator(Calibrator):
    """A fixed-size histogram of |x| per tensor; the range is [-t, t], t the percentile of |x|."""

    method = "percentile"

    def ranges(self, feed):
        hists = {n: AbsHistogram() for n in self.names}

        def add(fetched):
            for n in self.names:
                hists[n].update(fetched[n], n)

        self._pass(with_outputs(self.model, self.names), self.names, add, feed)
        result = {}
        for n, h in hists.items():
            t = h.percentile(self.opts.percentile)
            result[n] = (-t, t)
        return result


class EntropyCalibrator(Calibrator):
    """TensorRT's KL-divergence calibration (2048 bins of |x| over [0, max|x|], 128 levels),
    in two passes: the maxima, then the histograms."""

    method = "entropy"

    def ranges(self, feed):
        names = self.names
        probe, outs = reduced(self.model, names, ("absmax",))
        amax = dict.fromkeys(names, 0.0)

        def top(fetched):
            for n in names:
                v = float(fetched[outs[(n, "absmax")]])
                if np.isinf(v):
                    raise AFTExportError(f"calibration: {n} takes an infinite value on these images")
                if not np.isnan(v):
                    amax[n] = max(amax[n], v)

        self._pass(probe, outs.values(), top, feed)
        del probe
        counts = {n: np.zeros(ENTROPY_BINS, np.int64) for n in names}

        def add(fetched):
            for n in names:
                counts[n] += fixed_abs_histogram(fetched[n], amax[n])

        self._pass(with_outputs(self.model, names), names, add, feed)
        result = {}
        for n in names:
            t = entropy_threshold(counts[n], amax[n])
            result[n] = (-t, t)
        return result


CALIBRATORS: dict[str, type[Calibrator]] = {
    c.method: c for c in (MinMaxCalibrator, EntropyCalibrator, PercentileCalibrator)}  # fmt: skip


def calibrate(model, tensors: np.ndarray, opts: QuantizeOptions, prep: Preprocessing, ranges: Path) -> None:
    """Compute activation ranges on the calibration images with ``opts.method``'s
    calibrator, fed ``opts.batch_size`` images at a time at the most, and save them to
    ``ranges`` in ONNX Runtime's calibration-cache format."""
    from onnxruntime.quantization.calibrate import TensorData, TensorsData, save_tensors_data

    types = op_types(opts)
    names = calibration_tensors(model, types)
    if not names:
        raise AFTExportError(f"the graph has no {'/'.join(types)} input to calibrate")
    feed = runs.reader(model, tensors, opts.batch_size)
    result = CALIBRATORS[opts.method](model, names, opts, prep).ranges(feed)
    data = TensorsData(ort_method(opts.method), {
        n: TensorData(lowest=np.array(lo, np.float32), highest=np.array(hi, np.float32))
        for n, (lo, hi) in result.items()})  # fmt: skip
    # the cache is read as a hit next time: it appears whole or not at all
    atomic_write(ranges, lambda tmp: save_tensors_data(data, tmp))
