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
every choice that depends on the library is a function of ``(version, library)`` here. What
each library does differently is one table, :data:`LIBRARIES` (a :class:`Library` row each,
looked up by :func:`library_of`): code branches on a column of its row (``lib.strongly_typed``,
``lib.takes_targets``), never on a library's name, and before any version comparison (RTX
reports 1.x); ``tests/test_trt_api.py`` reads those columns from this table like the version
checks, against the API of the ``tensorrt_rtx`` bindings too.

Every engine gets a manifest beside it: :mod:`aft_export.tensorrt.manifest`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from aft_export.environment import tensorrt_libraries
from aft_export.runtimes import TENSORRT_MODULES, title_of
from aft_export.errors import AFTExportError, Named, RuntimeMissing, said
from aft_export.artifacts.ends import graph_ends
from aft_export.artifacts.onnxio import ArtifactMeta
from aft_export.options import BuildOptions
from aft_export.options.commands import command_line

MIN_TRT = (8, 5)  # JetPack 5.1
MAX_TRT_MAJOR = 11
# TensorRT-RTX: the release whose Python API tests/data/trt_api.json holds ("rtx-1.7")
MIN_RTX = (1, 7)
MAX_RTX_MAJOR = 1
RTX = "tensorrt-rtx"
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


# ---------------------------------------------------------------- the libraries


@dataclass(frozen=True)
class Library:
    """What a TensorRT library does differently, as the code that builds, records and runs its engines asks
    it: one row of :data:`LIBRARIES` each. Its name is its runtime's (:data:`aft_export.runtimes.RUNTIMES`),
    which holds its title (:func:`~aft_export.runtimes.title_of`) and its Python module."""

    name: str  # the word everywhere: the `library` option, an engine manifest's "library", its runtime's name
    install: str  # what to install where it is missing (a sentence's parenthesis)
    suffix: str  # how its engines' default file name ends (engine_name)
    # its engines' names end with its suffix, and no other library's do: they load nowhere else (check_engine_name)
    named_by_suffix: bool
    # every network is strongly typed, whatever the version: no precision flags, no fp32 layers pinned
    strongly_typed: bool
    # builds for the compute capabilities set on its builder config (RTX_TARGETS; none: its default ones), which
    # the manifest records, rather than for the GPU it builds on
    takes_targets: bool
    builds_without_gpu: bool  # builds ahead of time on any machine; only running an engine needs a GPU
    # takes the options of a build on its GPU: DLA, TF32, version and hardware compatibility, the timing cache
    # (else each is refused, in one line: rtx_refusals)
    gpu_options: bool
    # version-compatible engines exist (from 8.6: version_compatible_runs); else an engine loads only with the
    # release that built it
    version_compatible: bool
    # the offline rules' column for its parser (aft_export.trtcheck): "" its own major.minor, else the prefix
    # of its edition's columns ("rtx-": rtx-1.7)
    rules: str
    # its version is the manifest's "tensorrt" entry too, as manifests written before TensorRT-RTX hold it
    tensorrt_entry: bool
    triton_plan: bool  # Triton's tensorrt_plan backend loads its engines (NVIDIA's container has standard TensorRT)

    @property
    def module(self) -> str:
        """Its Python module (``tensorrt``, ``tensorrt_rtx``): the runtime table's."""
        return TENSORRT_MODULES[self.name]

    @property
    def env_key(self) -> str:
        """The key of its version in :func:`~aft_export.environment.tensorrt_environment` (its module's name)."""
        return self.module


# in the order auto chooses them (choose_library): standard TensorRT where it is installed, else TensorRT-RTX
LIBRARIES: dict[str, Library] = {lib.name: lib for lib in (
    Library("tensorrt", INSTALL_HINT, ".engine", named_by_suffix=False, strongly_typed=False, takes_targets=False,
            builds_without_gpu=False, gpu_options=True, version_compatible=True, rules="", tensorrt_entry=True,
            triton_plan=True),
    Library(RTX, RTX_INSTALL_HINT, ".rtx.engine", named_by_suffix=True, strongly_typed=True, takes_targets=True,
            builds_without_gpu=True, gpu_options=False, version_compatible=False, rules="rtx-",
            tensorrt_entry=False, triton_plan=False),
)}  # fmt: skip


