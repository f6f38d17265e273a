#!/usr/bin/env python3
"""Extract the Python API of each supported TensorRT version (and TensorRT-RTX) into tests/data/trt_api.json.

Why: ``aft_export/tensorrt/library.py`` may only use a TensorRT name that every supported version ships,
or guard it by a version check; ``tests/test_trt_api.py`` checks that statically against the
JSON this script writes. TensorRT cannot be installed here, but NVIDIA publishes the Python
bindings of each release on PyPI as real wheels (``tensorrt-bindings``,
``tensorrt-cu12-bindings``, ``tensorrt-cu13-bindings``; the ``-libs`` wheels that hold
libnvinfer are the download stubs). TensorRT for RTX (``tensorrt_rtx``, key ``rtx-1.7``) is read
the same way from ``tensorrt-rtx-cu12-bindings``, whose module is ``tensorrt_rtx_bindings``
(``tensorrt_rtx.so``); its ``-libs`` wheel is real, but the stubs keep the extraction the same
for every version.

How: each wheel is downloaded with pip, pinned by version and sha256 (pip checks the hash, and so
do we). The compiled module links a handful of C entry points of libnvinfer and its parsers
(``createInferBuilder_INTERNAL``, ...). We compile stand-ins for exactly those symbols, each of
which aborts the process if it is ever called, so the module can be imported in a child process
and read through pybind11's own introspection: classes, methods, properties, enums and their
members, and the signatures with their return types, e.g.
``create_network(self: tensorrt.tensorrt.Builder, flags: int = 0) -> tensorrt.tensorrt.INetworkDefinition``.
Nothing of TensorRT runs: a call into it kills the child. Every name found must also occur as a
string in the .so (or in the wheel's ``__init__.py``), and known facts about the versions are
asserted before anything is written.

TensorRT 8.5 (JetPack 5.1): NVIDIA published no bindings wheel for it (PyPI starts at 8.6.1), so
it has no entry here. 8.5 is covered by the parser-source rules elsewhere, not here; the API test
treats 8.5 as 8.6 less the names 8.6 added that aft-export touches (a small table there, with its
source).

Needs: Linux x86-64, Python 3.11 (the pinned wheels are cp311), gcc, binutils (nm, readelf), and
network access to PyPI for pip; nothing else.

Usage: python tools/extract_trt_api.py [-o tests/data/trt_api.json] [--keep DIR] [--only KEY ...]
(``--only rtx-1.7``: extract that version and keep the others as the JSON has them)
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "tests" / "data" / "trt_api.json"

# version key -> (package, exact version, wheel file, sha256 of that file as published on PyPI)
WHEELS = {
    "8.6": ("tensorrt-bindings", "8.6.1", "tensorrt_bindings-8.6.1-cp311-none-manylinux_2_17_x86_64.whl",
            "705cfab5c60f0bed7d939559d880165a761bd9ac0f4203004948a760eef99838"),
    "10.3": ("tensorrt-cu12-bindings", "10.3.0",
             "tensorrt_cu12_bindings-10.3.0-cp311-none-manylinux_2_17_x86_64.whl",
             "59ace22d7f2ca1e9dcde2cb0cb5916912cb3cd5a9d72dd7852be0160d9b3a0ee"),
    "10.13": ("tensorrt-cu12-bindings", "10.13.3.9",
              "tensorrt_cu12_bindings-10.13.3.9-cp311-none-manylinux_2_28_x86_64.whl",
              "33aa9d104c04b008871645a97bd8a1a02279cf498d251df5e767d9d5183e0646"),
    "11.4": ("tensorrt-cu13-bindings", "11.4.0.106",
             "tensorrt_cu13_bindings-11.4.0.106-cp311-none-manylinux_2_28_x86_64.whl",
             "d072ac2a095e2be749fefc847adfb25d5ebe70303401df62ede8fe67a59f27fc"),
    "rtx-1.7": ("tensorrt-rtx-cu12-bindings", "1.7.1.116",
                "tensorrt_rtx_cu12_bindings-1.7.1.116-cp311-none-manylinux_2_28_x86_64.whl",
                "aea28353c9a0e724c60673db48adb0fe4a1970c5109be68a562a32845bc6d230"),
}  # fmt: skip
# version key -> (package directory in the wheel, compiled module in it); default the TensorRT bindings'
MODULES = {"rtx-1.7": ("tensorrt_rtx_bindings", "tensorrt_rtx.so")}
DEFAULT_MODULE = ("tensorrt_bindings", "tensorrt.so")
NO_WHEEL = {
    "8.5": "no TensorRT 8.5 bindings wheel is on PyPI (tensorrt-bindings starts at 8.6.1); 8.5 is covered "
           "by the parser-source rules elsewhere, not by this file",
}  # fmt: skip
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")

# (version key, "Class.member", present?): checked on every run, so a broken extraction cannot be written
KNOWN_FACTS = [
    ("10.13", "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", True),
    ("11.4", "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", True),
    ("10.3", "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY", False),
    ("10.3", "HardwareCompatibilityLevel.AMPERE_PLUS", True),
    ("8.6", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH", True),
    ("10.13", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH", True),
    ("11.4", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH", False),
    ("8.6", "NetworkDefinitionCreationFlag.STRONGLY_TYPED", False),
    ("10.3", "NetworkDefinitionCreationFlag.STRONGLY_TYPED", True),
    ("11.4", "NetworkDefinitionCreationFlag.STRONGLY_TYPED", True),
    ("10.13", "BuilderFlag.INT8", True),
    ("11.4", "BuilderFlag.INT8", False),
    ("11.4", "BuilderFlag.FP16", False),
    ("8.6", "IExecutionContext.execute_async_v3", True),
    ("8.6", "Builder.create_network", True),
    # TensorRT-RTX 1.7: strongly typed only (no precision flags), targets as compute capabilities
    ("rtx-1.7", "NetworkDefinitionCreationFlag.STRONGLY_TYPED", True),
    ("rtx-1.7", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH", False),
    ("rtx-1.7", "BuilderFlag.INT8", False),
    ("rtx-1.7", "BuilderFlag.FP16", False),
    ("rtx-1.7", "ComputeCapability.SM75", True),
    ("rtx-1.7", "IBuilderConfig.set_compute_capability", True),
    ("10.13", "IBuilderConfig.set_compute_capability", False),
]
KNOWN_CLASSES = [("10.13", "IInt8Calibrator", True), ("11.4", "IInt8Calibrator", False),
                 ("rtx-1.7", "ComputeCapability", False)]  # an enum, not a class


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download(key: str, dest: Path) -> Path:
    """pip download one pinned wheel; pip refuses any file whose sha256 differs, and we check again."""
    package, version, filename, digest = WHEELS[key]
    dest.mkdir(parents=True, exist_ok=True)
    req = dest / f"{key}.txt"
    req.write_text(f"{package}=={version} --hash=sha256:{digest}\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
           "--python-version", "3.11", "--implementation", "cp", "-d", str(dest), "-r", str(req)]
    cmd += [arg for p in PLATFORMS for arg in ("--platform", p)]
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
        raise SystemExit(f"pip could not download {package}=={version} with sha256 {digest} (pip says why above)")
    wheel = dest / filename
    if not wheel.is_file() or sha256(wheel) != digest:
        raise SystemExit(f"{filename}: missing after pip download, or its sha256 is not {digest}")
    return wheel


def unpack(wheel: Path, dest: Path, key: str) -> Path:
    """The wheel's bindings package (``tensorrt_bindings``: unpacked as ``dest/tensorrt``, its import
    name; ``tensorrt_rtx_bindings``: under its own name, which ``tensorrt_rtx`` re-exports)."""
    folder, _ = MODULES.get(key, DEFAULT_MODULE)
    pkg = dest / ("tensorrt" if folder == "tensorrt_bindings" else folder)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.startswith(folder + "/") and not info.is_dir():
                target = pkg / info.filename.split("/", 1)[1]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(info))
    return pkg


def _tool(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def make_stubs(so: Path, dest: Path) -> Path:
    """Libraries named like the ones ``so`` needs but this machine lacks (libnvinfer, ...), defining the
    symbols nothing here provides as functions that abort: enough to import the module, never to run it."""
    import ctypes

    loaded = ctypes.CDLL(None)
    for lib in ("libstdc++.so.6", "libgcc_s.so.1", "libm.so.6"):
        ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    missing_libs = []
    for name in re.findall(r"\(NEEDED\).*\[(.+)\]", _tool("readelf", "-d", str(so))):
        try:
            ctypes.CDLL(name)
        except OSError:
            missing_libs.append(name)
    symbols = []
    for line in _tool("nm", "-D", "--undefined-only", str(so)).splitlines():
        kind, name = line.split()[-2:]
        if kind == "U" and "@" not in name and not hasattr(loaded, name):
            symbols.append(name)
    dest.mkdir(parents=True, exist_ok=True)
    src = dest / "stub.c"
    body = "".join(f'void {s}(void) {{ refuse("{s}"); }}\n' for s in symbols)
    src.write_text('#include <stdio.h>\n#include <stdlib.h>\n'
                   'static void refuse(const char *s) {\n'
                   '    fprintf(stderr, "%s called: this is an introspection stub, not TensorRT\\n", s);\n'
                   '    abort();\n}\n' + body)  # fmt: skip
    lib = dest / "libtrtstub.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    for name in missing_libs:
        (dest / name).unlink(missing_ok=True)
        (dest / name).symlink_to(lib.name)
    return dest


# ---------------------------------------------------------------- run in the child process


def _short(type_text: str) -> str:
    return re.sub(r"\btensorrt_rtx_bindings\.tensorrt_rtx\.|\btensorrt_rtx\.|\btensorrt\.tensorrt\.|\btensorrt\.", "",
                  type_text.strip())


def _returns(doc: str | None) -> str:
    """Return types from a pybind11 docstring's signature line(s), ``|``-joined if overloads differ."""
    found = []
    for line in (doc or "").splitlines():
        m = re.match(r"^(?:\d+\. )?[\w.]*\(.*\) -> (.+)$", line.strip())
        if m and _short(m.group(1)) not in found:
            found.append(_short(m.group(1)))
    return "|".join(found)


