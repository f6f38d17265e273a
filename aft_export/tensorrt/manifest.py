"""The engine manifest: every engine gets one beside it (``model.engine.json``; never bytes
glued in front of the engine, which breaks other tools): TensorRT and CUDA versions, GPU name
and compute capability, precision, the TensorRT flags used, profiles, ONNX and engine
sha256, build options and time; the library, and for TensorRT-RTX the target compute
capabilities as the builder config reports them. Loading checks it first
(:func:`check_manifest`) and refuses a mismatched or corrupt engine (another library,
version or GPU) with the command that rebuilds it (:func:`rebuild_command`). What the
library is and which versions run an engine: :mod:`aft_export.tensorrt.library`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from aft_export import readers
from aft_export.version import __version__
from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.fileio import atomic_write_text, relative_name, sha256_file
from aft_export.options import BuildOptions
from aft_export.tensorrt.library import (LIBRARIES, RTX_DEFAULT_TARGETS, RTX_TARGETS, InputShapes, engine_file_name,
                                         library_of, rtx_runs_on, version_compatible_runs, version_tuple)  # fmt: skip
from aft_export.options.commands import command_line


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
    lib = library_of(library)
    version = library_version or env.get(lib.env_key)
    build_options = asdict(opts)
    if opts.timing_cache:  # the manifest travels with the engine: the cache named relative to it
        build_options["timing_cache"] = relative_name(opts.timing_cache, engine.parent)
    return {
        "format": "aft-export.engine.v1", "tool": f"aft-export {__version__}",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "library": library, "library_version": version, "tensorrt": version if lib.tensorrt_entry else None,
        "cuda": env["cuda"], "gpu": env["gpu"],
        "compute_capability": None if lib.takes_targets else env["compute_capability"],
        "compute_capabilities": list(targets if targets is not None else
                                     ([env["compute_capability"]] if env.get("compute_capability") else [])),
        **({"compute_capabilities_default": list(RTX_DEFAULT_TARGETS) + ["later RTX"]}
           if lib.takes_targets and not targets else {}),
        "built_on_gpu": env["gpu"] is not None, "precision": precision,
        "input": {"name": shapes.name, "dtype": shapes.dtype, "min": list(shapes.min), "opt": list(shapes.opt),
                  "max": list(shapes.max)},
        "onnx": onnx_path.name, "onnx_sha256": sha256_file(onnx_path), "engine_sha256": sha256_file(engine),
        "build_options": build_options, "tensorrt_build": trt_build, "build_seconds": round(seconds, 2),
        "parser_warnings": parser_warnings, "network": network,
        **({"note": RTX_NOTE} if lib.builds_without_gpu else {}),
        "model": {k: source_meta[k] for k in ("model_name", "classes", "input_size", "mean", "std", "source_sha256",
                                              "preprocessing_from", "input_format", "output_format")
                  if k in source_meta},
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
    """The input and its optimisation profile: a name, its dtype where recorded, and min, opt and max shapes of
    one rank (at least the batch)."""
    shapes = [v.get(k) for k in ("min", "opt", "max")] if isinstance(v, dict) else []
    return (bool(shapes) and _text(v.get("name", "")) and all(_dims(s) and s for s in shapes)
            and len({len(s) for s in shapes}) == 1 and _text(v.get("dtype", "")))  # fmt: skip


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
    In flags (it is typed in a shell). A malformed entry of the manifest is left out, as if absent."""
    m = manifest if isinstance(manifest, dict) else {}
    m = {k: v for k, v in m.items() if k not in manifest_problems(m)}
    library = library or m.get("library", "tensorrt")
    options: dict = {"library": library}
    opts = m.get("build_options") or {}
    # the profiles; old: their fields' names in a manifest written before they were renamed after their flags
    for field, old in (("batch_profile", "batch"), ("hw_profile", "hw")):
        value = opts.get(field, opts.get(old))
        if value:
            options[field] = value
    if library_of(library).takes_targets:
        capabilities = [cc] if cc else opts.get("compute_capabilities") or []
        if capabilities:
            options["compute_capabilities"] = list(capabilities)
    return command_line("build", m.get("onnx") or "MODEL.onnx", **options,
                        output=engine_file_name(engine.name, library))


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
    generic = f"rebuild it here: {command_line('build', 'MODEL.onnx', output=engine.name)}"
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
    lib = library_of(manifest.get("library"))
    instead = next(o for o in LIBRARIES.values() if o is not lib)  # the library a machine may have in its place
    built = manifest.get("library_version") or manifest.get("tensorrt")
    opts = manifest.get("build_options", {})
    cc = env.get("compute_capability")
    if not lib.version_compatible:  # TensorRT-RTX: only the release that built it, on the GPUs it targets
        here, other = env.get(lib.env_key), env.get(instead.env_key)
        if here is None and other is not None:
            raise RuntimeMissing(f"engine {engine} was built with TensorRT-RTX {built} and loads only with it; this "
                                 f"machine has TensorRT {other} and no TensorRT-RTX ({lib.install}); or "
                                 f"rebuild it for TensorRT: {rebuild_command(engine, manifest, instead.name)}")  # fmt: skip
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
                                 f"GPU is {cc} ({env.get('gpu')}); " + fix)  # fmt: skip
        return manifest
    rebuild = f"rebuild it here: {rebuild_command(engine, manifest)}"
    here = env.get(lib.env_key)
    if here is None and env.get(instead.env_key) is not None:
        raise RuntimeMissing(f"engine {engine} was built with TensorRT {built} and loads only with standard "
                             f"TensorRT; this machine has TensorRT-RTX {env[instead.env_key]} and no TensorRT "
                             f"({lib.install}); or rebuild it for TensorRT-RTX: "
                             f"{rebuild_command(engine, manifest, instead.name)}")  # fmt: skip
    if here is not None and built != here:
        b, now = version_tuple(built or "0"), version_tuple(here)
        if not opts.get("version_compatible"):
            raise AFTExportError(f"engine {engine} was built with TensorRT {built}, this machine has "
                                 f"{here}; {rebuild} (or build with {command_line('build', version_compatible=True)})")  # fmt: skip
        if not version_compatible_runs(b, now):
            raise AFTExportError(f"engine {engine} was built with TensorRT {built}, this machine "
                                 f"has {here}: a version-compatible engine runs only on the same or a later "
                                 f"TensorRT of its major, or built with 10.x on 11.x, or with 8.6 on 10.x; "
                                 f"{rebuild}")  # fmt: skip
    if cc is not None and manifest.get("compute_capability") not in (None, cc):
        level = opts.get("hardware_compatibility", "none")
        ampere_ok = level == "ampere+" and version_tuple(cc) >= (8, 0)
        if not ampere_ok:
            raise AFTExportError(f"engine {engine} was built for compute capability {manifest['compute_capability']} "
                                 f"({manifest.get('gpu')}), this GPU is {cc} ({env.get('gpu')}); {rebuild} "
                                 f"(or build with {command_line('build', hardware_compatibility='ampere+')})")  # fmt: skip
    return manifest


def save_json_atomic(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2))
