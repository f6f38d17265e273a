"""What DeepStream's ``nvinfer`` reads and does, per release, from NVIDIA's own sources: the keys of its
``[property]`` group we write (:data:`KEYS`), the releases (:data:`RELEASES`), the scaling filters
(:data:`FILTERS`) and compute units (:data:`COMPUTE`), the name it gives an engine it builds itself, and
what that build does (:func:`own_build`). ``aft_export.serving.deepstream`` writes configs from these tables;
nothing here decides a value from anything but them.

Sources read (nothing of them copied):

- DeepStream 6.3: the SDK's ``sources/`` as extracted from its container in the public repository
  github.com/hiennguyen9874/deepstream-sources, branch 6.3 (run through clang-format there, so its line
  numbers are not NVIDIA's: the functions and strings are); cited as [6.3].
- DeepStream 9.0 and 9.1: github.com/NVIDIA/DeepStream, tags v9.0.0 and v9.1.0, ``src/gst-plugins/gst-nvinfer/``,
  ``src/utils/nvdsinfer/``, ``includes/``; cited as [9.x] with 9.0's line numbers (the parser, the builder and
  the context are byte-identical in 9.1).
- No source of DeepStream 7.0, 7.1 or 8.0's nvinfer was found (neither repository has them; NVIDIA's API
  reference lists 7.0's key names only). Their configs use only the keys 6.3's parser reads, which 9.x's
  still reads; what their nvinfer does when it builds an engine is not shown by any source, and is said so.
"""

from __future__ import annotations

from dataclasses import dataclass

from aft_export.options.deepstream import (C_INT_MAX, DEEPSTREAM_RELEASES, NVINFER_MAX_BATCH, SCALING_FILTERS,
                                           SCALING_HW)  # fmt: skip
from aft_export.trtcheck.versions import JETPACKS, JetPack

P63 = "[6.3] gstnvinfer_property_parser.cpp"
P9 = "[9.x] gstnvinfer_property_parser.cpp"
GST63, GST9 = "[6.3] gstnvinfer.cpp", "[9.x] gstnvinfer.cpp"
BUILDER63, BUILDER9 = "[6.3] nvdsinfer_model_builder.cpp", "[9.x] nvdsinfer_model_builder.cpp"
CONTEXT9 = "[9.x] nvdsinfer_context_impl.cpp"
# the largest batch-size nvinfer takes: NVDSINFER_MAX_BATCH_SIZE ([6.3] nvdsinfer_context.h:106, [9.x] :112),
# checked by the parser's CONFIG_GROUP_INFER_BATCH_SIZE branch ([6.3] 602-617, [9.x] 657-673); every other
# integer key is a gint (g_key_file_get_integer), at most C_INT_MAX
MAX_BATCH = NVINFER_MAX_BATCH


@dataclass(frozen=True)
class Key:
    """A key of nvinfer's ``[property]`` group that we write: its GKeyFile type, the values it takes (empty:
    any of the type), what it means, and where the parser reads it."""

    name: str
    type: str  # integer, double, boolean, string, integer list, double list, string list
    values: tuple = ()
    meaning: str = ""
    source: str = ""


def _read(macro: str, getter: str, line63: str, line9: str, note: str = "") -> str:
    return (f"{P63} {line63} and {P9} {line9}: {macro}, g_key_file_get_{getter}" + (f"; {note}" if note else ""))


