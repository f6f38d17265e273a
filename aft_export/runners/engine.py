"""TensorRT and TensorRT-RTX: a serialized engine, its manifest checked before either is touched.

The manifest says which library built the engine; that one is imported (a TensorRT-RTX engine
loads only with TensorRT-RTX, of the release that built it). Either runs on a GPU only: with
none here, loading raises RuntimeMissing and the stages report the engine *skipped, no GPU*.
Device buffers and the CUDA stream come from PyTorch (no pycuda/cuda-python needed).
Every TensorRT name used here is checked against each supported version's API by
tests/test_trt_api.py, like aft_export/tensorrt/library.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export.errors import AFTExportError
from aft_export.artifacts.ends import Claim, engine_format, engine_input_problem
from aft_export.artifacts.onnxio import ArtifactMeta
from aft_export.readers import reason
from aft_export.runners.base import ModelInfo, Runner
from aft_export.environment import tensorrt_environment
from aft_export.tensorrt.library import import_library, library_logger, library_of, require_gpu
from aft_export.tensorrt.manifest import check_manifest, manifest_problems
from aft_export.options.commands import command_line

# what running an engine reads from its manifest besides what check_manifest decides with
READ = ("input", "precision", "model")


def manifest_info(manifest: dict, engine: str) -> ModelInfo:
    """What feeding ``engine`` needs, from its manifest (checked by :func:`~aft_export.tensorrt.manifest.check_manifest`):
    the model's metadata, its precision, and an input profile the runner can read (a name, and
    min, opt and max shapes of one rank). A manifest without them, or with one of them malformed
    (a hand-edited manifest), is one line, before TensorRT is loaded."""
    bad = [k for k in manifest_problems(manifest) if k in READ]
    if bad or "input" not in manifest:
        what = f"has malformed entries ({', '.join(bad)})" if bad else "has no input profile (input)"
        raise AFTExportError(f"engine manifest of {engine} {what}, so aft-export cannot tell what the engine takes; "
                             f"rebuild it with `aft-export build`")  # fmt: skip
    m = ArtifactMeta(manifest.get("model", {}), engine)
    takes = engine_format(manifest.get("model"), manifest["input"], engine)  # no graph: the manifest decides
    try:
        return ModelInfo(m.classes, m.input_size, m.mean, m.std, source_sha256=m.source_sha256,
                         precision=manifest.get("precision", "fp32"), extra=manifest,
                         preprocessing_from=m.get("preprocessing_from", ""), input_format=takes.name,
                         output_format=Claim.of_meta(m).output_format or "logits")  # fmt: skip
    except (KeyError, ValueError) as exc:  # readers.Malformed is a ValueError
        raise AFTExportError(f"engine manifest of {engine} lacks the model's metadata ({reason(exc)}); rebuild it") from None


def load_engine(engine: str, manifest: dict, env: dict):
    """``(trt, library, the deserialised engine)`` of ``engine``, whose ``manifest``
    (:func:`~aft_export.tensorrt.manifest.check_manifest`) says which library built it, with the TensorRT installed
    here (no torch needed: a Jetson's check runs without it). RuntimeMissing where the library or a GPU is missing;
    one error where it does not deserialise."""
    trt, library, version = import_library(manifest.get("library", "tensorrt"))
    require_gpu(env, library)
    logger = library_logger(trt, library)
    runtime = trt.Runtime(logger)
    if (library_of(library).version_compatible and manifest.get("build_options", {}).get("version_compatible")
            and version >= (8, 6)):  # fmt: skip
        runtime.engine_host_code_allowed = True  # the plan carries its own lean runtime: we trust it
    loaded = runtime.deserialize_cuda_engine(Path(engine).read_bytes())
    if loaded is None:
        said = "; ".join(m for _, m in logger.messages)[:400]
        raise AFTExportError(f"{library} could not deserialise {engine}{': ' + said if said else ''}; rebuild it "
                             f"on this machine")  # fmt: skip
    return trt, library, loaded


@dataclass(frozen=True)
class EngineInput:
    """An engine's image input as TensorRT reads it: its name, dtype (NumPy's name) and optimisation profile 0."""

    name: str
    dtype: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


def engine_input(trt, engine) -> EngineInput:
    """What a deserialised ``engine`` takes (its first input), read from the engine itself."""
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    name = next(n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT)
    lo, opt, hi = engine.get_tensor_profile_shape(name, 0)
    return EngineInput(name, np.dtype(trt.nptype(engine.get_tensor_dtype(name))).name, tuple(lo), tuple(opt),
                       tuple(hi))  # fmt: skip


class TrtRunner(Runner):
    backend = "tensorrt"

    def __init__(self, engine: str, threads: int = 0) -> None:
        import torch

        env = tensorrt_environment()
        manifest = check_manifest(engine, env)
        super().__init__(str(engine), manifest_info(manifest, engine))
        trt, library, loaded = load_engine(engine, manifest, env)
        self.backend = library  # the runtime's name (aft_export.runtimes): tensorrt or tensorrt-rtx
        self.threads = threads
        self._open(trt, loaded)
        # the engine's own input, as TensorRT reads it, held to what its manifest says it takes
        seen = engine_input(trt, loaded)
        problem = engine_input_problem(self.info.takes, seen.dtype, seen.max)
        if problem:
            raise AFTExportError(f"the manifest of {self.path} says input_format {self.info.input_format}, but the "
                                 f"engine's {problem}; rebuild the engine with `aft-export build`")  # fmt: skip
        lo, hi = manifest["input"]["min"], manifest["input"]["max"]
        self.fixed_batch = lo[0] if lo[0] == hi[0] else None
        self.limits = (lo, hi)
        self.stream = torch.cuda.Stream()

    def _open(self, trt, engine) -> None:
        self.trt, self.engine = trt, engine
        self.context = engine.create_execution_context()
        self.names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in self.names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.input_name = self.inputs[0]
        self.output_name = next(n for n in self.names if n not in self.inputs)

    def run(self, feeds):
        import torch

        trt = self.trt
        lo, hi = self.limits
        # the engine's own input type: float32, or uint8 for a file that takes raw pixels
        x = np.ascontiguousarray(feeds[self.inputs[0]], dtype=trt.nptype(self.engine.get_tensor_dtype(self.inputs[0])))
        if any(not a <= s <= b for a, s, b in zip(lo, x.shape, hi)):
            line = command_line("build", batch_profile="MIN,OPT,MAX", hw_profile="MIN,OPT,MAX")
            raise AFTExportError(f"input shape {x.shape} is outside the engine's profile {lo}..{hi}; rebuild with a "
                                 f"wider profile: {line}")  # fmt: skip
        with torch.cuda.stream(self.stream):
            xin = torch.from_numpy(x).cuda(non_blocking=True)
            self.context.set_input_shape(self.inputs[0], tuple(x.shape))
            self.context.set_tensor_address(self.inputs[0], xin.data_ptr())
            outs = {}
            for name in self.names:
                if name in self.inputs:
                    continue
                shape = tuple(self.context.get_tensor_shape(name))
                dtype = torch.from_numpy(np.zeros(0, trt.nptype(self.engine.get_tensor_dtype(name)))).dtype
                outs[name] = torch.empty(shape, dtype=dtype, device="cuda")
                self.context.set_tensor_address(name, outs[name].data_ptr())
            if not self.context.execute_async_v3(self.stream.cuda_stream):
                raise AFTExportError(f"TensorRT failed to run {self.path}")
        self.stream.synchronize()
        return {k: v.float().cpu().numpy() for k, v in outs.items()}