def _is_enum(obj) -> bool:
    return isinstance(obj, type) and isinstance(getattr(obj, "__members__", None), dict)


def introspect(pkg_parent: str, module: str = "tensorrt") -> dict:
    """Every public class, enum, function and attribute of the bindings package ``module`` under ``pkg_parent``."""
    import importlib

    sys.path.insert(0, pkg_parent)
    trt = importlib.import_module(module)

    classes, enums, module = {}, {}, {}

    def member(value) -> str:
        if isinstance(value, property):
            return "property:" + _returns(value.fget.__doc__ if value.fget else "")
        if isinstance(value, (staticmethod, classmethod)):
            return "method:" + _returns(value.__func__.__doc__)
        if callable(value) and not isinstance(value, type):
            return "method:" + _returns(getattr(value, "__doc__", ""))
        return "attribute:" + _short(type(value).__qualname__)

    def visit(path: str, cls: type, stack: tuple) -> None:
        if _is_enum(cls):
            enums[path] = sorted(cls.__members__)
            return
        members = {}
        for name in dir(cls):
            if name.startswith("_"):
                continue
            value = inspect.getattr_static(cls, name)
            if isinstance(value, type):
                members[name] = "class:" + _short(value.__qualname__)
                if value not in stack:
                    visit(f"{path}.{name}", value, stack + (value,))
            else:
                members[name] = member(value)
        classes[path] = members

    for name in dir(trt):
        value = getattr(trt, name)
        if (name.startswith("_") and name != "__version__") or inspect.ismodule(value):
            continue
        if isinstance(value, type):
            module[name] = "enum" if _is_enum(value) else "class"
            visit(name, value, (value,))
        elif callable(value):
            module[name] = "function:" + _returns(value.__doc__)
        else:
            module[name] = "attribute:" + _short(type(value).__qualname__)
    return {"tensorrt_version": trt.__version__, "module": module, "classes": classes, "enums": enums}