KEYS = {k.name: k for k in (
    Key("gpu-id", "integer", (), "the GPU", _read("CONFIG_GROUP_INFER_GPU_ID", "integer", "559-579", "609-631")),
    Key("gie-unique-id", "integer", (), "this element's id (> 0)",
        _read("CONFIG_GROUP_INFER_UNIQUE_ID", "integer", "534-547", "582-596", "must be > 0")),
    Key("process-mode", "integer", (1, 2), "1 primary (whole frames), 2 secondary (objects a detector found)",
        _read("CONFIG_GROUP_INFER_PROCESS_MODE", "integer", "301-318", "337-355")),
    Key("network-type", "integer", (1,), "1 classifier", _read("CONFIG_GROUP_INFER_NETWORK_TYPE", "integer", "", "")),
    Key("onnx-file", "string", (), "the ONNX file nvinfer builds an engine from when it has none",
        _read("CONFIG_GROUP_INFER_ONNX", "string", "1005-1015", "1127-1138", "relative to the config file")),
    Key("model-engine-file", "string", (), "the engine nvinfer deserialises",
        _read("CONFIG_GROUP_INFER_MODEL_ENGINE", "string", "664-676", "723-736", "relative to the config file")),
    Key("labelfile-path", "string", (), "the labels file",
        _read("CONFIG_GROUP_INFER_LABEL", "string", "548-558", "597-608")),
    Key("batch-size", "integer", (), f"the largest batch (1 to {MAX_BATCH})",
        _read("CONFIG_GROUP_INFER_BATCH_SIZE", "integer", "602-617", "657-673", "1 to NVDSINFER_MAX_BATCH_SIZE")),
    Key("network-mode", "integer", (0, 1, 2), "0 fp32, 1 int8, 2 fp16: the builder flags of nvinfer's own build",
        _read("CONFIG_GROUP_INFER_NETWORK_MODE", "integer", "647-663", "705-722", "9.x also 3, best")),
    Key("strongly-typed", "boolean", (), "nvinfer's own build is strongly typed: the graph's types decide",
        _read("CONFIG_GROUP_INFER_STRONGLY_TYPED", "boolean", "(absent)", "1255-1259",
              "[9.x] nvdsinfer_model_builder.cpp:740-747 adds kSTRONGLY_TYPED")),
    Key("infer-dims", "integer list", (), "the input's C;H;W",
        _read("CONFIG_GROUP_INFER_INFER_DIMENSIONS", "integer_list", "632-646", "689-704", "3 values, c;h;w")),
    Key("model-color-format", "integer", (0,), "0 RGB",
        _read("CONFIG_GROUP_INFER_MODEL_COLOR_FORMAT", "integer", "729-748", "840-859")),
    Key("net-scale-factor", "double", (), "y = net-scale-factor * (x - offsets)",
        _read("CONFIG_GROUP_INFER_SCALE_FACTOR", "double", "749-752", "860-864")),
    Key("offsets", "double list", (), "per-channel offsets",
        _read("CONFIG_GROUP_INFER_OFFSETS", "double_list", "753-769", "865-882")),
    Key("maintain-aspect-ratio", "boolean", (), "pad to keep the aspect ratio (0: stretch)",
        _read("CONFIG_GROUP_INFER_MAINTAIN_ASPECT_RATIO", "boolean", "352-356", "392-396")),
    Key("scaling-filter", "integer", tuple(range(7)), "the filter frames or objects are scaled with",
        _read("CONFIG_GROUP_INFER_SCALING_FILTER", "integer", "455-474", "503-522",
              "NvBufSurfTransform_Inter, 0 to 6; absent: 6, NvBufSurfTransformInter_Default ([6.3] gstnvinfer.cpp:414, "
              "[9.x] :440)")),
    Key("scaling-compute-hw", "integer", (0, 1, 2), "0 default (VIC on Jetson, GPU on dGPU), 1 GPU, 2 VIC",
        _read("CONFIG_GROUP_INFER_SCALING_COMPUTE_HW", "integer", "437-454", "485-502",
              "NvBufSurfTransform_Compute; 2 (VIC) only where built for aarch64")),
    Key("output-blob-names", "string list", (), "the output the classifier parser reads",
        _read("CONFIG_GROUP_INFER_OUTPUT_BLOB_NAMES", "string_list", "688-695", "749-756")),
    Key("classifier-threshold", "double", (), "a label is attached above this probability (>= 0)",
        _read("CONFIG_GROUP_INFER_CLASSIFIER_THRESHOLD", "double", "1072-1082", "1195-1206", "negative refused")),
    Key("operate-on-gie-id", "integer", (), "classify the objects of the element of this gie-unique-id (-1: any)",
        _read("CONFIG_GROUP_INFER_GIE_ID_FOR_OPERATION", "integer", "400-406", "446-453",
              "absent: -1, DEFAULT_OPERATE_ON_GIE_ID ([6.3] gstnvinfer.cpp:94, [9.x] :101)")),
    Key("operate-on-class-ids", "integer list", (), "classify objects of these classes only (absent: every class)",
        _read("CONFIG_GROUP_INFER_CLASS_IDS_FOR_OPERATION", "integer_list", "407-425", "454-473",
              "should_infer_object: an empty list infers on every class ([9.x] gstnvinfer.cpp:1871-1877)")),
    Key("input-object-min-width", "integer", (), "objects narrower than this are not classified",
        _read("CONFIG_GROUP_INFER_INPUT_OBJECT_MIN_WIDTH", "integer", "362-380", "402-423", "negative refused")),
    Key("input-object-min-height", "integer", (), "objects lower than this are not classified",
        _read("CONFIG_GROUP_INFER_INPUT_OBJECT_MIN_HEIGHT", "integer", "362-380", "402-423", "negative refused")),
)}  # fmt: skip
SECONDARY_KEYS = ("operate-on-gie-id", "operate-on-class-ids", "input-object-min-width", "input-object-min-height")


