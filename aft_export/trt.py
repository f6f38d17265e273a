"""TensorRT engines: build, record, check, run (TensorRT 8.5, 8.6, 10.x and 11.x).

Written against the TensorRT Python API directly rather than through Polygraphy:
what we need is small (a network from ONNX, one optimisation profile, a handful of
builder options, one runner), and calling the API ourselves keeps every call visible,
lets the version checks and error messages be ours, and adds no dependency. TensorRT
is imported lazily; nothing here imports it at module load, so everything else in
aft-export works without it.

Precision is never chosen here: fp32, fp16 and Q/DQ-int8 come from the ONNX graph.
TensorRT 10 gets a STRONGLY_TYPED network and 11 is strongly typed always (it accepts
nothing else). TensorRT 8.x (JetPack 5.1 and 6.0) has no strongly typed networks, so
there the builder flags are set that make it follow the graph: INT8 alone for Q/DQ
graphs, FP16 with OBEY_PRECISION_CONSTRAINTS and the graph's fp32 layers pinned to fp32
for fp16 graphs. These choices are small pure functions of the version
(:func:`build_plan`), tested for every supported version without TensorRT, and
recorded in the manifest. The parser inlines the com.aft model-local functions from 9.0
on (since 10.7 a registered plugin of the same name could take the node over instead);
TensorRT 8's parser does not import them, so graphs for it must come inlined.

TensorRT names that not every supported version has are used only under a version
check that ``tests/test_trt_api.py`` can read: ``if version >= (10, 9):`` (or ``<``,
``and``/``or``/``not``; ``version`` is the tuple from :func:`check_trt_version`), an
early ``raise``/``return`` under such a check, or ``getattr(obj, "name", default)``.
Flags are named as string literals (``"BuilderFlag.FP16"``), which that test checks
like attribute uses, against the API extracted from each version's bindings
(``tests/data/trt_api.json``).

Every engine gets a manifest beside it (``model.engine.json``; never bytes glued in
front of the engine, which breaks other tools): TensorRT and CUDA versions, GPU name
and compute capability, precision, the TensorRT flags used, profiles, ONNX and engine
sha256, build options and time. Loading checks it first and refuses a mismatched or
corrupt engine with a message that says how to rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from aft_export import __version__
from aft_export.errors import AFTExportError, RuntimeMissing

MIN_TRT = (8, 5)  # JetPack 5.1
MAX_TRT_MAJOR = 11
HW_LEVELS = ("none", "ampere+", "same-cc")
INSTALL_HINT = ("x86-64 with an NVIDIA GPU: pip install 'tensorrt>=10.3'; Jetson: use the TensorRT that "
                "JetPack installs (python3 -c 'import tensorrt')")  # fmt: skip


# ---------------------------------------------------------------- options, profiles


@dataclass(frozen=True)
class Profile:
    """min/opt/max of one dimension."""

    min: int
    opt: int
    max: int

    @classmethod
    def parse(cls, spec: str | int | None, default: int, name: str) -> Profile:
        """``"1,8,32"`` (min,opt,max), ``"8"`` (fixed) or None (the graph's size)."""
        if spec is None:
            return cls(default, default, default)
        parts = [p.strip() for p in str(spec).split(",")]
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise AFTExportError(f"bad {name} profile {spec!r}: use MIN,OPT,MAX such as 1,8,32, or one number") from None
        if len(values) == 1:
            values *= 3
        if len(values) != 3:
            raise AFTExportError(f"bad {name} profile {spec!r}: give 1 or 3 numbers (MIN,OPT,MAX)")
        lo, opt, hi = values
        if lo < 1 or not lo <= opt <= hi:
            raise AFTExportError(f"inconsistent {name} profile {spec!r}: need 1 <= min <= opt <= max")
        return cls(lo, opt, hi)


@dataclass(frozen=True)
class BuildOptions:
    batch: str | None = "1,8,32"
    hw: str | None = None  # AFT-conv with dynamic height and width: "MIN,OPT,MAX" pixels
    workspace_mb: int = 1024
    timing_cache: str | None = None  # loaded if present, saved after the build
    dla_core: int | None = None  # Jetson DLA, with GPU fallback
    version_compatible: bool = False
    hardware_compatibility: str = "none"  # none | ampere+ | same-cc
    # TF32 math for fp32 matrix products and convolutions (Ampere+). TensorRT enables it by
    # default; it is a precision the graph does not say (~1e-3 relative error, outside the
    # fp32 parity limit), so it is off unless asked for.
    tf32: bool = False

    def __post_init__(self) -> None:
        if self.workspace_mb < 1:
            raise AFTExportError("--workspace-mb must be >= 1")
        if self.dla_core is not None and self.dla_core < 0:
            raise AFTExportError("--dla-core must be >= 0")
        if self.hardware_compatibility not in HW_LEVELS:
            raise AFTExportError(f"--hardware-compatibility must be one of {sorted(HW_LEVELS)}")


@dataclass(frozen=True)
class InputShapes:
    """min/opt/max shapes of the image input, from the graph and the options."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


def input_profile(model, opts: BuildOptions) -> InputShapes:
    """The optimisation profile for the ONNX graph's (N, C, H, W) input.

    Dynamic dimensions need a profile; fixed ones must not be given another size.
    """
    inp = model.graph.input[0]
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    if len(dims) != 4:
        raise AFTExportError(f"input {inp.name} has {len(dims)} dimensions; expected N, C, H, W")
    n, c, h, w = dims
    if c is None:
        raise AFTExportError(f"input {inp.name} has a dynamic channel count; export with a fixed one")
    if n is not None and opts.batch is not None and Profile.parse(opts.batch, n, "batch") != Profile(n, n, n):
        raise AFTExportError(f"the graph has a fixed batch of {n}; re-export with --batch dynamic or use --batch {n}")
    meta = {p.key: p.value for p in model.metadata_props}
    size = json.loads(meta["input_size"])[-1] if "input_size" in meta else None
    b = Profile.parse(opts.batch if n is None else n, n or 1, "batch")
    if (h is None) != (w is None):
        raise AFTExportError("height and width must be both dynamic or both fixed")
    if h is None:
        if opts.hw is None and size is None:
            raise AFTExportError("the graph has dynamic height and width: give --hw MIN,OPT,MAX")
        s = Profile.parse(opts.hw, size, "height/width")
    else:
        if opts.hw is not None and Profile.parse(opts.hw, h, "height/width") != Profile(h, h, h):
            raise AFTExportError(f"the graph takes {h}x{w} images only; --hw applies to AFT-conv exports "
                                 f"made with --dynamic-hw")  # fmt: skip
        s = Profile(h, h, h)
    wprof = s if w is None else Profile(w, w, w)
    return InputShapes(inp.name, (b.min, c, s.min, wprof.min), (b.opt, c, s.opt, wprof.opt),
                       (b.max, c, s.max, wprof.max))  # fmt: skip


# ---------------------------------------------------------------- environment, versions


def _version_tuple(text: str) -> tuple[int, ...]:
    out = []
    for part in str(text).split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def check_trt_version(version: str) -> tuple[int, ...]:
    """``version`` as a tuple of ints; AFTExportError for a TensorRT aft-export does not support."""
    v = _version_tuple(version)
    if v[:2] < MIN_TRT:
        raise AFTExportError(f"TensorRT {version} is too old: aft-export needs {_dotted(MIN_TRT)} or newer "
                             f"(JetPack 5.1 and later) for its runner API: named tensors, execute_async_v3")  # fmt: skip
    if v[0] == 9:
        raise AFTExportError(f"TensorRT {version} is not supported: 9.x was a limited release whose API "
                             f"aft-export has not checked; use 8.6, 10.x or 11.x")  # fmt: skip
    if v[0] > MAX_TRT_MAJOR:
        raise AFTExportError(f"TensorRT {version} is newer than this aft-export knows (8.5 to {MAX_TRT_MAJOR}.x): "
                             f"its API has not been checked; use TensorRT {MAX_TRT_MAJOR}.x or a newer "
                             f"aft-export")  # fmt: skip
    return v


def network_flags(version: tuple[int, ...]) -> tuple[str, ...]:
    """NetworkDefinitionCreationFlag members for ``create_network``."""
    if version < (9, 0):
        return ("NetworkDefinitionCreationFlag.EXPLICIT_BATCH",)  # 8.x: no strongly typed networks yet
    if version < (11, 0):
        return ("NetworkDefinitionCreationFlag.STRONGLY_TYPED",)
    return ()  # 11.x: always strongly typed (the flag is accepted and ignored); EXPLICIT_BATCH is gone


def precision_flags(version: tuple[int, ...], precision: str) -> tuple[str, ...]:
    """BuilderFlag members that make TensorRT run the graph in the graph's own precision.

    Strongly typed networks (10.x, 11.x) take it from the tensor types and need none. TensorRT 8
    runs everything in fp32 unless allowed otherwise: Q/DQ graphs need INT8 (and not FP16, so the
    float parts stay fp32 as in the graph); fp16 graphs need FP16, and OBEY_PRECISION_CONSTRAINTS
    so that the layers the graph keeps in fp32 (AFT core, LayerNorm), pinned by
    :func:`_pin_fp32_layers`, are not moved to fp16.
    """
    if version >= (9, 0):
        return ()
    if precision == "int8":
        return ("BuilderFlag.INT8",)
    if precision == "fp16":
        return ("BuilderFlag.FP16", "BuilderFlag.OBEY_PRECISION_CONSTRAINTS")
    return ()


def hardware_level(level: str, version: tuple[int, ...]) -> str | None:
    """The HardwareCompatibilityLevel member for ``--hardware-compatibility``, or a clear error."""
    if level == "none":
        return None
    if version < (8, 6):
        raise AFTExportError(f"--hardware-compatibility {level} needs TensorRT 8.6 or newer; this is "
                             f"{_dotted(version)}; use none")  # fmt: skip
    if level == "ampere+":
        return "HardwareCompatibilityLevel.AMPERE_PLUS"
    if version < (10, 9):  # SAME_COMPUTE_CAPABILITY came with 10.9 (TensorRT 10.9.0 release notes)
        raise AFTExportError(f"--hardware-compatibility same-cc needs TensorRT 10.9 or newer "
                             f"(HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY); this is "
                             f"{_dotted(version)}; use ampere+ or none")  # fmt: skip
    return "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY"


def compatibility_flags(version_compatible: bool, version: tuple[int, ...]) -> tuple[str, ...]:
    if not version_compatible:
        return ()
    if version < (8, 6):
        raise AFTExportError(f"--version-compatible needs TensorRT 8.6 or newer; this is {_dotted(version)}; "
                             f"build without it")  # fmt: skip
    return ("BuilderFlag.VERSION_COMPATIBLE",)


@dataclass(frozen=True)
class BuildPlan:
    """What a build asks of TensorRT, by TensorRT name; recorded in the manifest."""

    network_flags: tuple[str, ...]
    builder_flags: tuple[str, ...]
    hardware_compatibility_level: str | None
    pin_fp32_layers: bool  # TensorRT 8 fp16: keep the layers the graph has in fp32 in fp32


def build_plan(version: tuple[int, ...], precision: str, opts: BuildOptions) -> BuildPlan:
    """Every TensorRT-version-dependent choice of a build; option errors raised here, before any build."""
    flags = precision_flags(version, precision) + compatibility_flags(opts.version_compatible, version)
    return BuildPlan(network_flags(version), flags, hardware_level(opts.hardware_compatibility, version),
                     pin_fp32_layers=version < (9, 0) and precision == "fp16")  # fmt: skip


def version_compatible_runs(built: tuple[int, ...], here: tuple[int, ...]) -> bool:
    """Whether TensorRT ``here`` may load an engine built version-compatible with TensorRT ``built``.

    As NVIDIA states it: version compatibility needs 8.6 or newer to build and to run; such an
    engine runs on the same or a later release of the same major, and across majors in exactly two
    combinations, "TensorRT 10 version-compatible engines can run with a TensorRT 11 runtime, and
    TensorRT 8 version-compatible engines can run with a TensorRT 10 runtime. No other combination
    across major versions is supported" (TensorRT 11.4 Support Matrix, Engine Portability:
    https://docs.nvidia.com/deeplearning/tensorrt/11.4.0/getting-started/support-matrix.html; also
    the Engine Compatibility page, https://docs.nvidia.com/deeplearning/tensorrt/11.1.0/
    inference-library/engine-compatibility.html). Loading one needs
    ``runtime.engine_host_code_allowed = True`` (the plan carries its lean runtime), which the runner
    sets for engines whose manifest says version_compatible.
    """
    if built[:2] < (8, 6) or here[:2] < (8, 6) or built > here:
        return False
    return built[0] == here[0] or (built[0], here[0]) in {(8, 10), (10, 11)}


def import_tensorrt():
    """``tensorrt`` or RuntimeMissing with the install steps."""
    try:
        import tensorrt as trt
    except ImportError:
        raise RuntimeMissing(f"TensorRT is not installed here ({INSTALL_HINT})") from None
    check_trt_version(trt.__version__)
    return trt


def environment() -> dict:
    """What an engine built here would be tied to. No TensorRT or GPU: those fields None."""
    env = {"tensorrt": None, "cuda": None, "gpu": None, "compute_capability": None}
    try:
        import tensorrt as trt

        env["tensorrt"] = trt.__version__
    except ImportError:
        pass
    try:
        import torch

        env["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
            major, minor = torch.cuda.get_device_capability(0)
            env["compute_capability"] = f"{major}.{minor}"
    except Exception:  # noqa: BLE001 - a broken CUDA install reads as "no GPU"
        pass
    return env


def require_gpu(env: dict) -> None:
    if env.get("gpu") is None:
        raise RuntimeMissing("no CUDA GPU is visible here (torch.cuda.is_available() is False); "
                             "TensorRT engines are built and run on the GPU they are for")  # fmt: skip


# ---------------------------------------------------------------- manifest


def manifest_path(engine: str | os.PathLike) -> Path:
    return Path(str(engine) + ".json")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_manifest(engine: Path, onnx_path: Path, precision: str, shapes: InputShapes, opts: BuildOptions,
                  env: dict, seconds: float, source_meta: dict, trt_build: dict) -> dict:  # fmt: skip
    return {
        "format": "aft-export.engine.v1", "tool": f"aft-export {__version__}",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tensorrt": env["tensorrt"], "cuda": env["cuda"], "gpu": env["gpu"],
        "compute_capability": env["compute_capability"], "precision": precision,
        "input": {"name": shapes.name, "min": list(shapes.min), "opt": list(shapes.opt), "max": list(shapes.max)},
        "onnx": onnx_path.name, "onnx_sha256": _sha256(onnx_path), "engine_sha256": _sha256(engine),
        "build_options": asdict(opts), "tensorrt_build": trt_build, "build_seconds": round(seconds, 2),
        "model": {k: source_meta[k] for k in ("model_name", "classes", "input_size", "mean", "std", "source_sha256")
                  if k in source_meta},
    }  # fmt: skip


def check_manifest(engine: str | os.PathLike, env: dict) -> dict:
    """Read the manifest beside ``engine`` and refuse an engine that cannot run here.

    Checks, without TensorRT: the manifest exists and parses, the engine's sha256
    matches (a truncated or corrupt engine is caught here), then against ``env``:
    the TensorRT version (unless built version-compatible, see
    :func:`version_compatible_runs`) and the GPU's compute capability (unless built
    hardware-compatible).
    """
    engine = Path(engine)
    rebuild = f"rebuild it here: aft-export build MODEL.onnx -o {engine.name}"
    if not engine.is_file():
        raise AFTExportError(f"engine {engine} does not exist")
    mpath = manifest_path(engine)
    if not mpath.is_file():
        raise AFTExportError(f"engine {engine} has no manifest ({mpath.name}); aft-export cannot tell what it was "
                             f"built with, so it will not load it; {rebuild}")  # fmt: skip
    try:
        manifest = json.loads(mpath.read_text())
        recorded = manifest["engine_sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise AFTExportError(f"engine manifest {mpath} is unreadable ({exc}); {rebuild}") from None
    if _sha256(engine) != recorded:
        raise AFTExportError(f"engine {engine} is corrupt or was replaced: its sha256 differs from its manifest; {rebuild}")
    opts = manifest.get("build_options", {})
    here = env.get("tensorrt")
    if here is not None and manifest.get("tensorrt") != here:
        built, now = _version_tuple(manifest.get("tensorrt") or "0"), _version_tuple(here)
        if not opts.get("version_compatible"):
            raise AFTExportError(f"engine {engine} was built with TensorRT {manifest.get('tensorrt')}, this machine has "
                                 f"{here}; {rebuild} (or build with --version-compatible)")  # fmt: skip
        if not version_compatible_runs(built, now):
            raise AFTExportError(f"engine {engine} was built with TensorRT {manifest.get('tensorrt')}, this machine "
                                 f"has {here}: a version-compatible engine runs only on the same or a later "
                                 f"TensorRT of its major, or built with 10.x on 11.x, or with 8.6 on 10.x; "
                                 f"{rebuild}")  # fmt: skip
    cc = env.get("compute_capability")
    if cc is not None and manifest.get("compute_capability") not in (None, cc):
        level = opts.get("hardware_compatibility", "none")
        ampere_ok = level == "ampere+" and _version_tuple(cc) >= (8, 0)
        if not ampere_ok:
            raise AFTExportError(f"engine {engine} was built for compute capability {manifest['compute_capability']} "
                                 f"({manifest.get('gpu')}), this GPU is {cc} ({env.get('gpu')}); {rebuild} "
                                 f"(or build with --hardware-compatibility ampere+)")  # fmt: skip
    return manifest


def save_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


# ---------------------------------------------------------------- build


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
    from aft_export.trtcheck import check_model, enforce

    name = _dotted(version[:2])
    report = check_model(str(onnx_path), [name])
    enforce(report, log, what="the build")
    for note in report.notes:
        log(f"note: {note}")
    return {"version": name, "status": report.status[name], "findings": len(report.findings)}


def build_engine(onnx_path, out, options: BuildOptions | None = None, log=print) -> BuildResult:
    """Build a TensorRT engine from an ONNX file; writes ``out`` and ``out.json`` atomically."""
    import onnx

    from aft_export.runners import graph_precision

    opts = options or BuildOptions()
    onnx_path, out = Path(onnx_path), Path(out)
    if not onnx_path.is_file():
        raise AFTExportError(f"model {onnx_path} does not exist")
    if not out.parent.is_dir():
        raise AFTExportError(f"output directory {out.parent} does not exist")
    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise AFTExportError(f"{onnx_path} is not a readable ONNX file: {exc}") from None
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
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(memoryview(serialized))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    if cache_file:
        cache_tmp = cache_file.with_name(f".{cache_file.name}.tmp")
        cache_tmp.write_bytes(memoryview(config.get_timing_cache().serialize()))
        os.replace(cache_tmp, cache_file)
    meta = {p.key: p.value for p in model.metadata_props}
    trt_build = {**asdict(plan), "pinned_fp32_layers": pinned, "offline_check": checked}
    seconds = time.perf_counter() - t0
    manifest = make_manifest(out, onnx_path, precision, shapes, opts, env, seconds, meta, trt_build)
    save_json_atomic(manifest_path(out), manifest)
    flags = ", ".join(plan.network_flags + plan.builder_flags) or "no flags"
    log(f"wrote {out} and {manifest_path(out).name} ({precision}, TensorRT {env['tensorrt']} with {flags}, "
        f"{env['gpu']})")  # fmt: skip
    return BuildResult(str(out), manifest)


# ---------------------------------------------------------------- runner


def trt_runner(engine: str, threads: int = 0):
    """A runner for a TensorRT engine (checks the manifest before TensorRT is touched)."""
    from aft_export.runners import ModelInfo, Runner

    manifest = check_manifest(engine, environment())
    m = manifest.get("model", {})
    try:
        info = ModelInfo(json.loads(m["classes"]), tuple(json.loads(m["input_size"])), tuple(json.loads(m["mean"])),
                         tuple(json.loads(m["std"])), source_sha256=m.get("source_sha256", ""),
                         precision=manifest.get("precision", "fp32"), extra=manifest)  # fmt: skip
    except (KeyError, ValueError) as exc:
        raise AFTExportError(f"engine manifest of {engine} lacks the model's metadata ({exc}); rebuild it") from None
    trt = import_tensorrt()
    version = check_trt_version(trt.__version__)
    env = environment()
    require_gpu(env)

    class TrtRunner(Runner):
        backend = "tensorrt"

        def __init__(self) -> None:
            import torch

            super().__init__(str(engine), info)
            self.threads = threads
            runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
            if manifest.get("build_options", {}).get("version_compatible") and version >= (8, 6):
                runtime.engine_host_code_allowed = True  # the plan carries its own lean runtime: we trust it
            self.engine = runtime.deserialize_cuda_engine(Path(engine).read_bytes())
            if self.engine is None:
                raise AFTExportError(f"TensorRT could not deserialise {engine}; rebuild it on this machine")
            self.context = self.engine.create_execution_context()
            self.names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
            self.inputs = [n for n in self.names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
            self.stream = torch.cuda.Stream()
            lo, hi = manifest["input"]["min"], manifest["input"]["max"]
            self.fixed_batch = lo[0] if lo[0] == hi[0] else None
            self.limits = (lo, hi)

        def run(self, feeds):
            import torch

            lo, hi = self.limits
            x = np.ascontiguousarray(feeds[self.inputs[0]], dtype=np.float32)
            if any(not a <= s <= b for a, s, b in zip(lo, x.shape, hi)):
                raise AFTExportError(f"input shape {x.shape} is outside the engine's profile {lo}..{hi}; "
                                     f"rebuild with a wider --batch/--hw")  # fmt: skip
            with torch.cuda.stream(self.stream):
                xin = torch.from_numpy(x).cuda(non_blocking=True)
                self.context.set_input_shape(self.inputs[0], tuple(x.shape))
                self.context.set_tensor_address(self.inputs[0], xin.data_ptr())
                outs = {}
                for name in self.names:
                    if name in self.inputs:
                        continue
                    shape = tuple(self.context.get_tensor_shape(name))
                    dtype = torch.from_numpy(np.zeros(0, trt.nptype(self.engine.get_tensor_dtype(name)))).dtype
                    outs[name] = torch.empty(shape, dtype=dtype, device="cuda")
                    self.context.set_tensor_address(name, outs[name].data_ptr())
                if not self.context.execute_async_v3(self.stream.cuda_stream):
                    raise AFTExportError(f"TensorRT failed to run {engine}")
            self.stream.synchronize()
            return {k: v.float().cpu().numpy() for k, v in outs.items()}

    return TrtRunner()