def library_of(name) -> Library:
    """The row of the library ``name`` names. Any other name (a manifest without "library", or one edited by
    hand) reads as standard TensorRT, as engines were read before TensorRT-RTX; the `library` option's
    value is checked where it is chosen (:func:`choose_library`)."""
    found = LIBRARIES.get(name) if isinstance(name, str) else None
    return found or LIBRARIES["tensorrt"]


def library_named(name: str) -> Library | None:
    """The library an engine's file name says it is for: the one whose suffix names its engines
    (``*.rtx.engine``: TensorRT-RTX); None for any other name (``*.engine``, ``*.plan``)."""
    return next((lib for lib in LIBRARIES.values() if lib.named_by_suffix and name.endswith(lib.suffix)), None)


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
            raise AFTExportError(said("bad {name} profile {spec!r} ({option}); use MIN,OPT,MAX such as 1,8,32, or "
                                      "one number", "build", option=Named(option), name=name, spec=spec)) from None  # fmt: skip
        if len(values) == 1:
            values *= 3
        if len(values) != 3:
            raise AFTExportError(said("bad {name} profile {spec!r} ({option}); give 1 or 3 numbers (MIN,OPT,MAX)",
                                      "build", option=Named(option), name=name, spec=spec))
        lo, opt, hi = values
        if lo < 1 or not lo <= opt <= hi:
            raise AFTExportError(said("inconsistent {name} profile {spec!r} ({option}); give MIN,OPT,MAX with 1 <= "
                                      "min <= opt <= max", "build", option=Named(option), name=name, spec=spec))  # fmt: skip
        return cls(lo, opt, hi)


