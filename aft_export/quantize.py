"""Precision in the graph: int8 with explicit Q/DQ, and fp16 mixed precision.

TensorRT 11 takes reduced precision only from the graph (strongly typed networks),
TensorRT 10 on Jetson accepts the same graphs, ONNX Runtime runs them anywhere. So
the precision decision is made here, once, in ONNX.

**int8** uses ONNX Runtime's static quantiser in QDQ format with the settings
TensorRT's explicit quantisation needs: symmetric int8, zero-point 0, weights
per output channel, activations per tensor. Only the projections (the fused q/k/v
one included), the MLP, the patch embedding and the head (``MatMul``/``Gemm``/``Conv``)
are quantised; the AFT core (exps, the products or convolutions on them, reductions,
division) stays in floating point: the custom ``com.aft`` nodes, or in the decomposed
form every other node owned directly by an AFT module (see
:func:`aft_export.graph.aft_core_nodes`). ``quantize_aft_core`` (``--quantize-aft-core``)
inlines the ``com.aft`` functions and quantises the core's MatMuls/Convs too: their
operands ``exp(w - max)`` and ``exp(K - max)`` lie in (0, 1], so int8 keeps only 7 bits
of them and rounds small weights to 0; it is measured, not the default.

Placement is for the runtime as well as for TensorRT: every layer that reads a
quantised activation gets its own Q -> DQ pair (:func:`_qdq_per_consumer`), which is
what ONNX Runtime needs to fuse ``DQ -> MatMul`` into ``MatMulIntegerToFloat``.

Calibration ranges are computed here, batch by batch in memory that does not grow
with the number of images (:mod:`aft_export.ranges`: running min/max, fixed-size
histograms of |x|, TensorRT's KL-divergence entropy), and handed to ONNX Runtime's
QDQ quantiser in its calibration-cache format. They are cached under a key made of
the model's sha256, the calibration set's sha256, the method and the version of the
range algorithm, so a second run with the same inputs skips calibration and
anything changed invalidates it.

**fp16** converts the graph to fp16 except the AFT core and LayerNormalization
(overflow and underflow risks), keeps fp32 inputs and outputs, and reports any
NaN or Inf an fp16 value takes on the calibration set (counted inside the graph,
per batch).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from aft_export.version import __version__
from aft_export.calib import CalibrationSet, Preprocess, load_calibration
from aft_export.compare import agreement as _agreement
from aft_export.errors import AFTExportError
from aft_export.fileio import atomic_write, atomic_write_bytes, cache_root, claim_output, make_dirs, sha256_file
from aft_export.graph import (AFT_LAYER_TYPES, DOMAIN, aft_core_nodes, inline_functions, name_nodes, node_module,
                              toposort, with_outputs)
from aft_export.options import MAX_SEED, METHODS, PRECISIONS, QuantizeOptions, whole  # noqa: F401 (the API)
from aft_export.onnxio import check_graph, graph_precision, load_onnx, read_metadata, save_onnx, set_metadata
from aft_export.ranges import ENTROPY_BINS, AbsHistogram, MinMax, entropy_threshold, fixed_abs_histogram
from aft_export.runners import ModelInfo, OrtRunner
from aft_export.trtcheck import check_model, enforce

QUANTIZED_OP_TYPES = ("MatMul", "Gemm", "Conv")
# what the cached ranges mean (aft_export.ranges); a change of algorithm changes it, so
# ranges computed the old way are never read as the new ones
RANGES_VERSION = "aft-ranges-1"
# recipe entries that describe this run, not the artifact: in the result, not in the file
RUN_ONLY = ("calibration_cache",)
FP16_KEEP_FP32_OPS = ("LayerNormalization",)
# the same, for graphs where LayerNorm is decomposed (the TensorRT 8 form): by PyTorch module
FP16_KEEP_FP32_MODULES = ("LayerNorm",)


@dataclass
class QuantizeResult:
    path: str
    precision: str
    sha256: str
    recipe: dict
    seconds: dict
    agreement: dict | None = None  # vs the fp32 model on the calibration images
    nonfinite: list = field(default_factory=list)  # fp16 values that took NaN/Inf
    sensitivity: list = field(default_factory=list)
    trt_check: dict | None = None  # TensorRT compatibility per version (aft_export.trtcheck)
    # what this run has in memory, for a caller to hand on to the next quantisation of the same
    # fp32 model (quantize_model's calibration, fp32_logits and the check's CheckReport); not in to_dict
    calibration: CalibrationSet | None = field(default=None, repr=False, compare=False)
    fp32_logits: np.ndarray | None = field(default=None, repr=False, compare=False)
    check_report: object = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name not in HANDED_ON}


HANDED_ON = ("calibration", "fp32_logits", "check_report")


def default_cache_dir() -> Path:
    return cache_root("calibration")


def _runner(model, prep: Preprocess, optimize: bool = True) -> OrtRunner:
    """The graph in ONNX Runtime, fed preprocessed calibration tensors."""
    return OrtRunner(model, info=ModelInfo([], (3, prep.size, prep.size), prep.mean, prep.std), optimize=optimize)


def _logits(model, prep: Preprocess, tensors: np.ndarray) -> np.ndarray:
    """Logits in batches of up to 128 images, fewer where the graph's estimated working
    memory per image (Runner.memory_estimate) would take a run past RUN_BYTES."""
    runner = _runner(model, prep)
    per_image = runner.memory_estimate(1)[1]
    return runner.logits(tensors, batch_size=int(max(1, min(128, RUN_BYTES // max(per_image, 1)))))


@contextlib.contextmanager
def _quiet_ort_quantizer():
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


def _method(name: str):
    from onnxruntime.quantization import CalibrationMethod

    return {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
            "percentile": CalibrationMethod.Percentile}[name]  # fmt: skip


# what one calibration run may hand back: the images of a batch are run in chunks whose
# activations fit in this many bytes, so memory does not grow with the batch or the set
CALIBRATION_FETCH_BYTES = 256 << 20
# and the working memory one inference run may take by the runner's estimate (which the
# unoptimised calibration probes exceed about twice: their reductions copy each value)
RUN_BYTES = 256 << 20


def _calibration_tensors(model) -> list[str]:
    """The activations whose ranges the quantiser reads: every float input of a
    quantisable node that is not an initializer and that shape inference types (the
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
        if node.op_type not in QUANTIZED_OP_TYPES:
            continue
        for name in node.input:
            vi = typed.get(name)
            if (name and name not in inits and vi is not None and vi.type.HasField("tensor_type")
                    and vi.type.tensor_type.elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16)):  # fmt: skip
                names[name] = None
    return list(names)


