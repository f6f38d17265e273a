"""TensorRT engines: build one from an ONNX file, with its manifest.

The version-dependent choices (network flags, precision flags for TensorRT 8, hardware
and version compatibility) and the manifest live in :mod:`aft_export.trt`; the graph is
checked first against the installed TensorRT's parser rules (:mod:`aft_export.trtcheck`),
so a graph it would refuse stops before a build is wasted. Every TensorRT name used
here is checked against each supported version's API by tests/test_trt_api.py.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.fileio import atomic_write, check_output_path
from aft_export.onnxio import graph_precision, load_onnx
from aft_export.trt import (BuildOptions, _dotted, build_plan, check_trt_version, environment, import_tensorrt,
                            input_profile, make_manifest, manifest_path, require_gpu, save_json_atomic)  # fmt: skip
from aft_export.trtcheck import check_model, enforce


@dataclass
class BuildResult:
    engine: str
    manifest: dict
    parser_warnings: list = field(default_factory=list)


def _parser_errors(parser) -> list[str]:
    out = []
    for i in range(parser.num_errors):
        err = parser.get_error(i)
        name = getattr(err, "node_name", lambda: "")() or f"#{err.node()}"
        op = getattr(err, "node_operator", lambda: "")() or "?"
        out.append(f"node {name} ({op}): {err.desc()}")
    return out


def _trt_attr(trt, name: str):
    """``"BuilderFlag.FP16"`` -> ``trt.BuilderFlag.FP16``. The one dynamic lookup: the API check
    (tests/test_trt_api.py) checks these names as the string literals where they are written."""
    obj = trt
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _pin_fp32_layers(trt, network, version: tuple[int, ...]) -> int:
    """Pin every layer whose outputs the parsed graph has in fp32 to fp32 (precision and output
    types); with FP16 and OBEY_PRECISION_CONSTRAINTS, TensorRT 8 then keeps the fp32 AFT core and
    LayerNorm of an fp16 graph in fp32 instead of choosing fp16 for them. The parser gives each
    tensor the graph's type (Cast becomes a layer with that output type), so the network's tensor
    types are the graph's. Returns how many layers were pinned."""
    if version >= (9, 0):  # strongly typed: the graph's types already hold, and 11.x has no such setters
        return 0
    pinned = 0
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        n = layer.num_outputs
        if n and all(layer.get_output(j).dtype == trt.float32 for j in range(n)):
            layer.precision = trt.float32
            for j in range(n):
                layer.set_output_type(j, trt.float32)
            pinned += 1
    return pinned


def check_for_version(onnx_path, version: tuple[int, ...], log=print) -> dict:
    """The offline TensorRT check (:mod:`aft_export.trtcheck`) for the TensorRT about to
    build: a graph it would refuse stops here, before a build is wasted."""
    name = _dotted(version[:2])
    report = check_model(str(onnx_path), [name])
    enforce(report, log, what="the build")
    for note in report.notes:
        log(f"note: {note}")
    return {"version": name, "status": report.status[name], "findings": len(report.findings)}


def build_engine(onnx_path, out, options: BuildOptions | None = None, log=print) -> BuildResult:
    """Build a TensorRT engine from an ONNX file; writes ``out`` and ``out.json`` atomically."""
    opts = options or BuildOptions()
    onnx_path, out = Path(onnx_path), check_output_path(out, inputs=[onnx_path, opts.timing_cache])
    if opts.timing_cache:  # read, then written after the build: never the model
        check_output_path(opts.timing_cache, inputs=[onnx_path, out])
    model = load_onnx(onnx_path, external_data=False)
    shapes = input_profile(model, opts)  # option errors before anything needs TensorRT
    precision = graph_precision(model)
    trt = import_tensorrt()
    version = check_trt_version(trt.__version__)
    plan = build_plan(version, precision, opts)  # version-dependent option errors before the build
    checked = check_for_version(onnx_path, version, log)  # what this TensorRT's parser would refuse
    env = environment()
    require_gpu(env)

    t0 = time.perf_counter()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(sum(1 << int(_trt_attr(trt, name)) for name in plan.network_flags))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = _parser_errors(parser)
        raise AFTExportError(f"TensorRT's ONNX parser rejected {onnx_path.name}: " + "; ".join(errors[:10]))
    pinned = _pin_fp32_layers(trt, network, version) if plan.pin_fp32_layers else 0
    config = builder.create_builder_config()
    for name in plan.builder_flags:
        config.set_flag(_trt_attr(trt, name))
    if not opts.tf32:
        config.clear_flag(trt.BuilderFlag.TF32)
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, opts.workspace_mb << 20)
    profile = builder.create_optimization_profile()
    profile.set_shape(shapes.name, shapes.min, shapes.opt, shapes.max)
    config.add_optimization_profile(profile)
    if opts.dla_core is not None:
        if builder.num_DLA_cores == 0:
            raise RuntimeMissing("--dla-core was given but this device has no DLA (DLA exists on Jetson AGX/NX)")
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = opts.dla_core
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    if plan.hardware_compatibility_level and version >= (8, 6):  # the plan has none before 8.6
        config.hardware_compatibility_level = _trt_attr(trt, plan.hardware_compatibility_level)
    cache_file = Path(opts.timing_cache) if opts.timing_cache else None
    cache = config.create_timing_cache(cache_file.read_bytes() if cache_file and cache_file.is_file() else b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise AFTExportError(f"TensorRT could not build an engine from {onnx_path.name}; rerun with a larger "
                             f"--workspace-mb or see TensorRT's log above")  # fmt: skip
    atomic_write(out, lambda tmp: Path(tmp).write_bytes(memoryview(serialized)))
    if cache_file:
        timing = memoryview(config.get_timing_cache().serialize())
        atomic_write(cache_file, lambda tmp: Path(tmp).write_bytes(timing))
    meta = {p.key: p.value for p in model.metadata_props}
    trt_build = {**asdict(plan), "pinned_fp32_layers": pinned, "offline_check": checked}
    seconds = time.perf_counter() - t0
    manifest = make_manifest(out, onnx_path, precision, shapes, opts, env, seconds, meta, trt_build)
    save_json_atomic(manifest_path(out), manifest)
    flags = ", ".join(plan.network_flags + plan.builder_flags) or "no flags"
    log(f"wrote {out} and {manifest_path(out).name} ({precision}, TensorRT {env['tensorrt']} with {flags}, "
        f"{env['gpu']})")  # fmt: skip
    return BuildResult(str(out), manifest)
