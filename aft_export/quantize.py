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
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from aft_export import __version__
from aft_export.calib import CalibrationReader, CalibrationSet, Preprocess, load_calibration
from aft_export.errors import AFTExportError

PRECISIONS = ("int8", "fp16")
METHODS = ("minmax", "entropy", "percentile")
QUANTIZED_OP_TYPES = ("MatMul", "Gemm", "Conv")
FP16_KEEP_FP32_OPS = ("LayerNormalization",)
# the same, for graphs where LayerNorm is decomposed (the TensorRT 8 form): by PyTorch module
FP16_KEEP_FP32_MODULES = ("LayerNorm",)


@dataclass(frozen=True)
class QuantizeOptions:
    precision: str = "int8"
    method: str = "percentile"
    percentile: float = 99.999
    count: int | None = None  # None: the recipe's, else 512
    batch_size: int = 32
    seed: int | None = None  # None: the recipe's, else 0
    per_channel: bool = True
    exclude: tuple[str, ...] = ()  # node names kept in floating point
    quantize_aft_core: bool = False
    sensitivity: bool = False  # rank nodes; exclude the worst until the budget is met
    budget: float = 0.5  # % top-1 disagreement with fp32 on the calibration images
    allow_fewer: bool = False
    cache_dir: str | None = None  # None: ~/.cache/aft-export/calibration; "" disables
    input_size: int | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise AFTExportError(f"unknown precision {self.precision!r}; choose one of {PRECISIONS}")
        if self.method not in METHODS:
            raise AFTExportError(f"unknown calibration method {self.method!r}; choose one of {METHODS}")
        if not 0 < self.percentile <= 100:
            raise AFTExportError(f"percentile must be in (0, 100], got {self.percentile}")
        if (self.count is not None and self.count < 1) or self.batch_size < 1:
            raise AFTExportError("calibration count and batch size must be >= 1")
        if self.budget < 0:
            raise AFTExportError("the accuracy budget is a percentage >= 0")


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
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aft-export" / "calibration"


def _load(path) -> tuple:
    import onnx

    path = Path(path)
    if not path.is_file():
        raise AFTExportError(f"model {path} does not exist")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf's DecodeError and friends
        raise AFTExportError(f"{path} is not a readable ONNX file: {exc}") from None
    return model, path.read_bytes()


def _agreement(ref: np.ndarray, out: np.ndarray) -> dict:
    agree = float((ref.argmax(1) == out.argmax(1)).mean()) if len(ref) else 1.0
    return {"images": len(ref), "top1_agreement": round(100 * agree, 3),
            "disagreement": round(100 * (1 - agree), 3),
            "max_abs": float(np.abs(ref - out).max()) if len(ref) else 0.0,
            "mse": float(((ref - out) ** 2).mean()) if len(ref) else 0.0}  # fmt: skip


def _session(model, threads: int = 0):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _logits(session, tensors: np.ndarray, batch: int = 128) -> np.ndarray:
    name = session.get_inputs()[0].name
    fixed = session.get_inputs()[0].shape[0]
    step = fixed if isinstance(fixed, int) else batch
    outs = []
    for i in range(0, len(tensors), step):
        x = tensors[i : i + step]
        if len(x) < step and isinstance(fixed, int):
            break  # a fixed-batch model: compare whole batches only
        outs.append(session.run(None, {name: x})[0].astype(np.float32))
    return np.concatenate(outs) if outs else np.zeros((0, 0), np.float32)


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
            save_tensors_data(calibrator.compute_data(), ranges)


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
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AFTExportError(f"cannot create the calibration cache {root}: {exc}; pass --no-cache") from None
    return root / f"{key}.json"


def _quantized_nodes(model) -> list[str]:
    """The MatMul/Gemm/Conv nodes that compute in int8: their inputs come from DequantizeLinear."""
    dq_outputs = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return [n.name for n in model.graph.node if n.op_type in QUANTIZED_OP_TYPES
            and any(i in dq_outputs for i in n.input)]  # fmt: skip


