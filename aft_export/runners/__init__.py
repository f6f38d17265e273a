"""Runners: one contract for every backend (see :mod:`aft_export.runners.base`).

``load_runner`` picks the backend from the artifact: a checkpoint runs in PyTorch, an
ONNX file in ONNX Runtime, an engine in TensorRT. An ONNX file also runs in OpenVINO
(:class:`OpenVinoRunner`) and in the ONNX reference evaluator (:class:`ReferenceRunner`),
made directly. ``providers`` (cpu, cuda, tensorrt)
chooses ONNX Runtime's execution provider; a GPU provider also runs checkpoints on the
GPU. A backend missing here raises :class:`~aft_export.errors.RuntimeMissing`, which
the stages report as *skipped*, never as passed.

The PyTorch runner (and torch with it) is loaded on first use, as the package's own
``__init__`` loads the model API: a process that runs only ONNX files or engines (a
Triton Python backend stub of ``aft-export serve``) never imports torch.
"""

from __future__ import annotations

from pathlib import Path

from aft_export.errors import AFTExportError
from aft_export.preprocess import ForeignPreprocessing
from aft_export.runners.base import INPUT, OUTPUT, ModelInfo, Runner
from aft_export.runners.engine import TrtRunner
from aft_export.runners.openvino import OpenVinoRunner
from aft_export.runners.ort import PROVIDER_KINDS, OrtRunner, info_from_metadata, onnx_info, ort_providers
from aft_export.runners.reference import ReferenceRunner
from aft_export.sources import SPEC_SUFFIXES, source_suffixes

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".safetensors")
ENGINE_SUFFIXES = (".engine", ".plan")

__all__ = ["CHECKPOINT_SUFFIXES", "INPUT", "OUTPUT", "PROVIDER_KINDS", "ModelInfo", "OpenVinoRunner", "OrtRunner",
           "ReferenceRunner", "Runner", "TorchRunner", "TrtRunner", "info_from_metadata", "load_runner", "onnx_info",
           "ort_providers"]  # fmt: skip


def __getattr__(name: str):
    if name == "TorchRunner":
        from aft_export.runners.pytorch import TorchRunner

        return TorchRunner
    raise AttributeError(f"module 'aft_export.runners' has no attribute {name!r}")


def load_runner(artifact: str, providers: list | str | None = None, config: str | None = None,
                threads: int = 0, preprocessing: ForeignPreprocessing | None = None,
                spinning: bool = True) -> Runner:  # fmt: skip
    """The runner of ``artifact``; ``preprocessing``: how to feed an ONNX file another tool wrote
    (one with our metadata, a checkpoint or an engine describes itself); ``spinning`` False:
    ONNX Runtime's pools sleep when idle (:class:`OrtRunner`)."""
    path = Path(artifact)
    if not path.exists():
        raise AFTExportError(f"artifact {path} does not exist; check the path")
    suffix = path.suffix.lower()
    if suffix in CHECKPOINT_SUFFIXES or suffix in SPEC_SUFFIXES or suffix in source_suffixes():  # any model source
        from aft_export.runners.pytorch import TorchRunner

        device = "cuda" if providers in ("cuda", "tensorrt") else "cpu"
        return TorchRunner(str(path), config=config, threads=threads, device=device)
    if suffix == ".onnx":
        return OrtRunner(str(path), providers, threads=threads, preprocessing=preprocessing,
                         spinning=spinning)  # fmt: skip
    if suffix in ENGINE_SUFFIXES:
        return TrtRunner(str(path), threads=threads)
    raise AFTExportError(f"{path}: unknown artifact type; expected a checkpoint (.pt, .pth, .safetensors), "
                         f"a model spec (.yaml, .yml, .json), .onnx or a TensorRT .engine")
