"""TensorRT engines: build one from an ONNX file, with its manifest; parse one with the real parser.

One code path for both libraries (:mod:`aft_export.tensorrt.library`): standard TensorRT, which builds on
the GPU the engine is for, and TensorRT-RTX, which builds ahead of time on a CPU. They differ
only where their APIs do, each difference under a column of the library's row
(:data:`~aft_export.tensorrt.library.LIBRARIES`, ``lib.takes_targets``): the network flags and
TensorRT 8's precision flags, TF32/DLA/hardware compatibility/timing cache (standard only),
target compute capabilities (TensorRT-RTX only). The library- and version-dependent choices
and the manifest live in :mod:`aft_export.tensorrt.library`; the graph is checked first against the
offline rules for the parser about to read it (:mod:`aft_export.trtcheck`), so a graph it
would refuse stops before a build is wasted. Every TensorRT name used here is checked
against each supported version's API, TensorRT-RTX's included, by tests/test_trt_api.py.

What the parser made of the graph is recorded from the network definition, which needs
no GPU (:func:`network_summary`): layer types, the types of the tensors layers produce,
and which matrix products and convolutions take dequantised int8 inputs.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aft_export.errors import AFTExportError, Judged, RuntimeMissing, Verdict, said
from aft_export.fileio import atomic_write, check_output_path, claim_output
from aft_export.artifacts.onnxio import ArtifactMeta, graph_precision, load_onnx
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.environment import tensorrt_environment
from aft_export.runtimes import title_of
from aft_export.runners import onnx_info
from aft_export.tensorrt.library import (BuildOptions, build_plan, check_engine_name, engine_name, import_library,
                                         input_profile, library_logger, library_of, require_gpu)  # fmt: skip
from aft_export.tensorrt.manifest import make_manifest, manifest_path, save_json_atomic
from aft_export.trtcheck import check_model, enforce
from aft_export.trtcheck.versions import EDITIONS, parse_version
from aft_export.options.commands import command_line

# layer output types, as the manifest counts them
DTYPES = {"FLOAT": "fp32", "HALF": "fp16", "INT8": "int8", "BF16": "bf16", "FP8": "fp8", "INT32": "int32",
          "INT64": "int64", "BOOL": "bool", "UINT8": "uint8", "INT4": "int4", "FP4": "fp4"}  # fmt: skip
FLOATS = ("fp32", "fp16", "bf16", "fp8", "fp4")
# layers that hold, move, convert or (de)quantise data: not counted as compute (network_summary)
DATA_LAYERS = ("CONSTANT", "SHUFFLE", "SQUEEZE", "UNSQUEEZE", "CAST", "IDENTITY", "QUANTIZE", "DEQUANTIZE")
# what an int8 input is traced back through to its dequantisation: reshapes, transposes, casts
SEEN_THROUGH = ("SHUFFLE", "SQUEEZE", "UNSQUEEZE", "CAST", "IDENTITY")
_PARSES: Counter = Counter()  # parses per library in this process (its log prints a warning text once)


@dataclass
class BuildResult(Judged):
    engine: str
    manifest: dict
    parser_warnings: list = field(default_factory=list)
    # a build that fails raises; one that returns built the engine (running it is parity's check)
    verdict: Verdict = field(default_factory=Verdict)

    def to_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict.to_dict()}


def offline_column(library: str, version: tuple[int, ...]) -> str:
    """The offline rules' column (:mod:`aft_export.trtcheck`) for the parser about to read a graph:
    standard TensorRT its own ``major.minor``; TensorRT-RTX its edition's column (``rtx-1.7``:
    10.13's rules plus the documented differences of TensorRT-RTX, see
    :data:`aft_export.trtcheck.versions.EDITIONS`), for a newer release of the same major the
    newest such column not newer than it. A TensorRT-RTX the check has no column for is an error:
    standard TensorRT's rules are not its rules."""
    prefix = library_of(library).rules
    if not prefix:
        return f"{version[0]}.{version[1]}"
    have = sorted((parse_version(c.removeprefix(prefix)), c) for c in EDITIONS if c.startswith(prefix))
    fits = [c for v, c in have if v[0] == version[0] and v <= tuple(version[:2])]
    if not fits:
        raise AFTExportError(f"the offline TensorRT check has no rules for TensorRT-RTX {version[0]}.{version[1]} "
                             f"(it knows {', '.join(c for _, c in have)}); check with that release's parser alone: "
                             f"{command_line('check', library='tensorrt-rtx')}, or install tensorrt-rtx-cu12==1.7.1.116")  # fmt: skip
    return fits[-1]


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