@dataclass(frozen=True)
class InputShapes:
    """min/opt/max shapes of the image input, from the graph and the options."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]
    dtype: str = "float32"  # the input's type (NumPy's name): uint8 for a file that takes uint8 pixels


def input_profile(model, opts: BuildOptions) -> InputShapes:
    """The optimisation profile for the ONNX graph's (N, C, H, W) input, or (N, H, W, C) for a file
    that takes uint8 pixels (what its graph takes: :func:`~aft_export.artifacts.ends.graph_ends`).

    Dynamic dimensions need a profile; fixed ones must not be given another size.
    """
    inp = model.graph.input[0]
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    if len(dims) != 4:
        raise AFTExportError(f"input {inp.name} has {len(dims)} dimensions; expected N, C, H, W")
    meta = ArtifactMeta.of(model)
    takes = graph_ends(model).takes
    nhwc = takes.layout == "NHWC"
    n, c, h, w = (dims[0], dims[3], dims[1], dims[2]) if nhwc else dims
    if c is None:
        raise AFTExportError(f"input {inp.name} has a dynamic channel count; export with a fixed one")
    batch = opts.batch_profile
    if n is not None and batch is not None and Profile.parse(batch, n, "batch", "batch_profile") != Profile(n, n, n):
        raise AFTExportError(said("the graph has a fixed batch of {n}; re-export with {line} or use {use}", "build",
                                  n=n, line=command_line("export", batch_dim="dynamic"),
                                  use=Named("batch_profile", n)))  # fmt: skip
    size = meta.input_size[-1] if "input_size" in meta else None
    b = Profile.parse(batch if n is None else n, n or 1, "batch", "batch_profile")
    if (h is None) != (w is None):
        raise AFTExportError("height and width must be both dynamic or both fixed")
    if h is None:
        if opts.hw_profile is None and size is None:
            raise AFTExportError(said("the graph has dynamic height and width: give {hw_profile_set}", "build",
                                      hw_profile_set=Named('hw_profile', 'MIN,OPT,MAX')))
        s = Profile.parse(opts.hw_profile, size, "height/width", "hw_profile")
    else:
        hw = opts.hw_profile
        if hw is not None and Profile.parse(hw, h, "height/width", "hw_profile") != Profile(h, h, h):
            raise AFTExportError(said("the graph takes {h}x{w} images only; {hw_profile} applies to AFT-conv exports "
                                      "with a dynamic height and width ({line})", "build", h=h, w=w,
                                      line=command_line("export", dynamic_hw=True)))  # fmt: skip
        s = Profile(h, h, h)
    wprof = s if w is None else Profile(w, w, w)
    shapes = [(b.min, c, s.min, wprof.min), (b.opt, c, s.opt, wprof.opt), (b.max, c, s.max, wprof.max)]
    if nhwc:
        shapes = [(bn, hh, ww, cc) for bn, cc, hh, ww in shapes]
    return InputShapes(inp.name, *shapes, dtype=takes.dtype)


# ---------------------------------------------------------------- environment, versions


def version_tuple(text: str) -> tuple[int, ...]:
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
    v = version_tuple(version)
    if library == RTX:  # each library's releases, in its own words: decided here, by name
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
        raise RuntimeMissing(f"{title_of(requested)} is not installed here ({library_of(requested).install})")
    return requested


def import_library(library: str = "auto"):
    """``(module, library, version)``: the TensorRT module chosen by :func:`choose_library`
    (``tensorrt`` or ``tensorrt_rtx``), its library name and its checked version tuple."""
    name = choose_library(library, tensorrt_libraries())
    module = importlib.import_module(TENSORRT_MODULES[name])
    return module, name, check_trt_version(module.__version__, name)


def network_flags(version: tuple[int, ...], library: str = "tensorrt") -> tuple[str, ...]:
    """NetworkDefinitionCreationFlag members for ``create_network``."""
    if library_of(library).strongly_typed:  # TensorRT-RTX: STRONGLY_TYPED, its one member, is accepted
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
    if library_of(library).strongly_typed or version >= (9, 0):
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
        raise AFTExportError(said("{level} needs TensorRT 8.6 or newer; this is {value}; use none", "build",
                                  level=Named('hardware_compatibility', level), value=_dotted(version)))  # fmt: skip
    if level == "ampere+":
        return "HardwareCompatibilityLevel.AMPERE_PLUS"
    if version < (10, 9):  # SAME_COMPUTE_CAPABILITY came with 10.9 (TensorRT 10.9.0 release notes)
        raise AFTExportError(said("{hardware_compatibility_set} needs TensorRT 10.9 or newer "
                                  "(HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY); this is {value}; use "
                                  "ampere+ or none", "build",
                                  hardware_compatibility_set=Named('hardware_compatibility', 'same-cc'),
                                  value=_dotted(version)))  # fmt: skip
    return "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY"


def compatibility_flags(version_compatible: bool, version: tuple[int, ...]) -> tuple[str, ...]:
    if not version_compatible:
        return ()
    if version < (8, 6):
        raise AFTExportError(said("{version_compatible} needs TensorRT 8.6 or newer; this is {value}; build "
                                  "without it", "build", value=_dotted(version)))  # fmt: skip
    return ("BuilderFlag.VERSION_COMPATIBLE",)


def rtx_refusals(opts: BuildOptions) -> None:
    """TensorRT-RTX has no DLA, no version or hardware compatibility (engines run only with the
    TensorRT-RTX release that built them; targets are compute capabilities), no TF32 switch, and
    its timing cache is deprecated and forces a GPU: such options are refused, in one line."""
    given = [said("{option}", "build", option=Named(option)) for option, on in (("dla_core", opts.dla_core is not None),
                                              ("version_compatible", opts.version_compatible),
                                              ("hardware_compatibility", opts.hardware_compatibility != "none"),
                                              ("tf32", opts.tf32), ("timing_cache", bool(opts.timing_cache))) if on]  # fmt: skip
    if given:
        raise AFTExportError(said("TensorRT-RTX has no {value} (no DLA, no version or hardware compatibility: use "
                                  "{compute_capabilities}; no TF32 switch; its timing cache is deprecated and "
                                  "needs a GPU); leave {value2} out, or build with standard TensorRT: {library_set}",
                                  "build", library_set=Named('library', 'tensorrt'), value=', '.join(given),
                                  value2='it' if len(given) == 1 else 'them'))  # fmt: skip


def compute_capabilities(ccs, library: str) -> tuple[str, ...]:
    """ComputeCapability members for ``compute_capabilities`` ("X.Y" each; TensorRT-RTX only); () keeps the
    library's default targets (:data:`RTX_DEFAULT_TARGETS`)."""
    ccs = tuple(dict.fromkeys(str(c) for c in ccs))
    if not ccs:
        return ()
    if not library_of(library).takes_targets:
        raise AFTExportError(said("{compute_capabilities} are TensorRT-RTX's (engines built ahead of time for the "
                                  "GPUs named); standard TensorRT builds for the GPU it runs on (see "
                                  "{hardware_compatibility}); add {library_set} or leave them out", "build",
                                  library_set=Named('library', 'tensorrt-rtx')))  # fmt: skip
    bad = [c for c in ccs if c not in RTX_TARGETS]
    if bad:
        raise AFTExportError(said("compute capability {value} is not a TensorRT-RTX target (it builds for "
                                  "{value2}: RTX GPUs); Hopper (9.0), data-centre Blackwell and Jetson take "
                                  "standard TensorRT: {library_set}", "build",
                                  library_set=Named('library', 'tensorrt'), value=', '.join(bad),
                                  value2=', '.join(RTX_TARGETS)))  # fmt: skip
    return tuple(RTX_TARGETS[c] for c in ccs)


