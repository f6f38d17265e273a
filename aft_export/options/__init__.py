"""The options of every stage, as frozen dataclasses validated once: the one place a
default is written (the command line reads its defaults from here).

Pure data, light to import: nothing here loads torch, ONNX or ONNX Runtime at import. A field
has its flag's name; a field renamed to it keeps its old name for one release (renamed_fields).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from aft_export.verify.compare import EXPORT_MAX_ABS
from aft_export.errors import AFTExportError, Named, said
from aft_export.artifacts.onnxio import TWO_GB
from aft_export.data.images import (FLOAT_NCHW, INPUT_FORMATS, LOGITS, NORMALIZED, OUTPUT_FORMATS,  # noqa: F401
                                    PROBABILITIES, UINT8_NHWC)  # fmt: skip
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.options.deepstream import DEEPSTREAM_MODES, DeepStreamOptions  # noqa: F401  (named here, as before)
from aft_export.options.targets import (DEFAULT_TARGET, EXPORT_TARGETS, LIBRARIES, OP_FORMS, TARGET_OPSETS,  # noqa: F401
                                        TARGETS, ExportTarget)  # fmt: skip
from aft_export.options.params import (REQUIRED, Batch, Choice, Flag, Form, Model, Number, Opset, Path, Pattern, Text,
                                       Triple, Whole, declare, options_of)  # fmt: skip
from aft_export.readers import MAX_SIDE
# the runtimes, and which are values of `backend`: one table, read here (and named here, as before)
from aft_export.runtimes import (BACKENDS, DEFAULT_BACKEND, PROVIDER_BACKENDS, RUNTIMES, TRITON_BACKENDS,  # noqa: F401
                                 backend_of)  # fmt: skip
from aft_export.version import renamed_fields

# ---------------------------------------------------------------- export

MAX_BATCH = 65536
# limits of what a command line may ask for: more CPU threads than any machine this runs on
# has cores, and the seeds numpy's and torch's generators both take
MAX_THREADS = 1024
MAX_SEED = 2**32 - 1
SEED, SIDE = Whole(0, MAX_SEED), Whole(1, MAX_SIDE)  # the kinds of a seed and of an image side
THREADS = Whole(0, MAX_THREADS)  # 0: the backend's default
DATA = Path("either", named=True)  # a folder, a tar or a named set (cifar10:test)
ZERO_UP, PORT = Whole(0), Whole(1, 65535)
MIN_OPSET = 18


BACKEND = Choice(tuple(BACKENDS))
BACKEND_LIST = ", ".join(f"{b.name} ({b.summary})" for b in BACKENDS.values())
BACKEND_HELP = (f"Where .onnx artifacts run: {BACKEND_LIST}. A GPU backend also runs checkpoints in PyTorch on "
                f"the GPU; engines run in TensorRT.")  # fmt: skip
REQUIRE_AFT = ("Fail (exit 2) unless every AFT-like layer exports as a com.aft node: a layer with the parameters of a "
               "known AFT layer that does not compute it, or a model with no AFT layer, is an error instead of plain "
               "ONNX ops with a warning.")  # fmt: skip


@options_of("export")
class ExportOptions:
    """``export``'s options, each declared here: the command's parameters of these names are these fields."""

    opset: int = declare(Opset(MIN_OPSET), 18, help="ONNX opset (18 or newer: the AFT functions' ReduceMax and "
                                                    "ReduceSum take their axes as an input).")
    batch_dim: str = declare(Batch(hi=MAX_BATCH), "dynamic",
                             help="The graph's batch dimension: 'dynamic' or a fixed batch size.")
    dynamic_hw: bool = declare(Flag(), False, help="AFT-conv only: dynamic height and width.")
    op_form: str = declare(Choice(OP_FORMS), "custom",
                           help="custom: one com.aft node per AFT layer; decomposed: plain ONNX ops.")
    target: str = declare(Choice(TARGETS), DEFAULT_TARGET,
                          help="; ".join(f"{t.name}: {t.summary}" for t in EXPORT_TARGETS.values()) + ".")
    input_format: str = declare(
        Choice(INPUT_FORMATS), NORMALIZED,
        help="What the file takes: normalized images, or raw RGB pixels in 0-255 that its first nodes normalise "
             "(fp32): uint8-nhwc (uint8 N,H,W,3: applications, Triton clients) or float-nchw (float N,3,H,W: "
             "DeepStream's nvinfer); see docs/jetson.md.")
    output_format: str = declare(
        Choice(OUTPUT_FORMATS), LOGITS,
        help="What the file gives: logits, or probabilities (a Softmax, for DeepStream's classifier parser).")
    simplify: bool = declare(Flag(), True, off="--no-simplify", help="Run onnxsim.")
    allow_unsimplified: bool = declare(Flag(), False,  # continue without onnxsim if it fails
                                       help="Keep the unsimplified graph if onnxsim fails.")
    images: int = declare(ZERO_UP, 64,  # real images the export is verified on (0: none)
                          help="Real images to verify the export on (0: skip; the exit status is then 3, not verified).")
    # where they come from (None: the data rule, datasets.verification_data)
    data: str | None = declare(DATA, help="Images to verify on: ImageFolder directory or tar [default: a zoo "
                                          "checkpoint's test set].")
    require_aft: bool = declare(Flag(), False, help=REQUIRE_AFT)
    verify_atol: float = EXPORT_MAX_ABS
    external_data_threshold: int = TWO_GB  # bytes of weights above which .data is used

    def __post_init__(self) -> None:
        if self.target in TARGET_OPSETS and self.opset != 18:
            raise AFTExportError(said("the {form} form is always opset {value} (exported at 18, then converted); "
                                      "leave {opset} out with {target_set}", "export", form=self.target,
                                      target_set=Named("target", self.target), value=TARGET_OPSETS[self.target]))  # fmt: skip


# the pipeline's pixel files (PipelineOptions.pixel_forms, model.FORM*.onnx): each form's input and output formats
PIXEL_FORMS = {UINT8_NHWC: (UINT8_NHWC, LOGITS), FLOAT_NCHW: (FLOAT_NCHW, LOGITS),
               "deepstream": (FLOAT_NCHW, PROBABILITIES)}  # fmt: skip


# ---------------------------------------------------------------- quantisation

PRECISIONS = ("int8", "fp16")  # what quantize makes
# what an int8 graph computes in outside its int8 layers (QuantizeOptions.rest_precision)
REST_PRECISIONS = ("fp16", "fp32")
OP_TYPE = Form(pattern=r"[A-Za-z][A-Za-z0-9_]*", what="an ONNX op type such as MatMul or Conv", example="MatMul")
# what int8 quantises when QuantizeOptions.quantize_op_types is left out: the projections, the MLP, the
# patch embedding and the head (aft_export/quantization/placement.py)
QUANTIZED_OP_TYPES = ("MatMul", "Gemm", "Conv")
CALIB_COUNT = 512  # calibration images when neither the command line nor the recipe says
CALIB_SEED = 0  # the calibration sample's seed, likewise
METHODS = ("minmax", "entropy", "percentile")


# the options only an int8 run reads, and what each decides: given with fp16 (not left at its default), refused
INT8_ONLY = {
    "exclude_regex": "it chooses what int8 covers", "exclude_op_types": "it chooses what int8 covers",
    "quantize_op_types": "it chooses what int8 covers", "rest_precision": "it chooses what an int8 graph computes "
    "outside its int8 layers", "weight_bits": "the bits of the int8 weights", "method": "how int8 ranges are "
    "calibrated", "percentile": "how int8 ranges are calibrated", "per_channel": "how int8 weights are scaled",
    "stem_fp32": "whether the stem is kept out of int8", "quantize_aft_core": "whether the AFT core is quantised",
    "sensitivity": "it keeps the nodes worst in int8 out of it", "budget": "the accuracy the sensitivity search keeps",
}  # fmt: skip


@renamed_fields({"count": "images"})
@options_of("quantize")
class QuantizeOptions:
    """``quantize``'s options, each declared here (:func:`~aft_export.options.params.declare`): the command's
    parameters of the same names are these fields (:data:`aft_export.options.commands.QUANTIZE`)."""

    precision: str = declare(Choice(PRECISIONS), "int8", cli_required=True,
                             help="int8: explicit Q/DQ, the rest in --rest-precision; fp16: mixed precision (AFT "
                                  "core and LayerNorm in fp32).")
    method: str = declare(Choice(METHODS), "percentile", help="int8 range calibration.")
    percentile: float = declare(Number(0, 100, lo_open=True), 99.999, help="For --method percentile.")
    images: int | None = declare(Whole(1), help=f"Calibration images to sample [default: the recipe's, else "
                                                f"{CALIB_COUNT}].")
    batch_size: int = declare(Whole(1), 32, help="Calibration batch size.")
    seed: int | None = declare(SEED, help=f"Seed of the calibration sample [default: the recipe's, else {CALIB_SEED}].")
    per_channel: bool = declare(Flag(), True, off="--per-tensor", help="int8 weight scales.")
    # int8 weights in 8 bits, or 7 (ORT's reduce_range): None, the target's ExportTarget.int8_weight_bits
    # (7 for portable, 8 otherwise). OpenVINO's CPU int8 kernels on x86 without VNNI (AVX2, AVX-512F) sum pairs of
    # u8 x s8 products in saturating 16 bits, which full-range weights overflow (measured:
    # cosine 0.33 against PyTorch on aft_conv_cifar, AVX2 AMD EPYC); 7-bit weights cannot
    # overflow and give ONNX Runtime's result there. TensorRT has no such limit: its targets
    # keep 8 bits.
    weight_bits: int | None = declare(
        Choice((7, 8)), help="int8: weights in 8 bits, or 7 (no overflow in OpenVINO's int8 kernels on CPUs without "
        "VNNI) [default: " + ", ".join(f"{t.int8_weight_bits} for {n}" for n, t in EXPORT_TARGETS.items()) + "].")
    # int8: keep the stem (the graph's first MatMul/Gemm/Conv) out of int8; None: the target's
    # ExportTarget.int8_stem_fp32 (the portable target's 7-bit int8 keeps it)
    stem_fp32: bool | None = None
    target: str | None = declare(
        Choice(TARGETS), help="The export target the file is for; it decides int8's defaults (--rest-precision, "
        "--weight-bits). Another target than the fp32 file's puts the graph in that target's form first (from the "
        "default tensorrt export only): --target portable makes the CPU's int8 (rest fp32, 7-bit weights) [default: "
        "the fp32 file's target].")
    exclude: tuple[str, ...] = declare(Text(), (), repeat=True,
                                       help="Node name to keep out of int8 (int8), or in fp32 (fp16) (repeatable).")
    exclude_regex: tuple[str, ...] = declare(
        Pattern(), (), repeat=True, metavar="REGEX",
        help="int8: keep the nodes whose names this regular expression matches (from the start, as re.match and "
             "ModelOpt's --nodes_to_exclude) out of int8 (repeatable).")
    exclude_op_types: tuple[str, ...] = declare(OP_TYPE, (), repeat=True, flag="--exclude-op-type", metavar="OP",
                                                help="int8: keep every node of this op type out of int8 (repeatable).")
    quantize_op_types: tuple[str, ...] = declare(
        OP_TYPE, (), repeat=True, flag="--quantize-op-type", metavar="OP",
        help=f"int8: an op type to quantise (repeatable) [default: {', '.join(QUANTIZED_OP_TYPES)}].")
    keep_fp32: tuple[str, ...] = declare(
        Pattern(), (), repeat=True, metavar="REGEX",
        help="Keep the nodes whose names this regular expression matches in fp32: out of int8 and out of fp16 "
             "(repeatable).")
    rest_precision: str | None = declare(
        Choice(REST_PRECISIONS), help="int8: what the graph computes in outside its int8 layers; fp16 keeps the AFT "
        "core and LayerNorm in fp32 (opset 19, fp16 scales) [default: "
        + ", ".join(f"{t.int8_rest} for {n}" for n, t in EXPORT_TARGETS.items()) + "].")
    quantize_aft_core: bool = declare(
        Flag(), False, help="int8: quantise the AFT core too (inlines the com.aft functions): faster in OpenVINO on "
        "AFT-full and AFT-local, slower elsewhere (docs/quantize.md); bench --reference says which on your CPU.")
    sensitivity: bool = declare(Flag(), False, help="int8: rank nodes, keep the worst in float until --budget.")
    budget: float = declare(Number(0, 100), 0.5,  # % top-1 disagreement with fp32 on the calibration images
                            help="Sensitivity: allowed % top-1 disagreement with fp32 on the calibration images.")
    allow_fewer: bool = declare(Flag(), False, help="Use fewer calibration images if the source has fewer.")
    cache_dir: str | None = declare(Path("directory", empty="no cache"),
                                    help="Calibration cache [default: ~/.cache/aft-export/calibration].")
    input_size: int | None = declare(SIDE, help="For models without aft-export metadata: square input size.")
    mean: tuple[float, ...] | None = declare(Triple(), help="For models without metadata: r,g,b mean of (x / 255).")
    std: tuple[float, ...] | None = declare(Triple(positive=True), help="For models without metadata: r,g,b std.")

    def __post_init__(self) -> None:
        if self.precision == "fp16":  # an option only int8 reads, given: refused, never silently ignored
            defaults = {f.name: f.default for f in fields(self)}
            given = [n for n in INT8_ONLY if getattr(self, n) != defaults[n]]
            if given:
                value = getattr(self, given[0])
                option = Named(given[0], value) if isinstance(value, bool) else Named(given[0])  # a switch: as set
                raise AFTExportError(said("{option} is an int8 option ({what}); an fp16 graph has no int8 layers and "
                                          "takes no calibration method: leave it out (keep nodes in fp32 with "
                                          "{keep_fp32})", "quantize", option=option, what=INT8_ONLY[given[0]]))  # fmt: skip


# ---------------------------------------------------------------- TensorRT builds

HW_LEVELS = ("none", "ampere+", "same-cc")


@renamed_fields({"batch": "batch_profile", "hw": "hw_profile"})
@options_of("build")
class BuildOptions:
    """``build``'s options, each declared here: the command's parameters of these names are these fields."""

    batch_profile: str | None = declare(Text(), "1,8,32", help="The engine's batch sizes MIN,OPT,MAX (or one number).")
    hw_profile: str | None = declare(Text(), help="AFT-conv exported with --dynamic-hw: height/width MIN,OPT,MAX.")
    workspace_mb: int = declare(Whole(1), 1024, help="Builder workspace limit.")
    timing_cache: str | None = declare(Path(), help="Timing cache file: loaded if present, saved after.")
    dla_core: int | None = declare(Whole(0), help="Jetson: build for this DLA core, with GPU fallback.")
    version_compatible: bool = declare(
        Flag(), False, help="Engine loadable by later TensorRT of the same major, and 10.x engines by 11.x (8.6 by "
        "10.x); needs TensorRT 8.6+.")
    # TF32 math for fp32 matrix products and convolutions (Ampere+). TensorRT enables it by
    # default; it is a precision the graph does not say (~1e-3 relative error, outside the
    # fp32 parity limit), so it is off unless asked for.
    tf32: bool = declare(Flag(), False, help="Allow TF32 for fp32 math (Ampere+: faster, ~1e-3 relative error).")
    hardware_compatibility: str = declare(Choice(tuple(sorted(HW_LEVELS))), "none",
                                          help="Engine loadable on other GPUs of that level.")
    library: str = declare(
        Choice(LIBRARIES), "auto", help="tensorrt: standard TensorRT (builds on the GPU it is for; Hopper, Jetson); "
        "tensorrt-rtx: TensorRT for RTX (builds ahead of time on any CPU, runs on RTX GPUs); auto: TensorRT where "
        "installed, else TensorRT-RTX.")
    compute_capabilities: tuple[str, ...] = declare(
        Form(pattern=r"[0-9]{1,2}\.[0-9]", what="a compute capability MAJOR.MINOR such as 8.6 or 7.5", example="8.6"),
        (), repeat=True, flag="--compute-capability", metavar="X.Y",
        help="TensorRT-RTX: target GPU (repeatable; 7.5, 8.0, 8.6, 8.9, 12.0, 12.1) [default: the library's, 8.6 and "
             "later].")


# ---------------------------------------------------------------- pipeline, training


TOLERANCE = "PREC.FIELD=VALUE"  # a parity limit's override, as the command line takes it
PIPELINE_PRECISIONS, PIPELINE_TARGETS, PIPELINE_BATCHES = ("fp16", "int8"), ("tensorrt",), (1, 32)


@renamed_fields({"bench_batches": "bench_batch_sizes"})
@options_of("pipeline")
class PipelineOptions:
    """``pipeline``'s options, each declared here: the command's parameters of these names are these fields
    (``gives``: the stages' keywords each one sets, so that a stage's message names the pipeline's flag)."""

    output: str | None = declare(Path("directory"), short="-o",
                                 help="Run directory [default: runs/<model>-<UTC time>].")
    calib: str | None = declare(DATA, help="Calibration images or recipe [default: calibration/cifar10.json].")
    data: str | None = declare(DATA, help="Labelled images for parity and eval [default: the checkpoint's test data, "
                                          "else cifar10:test].")
    precisions: tuple[str, ...] = declare(
        Choice(tuple(sorted(PRECISIONS))), PIPELINE_PRECISIONS, repeat=True, flag="--precision", show_default=False,
        help=f"Reduced precisions to build [default: {' and '.join(PIPELINE_PRECISIONS)}].")
    op_form: str = declare(Choice(OP_FORMS), "custom", show_default=False, help="[default: custom]")
    targets: tuple[str, ...] = declare(
        Choice(TARGETS), PIPELINE_TARGETS, repeat=True, flag="--target", show_default=False,
        gives=(("export", "target"), ("quantize", "target")),
        help="Export target(s), repeatable: " + ", ".join(f"{t.name} ({t.stem}*.onnx)" for t in EXPORT_TARGETS.values())
             + f" [default: {', '.join(PIPELINE_TARGETS)}]; see export --help.")
    calib_images: int | None = declare(Whole(1), gives=(("quantize", "images"),),  # None: the recipe's count
                                       help="Calibration images to sample [default: the recipe's].")
    eval_images: int | None = declare(Whole(1), gives=(("eval", "images"),),  # None: the whole labelled set
                                      help="Evaluate a fixed subset of N images [default: all].")
    parity_images: int = declare(Whole(1), 64, show_default=False, gives=(("parity", "images"), ("export", "images")),
                                 help="Real images parity compares [default: 64].")
    bench_batch_sizes: tuple[int, ...] = declare(
        Whole(1), PIPELINE_BATCHES, repeat=True, nonempty=True, flag="--bench-batch-size", show_default=False,
        gives=(("bench", "batch_sizes"),),
        help=f"Bench batch sizes [default: {' and '.join(map(str, PIPELINE_BATCHES))}].")
    bench_iters: int = declare(Whole(1), 30, show_default=False, gives=(("bench", "iters"),),
                               help="Bench runs per batch size [default: 30].")
    threads: int = declare(THREADS, 0, show_default=False, help="CPU threads (0: the backend's default) [default: 0].")
    tolerances: tuple[str, ...] = declare(Text(), (), repeat=True, flag="--tolerance", metavar=TOLERANCE,
                                          help="Parity limit override.")
    triton_repo: bool = declare(Flag(), False, help="Also write RUN/triton: a Triton model repository of the "
                                                   "artifacts (aft-export triton-repo).")
    pixel_forms: tuple[str, ...] = declare(
        Choice(tuple(PIXEL_FORMS)), (), repeat=True, flag="--pixel-form", show_default=False,
        help="Also make files that take raw RGB pixels (0-255), at every target and precision, repeatable: "
             "uint8-nhwc (model.uint8-nhwc*.onnx), float-nchw (model.float-nchw*.onnx), deepstream (float "
             "pixels in, probabilities out: model.deepstream*.onnx, with RUN/deepstream/); see docs/jetson.md.")
    require_aft: bool = declare(Flag(), False, help=REQUIRE_AFT)  # ExportOptions.require_aft


@options_of("train")
class TrainConfig:
    """``train``'s options, each declared here: the command's parameters are these fields."""

    model: str = declare(Text(), REQUIRED, help="Registry config name (`aft-export models`).")
    data: str = declare(DATA, REQUIRED, help="ImageFolder directory or tar.")
    output: str = declare(Path(), REQUIRED, short="-o", help="Checkpoint to write.")
    epochs: int = declare(Whole(1), 12)
    batch_size: int = declare(Whole(1), 128)
    lr: float = declare(Number(0, lo_open=True), 2e-3)
    weight_decay: float = declare(Number(0), 0.05)
    warmup_epochs: float = declare(Number(0), 1.0)
    label_smoothing: float = declare(Number(0, 1, hi_open=True), 0.1)
    val_fraction: float = declare(Number(0, 1, hi_open=True), 0.1, help="Held-out validation share.")
    seed: int = declare(SEED, 0)
    threads: int = declare(THREADS, 0, show_default=False, help="Torch CPU threads (0: default).")
    test_data: str | None = declare(DATA, help="Labelled test set evaluated at the end.")
    images: int | None = declare(Whole(1), help="Train on the first N images only (smoke tests).")
    resume: str | None = declare(Path(), in_place=True, help="Continue from an epoch checkpoint (it may be --output "
                                                            "itself: the run goes on in place).")
    progress: bool = declare(Flag(), True, off="--no-progress", help="A progress bar on stderr.")


# ---------------------------------------------------------------- checks and measurements


@options_of("parity")
class ParityOptions:
    images: int = declare(Whole(1), 64, help="Number of real images.")  # real images compared
    backend: str = declare(BACKEND, DEFAULT_BACKEND, help=BACKEND_HELP)  # where ONNX files run


@options_of("eval")
class EvalOptions:
    batch_size: int = declare(Whole(1), 500)
    backend: str = declare(BACKEND, DEFAULT_BACKEND, help=BACKEND_HELP)


@renamed_fields({"batches": "batch_sizes"})
@options_of("bench")
class BenchOptions:
    """``bench``'s options and the pipeline's bench; its fields of the command's names are its parameters."""

    batch_sizes: tuple[int, ...] = declare(Whole(1), (1, 32), repeat=True, nonempty=True, flag="--batch-size",
                                           help="Batch size to time (repeatable).")
    backend: str = declare(BACKEND, DEFAULT_BACKEND, help=BACKEND_HELP)
    # runs before timing, for `aft-export bench` and the pipeline's bench alike (the pipeline
    # used 5 of its own): first runs pay for ONNX Runtime's arena growth, thread-pool start
    # and, on a GPU, clocks ramping up; 10 keeps both reports' latencies comparable
    warmup: int = declare(ZERO_UP, 10)
    iters: int = declare(Whole(1), 50)
    # the deploy table (aft_export.verify.deploy) times its rows in this many interleaved rounds, each row once a
    # round in turn, so that a change of load falls on every row alike
    rounds: int = 5
    reference: str | None = declare(
        Model(), help="The checkpoint the files were made from: the deploy table, every file on every runtime here, "
        "proven against it (parity, top-1) and timed, the fastest that passes marked per device.")
    data: str | None = declare(DATA, help="With --reference: labelled images for parity and top-1 [default: the "
                                          "checkpoint's test data, else cifar10:test].")
    images: int = declare(Whole(1), 1000)


@options_of("doctor")
class DoctorOptions:
    """``aft-export doctor``: every check in one run directory (aft_export/workflow/doctor.py); each option
    declared here."""

    output: str | None = declare(Path("directory"), short="-o",  # default: runs/doctor-<model>-<UTC time>
                                 help="Run directory [default: runs/doctor-<model>-<UTC time>].")
    data: str | None = declare(DATA, help="Labelled images for the export's verification, parity and eval [default: "
                                          "the checkpoint's test data, else cifar10:test].")
    calib: str | None = declare(DATA, help="Calibration images or recipe [default: calibration/cifar10.json].")
    calib_images: int | None = declare(Whole(1), help="Calibration images to sample [default: the recipe's].")
    parity_images: int = declare(Whole(1), 64)
    eval_images: int | None = declare(Whole(1), help="Evaluate a fixed subset of N images [default: all].")
    bench_iters: int = declare(Whole(1), 50, help="Bench runs per batch size.")
    timeout: float = declare(Number(0, lo_open=True), 3600.0, help="Seconds one check may take.")


# ---------------------------------------------------------------- serving (NVIDIA Triton)

# a dynamic-batch ONNX file is served (and written to a Triton repository) with batches up to
# this many images; an engine's maximum is its optimisation profile's, a fixed-batch export's
# its batch (no batching)
DEFAULT_MAX_BATCH = 32
TRITON_DEVICES = ("auto", "gpu", "cpu")  # a repository's instance kind: KIND_AUTO, KIND_GPU, KIND_CPU


@dataclass(frozen=True)
class TritonFields:
    """The fields ``serve`` and ``triton-repo`` both declare, each once, here."""

    max_batch: int | None = declare(Whole(1, MAX_BATCH),  # None: DEFAULT_MAX_BATCH, or an engine's profile maximum
                                    help=f"Largest batch [default: {DEFAULT_MAX_BATCH} for a dynamic-batch ONNX file, "
                                         f"an engine's profile maximum; a fixed-batch export is served without "
                                         f"batching].")
    instances: int = declare(Whole(1), 1, help="Model instances (one runner each).")  # per served model
    top_k: int = declare(Whole(1), 5, help="Classes in topk_index and topk_label.")
    # how long the dynamic batcher holds a request for others to join it: none (measured with
    # benchmarks/bench_serve.py: a delay adds itself to every request at one client, and under
    # load the requests that queue while a batch runs are batched anyway)
    queue_delay_us: int = declare(ZERO_UP, 0, help="How long the dynamic batcher holds a request for others to join "
                                                   "it.")


@options_of("serve")
class ServeOptions(TritonFields):
    """``serve``'s options, each declared here: the command's parameters of these names are these fields."""

    # loopback only: Triton's own default is every interface (0.0.0.0)
    host: str = declare(Text(), "127.0.0.1", help="Address HTTP, gRPC and metrics listen on (0.0.0.0: every "
                                                  "interface).")
    http_port: int = declare(PORT, 8000)
    grpc_port: int = declare(PORT, 8001)
    metrics_port: int = declare(PORT, 8002)
    backend: str = declare(BACKEND, DEFAULT_BACKEND, help=f"Where ONNX files run, inside Triton's Python backend "
                                                          f"stub: {BACKEND_LIST}; engines run in TensorRT.")
    provider: str | None = None  # the old word for `backend` (cpu, cuda, tensorrt), for one release: read into it
    threads: int = declare(THREADS, 0, help="Threads per model instance, ONNX Runtime's or OpenVINO's (0: the CPUs this "
                                            "process may use, shared out among the instances of every model; printed "
                                            "at start).")
    drain_seconds: int = declare(Whole(0, 3600), 30,
                                 help="On SIGINT/SIGTERM, how long Triton waits for the requests in flight.")
    # how an ONNX file another tool wrote is fed (None: the JSON beside it)
    preprocessing: ForeignPreprocessing | None = None

    def __post_init__(self) -> None:
        if len({self.http_port, self.grpc_port, self.metrics_port}) < 3:
            raise AFTExportError("the HTTP, gRPC and metrics ports must differ")
        object.__setattr__(self, "backend", backend_of(self.backend, self.provider))
        object.__setattr__(self, "provider", None)


@options_of("triton-repo")
class TritonRepoOptions(TritonFields):
    """``triton-repo``'s options, each declared here: the command's parameters of these names are these fields."""

    device: str = declare(Choice(TRITON_DEVICES), "auto",
                          help="Where ONNX models run (instance_group kind; auto: Triton's KIND_AUTO, the GPUs where "
                               "there are any, else the CPU); engines always on the GPU.")
    backend: str = declare(Choice(TRITON_BACKENDS), DEFAULT_BACKEND,
                           help="Triton's backend for ONNX files: onnxruntime (onnxruntime_onnx, CPU or GPU) or openvino "
                                "(CPU; the file with its functions inlined, a complete config).")
    threads: int = declare(THREADS, 0, help="Threads per instance: ONNX Runtime's intra_op_thread_count, OpenVINO's "
                                            "INFERENCE_NUM_THREADS (0: the backend's default, the container's cores; "
                                            "with --instances N give cores/N).")

    def __post_init__(self) -> None:
        triton = RUNTIMES[self.backend].triton_backend
        if triton.cpu_only and self.device == "gpu":
            raise AFTExportError(said("Triton's {name} backend runs on the CPU; leave {device} out (or give "
                                      "{device_set}) with {backend_set}", "triton-repo", name=triton.name,
                                      device_set=Named('device', 'cpu'), backend_set=Named('backend', self.backend)))  # fmt: skip
