"""What is installed here, gathered in one module (aft_export.environment): its answers against
importlib's own, and the ONNX Runtime wheel conflict from a stated set of wheels."""

import ast
import importlib.util
import os
import sys
from importlib.metadata import version

import pytest

from aft_export import environment
from aft_export.tensorrt.library import RTX
from tests.conftest import REPO


def test_distributions_are_the_installed_ones_with_their_versions():
    found = environment.distributions(("numpy", "onnx", "surely-not-a-distribution-aft"))
    assert found == {"numpy": version("numpy"), "onnx": version("onnx")}


def test_two_onnxruntime_wheels_are_one_conflict_naming_both(monkeypatch):
    monkeypatch.setattr(environment, "ort_distributions", lambda: {"onnxruntime": "1.32.0", "onnxruntime-gpu": "1.31.1"})
    line = environment.ort_conflict()
    assert line.startswith("onnxruntime 1.32.0, onnxruntime-gpu 1.31.1 are all installed") and "\n" not in line
    assert "pip uninstall -y onnxruntime onnxruntime-gpu" in line
    monkeypatch.setattr(environment, "ort_distributions", lambda: {"onnxruntime": "1.32.0"})
    assert environment.ort_conflict() is None


def test_the_onnxruntime_wheels_installed_here_are_found():
    here = environment.ort_distributions()
    assert set(here) <= set(environment.ORT_DISTRIBUTIONS)
    assert here == {d: version(d) for d in environment.ORT_DISTRIBUTIONS if d in here} and here  # [cpu] is installed


def test_tensorrt_libraries_are_those_python_finds_and_the_rtx_name_is_the_librarys():
    from aft_export.runtimes import TENSORRT_MODULES

    assert set(TENSORRT_MODULES) == {"tensorrt", RTX}
    assert environment.tensorrt_libraries() == {lib for lib, mod in TENSORRT_MODULES.items()
                                                if importlib.util.find_spec(mod) is not None}  # fmt: skip
    env = environment.tensorrt_environment()
    assert set(env) == {"tensorrt", "tensorrt_rtx", "cuda", "gpu", "compute_capability"}
    assert (env["tensorrt"] is not None) <= ("tensorrt" in environment.tensorrt_libraries())
    assert environment.has_gpu() is (env["gpu"] is not None)


def test_nvidia_tools_and_platform_facts_say_what_is_missing_as_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, trtexec or polygraphy on it
    monkeypatch.setattr(environment, "JETPACK_TRTEXEC", tmp_path / "trtexec-absent")
    assert environment.nvidia_tools() == {"driver": None, "trtexec": None, "polygraphy": None}
    jetpack = tmp_path / "jetpack-trtexec"
    jetpack.write_text("")
    monkeypatch.setattr(environment, "JETPACK_TRTEXEC", jetpack)
    assert environment.nvidia_tools()["trtexec"] == str(jetpack)
    facts = environment.platform_facts()
    assert facts["python"] == ".".join(map(str, sys.version_info[:3])) and facts["cpu_count"] == os.cpu_count()


def test_the_environment_imports_only_the_standard_library_at_load():
    """Floor 0: nothing of aft_export, and no third-party module, at import time (torch and
    TensorRT are imported inside the functions that need them)."""
    tree = ast.parse((REPO / "aft_export" / "environment.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom)}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_python_callers_are_told_of_two_onnxruntime_wheels_once(monkeypatch, caplog, tmp_path):
    """The warning the command line prints comes from the library, at every command function's door: a
    Python caller gets it as a warning of the aft_export logger, once per process."""
    import logging

    import aft_export

    monkeypatch.setattr(environment, "ort_distributions", lambda: {"onnxruntime": "1.0", "onnxruntime-gpu": "2.0"})
    monkeypatch.setattr(environment, "_SAID_CONFLICTS", set())
    with caplog.at_level(logging.WARNING, logger="aft_export"):
        for _ in range(2):
            with pytest.raises(aft_export.AFTExportError):
                aft_export.info(str(tmp_path / "missing.onnx"))
    said = [r.getMessage() for r in caplog.records if r.name == "aft_export"]
    assert len(said) == 1 and said[0].startswith("warning: onnxruntime 1.0, onnxruntime-gpu 2.0 are all installed")
