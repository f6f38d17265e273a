"""What is installed here: the one place the software environment is gathered.

- :func:`distributions`: the versions of installed Python distributions (by name);
- :func:`ort_distributions` and :func:`ort_conflict`: the ONNX Runtime wheels, which all write
  one package directory, so two of them installed is a conflict to report;
- :func:`tensorrt_libraries` and :func:`tensorrt_environment`: the TensorRT libraries found
  (standard TensorRT, TensorRT-RTX), their versions, CUDA and the GPU (what an engine built
  here would be tied to);
- :func:`nvidia_tools`: the NVIDIA driver, ``trtexec`` and ``polygraphy``;
- :func:`platform_facts`: Python, the platform, the architecture and the CPU count.

The doctor, the pipeline's manifest, the runners, the TensorRT build and the command line read
these; none gathers them itself. The CPU's instruction sets are :mod:`aft_export.machine`'s.
Only the standard library is imported here; torch and the TensorRT modules are imported by the
functions that need them, when called.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import platform
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path


# wheels that all install the one package directory ``onnxruntime``
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino",
                     "onnxruntime-qnn")  # fmt: skip
# the TensorRT libraries aft-export builds with, and their Python modules (tensorrt.library.RTX
# is the second's name)
JETPACK_TRTEXEC = Path("/usr/src/tensorrt/bin/trtexec")  # where JetPack puts it, off PATH


def distributions(names: Iterable[str]) -> dict[str, str]:
    """``{name: version}`` of the distributions in ``names`` installed here (the others left out)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def ort_distributions() -> dict[str, str]:
    """The ONNX Runtime distributions installed here, with their versions."""
    return distributions(ORT_DISTRIBUTIONS)


def ort_conflict() -> str | None:
    """One line when two ONNX Runtime wheels share the ``onnxruntime`` directory (which
    one's files ended up there is an accident of install order), else None."""
    found = ort_distributions()
    if len(found) < 2:
        return None
    names = ", ".join(f"{k} {v}" for k, v in found.items())
    return (f"{names} are all installed and write one package directory, so which one runs is undefined; keep "
            f"one: pip uninstall -y {' '.join(found)} && pip install 'aft-export[cpu]' (or [gpu])")


# the conflicts said in this process (each once: a notebook calls many functions)
_SAID_CONFLICTS: set[str] = set()


def say_ort_conflict() -> None:
    """:func:`ort_conflict`'s line as a warning of the ``aft_export`` logger, once per process: every
    command's function says it at its door (aft_export.options.commands.declared), for Python callers
    as for the command line, which shows the library's warnings on stderr."""
    conflict = ort_conflict()
    if conflict and conflict not in _SAID_CONFLICTS:
        _SAID_CONFLICTS.add(conflict)
        logging.getLogger("aft_export").warning(f"warning: {conflict}")


def tensorrt_libraries() -> set[str]:
    """The TensorRT libraries importable here (found, not imported)."""
    from aft_export.runtimes import TENSORRT_MODULES  # (the table: nothing of aft_export at this floor's load)

    return {library for library, module in TENSORRT_MODULES.items() if importlib.util.find_spec(module) is not None}


def tensorrt_environment() -> dict:
    """What an engine built here would be tied to: the TensorRT and TensorRT-RTX versions, CUDA,
    the GPU and its compute capability. What is missing (or broken) here is None."""
    env = {"tensorrt": None, "tensorrt_rtx": None, "cuda": None, "gpu": None, "compute_capability": None}
    from aft_export.runtimes import TENSORRT_MODULES

    found = tensorrt_libraries()
    for library, module in TENSORRT_MODULES.items():  # each library's version, keyed by its module's name
        if library in found:
            try:
                env[module] = importlib.import_module(module).__version__
            except ImportError:  # found but broken: reads as missing
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


def has_gpu() -> bool:
    """Whether a CUDA GPU is visible here (:func:`tensorrt_environment`'s ``gpu``)."""
    return tensorrt_environment()["gpu"] is not None


def nvidia_tools() -> dict:
    """The NVIDIA driver's version (None: no ``nvidia-smi`` or it failed) and where ``trtexec``
    (on PATH, else where JetPack puts it) and ``polygraphy`` are (None: not found)."""
    driver = None
    if shutil.which("nvidia-smi"):
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               check=False, capture_output=True, text=True, timeout=60)  # fmt: skip
            driver = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
        except (OSError, subprocess.TimeoutExpired):
            pass
    trtexec = shutil.which("trtexec") or (str(JETPACK_TRTEXEC) if JETPACK_TRTEXEC.is_file() else None)
    return {"driver": driver, "trtexec": trtexec, "polygraphy": shutil.which("polygraphy")}


def platform_facts() -> dict:
    """Python's version, the platform, the architecture and the CPU count."""
    return {"python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
            "cpu_count": os.cpu_count()}  # fmt: skip