# ---------------------------------------------------------------- checks, main


def cross_check(api: dict, pkg: Path, so: str = "tensorrt.so") -> None:
    """Every name must be a string in the compiled module or in the package's Python files."""
    text = (pkg / so).read_bytes() + b"".join(p.read_bytes() for p in pkg.rglob("*.py"))
    names = set(api["module"]) | {n for path in [*api["classes"], *api["enums"]] for n in path.split(".")}
    names |= {m for members in api["classes"].values() for m in members}
    names |= {m for members in api["enums"].values() for m in members}
    absent = sorted(n for n in names if n.encode() not in text)
    if absent:
        raise SystemExit(f"{pkg}: names not found in the binary or its Python files: {absent[:20]}")


def has(api: dict, dotted: str) -> bool:
    owner, _, name = dotted.rpartition(".")
    return name in api["enums"].get(owner, ()) or name in api["classes"].get(owner, {})


def check_facts(versions: dict) -> None:
    wrong = [f"{key}: {name} {'missing' if want else 'present'}" for key, name, want in KNOWN_FACTS
             if has(versions[key], name) != want]  # fmt: skip
    wrong += [f"{key}: class {name} {'missing' if want else 'present'}" for key, name, want in KNOWN_CLASSES
              if (name in versions[key]["classes"]) != want]  # fmt: skip
    for key, api in versions.items():
        if api["classes"]["Builder"].get("create_network") != "method:INetworkDefinition":
            wrong.append(f"{key}: Builder.create_network does not return INetworkDefinition")
    if wrong:
        raise SystemExit("the extraction contradicts known facts: " + "; ".join(wrong))