def _pin_fp32_layers(trt, network, version: tuple[int, ...], library: str = "tensorrt") -> int:
    """Pin every layer whose outputs the parsed graph has in fp32 to fp32 (precision and output
    types); with FP16 and OBEY_PRECISION_CONSTRAINTS, TensorRT 8 then keeps the fp32 AFT core and
    LayerNorm of an fp16 graph in fp32 instead of choosing fp16 for them. The parser gives each
    tensor the graph's type (Cast becomes a layer with that output type), so the network's tensor
    types are the graph's. Returns how many layers were pinned."""
    if library_of(library).strongly_typed or version >= (9, 0):  # the graph's types hold; 11.x, RTX lack the setters
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


def network_summary(trt, network) -> dict:
    """What the parser made of the graph, from the network definition (no GPU needed).

    ``layers``: count per layer type; ``outputs``: how many layers produce at least one tensor of
    each type (int8, fp16, fp32, ...); ``quantized``/``float``: the matrix products and convolutions
    whose data and weight inputs both come from an int8 DequantizeLinear (through reshapes,
    transposes and casts), and those with a float input, by layer name, so that a Q/DQ pair the
    parser dropped, or a layer the graph meant to quantise, shows up by name.

    ``compute``: the compute layers per precision, ``compute_layers`` the same per layer type: every
    layer with a floating-point or int8 output but those that only hold, move, convert or
    (de)quantise data (:data:`DATA_LAYERS`: constants, shuffles, casts, Q/DQ); shape arithmetic
    (int32/int64) is not counted. A compute layer is int8 when its inputs come from int8
    dequantisations (seen through shuffles and casts: an int8 MatMul fed through a Cast is int8),
    else the type of its output (fp16, fp32, ...).
    """
    producer, layers, outputs = {}, Counter(), Counter()
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        layers[layer.type.name] += 1
        kinds = set()
        for j in range(layer.num_outputs):
            tensor = layer.get_output(j)
            producer[tensor.name] = layer
            kinds.add(DTYPES.get(tensor.dtype.name, tensor.dtype.name.lower()))
        for kind in kinds:
            outputs[kind] += 1

    def source(tensor) -> str:
        """int8 when ``tensor`` is an int8 tensor dequantised, seen through shuffles and casts; else float."""
        layer = producer.get(tensor.name)
        while layer is not None and layer.type.name in SEEN_THROUGH:  # by name: no lookup the API check misses
            layer = producer.get(layer.get_input(0).name)
        if layer is not None and layer.type == trt.LayerType.DEQUANTIZE and layer.get_input(0).dtype == trt.int8:
            return "int8"
        return "float"

    quantized, floating = [], []
    compute: dict[str, Counter] = {}
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        products = layer.type in (trt.LayerType.MATRIX_MULTIPLY, trt.LayerType.CONVOLUTION)
        # a product's data and weights; any other layer's floating-point inputs
        inputs = [layer.get_input(j) for j in range(min(layer.num_inputs, 2) if products else layer.num_inputs)]
        inputs = [t for t in inputs if t is not None and (products or DTYPES.get(t.dtype.name) in FLOATS)]
        int8 = bool(inputs) and all(source(t) == "int8" for t in inputs)
        if products:
            (quantized if int8 else floating).append(layer.name)
        out = [DTYPES.get(layer.get_output(j).dtype.name, "") for j in range(layer.num_outputs)]
        if layer.type.name in DATA_LAYERS or not any(k in FLOATS or k == "int8" for k in out):
            continue
        kind = "int8" if int8 else next(k for k in out if k in FLOATS or k == "int8")
        compute.setdefault(kind, Counter())[layer.type.name] += 1
    return {"layers": dict(sorted(layers.items())), "outputs": dict(sorted(outputs.items())),
            "num_layers": network.num_layers, "quantized": quantized, "float": floating,
            "compute": {k: sum(c.values()) for k, c in sorted(compute.items())},
            "compute_layers": {k: dict(sorted(c.items())) for k, c in sorted(compute.items())}}  # fmt: skip


@dataclass
class Parsed:
    """A graph parsed by the real parser: the network and what the parser said."""

    library: str
    version: tuple[int, ...]
    ok: bool
    errors: list[str]
    warnings: list[str] | None  # None: not captured (another logger was registered first in this process)
    network: dict
    seconds: float
    # False when an earlier parse in this process may have printed (and so hidden) some of them: the
    # library's log prints each warning text once per process (checked: the same file parsed twice
    # warns the first time only)
    warnings_complete: bool = True
    objects: tuple = ()  # (trt, builder, network, parser, logger) while the build needs them


