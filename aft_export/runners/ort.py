"""ONNX Runtime: an ONNX file, or a graph in memory, on the CPU, CUDA or TensorRT provider."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.fileio import cache_root
from aft_export.onnxio import graph_precision, load_onnx, read_metadata
from aft_export.runners.base import ModelInfo, Runner

PROVIDER_KINDS = ("cpu", "cuda", "tensorrt")
# wheels that all install the one package directory ``onnxruntime``
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino",
                     "onnxruntime-qnn")  # fmt: skip


def ort_distributions() -> dict[str, str]:
    """The ONNX Runtime distributions installed here, with their versions."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ORT_DISTRIBUTIONS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def ort_conflict() -> str | None:
    """One line when two ONNX Runtime wheels share the ``onnxruntime`` directory (which
    one's files ended up there is an accident of install order), else None."""
    found = ort_distributions()
    if len(found) < 2:
        return None
    names = ", ".join(f"{k} {v}" for k, v in found.items())
    return (f"{names} are all installed and write one package directory, so which one runs is undefined; keep "
            f"one: pip uninstall -y {' '.join(found)} && pip install 'aft-export[cpu]' (or [gpu])")


def import_onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise AFTExportError("ONNX Runtime is not installed: pip install 'aft-export[cpu]' (CPU) or "
                             "'aft-export[gpu]' (onnxruntime-gpu; Jetson: the wheel JetPack's vendor provides)") from None
    return onnxruntime


def ort_providers(kind: str, cache_dir: str | None = None) -> list:
    """ONNX Runtime provider list for ``kind`` (cpu, cuda or tensorrt), falling back to
    CUDA then CPU for what the preferred provider cannot run. The TensorRT provider keeps
    its engine and timing caches in ``cache_dir`` (default the cache root's ort-tensorrt).
    Its ``trt_fp16_enable``/``trt_int8_enable`` stay off: with them ONNX Runtime builds a
    weakly typed network, without them a strongly typed one, which takes the precision
    from the graph (fp16 tensors, Q/DQ) as TensorRT 11 requires."""
    if kind not in PROVIDER_KINDS:
        raise AFTExportError(f"unknown provider {kind!r}; choose one of {PROVIDER_KINDS}")
    if kind == "cpu":
        return ["CPUExecutionProvider"]
    # use_tf32 0: fp32 means fp32 (ORT's CUDA provider computes fp32 products in TF32 by
    # default, ~1e-3 off: measured on an H100, outside the fp32 parity limit)
    cuda = [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
    if kind == "cuda":
        return cuda
    cache = Path(cache_dir) if cache_dir else cache_root("ort-tensorrt")
    cache.mkdir(parents=True, exist_ok=True)
    options = {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(cache),
               "trt_timing_cache_enable": True, "trt_timing_cache_path": str(cache)}  # fmt: skip
    return [("TensorrtExecutionProvider", options)] + cuda


def _provider_name(p) -> str:
    return p[0] if isinstance(p, tuple) else p


def info_from_metadata(model, where: str) -> ModelInfo:
    """Classes, input size and normalisation from aft-export's ONNX metadata."""
    meta = read_metadata(model)
    try:
        return ModelInfo(json.loads(meta["classes"]), tuple(json.loads(meta["input_size"])),
                         tuple(json.loads(meta["mean"])), tuple(json.loads(meta["std"])),
                         source_sha256=meta.get("source_sha256", ""), precision=graph_precision(model),
                         extra=meta)  # fmt: skip
    except (KeyError, ValueError) as exc:
        raise AFTExportError(f"{where} has no aft-export metadata (classes, input size, mean/std: {exc}); "
                             f"export it with `aft-export export`") from None  # fmt: skip


class OrtRunner(Runner):
    backend = "onnxruntime"

    def __init__(self, source, providers: list | str | None = None, threads: int = 0,
                 info: ModelInfo | None = None) -> None:  # fmt: skip
        """``source``: a path or a ModelProto (stages that run a graph they hold in memory);
        ``info``: what to feed it, for a graph without aft-export metadata."""
        import onnx

        ort = import_onnxruntime()
        in_memory = isinstance(source, onnx.ModelProto)
        model = source if in_memory else load_onnx(source, external_data=False)
        where = "the graph" if in_memory else str(source)
        info = replace(info or info_from_metadata(model, where), precision=graph_precision(model))
        super().__init__("<in memory>" if in_memory else str(source), info)
        available = ort.get_available_providers()
        if isinstance(providers, str):  # a kind: cpu, cuda, tensorrt
            providers = ort_providers(providers)
        wanted = providers or ["CPUExecutionProvider"]
        missing = [_provider_name(p) for p in wanted if _provider_name(p) not in available]
        if missing:
            raise RuntimeMissing(f"ONNX Runtime here lacks {missing} (available: {available}); "
                                 f"install onnxruntime-gpu with CUDA/TensorRT to use them")  # fmt: skip
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = threads  # 0: ONNX Runtime's default (all cores)
        self.threads = threads or (os.cpu_count() or 1)
        payload = source.SerializeToString() if in_memory else str(source)
        try:
            self.session = ort.InferenceSession(payload, options, providers=wanted)
        except Exception as exc:  # noqa: BLE001 - ORT's own error types: an invalid or unsupported graph
            raise AFTExportError(f"ONNX Runtime cannot load {where}: {str(exc).splitlines()[0][:300]}") from None
        first_input = self.session.get_inputs()[0]
        self.input_name = first_input.name
        self.output_name = self.session.get_outputs()[0].name
        self.fixed_batch = first_input.shape[0] if isinstance(first_input.shape[0], int) else None
        self.providers = self.session.get_providers()
        first = _provider_name(wanted[0])
        if first not in self.providers:  # ORT falls back to the CPU with a log line only
            raise RuntimeMissing(f"ONNX Runtime could not start {first} here (its CUDA/cuDNN/TensorRT libraries "
                                 f"did not load); it would have run on {self.providers}")  # fmt: skip
        if first != "CPUExecutionProvider":
            self.backend = f"onnxruntime-{first.replace('ExecutionProvider', '').lower()}"

    def run(self, feeds):
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, feeds)))