@dataclass(frozen=True)
class Filter:
    """A ``scaling-filter`` value (NvBufSurfTransform_Inter, nvbufsurftransform.h: [6.3] 73-90, [9.x] 87-106):
    what it is on the GPU and on VIC as the header's comment says, and the PIL filter that stands in for it when
    the scaling is measured on a CPU (``pil``; ``approximates`` says where that is not the same filter)."""

    name: str
    value: int
    gpu: str
    vic: str
    pil: str
    approximates: str = ""


# what each value of NvBufSurfTransform_Inter is, in the order of its values (its names: SCALING_FILTERS)
_FILTER_FACTS = (
    ("nearest", "nearest", "NEAREST", ""),
    ("bilinear", "bilinear", "BILINEAR", ""),
    ("cubic (GPU-Cubic)", "5-tap (VIC-5 Tap)", "BICUBIC", "VIC's 5-tap filter is approximated by PIL's bicubic"),
    ("supersampling (GPU-Super)", "10-tap (VIC-10 Tap)", "BOX",
     "GPU-Super and VIC's 10-tap filter are approximated by PIL's box (area) filter"),
    ("Lanczos (GPU-Lanzos, sic)", "VIC-Smart", "LANCZOS", "VIC-Smart is approximated by PIL's Lanczos"),
    ("ignored (GPU-Ignored)", "VIC-Nicest", "LANCZOS",
     "VIC-Nicest is approximated by PIL's Lanczos; on the GPU the filter is ignored"),
    ("nearest (GPU-Nearest)", "nearest (VIC-Nearest)", "NEAREST", ""),
)
FILTERS = {name: Filter(name, value, *facts) for value, (name, facts) in enumerate(zip(SCALING_FILTERS,
                                                                                        _FILTER_FACTS, strict=True))}
NVINFER_DEFAULT_FILTER = "default"  # what nvinfer scales with when no scaling-filter is written


@dataclass(frozen=True)
class Compute:
    """A ``scaling-compute-hw`` value (NvBufSurfTransform_Compute, nvbufsurftransform.h [6.3] 38-48, [9.x] 49-60)."""

    name: str
    value: int
    meaning: str


_COMPUTE_FACTS = ("VIC on Jetson, the GPU on x86: NvBufSurfTransformCompute_Default",
                  "the GPU: NvBufSurfTransformCompute_GPU",
                  "VIC, Jetson only: NvBufSurfTransformCompute_VIC, which the parser refuses where not built for aarch64")
COMPUTE = {name: Compute(name, value, facts) for value, (name, facts) in enumerate(zip(SCALING_HW, _COMPUTE_FACTS,
                                                                                        strict=True))}  # fmt: skip


@dataclass(frozen=True)
class Release:
    """A DeepStream release we write configs for: its Jetson (:class:`~aft_export.trtcheck.versions.JetPack`, whose
    TensorRT the file must be readable by), the dGPU TensorRT it ships, the keys of :data:`KEYS` its parser reads,
    whether nvinfer builds strongly typed networks, the smallest object it classifies on Jetson, and where all this
    was read (``source``; ``sourced`` False: no source of its nvinfer was found)."""

    name: str  # "6.3"
    jetpack: JetPack
    dgpu_tensorrt: str
    reads: frozenset
    strongly_typed: bool
    min_object: str  # the floor nvinfer puts on input-object-min-width/height, in words
    source: str
    sourced: bool = True

    @property
    def title(self) -> str:
        return f"DeepStream {self.name}"


_BASE = frozenset(KEYS) - {"strongly-typed"}  # what 6.3's parser reads of ours; 9.x's reads these too
_NO_SOURCE = ("no source of its nvinfer was found: its config uses only the keys DeepStream 6.3's parser reads, "
              "all of which 9.x's still reads (NVIDIA's API reference lists 7.0's key names)")
_MIN_63 = "16x16 whatever is written (MIN_INPUT_OBJECT_WIDTH/HEIGHT 16, [6.3] gstnvinfer.cpp:66-67, 845-849)"
_MIN_9 = ("1x1, but 16x16 on Jetson unless scaling-compute-hw is 1 (GPU) ([9.x] gstnvinfer.cpp:70-71, "
          "1044-1066)")


def _jetpack(deepstream: str) -> JetPack:
    return next(j for j in JETPACKS if j.deepstream == deepstream)