def parse(onnx_path, library: str = "auto", plan=None, keep: bool = False) -> Parsed:
    """Parse an ONNX file with the installed TensorRT's (or TensorRT-RTX's) own ONNX parser; no GPU.
    ``keep``: hold the builder and network for a build (:func:`build_engine`)."""
    load_onnx(onnx_path, external_data=False)  # its external data checked (contained) before TensorRT reads it
    trt, library, version = import_library(library)
    flags = plan.network_flags if plan is not None else build_plan(version, "fp32", BuildOptions(), library).network_flags
    logger = library_logger(trt, library)
    first = _PARSES[library] == 0
    _PARSES[library] += 1
    t0 = time.perf_counter()
    builder = trt.Builder(logger)
    network = builder.create_network(sum(1 << int(_trt_attr(trt, name)) for name in flags))
    parser = trt.OnnxParser(network, logger)
    ok = bool(parser.parse_from_file(str(onnx_path)))
    seconds = time.perf_counter() - t0
    errors = [] if ok else _parser_errors(parser) or [m for s, m in logger.messages if s != "WARNING"]
    warnings = [m for s, m in logger.messages if s == "WARNING"] if logger.seen else None
    summary = network_summary(trt, network) if ok else {}
    return Parsed(library, version, ok, errors, warnings, summary, seconds,
                  warnings_complete=first and warnings is not None,
                  objects=(trt, builder, network, parser, logger) if keep else ())  # fmt: skip


def check_for_version(onnx_path, version: tuple[int, ...], log=print, library: str = "tensorrt",
                      checked=None) -> dict:  # fmt: skip
    """The offline TensorRT check (:mod:`aft_export.trtcheck`) for the parser about to read the
    graph (:func:`offline_column`): a graph it would refuse stops here, before a build is wasted.
    ``checked``: a report of this file already made with that column asked for
    (``check_model(..., also=(column,))``, as the pipeline's export and quantise steps make
    it); without it, or when it lacks the column, the graph is checked here."""
    name = offline_column(library, version)
    report = checked.columns.get(name) if checked is not None else None
    if report is None:
        report = check_model(str(onnx_path), [name])
    enforce(report, log, what="the build")
    for note in report.notes:
        log(f"note: {note}")
    return {"version": name, "status": report.status[name], "findings": len(report.findings)}