def rtx_runs_on(targets, cc: str) -> bool:
    """Whether a TensorRT-RTX engine built for ``targets`` ("X.Y" each; empty: the default) runs on a GPU
    of compute capability ``cc``. Explicit targets: exactly those. Default: 8.6, 8.9, 12.0, 12.1 and
    later RTX parts (NVIDIA names no other; Hopper 9.0 and 10.x/11.x data-centre and Jetson parts are not
    RTX GPUs, and Turing 7.5 must be asked for)."""
    if targets:
        return cc in targets
    return cc in RTX_DEFAULT_TARGETS or version_tuple(cc) > version_tuple(RTX_DEFAULT_TARGETS[-1])


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
    if not library_of(library).gpu_options:
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
    return onnx_path.with_name(stem + library_of(library).suffix)


def check_engine_name(out, library: str) -> None:
    """A TensorRT-RTX engine is named ``*.rtx.engine`` and only such an engine is, so the two kinds
    cannot be mistaken for one another."""
    name = Path(out).name
    lib, said_by = library_of(library), library_named(name)
    if lib.named_by_suffix and said_by is not lib:  # TensorRT-RTX's engine, not named so
        stem = name.removesuffix(".engine").removesuffix(".plan")
        raise AFTExportError(said("name a TensorRT-RTX engine *.rtx.engine (it loads only with TensorRT-RTX): {use}",
                                  "build", use=Named("output", stem + lib.suffix)))  # fmt: skip
    if said_by is not None and said_by is not lib:  # named for TensorRT-RTX, built with standard TensorRT
        raise AFTExportError(said("{name} names a TensorRT-RTX engine, but this build uses standard TensorRT; use "
                                  "{use} or {library_set}", "build", name=name,
                                  use=Named("output", name.removesuffix(said_by.suffix) + lib.suffix),
                                  library_set=Named("library", said_by.name)))  # fmt: skip


def engine_file_name(name: str, library: str) -> str:
    """``name`` (an engine's file name) made right for an engine of ``library`` (what
    :func:`check_engine_name` asks): ``m.engine`` becomes ``m.rtx.engine`` for TensorRT-RTX, and
    ``m.rtx.engine`` becomes ``m.engine`` for standard TensorRT; a name that is right stays."""
    lib, said_by = library_of(library), library_named(name)
    if lib.named_by_suffix and said_by is not lib:
        return name.removesuffix(".engine") + lib.suffix
    if said_by is not None and said_by is not lib:
        return name.removesuffix(said_by.suffix) + lib.suffix
    return name


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
        if library_of(library).builds_without_gpu:
            raise RuntimeMissing("no GPU: a TensorRT-RTX engine is built ahead of time on any machine but runs only "
                                 "on an RTX GPU (compute capability 7.5 and up), and none is visible here "
                                 "(torch.cuda.is_available() is False)")  # fmt: skip
        raise RuntimeMissing("no GPU: no CUDA GPU is visible here (torch.cuda.is_available() is False); "
                             "TensorRT engines are built and run on the GPU they are for")  # fmt: skip
