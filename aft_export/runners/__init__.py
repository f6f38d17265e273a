"""Runners: one contract for every backend (see :mod:`aft_export.runners.base`).

``load_runner`` picks the runtime from the artifact and the ``backend``
(:data:`aft_export.options.BACKENDS`, each named as its runner names itself): an ONNX file runs
in ONNX Runtime on the CPU (``onnxruntime``, the default), in its CUDA or TensorRT provider
(``onnxruntime-cuda``, ``onnxruntime-tensorrt``) or in OpenVINO (``openvino``); a checkpoint runs
in PyTorch, on the GPU with a GPU backend; an engine in TensorRT. The ONNX reference evaluator
(:class:`ReferenceRunner`) is made directly. A backend missing here raises
:class:`~aft_export.errors.RuntimeMissing` (a file OpenVINO computes wrongly on this CPU, its
subclass :class:`~aft_export.errors.NotForThisCPU`), which the stages report as *skipped*,
never as passed. The old ``providers`` word (cpu, cuda, tensorrt) still names a backend, for
one release.

The PyTorch runner (and torch with it) is loaded on first use, as the package's own
``__init__`` loads the model API: a process that runs only ONNX files or engines (a
Triton Python backend stub of ``aft-export serve``) never imports torch.
"""

from __future__ import annotations

from pathlib import Path

from aft_export.errors import AFTExportError
from aft_export.options import BACKENDS, backend_of
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.runners.base import INPUT, OUTPUT, ModelInfo, Runner
from aft_export.runners.engine import TrtRunner
from aft_export.runners.openvino import OpenVinoRunner
from aft_export.runners.ort import PROVIDER_KINDS, OrtRunner, info_from_metadata, onnx_info, ort_providers
from aft_export.runners.reference import ReferenceRunner
from aft_export.models.sources import SPEC_SUFFIXES, source_suffixes

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".safetensors")
ENGINE_SUFFIXES = (".engine", ".plan")


def is_model_source(suffix: str) -> bool:
    """Whether a file of ``suffix`` (lower case) is a model source PyTorch runs: a checkpoint, a model
    spec or the file of a registered reader (:mod:`aft_export.models.sources`)."""
    return suffix in CHECKPOINT_SUFFIXES or suffix in SPEC_SUFFIXES or suffix in source_suffixes()


__all__ = ["CHECKPOINT_SUFFIXES", "INPUT", "OUTPUT", "PROVIDER_KINDS", "ModelInfo", "OpenVinoRunner", "OrtRunner",
           "ReferenceRunner", "Runner", "TorchRunner", "TrtRunner", "info_from_metadata", "load_runner", "onnx_info",
           "onnx_runner", "ort_providers"]  # fmt: skip


def __getattr__(name: str):
    if name == "TorchRunner":
        from aft_export.runners.pytorch import TorchRunner

        return TorchRunner
    raise AttributeError(f"module 'aft_export.runners' has no attribute {name!r}")


def onnx_runner(source, backend: str | None = None, threads: int = 0, info: ModelInfo | None = None,
                preprocessing: ForeignPreprocessing | None = None, spinning: bool = True) -> Runner:  # fmt: skip
    """An ONNX file or graph (``source``: a path or a ModelProto) on ``backend`` (None: the
    default): OpenVINO, or ONNX Runtime with the backend's execution provider."""
    backend = backend_of(backend)
    if backend == "openvino":
        return OpenVinoRunner(source, threads=threads, info=info, preprocessing=preprocessing)
    return OrtRunner(source, BACKENDS[backend].provider, threads=threads, info=info, preprocessing=preprocessing,
                     spinning=spinning)  # fmt: skip


def load_runner(artifact: str, backend: str | None = None, config: str | None = None, threads: int = 0,
                preprocessing: ForeignPreprocessing | None = None, spinning: bool = True,
                providers: list | str | None = None) -> Runner:  # fmt: skip
    """The runner of ``artifact`` on ``backend`` (see the module doc); ``preprocessing``: how to
    feed an ONNX file another tool wrote (one with our metadata, a checkpoint or an engine
    describes itself); ``spinning`` False: ONNX Runtime's pools sleep when idle
    (:class:`OrtRunner`). ``providers``: the old word, a provider kind (cpu, cuda, tensorrt)
    or ONNX Runtime's own provider list, for one release."""
    path = Path(artifact)
    if not path.exists():
        raise AFTExportError(f"artifact {path} does not exist; check the path")
    ort_list = providers if isinstance(providers, (list, tuple)) else None
    backend = backend_of(backend, None if ort_list is not None else providers)
    suffix = path.suffix.lower()
    if is_model_source(suffix):
        from aft_export.runners.pytorch import TorchRunner

        device = "cuda" if BACKENDS[backend].gpu else "cpu"
        return TorchRunner(str(path), config=config, threads=threads, device=device)
    if suffix == ".onnx":
        if ort_list is not None:
            return OrtRunner(str(path), list(ort_list), threads=threads, preprocessing=preprocessing,
                             spinning=spinning)  # fmt: skip
        return onnx_runner(str(path), backend, threads=threads, preprocessing=preprocessing, spinning=spinning)
    if suffix in ENGINE_SUFFIXES:
        return TrtRunner(str(path), threads=threads)
    raise AFTExportError(f"{path}: unknown artifact type; expected a checkpoint (.pt, .pth, .safetensors), "
                         f"a model spec (.yaml, .yml, .json), .onnx or a TensorRT .engine")
