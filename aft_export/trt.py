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

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from aft_export.version import __version__
from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.fileio import atomic_write_text, sha256_file
from aft_export.options import BuildOptions

MIN_TRT = (8, 5)  # JetPack 5.1
MAX_TRT_MAJOR = 11
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
            raise AFTExportError(f"bad {name} profile {spec!r} (--{name}); use MIN,OPT,MAX such as 1,8,32, "
                                 f"or one number") from None  # fmt: skip
        if len(values) == 1:
            values *= 3
        if len(values) != 3:
            raise AFTExportError(f"bad {name} profile {spec!r} (--{name}); give 1 or 3 numbers (MIN,OPT,MAX)")
        lo, opt, hi = values
        if lo < 1 or not lo <= opt <= hi:
            raise AFTExportError(f"inconsistent {name} profile {spec!r} (--{name}); give MIN,OPT,MAX with "
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


def make_manifest(engine: Path, onnx_path: Path, precision: str, shapes: InputShapes, opts: BuildOptions,
                  env: dict, seconds: float, source_meta: dict, trt_build: dict) -> dict:  # fmt: skip
    return {
        "format": "aft-export.engine.v1", "tool": f"aft-export {__version__}",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tensorrt": env["tensorrt"], "cuda": env["cuda"], "gpu": env["gpu"],
        "compute_capability": env["compute_capability"], "precision": precision,
        "input": {"name": shapes.name, "min": list(shapes.min), "opt": list(shapes.opt), "max": list(shapes.max)},
        "onnx": onnx_path.name, "onnx_sha256": sha256_file(onnx_path), "engine_sha256": sha256_file(engine),
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
    if sha256_file(engine) != recorded:
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
    atomic_write_text(path, json.dumps(data, indent=2))
