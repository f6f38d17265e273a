"""The options of ``aft-export deepstream`` and ``aft-export deepstream-check``, and the values they take:
nvinfer's scaling filters and compute units (facts of NVIDIA's ``nvbufsurftransform.h``, which
:mod:`aft_export.serving.nvinfer` describes with their sources) and the DeepStream releases a config is
written for. Pure data, like the rest of :mod:`aft_export.options`; values are checked at the door
(:mod:`aft_export.options.commands`), what depends on the file where the configs are written.
"""

from __future__ import annotations

from dataclasses import dataclass

DEEPSTREAM_MODES = ("primary", "secondary")  # whole frames (process-mode 1); objects a detector found (2)
# the releases a config is written for, oldest first (aft_export.serving.nvinfer.RELEASES holds what each is)
DEEPSTREAM_RELEASES = ("6.3", "7.0", "7.1", "8.0", "9.0", "9.1")
# scaling-filter by name (NvBufSurfTransform_Inter's values 0-6, in order; aft_export.serving.nvinfer.FILTERS)
SCALING_FILTERS = ("nearest", "bilinear", "cubic", "super", "lanczos", "nicest", "default")
SCALING_HW = ("default", "gpu", "vic")  # scaling-compute-hw by name (NvBufSurfTransform_Compute's 0, 1, 2)
NVINFER_MAX_BATCH = 1024  # NVDSINFER_MAX_BATCH_SIZE: the largest batch-size nvinfer's parser takes
C_INT_MAX = 2**31 - 1  # the largest value of a GKeyFile integer (a C int), nvinfer's other integer keys
MIN_OBJECT = 16  # DeepStream 6.3's floor on an object's size, MIN_INPUT_OBJECT_WIDTH/HEIGHT


@dataclass(frozen=True)
class DeepStreamOptions:  # a DeepStream nvinfer config (aft_export/serving/deepstream.py)
    mode: str = "primary"  # DEEPSTREAM_MODES
    # the DeepStream release (DEEPSTREAM_RELEASES); None: the oldest whose TensorRT reads the file's export target
    release: str | None = None
    batch_size: int = 1  # batch-size, and the engine's batch profile 1,N,N
    gpu_id: int = 0
    threshold: float = 0.0  # classifier-threshold: 0 attaches the top class to every frame or object, as infer does
    unique_id: int = 1  # gie-unique-id
    # scaling: the model was trained and proven on a bicubic resize; nvinfer's default is nearest neighbour.
    # cubic is GPU-Cubic on the GPU (VIC-5 Tap on VIC), and the GPU computes it: the filter closest to bicubic
    scaling_filter: str = "cubic"
    scaling_hw: str = "gpu"
    # secondary mode's object filters (None: their default there; refused in primary mode, which has no objects)
    operate_on_gie_id: int | None = None  # default 1: the detector NVIDIA's samples number 1
    operate_on_class_ids: tuple[int, ...] = ()  # () : objects of every class
    min_object_size: int | None = None  # default MIN_OBJECT, in every release alike
    # the measurement of nvinfer's scaling against aft-export's preprocessing, on labelled images (None: none)
    data: str | None = None
    images: int = 1000
    object_size: int | None = None  # each image resized to this square first (objects seen larger than the input)


SECONDARY_DEFAULTS = {"operate_on_gie_id": 1, "min_object_size": MIN_OBJECT}


@dataclass(frozen=True)
class DeepStreamCheckOptions:  # aft-export deepstream-check: a config's engine, on the device (serving/deepstream.py)
    library: str = "auto"  # LIBRARIES: which TensorRT deserialises the engine