def _build(trt, library: str, version: tuple[int, ...], builder, network, plan, shapes, opts: BuildOptions):
    """The builder config for ``plan`` and the build: ``(serialized engine or None, targets)``, the
    targets being TensorRT-RTX's compute capabilities as its builder config reports them back
    ([]: its default), None for standard TensorRT. The timing cache (standard TensorRT only) is
    loaded from and saved to ``opts.timing_cache``."""
    config = builder.create_builder_config()
    for name in plan.builder_flags:
        config.set_flag(_trt_attr(trt, name))
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, opts.workspace_mb << 20)
    profile = builder.create_optimization_profile()
    profile.set_shape(shapes.name, shapes.min, shapes.opt, shapes.max)
    config.add_optimization_profile(profile)
    lib = library_of(library)
    if lib.takes_targets:  # targets on the config, read back as the builder config reports them
        config.num_compute_capabilities = len(plan.compute_capabilities)
        for i, name in enumerate(plan.compute_capabilities):
            if not config.set_compute_capability(_trt_attr(trt, name), i):
                raise AFTExportError(f"TensorRT-RTX refused target {name}")
        targets = [_cc(config.get_compute_capability(i).name) for i in range(config.num_compute_capabilities)]
        return builder.build_serialized_network(network, config), targets
    if not opts.tf32:
        config.clear_flag(trt.BuilderFlag.TF32)
    if opts.dla_core is not None:
        if builder.num_DLA_cores == 0:
            raise RuntimeMissing(said("{dla_core} was given but this device has no DLA (DLA exists on Jetson "
                                      "AGX/NX)", "build"))
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = opts.dla_core
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    if plan.hardware_compatibility_level and version >= (8, 6):  # the plan has none before 8.6
        config.hardware_compatibility_level = _trt_attr(trt, plan.hardware_compatibility_level)
    cache_file = Path(opts.timing_cache) if opts.timing_cache else None
    cache = config.create_timing_cache(cache_file.read_bytes() if cache_file and cache_file.is_file() else b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    serialized = builder.build_serialized_network(network, config)
    if serialized is not None and cache_file:
        timing = memoryview(config.get_timing_cache().serialize())
        atomic_write(cache_file, lambda tmp: Path(tmp).write_bytes(timing))
    return serialized, None


def model_entry(model, onnx_path: Path, preprocessing: ForeignPreprocessing | None = None) -> dict[str, str]:
    """What the manifest says of the model (its ``model`` entry, read by every runner of the
    engine): our metadata; for a file another tool wrote, the preprocessing the user gave for it
    (``preprocessing``, or the JSON beside it), under the same keys, with where it came from. No
    preprocessing at all is an error: the engine could be built but not fed."""
    meta = ArtifactMeta.of(model, str(onnx_path))
    info = onnx_info(model, str(onnx_path), onnx_path, preprocessing)  # what it takes and gives: from its graph
    ends = {"input_format": info.input_format, "output_format": info.output_format}
    if meta.ours:
        return {**meta.values, **ends}
    return {"classes": json.dumps(info.classes), "input_size": json.dumps(list(info.input_size)),
            "mean": json.dumps(list(info.mean)), "std": json.dumps(list(info.std)),
            "preprocessing_from": info.preprocessing_from, **ends}  # fmt: skip


def build_engine(onnx_path, out=None, options: BuildOptions | None = None, log=print, checked=None,
                 preprocessing: ForeignPreprocessing | None = None) -> BuildResult:  # fmt: skip
    """Build a TensorRT or TensorRT-RTX engine from an ONNX file; writes ``out`` (default
    :func:`~aft_export.tensorrt.library.engine_name`) and ``out.json`` atomically. TensorRT-RTX builds with no
    GPU; such an engine is built, not run. ``checked``: the offline check report the caller
    already has for this file (see :func:`check_for_version`); None: checked here.
    ``preprocessing``: how the engine of a file another tool wrote is fed (:func:`model_entry`)."""
    opts = options or BuildOptions()
    onnx_path = Path(onnx_path)
    model = load_onnx(onnx_path, external_data=False)
    shapes = input_profile(model, opts)  # option errors before anything needs TensorRT
    described = model_entry(model, onnx_path, preprocessing)
    precision = graph_precision(model)
    trt, library, version = import_library(opts.library)
    lib = library_of(library)
    out = check_output_path(out if out is not None else engine_name(onnx_path, library),
                            inputs=[onnx_path, opts.timing_cache])
    # claimed for the build: a second run writing the same engine fails at its start (the command line's claim
    # is this one, re-entered)
    with claim_output(out, inputs=[onnx_path, opts.timing_cache]):
        if opts.timing_cache:  # read, then written after the build: never the model
            check_output_path(opts.timing_cache, inputs=[onnx_path, out])
        check_engine_name(out, library)
        plan = build_plan(version, precision, opts, library)  # library- and version-dependent option errors first
        checked = check_for_version(onnx_path, version, log, library, checked)  # what this parser would refuse
        env = tensorrt_environment()
        if not lib.builds_without_gpu:
            require_gpu(env)  # TensorRT-RTX builds ahead of time, on the CPU

        t0 = time.perf_counter()
        parsed = parse(onnx_path, library, plan, keep=True)
        if not parsed.ok:
            raise AFTExportError(f"{title_of(library)}'s ONNX parser rejected {onnx_path.name}: "
                                 + "; ".join(parsed.errors[:10]))  # fmt: skip
        _, builder, network, _, logger = parsed.objects
        pinned = _pin_fp32_layers(trt, network, version, library) if plan.pin_fp32_layers else 0
        serialized, targets = _build(trt, library, version, builder, network, plan, shapes, opts)
        if serialized is None:
            said = "; ".join(m for s, m in logger.messages if s != "WARNING")[:600]
            raise AFTExportError(f"{title_of(library)} could not build an engine from {onnx_path.name}: "
                                 + (said or said("see its log; rerun with a larger {workspace_mb}", "build")))  # fmt: skip
        atomic_write(out, lambda tmp: Path(tmp).write_bytes(memoryview(serialized)))
        trt_build = {**asdict(plan), "pinned_fp32_layers": pinned, "offline_check": checked,
                     "parse_seconds": round(parsed.seconds, 3),
                     "parser_warnings_complete": parsed.warnings_complete}  # fmt: skip
        seconds = time.perf_counter() - t0
        manifest = make_manifest(out, onnx_path, precision, shapes, opts, env, seconds, described, trt_build, library,
                                 trt.__version__, targets, parsed.network, parsed.warnings)  # fmt: skip
        save_json_atomic(manifest_path(out), manifest)
        flags = ", ".join(plan.network_flags + plan.builder_flags) or "no flags"
        if lib.takes_targets:
            where = ("for compute capability " + ", ".join(targets)) if targets else \
                "for TensorRT-RTX's default targets"
            runs = "built, not run: no GPU here" if env["gpu"] is None else "built ahead of time"
            log(f"wrote {out} and {manifest_path(out).name} ({precision}, TensorRT-RTX {trt.__version__} with {flags}, "
                f"{where}; {runs})")  # fmt: skip
        else:
            log(f"wrote {out} and {manifest_path(out).name} ({precision}, TensorRT {trt.__version__} with {flags}, "
                f"{env['gpu']})")  # fmt: skip
        if described.get("preprocessing_from"):
            log(f"note: {onnx_path.name} has no aft-export metadata; {manifest_path(out).name} records its "
                f"preprocessing from {described['preprocessing_from']}")  # fmt: skip
        if parsed.warnings:
            log(f"note: the parser warned {len(parsed.warnings)} times (parser_warnings in {manifest_path(out).name})")
        return BuildResult(str(out), manifest, parsed.warnings or [])


def _cc(member: str) -> str:
    """``SM86`` -> ``8.6``, ``SM120`` -> ``12.0``."""
    digits = member.removeprefix("SM")
    return f"{digits[:-1]}.{digits[-1]}" if digits.isdigit() else member.lower()


def real_check(onnx_path, offline_status: str, column: str, library: str = "auto", build: bool = False) -> dict:
    """The installed parser's verdict on a graph (and with ``build``, the builder's; in memory: a
    check writes nothing), beside the offline rules' verdict for the same parser (``offline_status``
    of ``column``, see :func:`offline_column`). ``agrees`` is False when the rules pass a graph the
    library refuses (a false pass) or refuse one it takes (a false refusal)."""
    parsed = parse(onnx_path, library, keep=build)
    result = {"library": parsed.library, "version": ".".join(map(str, parsed.version)), "column": column,
              "parses": parsed.ok, "errors": parsed.errors, "warnings": parsed.warnings,
              "warnings_complete": parsed.warnings_complete, "parse_seconds": round(parsed.seconds, 3),
              "network": parsed.network, "builds": None}  # fmt: skip
    if build and parsed.ok:
        trt, builder, network, _, logger = parsed.objects
        model = load_onnx(onnx_path, external_data=False)
        first = next(i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer})
        fixed = first.type.tensor_type.shape.dim[0].HasField("dim_value") if first.type.tensor_type.shape.dim else False
        # a fixed batch: its own
        opts = BuildOptions(library=parsed.library, batch_profile=None if fixed else BuildOptions.batch_profile)
        plan = build_plan(parsed.version, graph_precision(model), opts, parsed.library)
        t0 = time.perf_counter()
        serialized, _ = _build(trt, parsed.library, parsed.version, builder, network, plan,
                               input_profile(model, opts), opts)  # fmt: skip
        result["build_seconds"] = round(time.perf_counter() - t0, 3)
        result["builds"] = serialized is not None
        result["engine_bytes"] = serialized.nbytes if serialized is not None else None
        if serialized is None:
            result["errors"] = [m for s, m in logger.messages if s != "WARNING"]
    real_ok = parsed.ok and result["builds"] is not False
    rules_ok = offline_status != "refuses"
    result["verdict"] = "accepts" if real_ok else "refuses"
    result["agrees"] = real_ok == rules_ok
    result["disagreement"] = (None if real_ok == rules_ok else
                              "false pass: the rules accept what the library refuses" if rules_ok else
                              "false refusal: the rules refuse what the library accepts" if build else
                              said("false refusal: the rules refuse what the parser accepts (some rules are its "
                                   "builder's: check with {build} to see whether the builder refuses it)", "check"))  # fmt: skip
    return result


def check_verdict(report, real: dict | None = None, strict: bool = False) -> Verdict:
    """``aft-export check``'s verdict on one file: the offline rules' (``report``, a
    :class:`~aft_export.trtcheck.CheckReport`) and, where the installed library read it
    (``real``, from :func:`real_check`), its parser's and builder's: a refusal fails, and with
    ``strict`` so does the rules' disagreeing with the parser."""
    failed, name = [], Path(report.path).name
    if real:
        title = f"{title_of(real['library'])} {real['version']}"
        if real["verdict"] == "refuses":
            failed.append(f"{title}'s {'builder' if real['parses'] else 'parser'} refuses {name}")
        if strict and not real["agrees"]:
            failed.append(f"the offline rules (column {real['column']}) and {title}'s parser disagree on "
                          f"{name}: {real['disagreement']}")  # fmt: skip
    return Verdict.combine(report.verdict, Verdict.of(failed))
