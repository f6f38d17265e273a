"""What a file is made for: the export targets, one table (:data:`EXPORT_TARGETS`: what a graph is made for
and what that means everywhere it matters), and the TensorRT libraries an engine is built with
(:data:`LIBRARIES`). Named in :mod:`aft_export.options` too, as before."""

from __future__ import annotations

from dataclasses import dataclass

from aft_export.runtimes import TENSORRT_MODULES

OP_FORMS = ("custom", "decomposed")


@dataclass(frozen=True)
class ExportTarget:
    """What a graph is made for, and what that means everywhere it matters: the one table of
    export targets (the exporter, the quantiser, the TensorRT check, trtexec/polygraphy
    commands, the pipeline and the command line's help all read it)."""

    name: str
    summary: str  # for --help
    opset: int | None  # fixed opset (exported at 18, then converted); None: ExportOptions.opset
    oldest_tensorrt: tuple[int, int]  # the oldest TensorRT whose ONNX parser reads the form
    int8_weight_bits: int  # QuantizeOptions.weight_bits when left out (see there)
    stem: str  # the pipeline's file name for it: STEM.onnx, STEM.int8.onnx, ...
    # what an int8 graph computes outside its int8 layers when QuantizeOptions.rest_precision is
    # left out: fp16 where the runtime's types come from the graph and fp16 is fast (strongly typed
    # TensorRT 10.3+/11 and TensorRT-RTX); fp32 where it does not (TensorRT 8 takes precision from
    # builder flags; the CPU runtimes the portable form is for run fp16 slowly)
    int8_rest: str = "fp32"
    # int8: the stem (the first MatMul/Gemm/Conv, on the image's channels) kept out of int8 when
    # QuantizeOptions.stem_fp32 is left out. With 7-bit weights it lost the most: aft_conv_cifar's lowest
    # per-image cosine with PyTorch over 3,000 test images was 0.976 with the stem in int8 (under int8's
    # parity limit, 0.98), 0.986 without it (8-bit weights: 0.979); its 3 input channels give int8 little to
    # speed up
    int8_stem_fp32: bool = False
    # the runtimes a file of the target is for, as `info` and the pipeline's report say it
    # (aft_export.artifacts.purpose.made_for): fp32 files; int8 files whose rest is fp32; files that compute in
    # fp16 (an fp16 graph, an int8 graph's fp16 rest), which are for GPUs: CPUs have no fast fp16 kernels
    runtimes: str = ""
    int8_runtimes: str = ""
    fp16_runtimes: str = ""


EXPORT_TARGETS = {t.name: t for t in (  # the forms: aft_export/exporting/trt8.py, aft_export/exporting/portable.py
    ExportTarget("tensorrt", "TensorRT 10.3+/11 (opset 18, com.aft functions)", None, (10, 3), 8, "model", "fp16",
                 runtimes="TensorRT 10.3+/11, TensorRT-RTX, ONNX Runtime",
                 int8_runtimes="TensorRT 10.3+/11, TensorRT-RTX, ONNX Runtime",
                 fp16_runtimes="TensorRT 10.3+/11, TensorRT-RTX"),
    ExportTarget("tensorrt8", "TensorRT 8.5/8.6 (JetPack 5.1/6.0) and newer (opset 17, functions inlined, "
                 "LayerNorm decomposed)", 17, (8, 5), 8, "model.trt8",
                 runtimes="TensorRT 8.5/8.6 (JetPack 5.1/6.0) and newer", int8_runtimes="TensorRT 8.5/8.6 "
                 "(JetPack 5.1/6.0) and newer", fp16_runtimes="TensorRT 8.5/8.6 (JetPack 5.1/6.0) and newer"),
    ExportTarget("portable", "any conforming runtime (ONNX Runtime, OpenVINO, the ONNX reference, "
                 "TensorRT 10.3+; opset 19, IR 9, functions inlined, standard ops only)", 19, (10, 3), 7,
                 "model.portable", int8_stem_fp32=True,
                 runtimes="any conforming runtime: ONNX Runtime, OpenVINO, TensorRT 10.3+",
                 int8_runtimes="CPUs: ONNX Runtime, OpenVINO", fp16_runtimes="GPUs: TensorRT 10.3+, ONNX Runtime "
                 "(CUDA)"),
)}  # fmt: skip
TARGETS = tuple(EXPORT_TARGETS)
DEFAULT_TARGET = "tensorrt"  # also what a file without export_target metadata was made for
TARGET_OPSETS = {t.name: t.opset for t in EXPORT_TARGETS.values() if t.opset is not None}
# auto: standard TensorRT where it is installed, else TensorRT-RTX (aft_export.tensorrt.library.choose_library);
# the others, the runtime table's engine runtimes (tensorrt, tensorrt-rtx)
LIBRARIES = ("auto", *TENSORRT_MODULES)
