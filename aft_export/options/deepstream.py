"""The options of ``aft-export deepstream`` and ``aft-export deepstream-check``, and the values they take:
nvinfer's scaling filters and compute units (facts of NVIDIA's ``nvbufsurftransform.h``, which
:mod:`aft_export.serving.nvinfer` describes with their sources) and the DeepStream releases a config is
written for. Pure data, like the rest of :mod:`aft_export.options`; values are checked at the door
(:mod:`aft_export.options.commands`), what depends on the file where the configs are written.
"""

from __future__ import annotations

from aft_export.options.params import Choice, Number, Path, Whole, declare, options_of
from aft_export.options.targets import LIBRARIES
from aft_export.readers import MAX_SIDE

DEEPSTREAM_MODES = ("primary", "secondary")  # whole frames (process-mode 1); objects a detector found (2)
# the releases a config is written for, oldest first (aft_export.serving.nvinfer.RELEASES holds what each is)
DEEPSTREAM_RELEASES = ("6.3", "7.0", "7.1", "8.0", "9.0", "9.1")
# scaling-filter by name (NvBufSurfTransform_Inter's values 0-6, in order; aft_export.serving.nvinfer.FILTERS)
SCALING_FILTERS = ("nearest", "bilinear", "cubic", "super", "lanczos", "nicest", "default")
SCALING_HW = ("default", "gpu", "vic")  # scaling-compute-hw by name (NvBufSurfTransform_Compute's 0, 1, 2)
NVINFER_MAX_BATCH = 1024  # NVDSINFER_MAX_BATCH_SIZE: the largest batch-size nvinfer's parser takes
C_INT_MAX = 2**31 - 1  # the largest value of a GKeyFile integer (a C int), nvinfer's other integer keys
MIN_OBJECT = 16  # DeepStream 6.3's floor on an object's size, MIN_INPUT_OBJECT_WIDTH/HEIGHT


@options_of("deepstream")
class DeepStreamOptions:
    """A DeepStream nvinfer config (aft_export/serving/deepstream.py): ``deepstream``'s options, each declared
    here (the command's parameters of these names are these fields)."""

    mode: str = declare(Choice(DEEPSTREAM_MODES), "primary", help="primary: classify whole frames (process-mode 1); "
                                                                  "secondary: objects an upstream detector found (2).")
    # the DeepStream release; None: the oldest whose TensorRT reads the file's export target
    release: str | None = declare(
        Choice(DEEPSTREAM_RELEASES), show_default=False,
        help="The DeepStream release the config is for: its keys, and the TensorRT the file must be read by "
             "(6.3: JetPack 5.1.2, TensorRT 8.5; 7.0: JetPack 6.0, 8.6; 7.1: JetPack 6.1/6.2, 10.3; 8.0: JetPack "
             "7.0; 9.0: JetPack 7.1; 9.1: JetPack 7.2) [default: the oldest whose TensorRT reads the file: 6.3 for "
             "--target tensorrt8 files, 7.1 for the others]; see docs/jetson.md.")
    batch_size: int = declare(Whole(1, NVINFER_MAX_BATCH), 1,
                              help=f"nvinfer's batch-size (at most {NVINFER_MAX_BATCH}, what nvinfer takes), and the "
                                   f"engine's batch profile 1,N,N.")
    gpu_id: int = declare(Whole(0, C_INT_MAX), 0, help="The GPU (gpu-id; it is in the engine's name).")
    # classifier-threshold: 0 attaches the top class to every frame or object, as infer does
    threshold: float = declare(Number(0.0, 1.0), 0.0, help="classifier-threshold: a label is attached above this "
                                                          "probability (0: always the top class).")
    unique_id: int = declare(Whole(1, C_INT_MAX), 1, help="gie-unique-id of this element.")
    # scaling: the model was trained and proven on a bicubic resize; nvinfer's default is nearest neighbour.
    # cubic is GPU-Cubic on the GPU (VIC-5 Tap on VIC), and the GPU computes it: the filter closest to bicubic
    scaling_filter: str = declare(
        Choice(SCALING_FILTERS), "cubic",
        help="scaling-filter: how nvinfer scales frames or objects to the input size. cubic (GPU-Cubic; VIC: 5-tap) "
             "is the closest to the bicubic resize the model was trained and proven on; nvinfer's own default is "
             "nearest neighbour, which aliases downscaled frames.")
    scaling_hw: str = declare(
        Choice(SCALING_HW), "gpu", help="scaling-compute-hw: gpu (GPU-Cubic), vic (Jetson's VIC: the filter's VIC "
        "variant, off the GPU) or default (VIC on Jetson, the GPU on x86).")
    # secondary mode's object filters (None: their default there; refused in primary mode, which has no objects)
    operate_on_gie_id: int | None = declare(
        Whole(-1, C_INT_MAX), show_default=False,
        help="Secondary mode: classify the objects of the element of this gie-unique-id (-1: of any element) "
             "[default: 1, the detector NVIDIA's samples number 1].")
    operate_on_class_ids: tuple[int, ...] = declare(
        Whole(0, C_INT_MAX), (), repeat=True, flag="--operate-on-class-id", metavar="ID", show_default=False,
        help="Secondary mode: classify objects of this class id of the detector only (repeatable) [default: "
             "objects of every class].")
    min_object_size: int | None = declare(
        Whole(0, C_INT_MAX), show_default=False,
        help=f"Secondary mode: objects narrower or lower than this are not classified (input-object-min-width and "
             f"-height) [default: {MIN_OBJECT}, the floor DeepStream 6.3 puts on every object, so that every "
             f"release does the same].")
    # the measurement of nvinfer's scaling against aft-export's preprocessing, on labelled images (None: none)
    data: str | None = declare(
        Path("either", named=True),
        help="Also measure: the top-1 of each file on these labelled images, under nvinfer's scaling (stretched to "
             "the input size with --scaling-filter's CPU stand-in, and with nvinfer's default, nearest) beside "
             "aft-export's own preprocessing.")
    images: int = declare(Whole(1), 1000, help="With --data: how many labelled images.")
    object_size: int | None = declare(
        Whole(1, MAX_SIDE), help="With --data: resize each image to this square first (bicubic), as a camera sees "
        "an object larger than the network's input, so that the scaling has something to do.")


SECONDARY_DEFAULTS = {"operate_on_gie_id": 1, "min_object_size": MIN_OBJECT}


@options_of("deepstream-check")
class DeepStreamCheckOptions:
    """``aft-export deepstream-check``: a config's engine, on the device (serving/deepstream.py)."""

    library: str = declare(Choice(LIBRARIES), "auto", help="The TensorRT that deserialises the engines: tensorrt (a "
                                                           "Jetson's), tensorrt-rtx, or auto.")