def extract(key: str, work: Path) -> dict:
    """Download, unpack, import against the stubs, read and cross-check one version."""
    package, version, filename, digest = WHEELS[key]
    _, so = MODULES.get(key, DEFAULT_MODULE)
    wheel = download(key, work / "wheels")
    pkg = unpack(wheel, work / key, key)
    stubs = make_stubs(pkg / so, work / key / "stubs")
    env = {**os.environ, "LD_LIBRARY_PATH": str(stubs)}
    # -S: no site-packages, so an installed -libs wheel is never imported in place of the stubs
    out = subprocess.run([sys.executable, "-S", __file__, "--introspect", str(pkg.parent), "--module", pkg.name],
                         env=env, check=True, capture_output=True, text=True).stdout  # fmt: skip
    api = json.loads(out)
    if api.pop("tensorrt_version") != version:
        raise SystemExit(f"{filename} reports a TensorRT version other than {version}")
    cross_check(api, pkg, so)
    print(f"TensorRT {version}: {len(api['classes'])} classes, {len(api['enums'])} enums, "
          f"{sum(map(len, api['classes'].values()))} members")  # fmt: skip
    return {"wheel": {"package": package, "version": version, "file": filename, "sha256": digest}, **api}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", default=str(DEFAULT_OUT))
    parser.add_argument("--keep", help="work in this directory and keep it (default: a temporary one)")
    parser.add_argument("--only", nargs="+", choices=sorted(WHEELS), help="extract these versions; keep the others "
                        "as the existing JSON has them")  # fmt: skip
    parser.add_argument("--introspect", help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--module", default="tensorrt", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.introspect:
        json.dump(introspect(args.introspect, args.module), sys.stdout)
        return 0
    if sys.version_info[:2] != (3, 11) or not sys.platform.startswith("linux"):
        raise SystemExit("run this with Python 3.11 on Linux x86-64: the pinned wheels are cp311 manylinux")
    out = Path(args.out)
    versions = json.loads(out.read_text())["versions"] if args.only and out.is_file() else {}
    with tempfile.TemporaryDirectory(prefix="trt-api-") as tmp:
        versions.update({key: extract(key, Path(args.keep or tmp)) for key in (args.only or WHEELS)})
    missing = sorted(set(WHEELS) - set(versions))
    if missing:
        raise SystemExit(f"no API for {', '.join(missing)}: run without --only")
    check_facts(versions)
    data = {"about": "TensorRT Python API per version, written by tools/extract_trt_api.py; do not edit",
            "no_wheel": NO_WHEEL, "versions": versions}  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
