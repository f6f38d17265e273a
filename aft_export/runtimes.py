"""Every runtime aft-export runs a model in, in one table (:data:`RUNTIMES`): its name, its device
class, how to tell it is installed, what to install where it is not, and how its runner is made.

The name is the runner's own (``Runner.backend``), so one word names a runtime everywhere: the
``backend`` option, the reports, the JSON, the deploy table. The runtimes that are values of
``backend`` (where ``eval``, ``parity``, ``bench``, ``infer`` and ``serve`` run ONNX files) are
:data:`BACKENDS`; the deploy table lists :data:`TABLE_RUNTIMES`; ``triton-repo`` writes the
Triton backends of :data:`TRITON_BACKENDS`. A checkpoint runs in PyTorch (on the GPU with a GPU
backend) and an engine in TensorRT, whichever backend is chosen.

The facts only, on the ground floor: nothing here imports a runtime. The runners are made by
:func:`aft_export.runners.runtime_runner`, which looks up each ``family``'s factory when it is
first asked for one. A backend's name is checked once, where the command is called
(:mod:`aft_export.options.commands`); the stages look it up here.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from aft_export.errors import AFTExportError, Named, said
from aft_export.machine import CpuFeatures, cpu_features

CPU, GPU = "cpu", "gpu"


@dataclass(frozen=True)
class TritonBackend:
    """How NVIDIA Triton runs a runtime's ONNX files (``triton-repo`` writes its config): Triton's name for the
    backend, the config's line naming it, whether it runs on the CPU alone (its instances are KIND_CPU whatever
    ``device`` says, and ``device`` gpu is refused) and whether it reads model-local functions (else the file
    goes in with them inlined)."""

    name: str
    config: str
    cpu_only: bool
    reads_functions: bool


TRITON: dict[str, TritonBackend] = {b.name: b for b in (
    TritonBackend("onnxruntime_onnx", 'platform: "onnxruntime_onnx"', cpu_only=False, reads_functions=True),
    TritonBackend("openvino", 'backend: "openvino"\ndefault_model_filename: "model.onnx"', cpu_only=True,
                  reads_functions=False),
)}  # fmt: skip


@dataclass(frozen=True)
class Runtime:
    name: str  # the word everywhere: option values, reports, JSON (the runner's own Runner.backend)
    title: str  # its product's name, for sentences
    summary: str  # for the help of `backend`
    device: str  # the device class it runs on: cpu or gpu
    family: str  # how its runner is made (aft_export.runners.runtime_runner): torch, onnxruntime, openvino, tensorrt
    module: str  # the Python module that must be importable for it to run here
    install: str  # what to do where it is missing
    ort_kind: str | None = None  # ONNX Runtime's execution providers (runners.ort.ort_providers): cpu, cuda, tensorrt
    ort_provider: str | None = None  # the provider ONNX Runtime must list for it to run here (a GPU one)
    backend: bool = False  # a value of `backend`: where eval, parity, bench, infer and serve run ONNX files
    in_table: bool = True  # a runtime of the deploy table (aft_export.verify.deploy)
    triton: str = ""  # the Triton backend (TRITON) triton-repo writes its ONNX files for; "": none
    # the precision it computes a file's fp32 parts in where that is not fp32 ("": as the file says): bf16 is
    # OpenVINO's inference precision hint; parity holds it to the looser of this and the file's own limits
    compute: str = ""
    units: str = ""  # the CpuFeatures field the CPU must have for it to run here (CPU_UNITS): "" for none
    # serve says it is missing here (its module, the CPU's units) before Triton starts (aft_export.serving.server):
    # inside Triton's Python backend stub a model it cannot run would only fail to load
    checked_before_serving: bool = False

    @property
    def gpu(self) -> bool:
        return self.device == GPU

    @property
    def triton_backend(self) -> TritonBackend | None:
        return TRITON.get(self.triton)

    @property
    def runs(self) -> str:
        """What it runs: checkpoint (PyTorch), onnx (ONNX Runtime, OpenVINO) or engine (TensorRT)."""
        return RUNS[self.family]

    def missing(self, gpu: bool, ort_providers: list[str] | None = None, cpu: CpuFeatures | None = None) -> str:
        """"" where it can run here, else why not, in one line: no GPU (``gpu``: whether one is
        visible), a CPU without the units it computes on (``cpu``: None, this one's; a CPU whose flags
        cannot be read is not refused here: the runner asks its runtime), its module not installed,
        or (``ort_providers``: ONNX Runtime's available providers) ONNX Runtime without its provider."""
        if self.gpu and not gpu:
            return "no GPU here"
        if self.units:
            cpu = cpu or cpu_features()
            if getattr(cpu, self.units) is False:
                return f"this CPU has no {CPU_UNITS[self.units]} ({cpu.describe()})"
        if importlib.util.find_spec(self.module) is None:
            return f"not installed: {self.install}"
        if self.ort_provider and self.ort_provider not in (ort_providers or []):
            return f"not installed: {self.install}"
        return ""


# the CPU units a runtime may need (Runtime.units: a field of aft_export.machine.CpuFeatures), as said to users
CPU_UNITS = {"bf16": "bf16 units (AVX512_BF16 or AMX-BF16)"}
# what each family of runtimes runs
RUNS = {"torch": "checkpoint", "onnxruntime": "onnx", "openvino": "onnx", "tensorrt": "engine"}

# in the order the deploy table lists them: the CPU's, then the GPU's; PyTorch first in each
RUNTIMES: dict[str, Runtime] = {r.name: r for r in (
    Runtime("torch", "PyTorch", "PyTorch, CPU", CPU, "torch", "torch", "pip install torch==2.13.0"),
    Runtime("onnxruntime", "ONNX Runtime", "ONNX Runtime, CPU", CPU, "onnxruntime", "onnxruntime",
            "pip install 'aft-export[cpu]'", ort_kind="cpu", backend=True, triton="onnxruntime_onnx"),
    Runtime("openvino", "OpenVINO", "OpenVINO, CPU, the openvino extra", CPU, "openvino", "openvino",
            "pip install 'aft-export[openvino]'", backend=True, triton="openvino", checked_before_serving=True),
    Runtime("openvino-bf16", "OpenVINO", "OpenVINO on CPUs with bf16 units, fp32 computed in bf16", CPU,
            "openvino", "openvino", "pip install 'aft-export[openvino]'", backend=True, compute="bf16", units="bf16",
            checked_before_serving=True),
    Runtime("torch-cuda", "PyTorch", "PyTorch, CUDA", GPU, "torch", "torch", "a CUDA build of torch"),
    Runtime("onnxruntime-cuda", "ONNX Runtime", "its CUDA provider, onnxruntime-gpu", GPU, "onnxruntime",
            "onnxruntime", "onnxruntime-gpu with its CUDA provider", ort_kind="cuda",
            ort_provider="CUDAExecutionProvider", backend=True),
    Runtime("onnxruntime-tensorrt", "ONNX Runtime", "its TensorRT provider, onnxruntime-gpu", GPU, "onnxruntime",
            "onnxruntime", "onnxruntime-gpu with its TensorRT provider", ort_kind="tensorrt",
            ort_provider="TensorrtExecutionProvider", backend=True, in_table=False),
    Runtime("tensorrt", "TensorRT", "TensorRT", GPU, "tensorrt", "tensorrt", "pip install 'aft-export[tensorrt]'"),
    Runtime("tensorrt-rtx", "TensorRT-RTX", "TensorRT for RTX", GPU, "tensorrt", "tensorrt_rtx",
            "pip install 'aft-export[rtx]'"),
)}  # fmt: skip

# the values of `backend`, in the order its help lists them: ONNX Runtime's three, then OpenVINO's two
BACKENDS: dict[str, Runtime] = {n: RUNTIMES[n] for n in ("onnxruntime", "onnxruntime-cuda", "onnxruntime-tensorrt",
                                                          "openvino", "openvino-bf16")}  # fmt: skip
DEFAULT_BACKEND = "onnxruntime"
REFERENCE = "torch"  # the checkpoint in PyTorch on the CPU: what every file is proven against
TABLE_RUNTIMES = tuple(r.name for r in RUNTIMES.values() if r.in_table)
# the TensorRT libraries that build and run engines -> their Python modules
TENSORRT_MODULES = {r.name: r.module for r in RUNTIMES.values() if r.runs == "engine"}
# the Triton backends a repository runs ONNX files in (NVIDIA's container has both): ONNX Runtime's
# (onnxruntime_onnx: CPU or GPU) and OpenVINO's (CPU)
TRITON_BACKENDS = tuple(r.name for r in RUNTIMES.values() if r.triton)
# the old word for `backend`: `provider` cpu, cuda or tensorrt, read (by the command line's hidden
# option of that name and by ServeOptions) until aft_export.version.RENAMED_UNTIL
PROVIDER_BACKENDS = {r.ort_kind: r.name for r in BACKENDS.values() if r.ort_kind}


def runtime(name: str) -> Runtime:
    """The runtime ``name`` names (one of :data:`RUNTIMES`); an unknown name is one line."""
    found = RUNTIMES.get(name) if isinstance(name, str) else None
    if found is None:
        raise AFTExportError(f"unknown runtime {name!r}; choose one of {', '.join(RUNTIMES)}")
    return found


def computing(family: str, compute: str) -> Runtime:
    """The runtime of ``family`` that computes a file's fp32 parts in ``compute`` ("": as the file says): the name
    a runner of that family runs under (OpenVINO's: openvino, openvino-bf16)."""
    return next(r for r in RUNTIMES.values() if r.family == family and r.compute == compute)


def title_of(name: str) -> str:
    """A runtime's (or TensorRT library's: the libraries are the engine runtimes of :data:`RUNTIMES`)
    product name for sentences; a name the table does not know, as it is (an engine manifest's own word)."""
    found = RUNTIMES.get(name) if isinstance(name, str) else None
    return found.title if found else str(name)


def backend_of(backend: str | None = None, provider: str | None = None) -> str:
    """The backend that ``backend`` (one of :data:`BACKENDS`; None: :data:`DEFAULT_BACKEND`) and the old
    ``provider`` word (cpu, cuda, tensorrt: :data:`PROVIDER_BACKENDS`) name together. The one place an
    old word becomes a backend's name: the command line's hidden option of that name and
    ``ServeOptions(provider=...)``, until :data:`aft_export.version.RENAMED_UNTIL`."""
    if provider is not None:
        if provider not in PROVIDER_BACKENDS:
            raise AFTExportError(said("unknown provider {provider!r}; choose a {backend}: {value}", None,
                                      provider=provider, value=', '.join(BACKENDS)))
        named = PROVIDER_BACKENDS[provider]
        if backend not in (None, DEFAULT_BACKEND, named):
            raise AFTExportError(said("{backend_got} and {provider_got} ({named}) name two backends; give {backend} "
                                      "alone", None, backend_got=Named("backend", backend),
                                      provider_got=Named("provider", provider), named=named))  # fmt: skip
        return named
    backend = DEFAULT_BACKEND if backend is None else backend
    if backend not in BACKENDS:
        raise AFTExportError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    return backend