def quantize_model(model_path, out, calib: str | None, options: QuantizeOptions | None = None,
                   log=print, progress: bool = True) -> QuantizeResult:  # fmt: skip
    """Quantise an fp32 ONNX file to int8 (Q/DQ) or fp16; writes ``out`` atomically.
    ``progress`` shows a progress bar (stderr) while calibration images are decoded."""
    from aft_export.export.exporter import check_graph, read_metadata, save_onnx, set_metadata
    from aft_export.graph import aft_core_nodes, name_nodes, node_module, toposort
    from aft_export.runners import graph_precision

    opts = options or QuantizeOptions()
    out = Path(out)
    if not out.parent.is_dir():
        raise AFTExportError(f"output directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK):
        raise AFTExportError(f"output directory {out.parent} is not writable")
    model, raw = _load(model_path)
    current = graph_precision(model)
    if current != "fp32":
        raise AFTExportError(
            f"{model_path} is already {current}; quantise the fp32 export instead "
            f"(precision is decided once, from fp32)"
        )
    name_nodes(model)
    meta = read_metadata(model)
    prep = Preprocess.from_metadata(meta, opts.input_size, opts.mean, opts.std, path=str(model_path))
    model_sha = hashlib.sha256(raw).hexdigest()
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
        qmodel, recipe_int8, result_extra = _int8(model, cset, opts, core, model_sha, log)
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
        ref = _logits(_session(model), cset.tensors)
        got = _logits(_session(qmodel), cset.tensors)
        agreement = _agreement(ref, got)
        if opts.precision == "fp16":
            nonfinite = _fp16_nonfinite(qmodel, cset.tensors, node_module)
        seconds["check"] = time.perf_counter() - t

    from aft_export.trtcheck import check_model, enforce

    report = check_model(qmodel)
    report.path = str(out)
    enforce(report, log, what=f"the {opts.precision} quantisation")
    save_onnx(qmodel, out)
    return QuantizeResult(
        path=str(out), precision=opts.precision, sha256=hashlib.sha256(out.read_bytes()).hexdigest(),
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


def _int8(model, cset: CalibrationSet, opts: QuantizeOptions, core: list[str], model_sha: str, log):
    from aft_export.graph import node_module

    names = {n.name for n in model.graph.node}
    unknown = [n for n in opts.exclude if n not in names]
    if unknown:
        raise AFTExportError(f"--exclude names nodes the graph does not have: {unknown[:5]}")
    exclude = list(dict.fromkeys(([] if opts.quantize_aft_core else core) + list(opts.exclude)))
    cache = _cache_path(opts, model_sha, cset)
    cached = cache is not None and cache.is_file()
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
            qmodel, exclude, extra["sensitivity"] = _sensitivity(model, qmodel, cset, opts, exclude, ranges, log)
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


def _sensitivity(model, qmodel, cset, opts, exclude, ranges, log):
    """Rank quantised nodes by the error their quantisation causes (the error left when
    only that node goes back to float), then exclude the worst until the top-1
    disagreement with fp32 on the calibration images is within the budget."""
    from aft_export.graph import node_module

    by_name = {n.name: n for n in model.graph.node}
    ref = _logits(_session(model), cset.tensors)
    base = _agreement(ref, _logits(_session(qmodel), cset.tensors))
    candidates = [n for n in _quantized_nodes(qmodel) if n in by_name and n not in exclude]
    ranking = []
    for name in candidates:
        trial = _ort_quantize(model, opts, exclude + [name], ranges)
        m = _agreement(ref, _logits(_session(trial), cset.tensors))
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
        state = _agreement(ref, _logits(_session(current), cset.tensors))
        r["excluded"] = True
        log(f"  excluded {r['node']} ({r['module']}): disagreement now {state['disagreement']:.2f}%")
    if state["disagreement"] > opts.budget:
        log(f"sensitivity: budget {opts.budget}% not met even with every ranked node in float")
    return current, excluded, ranking


def _fp16(model, core: list[str], opts: QuantizeOptions):
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    from aft_export.graph import AFT_LAYER_TYPES

    from aft_export.graph import node_module

    blocked_ops = list(DEFAULT_OP_BLOCK_LIST) + list(FP16_KEEP_FP32_OPS) + list(AFT_LAYER_TYPES)
    norms = [n.name for n in model.graph.node if (node_module(n) or ("", ""))[1] in FP16_KEEP_FP32_MODULES]
    exclude = list(dict.fromkeys(core + norms + list(opts.exclude)))
    with _quiet_ort_quantizer():
        converted = convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked_ops,
                                             node_block_list=exclude)  # fmt: skip
    recipe = {"fp32_op_types": sorted(set(FP16_KEEP_FP32_OPS) | set(AFT_LAYER_TYPES)),
              "fp32_modules": list(FP16_KEEP_FP32_MODULES), "fp32_nodes": exclude, "io": "fp32"}  # fmt: skip
    return converted, recipe


def _fp16_nonfinite(model, tensors: np.ndarray, node_module, batch: int = 64) -> list[dict]:
    """Every fp16 value (and the output) that took NaN/Inf on the calibration images."""
    from onnx import TensorProto

    from aft_export.graph import with_outputs

    fp16_values = [v.name for v in model.graph.value_info if v.type.tensor_type.elem_type == TensorProto.FLOAT16]
    producer = {o: n for n in model.graph.node for o in n.output}
    probe = with_outputs(model, fp16_values)
    sess = _session(probe)
    names = [o.name for o in sess.get_outputs()]
    bad: dict[str, int] = {}
    for i in range(0, len(tensors), batch):
        for name, arr in zip(names, sess.run(names, {sess.get_inputs()[0].name: tensors[i : i + batch]})):
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
