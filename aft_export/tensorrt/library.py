"""TensorRT engines: build, record, check, run (TensorRT 8.5, 8.6, 10.x, 11.x and TensorRT-RTX 1.x).

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

Two libraries, one build path. Standard TensorRT (``import tensorrt``) builds on the GPU an
engine is for, and is the path for data-centre GPUs (Hopper) and Jetson. TensorRT for RTX
(``import tensorrt_rtx``, NVIDIA's edition for RTX GPUs) builds ahead of time on a CPU with no
GPU, for compute capabilities set on the builder config (default: 8.6, 8.9, 12.0, 12.1 and
later; 7.5 only when asked), and compiles kernels just in time on the GPU. Its networks are
always strongly typed; it has no DLA, version or hardware compatibility, TF32 switch or
timing cache (deprecated there, and they force a GPU), and its engines load only with the
exact TensorRT-RTX version that built them (NVIDIA's TensorRT-RTX docs: "Porting Guide for
TensorRT Applications", "CPU-Only AOT and TensorRT-RTX Engines", "Engine Compatibility").
:func:`choose_library` picks one (``auto``: TensorRT where installed, else TensorRT-RTX);
every choice that depends on the library is a function of ``(version, library)`` here, and
the code that calls TensorRT branches on ``library == RTX`` before any version comparison
(RTX reports 1.x), which ``tests/test_trt_api.py`` reads like the version checks, against the
API of the ``tensorrt_rtx`` bindings too.

Every engine gets a manifest beside it (``model.engine.json``; never bytes glued in
front of the engine, which breaks other tools): TensorRT and CUDA versions, GPU name
and compute capability, precision, the TensorRT flags used, profiles, ONNX and engine
sha256, build options and time; the library, and for TensorRT-RTX the target compute
capabilities as the builder config reports them. Loading checks it first and refuses a
mismatched or corrupt engine (another library, version or GPU) with the command that rebuilds it.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from aft_export import readers
from aft_export.version import __version__
from aft_export.environment import TENSORRT_MODULES, tensorrt_libraries
from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.fileio import atomic_write_text, relative_name, sha256_file
from aft_export.artifacts.onnxio import ArtifactMeta
from aft_export.options import BuildOptions

MIN_TRT = (8, 5)  # JetPack 5.1
MAX_TRT_MAJOR = 11
# TensorRT-RTX: the release whose Python API tests/data/trt_api.json holds ("rtx-1.7")
MIN_RTX = (1, 7)
MAX_RTX_MAJOR = 1
RTX = "tensorrt-rtx"
TITLES = {"tensorrt": "TensorRT", RTX: "TensorRT-RTX"}
INSTALL_HINT = ("x86-64 with an NVIDIA GPU: pip install 'tensorrt>=10.3'; Jetson: use the TensorRT that "
                "JetPack installs (python3 -c 'import tensorrt')")  # fmt: skip
RTX_INSTALL_HINT = "pip install 'aft-export[rtx]' (tensorrt-rtx-cu12==1.7.1.116; builds on a CPU, runs on RTX GPUs)"
# TensorRT-RTX 1.7's ComputeCapability members, by "major.minor" (7.5 Turing, 8.0/8.6 Ampere,
# 8.9 Ada, 12.0/12.1 Blackwell RTX and GB10); anything else (9.0 Hopper, 10.x, 11.0, Jetson's
# 7.2/8.7) is not a TensorRT-RTX target
RTX_TARGETS = {"7.5": "ComputeCapability.SM75", "8.0": "ComputeCapability.SM80", "8.6": "ComputeCapability.SM86",
               "8.9": "ComputeCapability.SM89", "12.0": "ComputeCapability.SM120",
               "12.1": "ComputeCapability.SM121"}  # fmt: skip
# what an engine built with none set runs on: "By default, an engine built by TensorRT-RTX can be run on
# GPU devices with compute capability 8.6, 8.9, 12.0, 12.1, and later" (TensorRT-RTX docs, "CPU-Only AOT
# and TensorRT-RTX Engines"); Turing (7.5) needs it set explicitly
RTX_DEFAULT_TARGETS = ("8.6", "8.9", "12.0", "12.1")


# ---------------------------------------------------------------- options, profiles


@dataclass(frozen=True)
class Profile:
    """min/opt/max of one dimension."""

    min: int
    opt: int
    max: int

    @classmethod
    def parse(cls, spec: str | int | None, default: int, name: str, option: str) -> Profile:
        """``"1,8,32"`` (min,opt,max), ``"8"`` (fixed) or None (the graph's size); ``option``: the
        field that gave ``spec``, named in the error."""
        if spec is None:
            return cls(default, default, default)
        parts = [p.strip() for p in str(spec).split(",")]
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise AFTExportError(f"bad {name} profile {spec!r} (`{option}`); use MIN,OPT,MAX such as 1,8,32, "
                                 f"or one number") from None  # fmt: skip
        if len(values) == 1:
            values *= 3
        if len(values) != 3:
            raise AFTExportError(f"bad {name} profile {spec!r} (`{option}`); give 1 or 3 numbers (MIN,OPT,MAX)")
        lo, opt, hi = values
        if lo < 1 or not lo <= opt <= hi:
            raise AFTExportError(f"inconsistent {name} profile {spec!r} (`{option}`); give MIN,OPT,MAX with "
                                 f"1 <= min <= opt <= max")  # fmt: skip
        return cls(lo, opt, hi)


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
    if n is not None and opts.batch is not None and Profile.parse(opts.batch, n, "batch", "batch") != Profile(n, n, n):
        raise AFTExportError(f"the graph has a fixed batch of {n}; re-export with `aft-export export batch=dynamic` "
                             f"or use `batch={n}`")  # fmt: skip
    meta = ArtifactMeta.of(model)
    size = meta.input_size[-1] if "input_size" in meta else None
    b = Profile.parse(opts.batch if n is None else n, n or 1, "batch", "batch")
    if (h is None) != (w is None):
        raise AFTExportError("height and width must be both dynamic or both fixed")
    if h is None:
        if opts.hw is None and size is None:
            raise AFTExportError("the graph has dynamic height and width: give `hw=MIN,OPT,MAX`")
        s = Profile.parse(opts.hw, size, "height/width", "hw")
    else:
        if opts.hw is not None and Profile.parse(opts.hw, h, "height/width", "hw") != Profile(h, h, h):
            raise AFTExportError(f"the graph takes {h}x{w} images only; `hw` applies to AFT-conv exports with a "
                                 f"dynamic height and width (`aft-export export dynamic_hw=true`)")  # fmt: skip
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


def check_trt_version(version: str, library: str = "tensorrt") -> tuple[int, ...]:
    """``version`` as a tuple of ints; AFTExportError for a TensorRT (or TensorRT-RTX) aft-export does not support."""
    v = _version_tuple(version)
    if library == RTX:
        if v[:2] < MIN_RTX or v[0] > MAX_RTX_MAJOR:
            raise AFTExportError(f"TensorRT-RTX {version} is not supported: aft-export's use of its API is checked "
                                 f"against {_dotted(MIN_RTX)} to {MAX_RTX_MAJOR}.x; {RTX_INSTALL_HINT}")  # fmt: skip
        return v
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


def choose_library(requested: str, installed) -> str:
    """The library a build or a check uses: ``requested`` (auto, tensorrt, tensorrt-rtx) among the
    ``installed`` ones. auto takes standard TensorRT where it is installed (it builds for the GPU
    here, and is the path for Hopper and Jetson), else TensorRT-RTX. RuntimeMissing when none fits."""
    if requested not in ("auto", *TENSORRT_MODULES):
        raise AFTExportError(f"unknown TensorRT library {requested!r}; choose auto, tensorrt or {RTX}")
    if requested == "auto":
        for library in TENSORRT_MODULES:
            if library in installed:
                return library
        raise RuntimeMissing(f"neither TensorRT nor TensorRT-RTX is installed here (TensorRT: {INSTALL_HINT}; "
                             f"TensorRT-RTX: {RTX_INSTALL_HINT})")  # fmt: skip
    if requested not in installed:
        hint = RTX_INSTALL_HINT if requested == RTX else INSTALL_HINT
        raise RuntimeMissing(f"{TITLES[requested]} is not installed here ({hint})")
    return requested


def import_library(library: str = "auto"):
    """``(module, library, version)``: the TensorRT module chosen by :func:`choose_library`
    (``tensorrt`` or ``tensorrt_rtx``), its library name and its checked version tuple."""
    name = choose_library(library, tensorrt_libraries())
    module = importlib.import_module(TENSORRT_MODULES[name])
    return module, name, check_trt_version(module.__version__, name)


def network_flags(version: tuple[int, ...], library: str = "tensorrt") -> tuple[str, ...]:
    """NetworkDefinitionCreationFlag members for ``create_network``."""
    if library == RTX:  # always strongly typed; STRONGLY_TYPED is the one member it has, and it is accepted
        return ("NetworkDefinitionCreationFlag.STRONGLY_TYPED",)
    if version < (9, 0):
        return ("NetworkDefinitionCreationFlag.EXPLICIT_BATCH",)  # 8.x: no strongly typed networks yet
    if version < (11, 0):
        return ("NetworkDefinitionCreationFlag.STRONGLY_TYPED",)
    return ()  # 11.x: always strongly typed (the flag is accepted and ignored); EXPLICIT_BATCH is gone


def precision_flags(version: tuple[int, ...], precision: str, library: str = "tensorrt") -> tuple[str, ...]:
    """BuilderFlag members that make TensorRT run the graph in the graph's own precision.

    Strongly typed networks (10.x, 11.x) take it from the tensor types and need none. TensorRT 8
    runs everything in fp32 unless allowed otherwise: Q/DQ graphs need INT8 (and not FP16, so the
    float parts stay fp32 as in the graph); fp16 graphs need FP16, and OBEY_PRECISION_CONSTRAINTS
    so that the layers the graph keeps in fp32 (AFT core, LayerNorm), pinned by
    :func:`_pin_fp32_layers`, are not moved to fp16. TensorRT-RTX is always strongly typed.
    """
    if library == RTX or version >= (9, 0):
        return ()
    if precision == "int8":
        return ("BuilderFlag.INT8",)
    if precision == "fp16":
        return ("BuilderFlag.FP16", "BuilderFlag.OBEY_PRECISION_CONSTRAINTS")
    return ()


def hardware_level(level: str, version: tuple[int, ...]) -> str | None:
    """The HardwareCompatibilityLevel member for ``hardware_compatibility``, or a clear error."""
    if level == "none":
        return None
    if version < (8, 6):
        raise AFTExportError(f"`hardware_compatibility={level}` needs TensorRT 8.6 or newer; this is "
                             f"{_dotted(version)}; use none")  # fmt: skip
    if level == "ampere+":
        return "HardwareCompatibilityLevel.AMPERE_PLUS"
    if version < (10, 9):  # SAME_COMPUTE_CAPABILITY came with 10.9 (TensorRT 10.9.0 release notes)
        raise AFTExportError(f"`hardware_compatibility=same-cc` needs TensorRT 10.9 or newer "
                             f"(HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY); this is "
                             f"{_dotted(version)}; use ampere+ or none")  # fmt: skip
    return "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY"


def compatibility_flags(version_compatible: bool, version: tuple[int, ...]) -> tuple[str, ...]:
    if not version_compatible:
        return ()
    if version < (8, 6):
        raise AFTExportError(f"`version_compatible` needs TensorRT 8.6 or newer; this is {_dotted(version)}; "
                             f"build without it")  # fmt: skip
    return ("BuilderFlag.VERSION_COMPATIBLE",)


def rtx_refusals(opts: BuildOptions) -> None:
    """TensorRT-RTX has no DLA, no version or hardware compatibility (engines run only with the
    TensorRT-RTX release that built them; targets are compute capabilities), no TF32 switch, and
    its timing cache is deprecated and forces a GPU: such options are refused, in one line."""
    given = [f"`{option}`" for option, on in (("dla_core", opts.dla_core is not None),
                                              ("version_compatible", opts.version_compatible),
                                              ("hardware_compatibility", opts.hardware_compatibility != "none"),
                                              ("tf32", opts.tf32), ("timing_cache", bool(opts.timing_cache))) if on]  # fmt: skip
    if given:
        raise AFTExportError(f"TensorRT-RTX has no {', '.join(given)} (no DLA, no version or hardware "
                             f"compatibility: use `compute_capabilities`; no TF32 switch; its timing cache is "
                             f"deprecated and needs a GPU); leave {'it' if len(given) == 1 else 'them'} out, or "
                             f"build with standard TensorRT: `library=tensorrt`")  # fmt: skip


def compute_capabilities(ccs, library: str) -> tuple[str, ...]:
    """ComputeCapability members for ``compute_capabilities`` ("X.Y" each; TensorRT-RTX only); () keeps the
    library's default targets (:data:`RTX_DEFAULT_TARGETS`)."""
    ccs = tuple(dict.fromkeys(str(c) for c in ccs))
    if not ccs:
        return ()
    if library != RTX:
        raise AFTExportError("`compute_capabilities` are TensorRT-RTX's (engines built ahead of time for the GPUs "
                             "named); standard TensorRT builds for the GPU it runs on (see "
                             "`hardware_compatibility`); add `library=tensorrt-rtx` or leave them out")  # fmt: skip
    bad = [c for c in ccs if c not in RTX_TARGETS]
    if bad:
        raise AFTExportError(f"compute capability {', '.join(bad)} is not a TensorRT-RTX target (it builds for "
                             f"{', '.join(RTX_TARGETS)}: RTX GPUs); Hopper (9.0), data-centre Blackwell and "
                             f"Jetson take standard TensorRT: `library=tensorrt`")  # fmt: skip
    return tuple(RTX_TARGETS[c] for c in ccs)


def rtx_runs_on(targets, cc: str) -> bool:
    """Whether a TensorRT-RTX engine built for ``targets`` ("X.Y" each; empty: the default) runs on a GPU
    of compute capability ``cc``. Explicit targets: exactly those. Default: 8.6, 8.9, 12.0, 12.1 and
    later RTX parts (NVIDIA names no other; Hopper 9.0 and 10.x/11.x data-centre and Jetson parts are not
    RTX GPUs, and Turing 7.5 must be asked for)."""
    if targets:
        return cc in targets
    return cc in RTX_DEFAULT_TARGETS or _version_tuple(cc) > _version_tuple(RTX_DEFAULT_TARGETS[-1])


@dataclass(frozen=True)
class BuildPlan:
    """What a build asks of TensorRT, by TensorRT name; recorded in the manifest."""

    network_flags: tuple[str, ...]
    builder_flags: tuple[str, ...]
    hardware_compatibility_level: str | None
    pin_fp32_layers: bool  # TensorRT 8 fp16: keep the layers the graph has in fp32 in fp32
    library: str = "tensorrt"
    compute_capabilities: tuple[str, ...] = ()  # TensorRT-RTX targets asked for (ComputeCapability members)


def build_plan(version: tuple[int, ...], precision: str, opts: BuildOptions, library: str = "tensorrt") -> BuildPlan:
    """Every library- and version-dependent choice of a build; option errors raised here, before any build."""
    ccs = compute_capabilities(opts.compute_capabilities, library)
    if library == RTX:
        rtx_refusals(opts)
        return BuildPlan(network_flags(version, library), (), None, False, library, ccs)
    flags = precision_flags(version, precision) + compatibility_flags(opts.version_compatible, version)
    return BuildPlan(network_flags(version), flags, hardware_level(opts.hardware_compatibility, version),
                     pin_fp32_layers=version < (9, 0) and precision == "fp16")  # fmt: skip


def engine_name(onnx_path, library: str) -> Path:
    """Where an engine built from ``onnx_path`` goes by default: ``model.int8.engine``, or for
    TensorRT-RTX ``model.int8.rtx.engine`` (its engines load nowhere else, so the name says so)."""
    onnx_path = Path(onnx_path)
    stem = onnx_path.name.removesuffix(".onnx")
    return onnx_path.with_name(f"{stem}.rtx.engine" if library == RTX else f"{stem}.engine")


def check_engine_name(out, library: str) -> None:
    """A TensorRT-RTX engine is named ``*.rtx.engine`` and only such an engine is, so the two kinds
    cannot be mistaken for one another."""
    name = Path(out).name
    if library == RTX and not name.endswith(".rtx.engine"):
        raise AFTExportError(f"name a TensorRT-RTX engine *.rtx.engine (it loads only with TensorRT-RTX): "
                             f"`output={name.removesuffix('.engine').removesuffix('.plan')}.rtx.engine`")  # fmt: skip
    if library != RTX and name.endswith(".rtx.engine"):
        raise AFTExportError(f"{name} names a TensorRT-RTX engine, but this build uses standard TensorRT; "
                             f"use `output={name.removesuffix('.rtx.engine')}.engine` or `library=tensorrt-rtx`")  # fmt: skip


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
    return import_library("tensorrt")[0]


_LOGGERS: dict[str, object] = {}  # one per library and process: TensorRT keeps the first logger it is given


def library_logger(trt, library: str):
    """The process's one logger for ``library``, collecting warnings and errors for the manifest.

    TensorRT (and TensorRT-RTX) keep the first logger a process gives them and ignore later ones
    ("The logger passed into createInferBuilder differs from one already registered ... the
    current new logger is ignored"), so every builder and runtime of aft-export shares this one; ``seen`` counts every
    message, so a build can tell when another logger was registered first and it heard nothing.
    """
    logger = _LOGGERS.get(library)
    if logger is None:

        class Collect(trt.ILogger):
            def __init__(self):
                super().__init__()
                self.messages: list[tuple[str, str]] = []
                self.seen = 0

            def log(self, severity, msg):
                self.seen += 1
                if severity in (trt.Logger.INTERNAL_ERROR, trt.Logger.ERROR, trt.Logger.WARNING):
                    self.messages.append((severity.name, msg))

        logger = _LOGGERS[library] = Collect()
    logger.messages, logger.seen = [], 0
    return logger


def require_gpu(env: dict, library: str = "tensorrt") -> None:
    if env.get("gpu") is None:
        if library == RTX:
            raise RuntimeMissing("no GPU: a TensorRT-RTX engine is built ahead of time on any machine but runs only "
                                 "on an RTX GPU (compute capability 7.5 and up), and none is visible here "
                                 "(torch.cuda.is_available() is False)")  # fmt: skip
        raise RuntimeMissing("no GPU: no CUDA GPU is visible here (torch.cuda.is_available() is False); "
                             "TensorRT engines are built and run on the GPU they are for")  # fmt: skip


# ---------------------------------------------------------------- manifest


def manifest_path(engine: str | os.PathLike) -> Path:
    return Path(str(engine) + ".json")


RTX_NOTE = ("TensorRT-RTX builds ahead of time and compiles kernels just in time on the GPU it runs on: "
            "'network' is the parsed network definition (layer types, output types, which matrix products and "
            "convolutions take dequantised int8), not the engine's kernels, which no CPU can show")  # fmt: skip


def make_manifest(engine: Path, onnx_path: Path, precision: str, shapes: InputShapes, opts: BuildOptions,
                  env: dict, seconds: float, source_meta: dict, trt_build: dict, library: str = "tensorrt",
                  library_version: str | None = None, targets: list[str] | None = None,
                  network: dict | None = None, parser_warnings: list[str] | None = None) -> dict:  # fmt: skip
    """The manifest written beside an engine. ``targets``: the compute capabilities the engine is for
    (TensorRT-RTX: as the builder config reports them, [] for the library's default; standard
    TensorRT: the GPU it was built on)."""
    rtx = library == RTX
    version = library_version or env.get("tensorrt_rtx" if rtx else "tensorrt")
    build_options = asdict(opts)
    if opts.timing_cache:  # the manifest travels with the engine: the cache named relative to it
        build_options["timing_cache"] = relative_name(opts.timing_cache, engine.parent)
    return {
        "format": "aft-export.engine.v1", "tool": f"aft-export {__version__}",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "library": library, "library_version": version, "tensorrt": None if rtx else version,
        "cuda": env["cuda"], "gpu": env["gpu"],
        "compute_capability": None if rtx else env["compute_capability"],
        "compute_capabilities": list(targets if targets is not None else
                                     ([env["compute_capability"]] if env.get("compute_capability") else [])),
        **({"compute_capabilities_default": list(RTX_DEFAULT_TARGETS) + ["later RTX"]} if rtx and not targets else {}),
        "built_on_gpu": env["gpu"] is not None, "precision": precision,
        "input": {"name": shapes.name, "min": list(shapes.min), "opt": list(shapes.opt), "max": list(shapes.max)},
        "onnx": onnx_path.name, "onnx_sha256": sha256_file(onnx_path), "engine_sha256": sha256_file(engine),
        "build_options": build_options, "tensorrt_build": trt_build, "build_seconds": round(seconds, 2),
        "parser_warnings": parser_warnings, "network": network, **({"note": RTX_NOTE} if rtx else {}),
        "model": {k: source_meta[k] for k in ("model_name", "classes", "input_size", "mean", "std", "source_sha256",
                                              "preprocessing_from") if k in source_meta},
    }  # fmt: skip


def _text(v) -> bool:
    return isinstance(v, str)


def _text_or_none(v) -> bool:
    return v is None or isinstance(v, str)


def _texts(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _dims(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= -1 for x in v)


def _profile(v) -> bool:
    """The input and its optimisation profile: a name, and min, opt and max shapes of one rank (at least the batch)."""
    shapes = [v.get(k) for k in ("min", "opt", "max")] if isinstance(v, dict) else []
    return (bool(shapes) and _text(v.get("name", "")) and all(_dims(s) and s for s in shapes)
            and len({len(s) for s in shapes}) == 1)  # fmt: skip


def _count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _counts(v) -> bool:
    """A mapping of names (a precision, a layer kind) to counts."""
    return isinstance(v, dict) and all(isinstance(k, str) and _count(x) for k, x in v.items())


# what each entry of a manifest holds (make_manifest writes it so); a hand-edited manifest whose entry
# is of another type has that entry malformed: `info` shows it as such, a command that needs it stops
MANIFEST_TYPES = {
    "format": _text, "tool": _text, "created_utc": _text, "library": _text, "library_version": _text_or_none,
    "tensorrt": _text_or_none, "cuda": _text_or_none, "gpu": _text_or_none, "compute_capability": _text_or_none,
    "compute_capabilities": _texts, "compute_capabilities_default": _texts,
    "built_on_gpu": lambda v: isinstance(v, bool), "precision": _text,
    "input": _profile,
    "onnx": _text, "onnx_sha256": _text, "engine_sha256": _text, "build_options": lambda v: isinstance(v, dict),
    "tensorrt_build": lambda v: isinstance(v, dict), "note": _text,
    "build_seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "parser_warnings": lambda v: v is None or _texts(v),
    "network": lambda v: v is None or (isinstance(v, dict) and _counts(v.get("outputs", {}))
                                       and _counts(v.get("compute", {})) and _count(v.get("num_layers", 0))),
    "model": lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()),
}  # fmt: skip
# the entries check_manifest decides with, when it checks an engine against this machine
DECIDING = ("library", "library_version", "tensorrt", "build_options", "compute_capabilities", "compute_capability")


def manifest_problems(manifest: dict) -> list[str]:
    """The entries of ``manifest`` that are not of their type (:data:`MANIFEST_TYPES`)."""
    return [k for k, ok in MANIFEST_TYPES.items() if k in manifest and not ok(manifest[k])]


def rebuild_command(engine: Path, manifest: dict | None = None, library: str | None = None,
                    cc: str | None = None) -> str:
    """The command that rebuilds ``engine`` here: same ONNX file (as the manifest names it), library,
    profile; for TensorRT-RTX the compute capability of the GPU here when the old targets miss it.
    In a message's words (backquoted, options as ``field=value``: the command line says its flags).
    A malformed entry of the manifest is left out, as if absent."""
    m = manifest if isinstance(manifest, dict) else {}
    m = {k: v for k, v in m.items() if k not in manifest_problems(m)}
    library = library or m.get("library", "tensorrt")
    parts = ["aft-export", "build", m.get("onnx") or "MODEL.onnx", f"library={library}"]
    opts = m.get("build_options") or {}
    if opts.get("batch"):
        parts.append(f"batch={opts['batch']}")
    if opts.get("hw"):
        parts.append(f"hw={opts['hw']}")
    if library == RTX:
        parts += [f"compute_capabilities={c}" for c in ([cc] if cc else opts.get("compute_capabilities") or [])]
    name = engine.name
    if library == RTX and not name.endswith(".rtx.engine"):
        name = name.removesuffix(".engine") + ".rtx.engine"
    elif library != RTX and name.endswith(".rtx.engine"):
        name = name.removesuffix(".rtx.engine") + ".engine"
    return "`" + " ".join([*parts, f"output={name}"]) + "`"


def check_manifest(engine: str | os.PathLike, env: dict) -> dict:
    """Read the manifest beside ``engine`` and refuse an engine that cannot run here.

    Checks, without TensorRT: the manifest exists and parses, the engine's sha256
    matches (a truncated or corrupt engine is caught here), then against ``env``:
    the library it was built with (a TensorRT-RTX engine loads only with TensorRT-RTX, a
    standard one only with standard TensorRT), the version (TensorRT-RTX: exactly the one
    that built it; TensorRT: the same, unless built version-compatible, see
    :func:`version_compatible_runs`) and the GPU's compute capability (TensorRT-RTX: the
    targets, :func:`rtx_runs_on`; TensorRT: the GPU built on, unless hardware-compatible).
    """
    engine = Path(engine)
    generic = f"rebuild it here: `aft-export build MODEL.onnx output={engine.name}`"
    readers.regular_file(engine, "engine")  # a FIFO or a device is said so, not "does not exist"
    mpath = manifest_path(engine)
    if not (mpath.exists() or mpath.is_symlink()):
        raise AFTExportError(f"engine {engine} has no manifest ({mpath.name}); aft-export cannot tell what it was "
                             f"built with, so it will not load it; {generic}")  # fmt: skip
    try:  # a regular file, bounded, UTF-8, JSON
        manifest = readers.read_document(mpath, "engine manifest", generic, yaml_ok=False)
    except readers.Malformed as exc:
        raise AFTExportError(f"engine manifest {mpath} is unreadable ({exc.reason.removeprefix('is ')}); "
                             f"{generic}") from None  # fmt: skip
    recorded = manifest.get("engine_sha256") if isinstance(manifest, dict) else None
    if not isinstance(recorded, str):
        what = "has no engine_sha256" if isinstance(manifest, dict) else f"holds a {type(manifest).__name__}"
        raise AFTExportError(f"engine manifest {mpath} is unreadable (it {what}, not a manifest's mapping); {generic}")
    bad = [k for k in manifest_problems(manifest) if k in DECIDING]
    if env and bad:  # nothing to decide without an environment (info, a Triton description)
        raise AFTExportError(f"engine manifest {mpath} has malformed entries ({', '.join(bad)}), so aft-export cannot "
                             f"tell what the engine needs; {generic}")  # fmt: skip
    if sha256_file(engine) != recorded:
        raise AFTExportError(f"engine {engine} is corrupt or was replaced: its sha256 differs from its manifest; "
                             f"rebuild it here: {rebuild_command(engine, manifest)}")  # fmt: skip
    library = manifest.get("library", "tensorrt")
    built = manifest.get("library_version") or manifest.get("tensorrt")
    opts = manifest.get("build_options", {})
    cc = env.get("compute_capability")
    if library == RTX:
        here, other = env.get("tensorrt_rtx"), env.get("tensorrt")
        if here is None and other is not None:
            raise RuntimeMissing(f"engine {engine} was built with TensorRT-RTX {built} and loads only with it; this "
                                 f"machine has TensorRT {other} and no TensorRT-RTX ({RTX_INSTALL_HINT}); or "
                                 f"rebuild it for TensorRT: {rebuild_command(engine, manifest, 'tensorrt')}")  # fmt: skip
        if here is not None and here != built:
            raise AFTExportError(f"engine {engine} was built with TensorRT-RTX {built}, this machine has {here}: "
                                 f"TensorRT-RTX engines load only with the release that built them; rebuild it "
                                 f"here: {rebuild_command(engine, manifest)}")  # fmt: skip
        targets = manifest.get("compute_capabilities") or []
        if cc is not None and not rtx_runs_on(targets, cc):
            which = ", ".join(targets) if targets else "the default (8.6, 8.9, 12.0, 12.1 and later RTX)"
            fix = (f"rebuild it here: {rebuild_command(engine, manifest, cc=cc)}" if cc in RTX_TARGETS else
                   f"{cc} is not a TensorRT-RTX target: build for standard TensorRT: "
                   f"{rebuild_command(engine, manifest, 'tensorrt')}")  # fmt: skip
            raise AFTExportError(f"engine {engine} was built by TensorRT-RTX for compute capability {which}, this "
                                 f"GPU is {cc} ({env.get('gpu')}); {fix}")  # fmt: skip
        return manifest
    rebuild = f"rebuild it here: {rebuild_command(engine, manifest)}"
    here = env.get("tensorrt")
    if here is None and env.get("tensorrt_rtx") is not None:
        raise RuntimeMissing(f"engine {engine} was built with TensorRT {built} and loads only with standard "
                             f"TensorRT; this machine has TensorRT-RTX {env['tensorrt_rtx']} and no TensorRT "
                             f"({INSTALL_HINT}); or rebuild it for TensorRT-RTX: "
                             f"{rebuild_command(engine, manifest, RTX)}")  # fmt: skip
    if here is not None and built != here:
        b, now = _version_tuple(built or "0"), _version_tuple(here)
        if not opts.get("version_compatible"):
            raise AFTExportError(f"engine {engine} was built with TensorRT {built}, this machine has "
                                 f"{here}; {rebuild} (or build with `aft-export build version_compatible=true`)")  # fmt: skip
        if not version_compatible_runs(b, now):
            raise AFTExportError(f"engine {engine} was built with TensorRT {built}, this machine "
                                 f"has {here}: a version-compatible engine runs only on the same or a later "
                                 f"TensorRT of its major, or built with 10.x on 11.x, or with 8.6 on 10.x; "
                                 f"{rebuild}")  # fmt: skip
    if cc is not None and manifest.get("compute_capability") not in (None, cc):
        level = opts.get("hardware_compatibility", "none")
        ampere_ok = level == "ampere+" and _version_tuple(cc) >= (8, 0)
        if not ampere_ok:
            raise AFTExportError(f"engine {engine} was built for compute capability {manifest['compute_capability']} "
                                 f"({manifest.get('gpu')}), this GPU is {cc} ({env.get('gpu')}); {rebuild} "
                                 f"(or build with `aft-export build hardware_compatibility=ampere+`)")  # fmt: skip
    return manifest


def save_json_atomic(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2))