def _reduced(model, names: list[str], reductions: tuple[str, ...]):
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


def _stream(runner, tensors: np.ndarray, batch_size: int, names, consume) -> None:
    """Run ``tensors`` through ``runner`` in batches of at most ``batch_size``, chunked
    so that the values in ``names`` one run hands back stay within
    CALIBRATION_FETCH_BYTES (the first image alone tells their size per image) and its
    estimated working memory within RUN_BYTES, and give
    each run's values to ``consume``; nothing is kept between runs."""
    names = list(names)
    step, i = 1, 0
    while i < len(tensors):
        out = runner.run({runner.input_name: tensors[i : i + step]})
        fetched = {n: out[n] for n in names}
        if i == 0:
            per_image = max(1, sum(a.nbytes for a in fetched.values()))
            run_per_image = max(1, runner.memory_estimate(1)[1])
            step = int(max(1, min(batch_size, CALIBRATION_FETCH_BYTES // per_image, RUN_BYTES // run_per_image)))
            i = 1
        else:
            i += step
        del out
        consume(fetched)


def _calibrate(model, tensors: np.ndarray, opts: QuantizeOptions, prep: Preprocess, ranges: Path) -> None:
    """Compute activation ranges on the calibration images, batch by batch in memory
    that does not grow with the number of images (:mod:`aft_export.ranges`), and save
    them to ``ranges`` in ONNX Runtime's calibration-cache format.

    minmax reduces inside the graph (a run hands back two numbers per tensor);
    percentile keeps a fixed-size histogram of |x| per tensor; entropy is TensorRT's
    KL-divergence calibration (2048 bins of |x| over [0, max|x|], 128 levels), in two
    passes: the maxima, then the histograms.
    """
    from onnxruntime.quantization.calibrate import TensorData, TensorsData, save_tensors_data

    names = _calibration_tensors(model)
    if not names:
        raise AFTExportError("the graph has no MatMul/Gemm/Conv input to calibrate")
    result: dict[str, tuple[float, float]] = {}
    if opts.method == "minmax":
        stats = {n: MinMax() for n in names}
        probe, outs = _reduced(model, names, ("min", "max"))

        def merge(fetched):
            for n in names:
                stats[n].update_range(fetched[outs[(n, "min")]], fetched[outs[(n, "max")]])

        _stream(_runner(probe, prep, optimize=False), tensors, opts.batch_size, outs.values(), merge)
        result = {n: s.result() for n, s in stats.items()}
    elif opts.method == "percentile":
        hists = {n: AbsHistogram() for n in names}

        def add(fetched):
            for n in names:
                hists[n].update(fetched[n], n)

        _stream(_runner(with_outputs(model, names), prep, optimize=False), tensors, opts.batch_size, names, add)
        for n, h in hists.items():
            t = h.percentile(opts.percentile)
            result[n] = (-t, t)
    else:  # entropy
        probe, outs = _reduced(model, names, ("absmax",))
        amax = dict.fromkeys(names, 0.0)

        def top(fetched):
            for n in names:
                v = float(fetched[outs[(n, "absmax")]])
                if np.isinf(v):
                    raise AFTExportError(f"calibration: {n} takes an infinite value on these images")
                if not np.isnan(v):
                    amax[n] = max(amax[n], v)

        _stream(_runner(probe, prep, optimize=False), tensors, opts.batch_size, outs.values(), top)
        del probe
        counts = {n: np.zeros(ENTROPY_BINS, np.int64) for n in names}

        def add(fetched):
            for n in names:
                counts[n] += fixed_abs_histogram(fetched[n], amax[n])

        _stream(_runner(with_outputs(model, names), prep, optimize=False), tensors, opts.batch_size, names, add)
        for n in names:
            t = entropy_threshold(counts[n], amax[n])
            result[n] = (-t, t)
    data = TensorsData(_method(opts.method), {
        n: TensorData(lowest=np.array(lo, np.float32), highest=np.array(hi, np.float32))
        for n, (lo, hi) in result.items()})  # fmt: skip
    # the cache is read as a hit next time: it appears whole or not at all
    atomic_write(ranges, lambda tmp: save_tensors_data(data, tmp))


def _ort_quantize(model, opts: QuantizeOptions, exclude: list[str], ranges: Path):
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
        with _quiet_ort_quantizer():
            quantize_static(
                str(src), str(dst), calibration_data_reader=None, quant_format=QuantFormat.QDQ,
                op_types_to_quantize=list(QUANTIZED_OP_TYPES), per_channel=opts.per_channel,
                reduce_range=opts.weight_bits == 7, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                nodes_to_exclude=exclude, calibrate_method=_method(opts.method), extra_options=extra,
                calibration_cache_path=str(ranges),
            )  # fmt: skip
        qmodel = onnx.load(str(dst))
    _qdq_per_consumer(qmodel)
    return qmodel


def _qdq_per_consumer(model) -> int:
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


def _restore_functions_and_metadata(out, source) -> None:
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


def _cache_path(opts: QuantizeOptions, model_sha: str, cset: CalibrationSet) -> Path | None:
    if opts.cache_dir == "":
        return None
    key = hashlib.sha256(json.dumps({
        "model": model_sha, "calibration": cset.sha256, "method": opts.method,
        "percentile": opts.percentile if opts.method == "percentile" else None,
        "ops": QUANTIZED_OP_TYPES, "bins": "trt-entropy-2048/128" if opts.method == "entropy" else None,
        "ranges": RANGES_VERSION, "aft_core": opts.quantize_aft_core,
    }, sort_keys=True).encode()).hexdigest()[:32]  # fmt: skip
    root = Path(opts.cache_dir) if opts.cache_dir else default_cache_dir()
    return root / f"{key}.json"  # the directory is made when an entry is written (quantize_model)


def _cached_ranges_ok(path: Path, model) -> bool:
    """A cache file that parses and names a range for every input of every quantisable
    node; anything else (a truncated or foreign file) is recomputed, not trusted."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    ranges = data.get("data") if isinstance(data, dict) else None  # ORT's save_tensors_data layout
    if not isinstance(ranges, dict) or not ranges:
        return False
    inits = {t.name for t in model.graph.initializer}
    wanted = {i for n in model.graph.node if n.op_type in QUANTIZED_OP_TYPES for i in n.input[:1] if i not in inits}
    return wanted <= set(ranges)


def _quantized_nodes(model) -> list[str]:
    """The MatMul/Gemm/Conv nodes that compute in int8: their inputs come from DequantizeLinear."""
    dq_outputs = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return [n.name for n in model.graph.node if n.op_type in QUANTIZED_OP_TYPES
            and any(i in dq_outputs for i in n.input)]  # fmt: skip


def quantize_model(model_path, out, calib: str | None, options: QuantizeOptions | None = None,
                   log=print, progress: bool = True, cache_writes: list | None = None,
                   calibration: CalibrationSet | None = None, fp32_logits: np.ndarray | None = None,
                   also_check: tuple[str, ...] = ()) -> QuantizeResult:  # fmt: skip
    """Quantise an fp32 ONNX file to int8 (Q/DQ) or fp16; writes ``out`` atomically.
    ``progress`` shows a progress bar (stderr) while calibration images are decoded.
    ``out`` is claimed before any work (:func:`aft_export.fileio.claim_output`): never
    the model, the recipe or the calibration source, and one run at a time. Fresh
    calibration ranges enter the cache only once ``out`` is written, so that a run
    stopped anywhere leaves the cache as it was; ``cache_writes``: a list to hand the
    entry to instead (``(path, bytes)``, for :func:`write_cache_entries`), for a caller
    whose own run is not complete yet (the pipeline).

    What an earlier quantisation already has in memory can be handed on (None: computed here,
    as always): ``calibration``, the decoded set (a result's ``calibration``; used when it is
    the same sample, in this model's preprocessing, else decoded again); ``fp32_logits``, the
    fp32 model's logits on that set (a result's ``fp32_logits``; only for the same fp32 file);
    ``also_check``: TensorRT columns the check also reports on (the result's ``check_report``
    holds the whole report)."""
    source, opts = apply_recipe(calib, options or QuantizeOptions())
    with claim_output(out, inputs=[model_path, calib, source]) as out:
        pending: list = []
        result = _quantize(model_path, out, source, opts, log, progress, pending, calibration, fp32_logits,
                           also_check)  # fmt: skip
        if cache_writes is None:
            write_cache_entries(pending)
        else:
            cache_writes.extend(pending)
        return result


def write_cache_entries(entries) -> None:
    """Write calibration cache entries ``(path, bytes)``: each appears whole or not at all."""
    for path, data in entries:
        make_dirs(Path(path).parent, "calibration cache", "pass --no-cache to do without, or --cache-dir DIR")
        atomic_write_bytes(path, data)


def _quantize(model_path, out: Path, calib, opts: QuantizeOptions, log, progress: bool, cache_writes: list,
              calibration: CalibrationSet | None = None, fp32_logits: np.ndarray | None = None,
              also_check: tuple[str, ...] = ()) -> QuantizeResult:  # fmt: skip
    model = load_onnx(model_path)
    current = graph_precision(model)
    if current != "fp32":
        raise AFTExportError(
            f"{model_path} is already {current}; quantise the fp32 export instead "
            f"(precision is decided once, from fp32)"
        )
    name_nodes(model)
    meta = read_metadata(model)
    prep = Preprocess.from_metadata(meta, opts.input_size, opts.mean, opts.std, path=str(model_path))
    if opts.weight_bits is None:  # see QuantizeOptions.weight_bits
        opts = replace(opts, weight_bits=7 if meta.get("export_target") == "portable" else 8)
    _check_input_size(model, prep, model_path)
    model_sha = sha256_file(model_path)
    seconds: dict[str, float] = {}

    cset = None
    if calib is None:
        if opts.precision == "int8":
            raise AFTExportError("int8 needs calibration images: pass --calib DATA (a folder, tar, .npy/.npz or cifar10:train)")
    elif calibration is not None and (calibration.source, calibration.requested, calibration.seed,
                                      calibration.preprocess) == (str(calib), opts.count, opts.seed, prep):  # fmt: skip
        cset = calibration  # decoded by an earlier quantisation: the same sample, the same preprocessing
    else:
        t = time.perf_counter()
        cset = load_calibration(calib, prep, opts.count, opts.seed, opts.allow_fewer, progress=progress)
        seconds["load_calibration"] = time.perf_counter() - t
        if cset.requested > len(cset):
            log(f"calibration: {calib} has only {len(cset)} images; using them (--allow-fewer)")
    if cset is not calibration:
        fp32_logits = None  # logits on another set than this one

    if opts.precision == "int8" and opts.quantize_aft_core and any(n.domain == DOMAIN for n in model.graph.node):
        # the core's MatMuls are inside the com.aft functions, where no quantiser reaches
        model = inline_functions(model)
        name_nodes(model)
        fp32_logits = None  # the inlined graph's own logits are the reference here
    core = aft_core_nodes(model)
    recipe: dict = {"precision": opts.precision, "tool": f"aft-export {__version__}",
                    "source_onnx_sha256": model_sha,
                    "calibration": cset.record() if cset is not None else None}  # fmt: skip
    result_extra: dict = {}
    t = time.perf_counter()
    if opts.precision == "int8":
        qmodel, recipe_int8, result_extra = _int8(model, cset, opts, core, model_sha, prep, log)
        recipe.update(recipe_int8)
    else:
        qmodel, recipe_fp16 = _fp16(model, core, opts)
        recipe.update(recipe_fp16)
    seconds["quantize"] = time.perf_counter() - t

    _restore_functions_and_metadata(qmodel, model)
    props = dict(meta)
    props["precision"] = opts.precision
    # the recipe, less how this run got its ranges (computed, or read from the cache): the same
    # model, images and options give the same bytes, whatever the cache held
    props["quantization"] = json.dumps({k: v for k, v in recipe.items() if k not in RUN_ONLY}, sort_keys=True)
    set_metadata(qmodel, props)
    toposort(qmodel)
    try:
        check_graph(qmodel)
    except Exception as exc:  # noqa: BLE001 - the checker's errors
        raise AFTExportError(f"the {opts.precision} graph is not valid ONNX ({exc}); nothing was written") from None

    agreement, nonfinite = None, []
    if cset is not None:
        t = time.perf_counter()
        if fp32_logits is None:
            fp32_logits = _logits(model, prep, cset.tensors)
        agreement = _agreement(fp32_logits, _logits(qmodel, prep, cset.tensors))
        if opts.precision == "fp16":
            nonfinite = _fp16_nonfinite(qmodel, prep, cset.tensors)
        seconds["check"] = time.perf_counter() - t

    report = check_model(qmodel, also=also_check)
    report.path = str(out)
    for column in report.columns.values():
        column.path = str(out)
    enforce(report, log, what=f"the {opts.precision} quantisation")
    save_onnx(qmodel, out)
    if "cache" in result_extra:
        cache_writes.append(result_extra.pop("cache"))
    return QuantizeResult(
        path=str(out), precision=opts.precision, sha256=sha256_file(out),
        recipe=recipe, seconds={k: round(v, 3) for k, v in seconds.items()}, agreement=agreement,
        nonfinite=nonfinite, sensitivity=result_extra.get("sensitivity", []),
        trt_check={"status": report.status, "findings": len(report.findings)},
        calibration=cset, fp32_logits=fp32_logits, check_report=report,
    )  # fmt: skip


def _check_input_size(model, prep: Preprocess, path) -> None:
    """The graph takes the (N, 3, size, size) images its metadata (or --input-size) says:
    calibration images of another size would fail inside ONNX Runtime halfway."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise AFTExportError(f"{path} takes {len(inputs)} inputs ({', '.join(i.name for i in inputs)}); an image "
                             f"classifier takes one, (N, 3, H, W): export it again with `aft-export export`")  # fmt: skip
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inputs[0].type.tensor_type.shape.dim]
    want = (3, prep.size, prep.size)
    if len(dims) != 4 or any(d is not None and d != w for d, w in zip(dims[1:], want)):
        shown = "x".join("?" if d is None else str(d) for d in dims[1:])
        raise AFTExportError(f"{path}'s graph takes {shown} inputs but its metadata (or --input-size) says "
                             f"{'x'.join(map(str, want))}; export it again, or give the right --input-size")  # fmt: skip


def apply_recipe(calib, opts: QuantizeOptions):
    """A calibration recipe (a JSON file such as ``calibration/cifar10.json``) names the
    source and the count and seed to sample; options given explicitly win."""
    from dataclasses import replace

    recipe = {}
    if calib is not None and str(calib).endswith(".json"):
        path = Path(calib)
        if not path.is_file():
            raise AFTExportError(f"calibration recipe {path} does not exist; give a recipe such as "
                                 f"calibration/cifar10.json, or the images themselves")  # fmt: skip
        try:
            recipe = json.loads(path.read_text())
        except (ValueError, OSError) as exc:
            raise AFTExportError(f"calibration recipe {path} is malformed ({str(exc)[:200]}); {RECIPE_HELP}") from None
        source = recipe.get("source") if isinstance(recipe, dict) else None
        if not isinstance(source, str) or not source:
            raise AFTExportError(f"calibration recipe {path} is malformed (it needs a 'source' naming the images); "
                                 f"{RECIPE_HELP}")  # fmt: skip
        for key, ok, says in (("count", lambda v: whole(v) and v >= 1, "a whole number >= 1"),
                              ("seed", lambda v: whole(v) and 0 <= v <= MAX_SEED, f"from 0 to {MAX_SEED}")):  # fmt: skip
            if key in recipe and not ok(recipe[key]):
                raise AFTExportError(f"calibration recipe {path}: {key} must be {says}, got {recipe[key]!r}; "
                                     f"{RECIPE_HELP}")  # fmt: skip
        calib = source if ":" in source or Path(source).is_absolute() else str(path.parent / source)
    opts = replace(opts, count=opts.count or recipe.get("count", 512),
                   seed=opts.seed if opts.seed is not None else recipe.get("seed", 0))  # fmt: skip
    return calib, opts


RECIPE_HELP = ('a recipe is {"source": IMAGES, "count": N, "seed": S}, IMAGES relative to the recipe or cifar10:train '
               '(see calibration/cifar10.json)')


def _int8(model, cset: CalibrationSet, opts: QuantizeOptions, core: list[str], model_sha: str, prep: Preprocess,
          log):  # fmt: skip
    names = {n.name for n in model.graph.node}
    unknown = [n for n in opts.exclude if n not in names]
    if unknown:
        raise AFTExportError(f"--exclude names nodes the graph does not have: {unknown[:5]}")
    exclude = list(dict.fromkeys(([] if opts.quantize_aft_core else core) + list(opts.exclude)))
    cache = _cache_path(opts, model_sha, cset)
    cached = cache is not None and cache.is_file() and _cached_ranges_ok(cache, model)
    if cache is not None and cache.is_file() and not cached:
        log(f"calibration: the cache file {cache} is unreadable or incomplete; recomputing it")
    extra: dict = {}
    # fresh ranges go to $TMPDIR; the cache gets them only once the output is written
    # (quantize_model), so a run stopped anywhere leaves the cache as it was
    with tempfile.TemporaryDirectory(prefix="aft-ranges-") as tmp:
        ranges = cache if cached else Path(tmp) / "ranges.json"
        if not cached:
            _calibrate(model, cset.tensors, opts, prep, ranges)
        log(f"calibration: {len(cset)} images, {opts.method}, "
            + (f"ranges reused from the cache {cache}" if cached else
               "ranges computed" + (f" and cached in {cache}" if cache else "")))  # fmt: skip
        qmodel = _ort_quantize(model, opts, exclude, ranges)
        if opts.sensitivity:
            qmodel, exclude, extra["sensitivity"] = _sensitivity(model, qmodel, cset, opts, exclude, ranges, prep,
                                                                 log)  # fmt: skip
        if cache is not None and not cached:
            extra["cache"] = (cache, ranges.read_bytes())
    by_name = {n.name: n for n in model.graph.node}
    recipe = {
        "method": opts.method, "percentile": opts.percentile if opts.method == "percentile" else None,
        "count": len(cset), "seed": opts.seed, "batch_size": opts.batch_size,
        "per_channel": opts.per_channel, "symmetric": True, "activation_type": "int8",
        "weight_type": "int8", **({"weight_bits": 7} if opts.weight_bits == 7 else {}), "bias": "float", "op_types": list(QUANTIZED_OP_TYPES),
        "excluded_nodes": exclude,
        "excluded_modules": sorted({node_module(by_name[n])[0] for n in exclude
                                    if n in by_name and node_module(by_name[n])}),
        "quantized_nodes": len(_quantized_nodes(qmodel)),
        "calibration_cache": "hit" if cached else ("written" if cache else "off"),
    }  # fmt: skip
    return qmodel, recipe, extra


def _sensitivity(model, qmodel, cset, opts, exclude, ranges, prep, log):
    """Rank quantised nodes by the error their quantisation causes (the error left when
    only that node goes back to float), then exclude the worst until the top-1
    disagreement with fp32 on the calibration images is within the budget."""
    by_name = {n.name: n for n in model.graph.node}
    ref = _logits(model, prep, cset.tensors)
    base = _agreement(ref, _logits(qmodel, prep, cset.tensors))
    candidates = [n for n in _quantized_nodes(qmodel) if n in by_name and n not in exclude]
    ranking = []
    for name in candidates:
        trial = _ort_quantize(model, opts, exclude + [name], ranges)
        m = _agreement(ref, _logits(trial, prep, cset.tensors))
        mod = node_module(by_name[name])
        ranking.append({"node": name, "module": mod[0] if mod else "", "mse_if_float": m["mse"],
                        "gain": base["mse"] - m["mse"], "disagreement_if_float": m["disagreement"]})  # fmt: skip
    ranking.sort(key=lambda r: -r["gain"])
    log(f"sensitivity: {len(ranking)} quantised nodes ranked; {base['disagreement']:.2f}% top-1 "
        f"disagreement with all quantised (budget {opts.budget}%)")  # fmt: skip
    current, excluded, state = qmodel, list(exclude), base
    for r in ranking:
        if state["disagreement"] <= opts.budget:
            break
        excluded.append(r["node"])
        current = _ort_quantize(model, opts, excluded, ranges)
        state = _agreement(ref, _logits(current, prep, cset.tensors))
        r["excluded"] = True
        log(f"  excluded {r['node']} ({r['module']}): disagreement now {state['disagreement']:.2f}%")
    if state["disagreement"] > opts.budget:
        log(f"sensitivity: budget {opts.budget}% not met even with every ranked node in float")
    return current, excluded, ranking


def _fp16(model, core: list[str], opts: QuantizeOptions):
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    blocked_ops = list(DEFAULT_OP_BLOCK_LIST) + list(FP16_KEEP_FP32_OPS) + list(AFT_LAYER_TYPES)
    norms = [n.name for n in model.graph.node if (node_module(n) or ("", ""))[1] in FP16_KEEP_FP32_MODULES]
    exclude = list(dict.fromkeys(core + norms + list(opts.exclude)))
    with _quiet_ort_quantizer():
        converted = convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked_ops,
                                             node_block_list=exclude)  # fmt: skip
    recipe = {"fp32_op_types": sorted(set(FP16_KEEP_FP32_OPS) | set(AFT_LAYER_TYPES)),
              "fp32_modules": list(FP16_KEEP_FP32_MODULES), "fp32_nodes": exclude, "io": "fp32"}  # fmt: skip
    return converted, recipe


def _fp16_nonfinite(model, prep: Preprocess, tensors: np.ndarray, batch: int = 64) -> list[dict]:
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

    _stream(_runner(with_outputs(model, values), prep), tensors, batch, values, count)
    report = []
    for name, count in bad.items():
        node = producer.get(name)
        mod = node_module(node) if node is not None else None
        report.append({"value": name, "node": node.name if node is not None else "", "count": count,
                       "module": mod[0] if mod else ""})  # fmt: skip
    return report
