"""Runners: one contract for every runtime (see :mod:`aft_export.runners.base`).

:func:`runtime_runner` makes the runner of any runtime of :data:`aft_export.runtimes.RUNTIMES`
(its ``family``'s factory, looked up when first asked for). ``load_runner`` picks the runtime from
the artifact and the ``backend`` (:data:`aft_export.runtimes.BACKENDS`): an ONNX file runs in ONNX
Runtime on the CPU (``onnxruntime``, the default), in its CUDA or TensorRT provider
(``onnxruntime-cuda``, ``onnxruntime-tensorrt``) or in OpenVINO (``openvino``; ``openvino-bf16``:
its fp32 parts computed in bf16, on CPUs with bf16 units); a checkpoint runs
in PyTorch, on the GPU with a GPU backend; an engine in TensorRT. The ONNX reference evaluator
(:class:`ReferenceRunner`) is made directly. A runtime missing here raises
:class:`~aft_export.errors.RuntimeMissing` (a file OpenVINO computes wrongly on this CPU, its
subclass :class:`~aft_export.errors.NotForThisCPU`), which the stages report as *skipped*,
never as passed.

The PyTorch runner (and torch with it) is loaded on first use, as the package's own
``__init__`` loads the model API: a process that runs only ONNX files or engines (a
Triton Python backend stub of ``aft-export serve``) never imports torch.
"""

from __future__ import annotations

from pathlib import Path

from aft_export.errors import AFTExportError
from aft_export.runtimes import BACKENDS, DEFAULT_BACKEND, Runtime, runtime
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.runners.base import INPUT, OUTPUT, ModelInfo, Runner
from aft_export.runners.engine import TrtRunner
from aft_export.runners.openvino import OpenVinoRunner
from aft_export.runners.ort import PROVIDER_KINDS, OrtRunner, info_from_metadata, onnx_info, ort_providers
from aft_export.runners.reference import ReferenceRunner
from aft_export.artifacts.kinds import ENGINE, ONNX, expected, kind_of

__all__ = ["INPUT", "OUTPUT", "PROVIDER_KINDS", "ModelInfo", "OpenVinoRunner", "OrtRunner",
           "ReferenceRunner", "Runner", "TorchRunner", "TrtRunner", "info_from_metadata", "load_runner", "onnx_info",
           "onnx_runner", "ort_providers", "runtime_runner"]  # fmt: skip


def __getattr__(name: str):
    if name == "TorchRunner":
        from aft_export.runners.pytorch import TorchRunner

        return TorchRunner
    raise AttributeError(f"module 'aft_export.runners' has no attribute {name!r}")


def _torch(source, rt: Runtime, threads: int, config=None, **_) -> Runner:
    from aft_export.runners.pytorch import TorchRunner

    return TorchRunner(str(source), config=config, threads=threads, device="cuda" if rt.gpu else "cpu")


def _onnxruntime(source, rt: Runtime, threads: int, info=None, preprocessing=None, spinning=True, **_) -> Runner:
    return OrtRunner(source, rt.ort_kind, threads=threads, info=info, preprocessing=preprocessing, spinning=spinning)


def _openvino(source, rt: Runtime, threads: int, info=None, preprocessing=None, **_) -> Runner:
    return OpenVinoRunner(source, threads=threads, info=info, preprocessing=preprocessing, compute=rt.compute)


def _tensorrt(source, rt: Runtime, threads: int, **_) -> Runner:
    return TrtRunner(str(source), threads=threads)  # TensorRT or TensorRT-RTX: the engine's manifest says which


def runtime_runner(source, name: str, threads: int = 0, *, info: ModelInfo | None = None, config: str | None = None,
                   preprocessing: ForeignPreprocessing | None = None, spinning: bool = True) -> Runner:  # fmt: skip
    """``source`` (a file; for an ONNX runtime also a ModelProto) in the runtime ``name``
    (:data:`aft_export.runtimes.RUNTIMES`). ``info``: what an ONNX graph without our metadata
    classifies; ``config``: a checkpoint's architecture; ``preprocessing``: how to feed an ONNX file
    another tool wrote; ``spinning`` False: ONNX Runtime's pools sleep when idle (:class:`OrtRunner`)."""
    rt = runtime(name)
    # how each family of runtimes (Runtime.family) makes its runner
    make = {"torch": _torch, "onnxruntime": _onnxruntime, "openvino": _openvino, "tensorrt": _tensorrt}[rt.family]
    return make(source, rt, threads, info=info, config=config, preprocessing=preprocessing, spinning=spinning)


def _backend(name: str) -> Runtime:
    """The backend ``name`` names (:data:`~aft_export.runtimes.BACKENDS`: where ONNX files run)."""
    if name not in BACKENDS:
        raise AFTExportError(f"ONNX files run in one of {', '.join(BACKENDS)}, not {name!r}")
    return BACKENDS[name]


def onnx_runner(source, backend: str = DEFAULT_BACKEND, threads: int = 0, info: ModelInfo | None = None,
                preprocessing: ForeignPreprocessing | None = None, spinning: bool = True) -> Runner:  # fmt: skip
    """An ONNX file or graph (``source``: a path or a ModelProto) on ``backend``, one of
    :data:`~aft_export.runtimes.BACKENDS`: OpenVINO, or ONNX Runtime with that backend's
    execution provider."""
    return runtime_runner(source, _backend(backend).name, threads, info=info, preprocessing=preprocessing,
                          spinning=spinning)


def load_runner(artifact: str, backend: str = DEFAULT_BACKEND, config: str | None = None, threads: int = 0,
                preprocessing: ForeignPreprocessing | None = None, spinning: bool = True) -> Runner:  # fmt: skip
    """The runner of ``artifact`` on ``backend`` (see the module doc); ``preprocessing``: how to
    feed an ONNX file another tool wrote (one with our metadata, a checkpoint or an engine
    describes itself); ``spinning`` False: ONNX Runtime's pools sleep when idle
    (:class:`OrtRunner`)."""
    path = Path(artifact)
    if not path.exists():
        raise AFTExportError(f"artifact {path} does not exist; check the path")
    on = _backend(backend)
    kind = kind_of(path)
    if kind is not None and kind.model_source:
        return runtime_runner(path, "torch-cuda" if on.gpu else "torch", threads, config=config)
    if kind is ONNX:
        return runtime_runner(str(path), backend, threads, preprocessing=preprocessing, spinning=spinning)
    if kind is ENGINE:
        return runtime_runner(path, "tensorrt", threads)
    raise AFTExportError(f"{path}: unknown artifact type; expected {expected()}")