# what each release is, in the order of DEEPSTREAM_RELEASES; the dGPU TensorRT: github.com/NVIDIA-AI-IOT/
# deepstream_dockers (ds6.3, ds7.0, ds7.1: the x86 Dockerfiles' TENSORRT_VERSION), the 8.0 migration guide, the
# README of github.com/NVIDIA/DeepStream v9.0.0 and v9.1.0
_UNSOURCED = dict(strongly_typed=False, min_object="not shown by a source", source=_NO_SOURCE, sourced=False)
_RELEASE_FACTS = (
    dict(dgpu_tensorrt="8.5.3", reads=_BASE, strongly_typed=False, min_object=_MIN_63,
         source="github.com/hiennguyen9874/deepstream-sources branch 6.3 (the SDK's sources/)"),
    dict(dgpu_tensorrt="8.6.1", reads=_BASE, **_UNSOURCED),
    dict(dgpu_tensorrt="10.3.0", reads=_BASE, **_UNSOURCED),
    dict(dgpu_tensorrt="10.9.0", reads=_BASE, **_UNSOURCED),
    dict(dgpu_tensorrt="10.14.1", reads=frozenset(KEYS), strongly_typed=True, min_object=_MIN_9,
         source="github.com/NVIDIA/DeepStream tag v9.0.0"),
    dict(dgpu_tensorrt="10.16.0", reads=frozenset(KEYS), strongly_typed=True, min_object=_MIN_9,
         source="github.com/NVIDIA/DeepStream tag v9.1.0"),
)
RELEASES = {name: Release(name, _jetpack(name), **facts)
            for name, facts in zip(DEEPSTREAM_RELEASES, _RELEASE_FACTS, strict=True)}  # fmt: skip
NETWORK_MODE = {"fp32": 0, "int8": 1, "fp16": 2}
MODE_WORD = {0: "fp32", 1: "int8", 2: "fp16"}  # networkMode2Str ([6.3] nvdsinfer_func_utils.cpp:159-171)


def nvinfer_engine_name(onnx_name: str, batch: int, gpu: int, network_mode: int, fallback_fp16: bool = False) -> str:
    """The name nvinfer gives an engine it builds itself, beside the ONNX file: ``<onnx file name>_b<batch-size>
    _gpu<gpu-id>_<mode>.engine``, the mode being the one it built after its fallbacks ({BUILDER9} 607-616,
    [6.3] 717-724; an int8 mode without a calibration file builds fp16, ``fallback_fp16``)."""
    mode = "fp16" if fallback_fp16 else MODE_WORD[network_mode]
    return f"{onnx_name}_b{batch}_gpu{gpu}_{mode}.engine"


def own_build(release: Release, precision: str) -> list[str]:
    """What nvinfer does when it builds an engine of a ``precision`` file itself (the engine is missing, does
    not deserialise with this TensorRT, or its profile is smaller than batch-size), one sentence each, only as
    the sources show it."""
    if not release.sourced:
        return [f"What {release.title}'s nvinfer does when it builds its own engine is not shown by any source "
                f"aft-export could read; 6.3's and 9.x's set only the flags network-mode maps to."]
    if release.strongly_typed:
        return ["It creates a strongly typed network (strongly-typed=1; nvdsinfer_model_builder.cpp:740-747) and, "
                "network-mode being 0, sets no precision flag (configCommonOptions, :1025-1095): every layer runs in "
                "the type the graph gives it, fp16 tensors in fp16 and Q/DQ pairs in int8, as in the engine "
                "aft-export builds; it pins no layer to fp32 beyond what the graph's types say."]
    said = {
        "fp32": "network-mode 0 sets no precision flag (configCommonOptions, [6.3] "
                "nvdsinfer_model_builder.cpp:1028-1075): an fp32 engine.",
        "fp16": "network-mode 2 sets the FP16 flag (when the platform has fast fp16): a weakly typed network in which "
                "TensorRT may run any layer in fp16, not only those the graph types fp16; the layers aft-export's "
                "build pins to fp32 are not pinned.",
        "int8": "network-mode 1 without int8-calib-file: nvinfer warns 'INT8 calibration file not specified. Trying "
                "FP16 mode.' and sets the FP16 flag only ([6.3] nvdsinfer_model_builder.cpp:1041-1042), naming the "
                "engine ..._fp16.engine; whether TensorRT 8.x then builds the Q/DQ network without the INT8 flag is "
                "not shown by a source read here.",
    }
    return [said[precision]]


__all__ = ["COMPUTE", "C_INT_MAX", "FILTERS", "KEYS", "MAX_BATCH", "NETWORK_MODE", "RELEASES", "SECONDARY_KEYS", "Compute",
           "Filter", "Key", "Release", "nvinfer_engine_name", "own_build"]
