"""Precision in the graph: int8 with explicit Q/DQ, and fp16 mixed precision.

TensorRT 11 takes reduced precision only from the graph (strongly typed networks),
TensorRT 10 on Jetson accepts the same graphs, ONNX Runtime runs them anywhere. So
the precision decision is made here, once, in ONNX.

**int8** uses ONNX Runtime's static quantiser in QDQ format with the settings
TensorRT's explicit quantisation needs: symmetric int8, zero-point 0, weights
per output channel, activations per tensor. Only the projections, the MLP, the
patch embedding and the head (``MatMul``/``Gemm``/``Conv``) are quantised; the AFT
core (exps, the products or convolutions on them, reductions, division) stays in
floating point: the custom ``com.aft`` nodes, or in the decomposed form every node
owned directly by an AFT module (see :func:`aft_export.graph.aft_core_nodes`).

Calibration ranges are cached under a key made of the model's sha256, the
calibration set's sha256 and the method, so a second run with the same inputs
skips calibration and anything changed invalidates it.

**fp16** converts the graph to fp16 except the AFT core and LayerNormalization
(overflow and underflow risks), keeps fp32 inputs and outputs, and reports any
NaN or Inf an fp16 value takes on the calibration set.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from aft_export.version import __version__
from aft_export.calib import CalibrationReader, CalibrationSet, Preprocess, load_calibration
from aft_export.compare import agreement as _agreement
from aft_export.errors import AFTExportError
from aft_export.fileio import atomic_write, cache_root, check_output_path, make_dirs, sha256_file
from aft_export.graph import AFT_LAYER_TYPES, aft_core_nodes, name_nodes, node_module, toposort, with_outputs
from aft_export.options import METHODS, PRECISIONS, QuantizeOptions  # noqa: F401 (the API)
from aft_export.onnxio import check_graph, graph_precision, load_onnx, read_metadata, save_onnx, set_metadata
from aft_export.runners import ModelInfo, OrtRunner
from aft_export.trtcheck import check_model, enforce

QUANTIZED_OP_TYPES = ("MatMul", "Gemm", "Conv")
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

    def to_dict(self) -> dict:
        return asdict(self)


def default_cache_dir() -> Path:
    return cache_root("calibration")


def _runner(model, prep: Preprocess) -> OrtRunner:
    """The graph in ONNX Runtime, fed preprocessed calibration tensors."""
    return OrtRunner(model, info=ModelInfo([], (3, prep.size, prep.size), prep.mean, prep.std))


def _logits(model, prep: Preprocess, tensors: np.ndarray) -> np.ndarray:
    return _runner(model, prep).logits(tensors, batch_size=128)


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


def _calibrate(model, reader: CalibrationReader, opts: QuantizeOptions, ranges: Path) -> None:
    """Collect activation ranges on the calibration images and save them to ``ranges``.

    Done here rather than inside ``quantize_static`` because its calibrator options
    leave entropy with 128 histogram bins and 128 quantised bins, which makes it
    min-max; we use TensorRT's entropy setting (2048 bins, 128 quantised bins).
    """
    import onnx
    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

    extra = {"symmetric": opts.method != "minmax", "percentile": opts.percentile}
    if opts.method == "entropy":
        extra.update(num_bins=2048, num_quantized_bins=128)
    with tempfile.TemporaryDirectory(prefix="aft-calib-") as tmp:
        src = Path(tmp) / "model.onnx"
        onnx.save(model, str(src))
        calibrator = create_calibrator(src, list(QUANTIZED_OP_TYPES), augmented_model_path=str(Path(tmp) / "aug.onnx"),
                                       calibrate_method=_method(opts.method), extra_options=extra)  # fmt: skip
        reader.rewind()
        with _quiet_ort_quantizer():
            calibrator.collect_data(reader)
            data = calibrator.compute_data()
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
                reduce_range=False, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                nodes_to_exclude=exclude, calibrate_method=_method(opts.method), extra_options=extra,
                calibration_cache_path=str(ranges),
            )  # fmt: skip
        return onnx.load(str(dst))


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
    }, sort_keys=True).encode()).hexdigest()[:32]  # fmt: skip
    root = Path(opts.cache_dir) if opts.cache_dir else default_cache_dir()
    return make_dirs(root, "calibration cache (pass --no-cache to do without)") / f"{key}.json"


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
                   log=print, progress: bool = True) -> QuantizeResult:  # fmt: skip
    """Quantise an fp32 ONNX file to int8 (Q/DQ) or fp16; writes ``out`` atomically.
    ``progress`` shows a progress bar (stderr) while calibration images are decoded."""
    opts = options or QuantizeOptions()
    out = check_output_path(out)
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
    model_sha = sha256_file(model_path)
    seconds: dict[str, float] = {}

    calib, opts = _apply_recipe(calib, opts)
    cset = None
    if calib is None:
        if opts.precision == "int8":
            raise AFTExportError("int8 needs calibration images: pass --calib DATA (a folder, tar, .npy/.npz or cifar10:train)")
    else:
        t = time.perf_counter()
        cset = load_calibration(calib, prep, opts.count, opts.seed, opts.allow_fewer, progress=progress)
        seconds["load_calibration"] = time.perf_counter() - t
        if cset.requested > len(cset):
            log(f"calibration: {calib} has only {len(cset)} images; using them (--allow-fewer)")

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
    props["quantization"] = json.dumps(recipe, sort_keys=True)
    set_metadata(qmodel, props)
    toposort(qmodel)
    try:
        check_graph(qmodel)
    except Exception as exc:  # noqa: BLE001 - the checker's errors
        raise AFTExportError(f"the {opts.precision} graph is not valid ONNX ({exc}); nothing was written") from None

    agreement, nonfinite = None, []
    if cset is not None:
        t = time.perf_counter()
        agreement = _agreement(_logits(model, prep, cset.tensors), _logits(qmodel, prep, cset.tensors))
        if opts.precision == "fp16":
            nonfinite = _fp16_nonfinite(qmodel, prep, cset.tensors)
        seconds["check"] = time.perf_counter() - t

    report = check_model(qmodel)
    report.path = str(out)
    enforce(report, log, what=f"the {opts.precision} quantisation")
    save_onnx(qmodel, out)
    return QuantizeResult(
        path=str(out), precision=opts.precision, sha256=sha256_file(out),
        recipe=recipe, seconds={k: round(v, 3) for k, v in seconds.items()}, agreement=agreement,
        nonfinite=nonfinite, sensitivity=result_extra.get("sensitivity", []),
        trt_check={"status": report.status, "findings": len(report.findings)},
    )  # fmt: skip


def _apply_recipe(calib, opts: QuantizeOptions):
    """A calibration recipe (a JSON file such as ``calibration/cifar10.json``) names the
    source and the count and seed to sample; options given explicitly win."""
    from dataclasses import replace

    recipe = {}
    if calib is not None and str(calib).endswith(".json"):
        path = Path(calib)
        if not path.is_file():
            raise AFTExportError(f"calibration recipe {path} does not exist")
        try:
            recipe = json.loads(path.read_text())
            source = recipe["source"]
        except (ValueError, KeyError, TypeError) as exc:
            raise AFTExportError(f"calibration recipe {path} is malformed ({exc}); it needs a 'source'") from None
        calib = source if ":" in source or Path(source).is_absolute() else str(path.parent / source)
    opts = replace(opts, count=opts.count or int(recipe.get("count", 512)),
                   seed=opts.seed if opts.seed is not None else int(recipe.get("seed", 0)))  # fmt: skip
    return calib, opts


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
    with tempfile.TemporaryDirectory(prefix="aft-ranges-") as tmp:
        ranges = cache if cache is not None else Path(tmp) / "ranges.json"
        if not cached:
            _calibrate(model, CalibrationReader(cset.tensors, "image", opts.batch_size), opts, ranges)
        log(f"calibration: {len(cset)} images, {opts.method}, "
            + (f"ranges reused from the cache {cache}" if cached else
               "ranges computed" + (f" and cached in {cache}" if cache else "")))  # fmt: skip
        qmodel = _ort_quantize(model, opts, exclude, ranges)
        extra: dict = {}
        if opts.sensitivity:
            qmodel, exclude, extra["sensitivity"] = _sensitivity(model, qmodel, cset, opts, exclude, ranges, prep,
                                                                 log)  # fmt: skip
    by_name = {n.name: n for n in model.graph.node}
    recipe = {
        "method": opts.method, "percentile": opts.percentile if opts.method == "percentile" else None,
        "count": len(cset), "seed": opts.seed, "batch_size": opts.batch_size,
        "per_channel": opts.per_channel, "symmetric": True, "activation_type": "int8",
        "weight_type": "int8", "bias": "float", "op_types": list(QUANTIZED_OP_TYPES),
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
    """Every fp16 value (and the output) that took NaN/Inf on the calibration images."""
    from onnx import TensorProto

    fp16_values = [v.name for v in model.graph.value_info if v.type.tensor_type.elem_type == TensorProto.FLOAT16]
    producer = {o: n for n in model.graph.node for o in n.output}
    probe = _runner(with_outputs(model, fp16_values), prep)
    bad: dict[str, int] = {}
    for i in range(0, len(tensors), batch):
        for name, arr in probe.run({probe.input_name: tensors[i : i + batch]}).items():
            count = int((~np.isfinite(arr)).sum()) if np.issubdtype(arr.dtype, np.floating) else 0
            if count:
                bad[name] = bad.get(name, 0) + count
    report = []
    for name, count in bad.items():
        node = producer.get(name)
        mod = node_module(node) if node is not None else None
        report.append({"value": name, "node": node.name if node is not None else "", "count": count,
                       "module": mod[0] if mod else ""})  # fmt: skip
    return report
