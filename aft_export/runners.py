"""Runners: one contract for every backend, ``dict[str, np.ndarray]`` in and out.

A runner also carries what is needed to feed it: class names, input size and the
normalisation, read from the checkpoint, the ONNX file's metadata or the engine's
manifest. TensorRT engines get a runner of their own in :mod:`aft_export.trt`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aft_export.errors import AFTExportError, RuntimeMissing

INPUT = "image"
OUTPUT = "logits"
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".safetensors", ".yaml", ".yml", ".json")  # specs: aft_export/byo/spec.py


@dataclass
class ModelInfo:
    """What a runner needs from its source to be fed and compared."""

    classes: list[str]
    input_size: tuple[int, int, int]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    source_sha256: str = ""  # the checkpoint the artifact was made from
    precision: str = "fp32"
    extra: dict = field(default_factory=dict)


class Runner:
    backend = ""
    fixed_batch: int | None = None
    threads: int = 0

    def __init__(self, path: str, info: ModelInfo) -> None:
        self.path = path
        self.info = info

    @property
    def name(self) -> str:
        return Path(self.path).name

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover

    def logits(self, images: np.ndarray, batch_size: int = 64) -> np.ndarray:
        """Run preprocessed NCHW float32 images in batches; returns fp32 logits."""
        outs = [self.run({INPUT: images[i : i + batch_size]})[OUTPUT].astype(np.float32)
                for i in range(0, len(images), batch_size)]  # fmt: skip
        return np.concatenate(outs) if outs else np.zeros((0, len(self.info.classes)), np.float32)


class TorchRunner(Runner):
    backend = "torch"

    def __init__(self, path: str, config: str | None = None, threads: int = 0, device: str = "cpu") -> None:
        import torch

        from aft_export.checkpoint import load_checkpoint

        if threads:
            torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()
        if device == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeMissing("no CUDA GPU is visible to PyTorch here (torch.cuda.is_available() is False)")
            # fp32 means fp32: TF32 convolutions (cuDNN's default) and matrix products are a
            # precision the model does not say, outside the fp32 parity limit
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            self.backend = "torch-cuda"
        self.device = torch.device(device)
        self.model, meta = load_checkpoint(path, config=config)
        self.model.to(self.device)
        super().__init__(str(path), ModelInfo(meta.classes, meta.input_size, meta.mean, meta.std,
                                              source_sha256=meta.sha256))  # fmt: skip

    def run(self, feeds):
        import torch

        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(feeds[INPUT])).to(self.device)
            return {OUTPUT: self.model(x).float().cpu().numpy()}


def graph_precision(model) -> str:
    """fp32, fp16 or int8, from what the graph itself says (precision lives in the graph)."""
    ops = {n.op_type for n in model.graph.node}
    if "QuantizeLinear" in ops or "DequantizeLinear" in ops:
        return "int8"
    from onnx import TensorProto

    if any(t.data_type == TensorProto.FLOAT16 for t in model.graph.initializer):
        return "fp16"
    return "fp32"


PROVIDER_KINDS = ("cpu", "cuda", "tensorrt")


def ort_providers(kind: str, cache_dir: str | None = None) -> list:
    """ONNX Runtime provider list for ``kind`` (cpu, cuda or tensorrt), falling back to
    CUDA then CPU for what the preferred provider cannot run. The TensorRT provider keeps
    its engine and timing caches in ``cache_dir`` (default ~/.cache/aft-export/ort-tensorrt).
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
    cache = Path(cache_dir) if cache_dir else Path.home() / ".cache" / "aft-export" / "ort-tensorrt"
    cache.mkdir(parents=True, exist_ok=True)
    options = {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(cache),
               "trt_timing_cache_enable": True, "trt_timing_cache_path": str(cache)}  # fmt: skip
    return [("TensorrtExecutionProvider", options)] + cuda


def _provider_name(p) -> str:
    return p[0] if isinstance(p, tuple) else p


class OrtRunner(Runner):
    backend = "onnxruntime"

    def __init__(self, path: str, providers: list | str | None = None, threads: int = 0) -> None:
        import onnx
        import onnxruntime as ort

        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as exc:  # protobuf raises DecodeError and friends
            raise AFTExportError(f"{path} is not a readable ONNX file: {exc}") from None
        meta = {p.key: p.value for p in model.metadata_props}
        if "classes" not in meta or "input_size" not in meta:
            raise AFTExportError(
                f"{path} has no aft-export metadata (classes, input size, mean/std); export it with "
                f"`aft-export export`"
            )
        info = ModelInfo(json.loads(meta["classes"]), tuple(json.loads(meta["input_size"])),
                         tuple(json.loads(meta["mean"])), tuple(json.loads(meta["std"])),
                         source_sha256=meta.get("source_sha256", ""), precision=graph_precision(model),
                         extra=meta)  # fmt: skip
        super().__init__(str(path), info)
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
        self.session = ort.InferenceSession(str(path), options, providers=wanted)
        dim0 = self.session.get_inputs()[0].shape[0]
        self.fixed_batch = dim0 if isinstance(dim0, int) else None
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


def load_runner(artifact: str, providers: list | str | None = None, config: str | None = None,
                threads: int = 0) -> Runner:  # fmt: skip
    path = Path(artifact)
    if not path.exists():
        raise AFTExportError(f"artifact {path} does not exist")
    suffix = path.suffix.lower()
    if suffix in CHECKPOINT_SUFFIXES:
        # a GPU provider asked for ONNX files runs checkpoints on the GPU too (PyTorch CUDA)
        device = "cuda" if providers in ("cuda", "tensorrt") else "cpu"
        return TorchRunner(str(path), config=config, threads=threads, device=device)
    if suffix == ".onnx":
        return OrtRunner(str(path), providers, threads=threads)
    if suffix in (".engine", ".plan"):
        from aft_export.trt import trt_runner

        return trt_runner(str(path), threads=threads)
    raise AFTExportError(f"{path}: unknown artifact type; expected a checkpoint (.pt, .pth, .safetensors), "
                         f".onnx or a TensorRT .engine")
