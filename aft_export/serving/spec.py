"""What an artifact looks like to NVIDIA Triton Inference Server: names, tensors, batching.

Shared by ``aft-export serve`` (:mod:`aft_export.serving.server`, a real Triton with the models in
its Python backend) and ``aft-export triton-repo`` (:mod:`aft_export.serving.repository`, a model
repository for a Triton container), so that a client written against one works against
the other: the models, their tensors, batching, warm-up requests and the text of their
``config.pbtxt`` are made here once. Nothing here runs a model or imports Triton.

Per artifact ``model.int8.onnx`` (name ``model_int8``) both serve:

- ``model_int8``: input ``image`` FP32 ``[3, H, W]`` (the artifact's input, normalised as
  its metadata says); outputs ``logits`` FP32 ``[classes]``, ``topk_index`` INT64 ``[k]``,
  ``topk_label`` BYTES ``[k]``;
- ``model_int8_image``: input ``image_bytes`` BYTES ``[1]`` (an encoded image: JPEG, PNG,
  ...), decoded and preprocessed as ``eval`` does (:func:`aft_export.data.images.load_image`,
  then ``(x / 255 - mean) / std``); the same outputs.

With a batch dimension (``max_batch_size`` > 0) a request carries up to that many images.
A fixed-batch export (``ExportOptions.batch`` N) gets no batch dimension: every request is exactly
``N`` images, as the artifact takes them.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from aft_export.data.formats import FORMATS, gives_probabilities
from aft_export.data.images import LOGITS, NORMALIZED, Preprocessing
from aft_export.errors import AFTExportError, Named, said
from aft_export.artifacts.ends import Claim, engine_format
from aft_export.artifacts.onnxio import ArtifactMeta, graph_precision, load_onnx
from aft_export.options import DEFAULT_MAX_BATCH
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.readers import reason, regular_file
from aft_export.artifacts.kinds import ENGINE, NAMED, ONNX, FileKind, expected, kind_of
from aft_export.runners import OUTPUT, onnx_info
from aft_export.tensorrt.library import library_named, library_of
from aft_export.tensorrt.manifest import check_manifest, manifest_problems
from aft_export.options.commands import command_line

IMAGE_INPUT = "image_bytes"
TRITON_TYPES = {"float32": "TYPE_FP32", "uint8": "TYPE_UINT8"}  # a format's dtype as Triton says it
TOPK_INDEX = "topk_index"
TOPK_LABEL = "topk_label"
IMAGE_SUFFIX = "_image"
NAME_MAX = 255  # the bytes of one file or directory name (Linux's NAME_MAX; model names are ASCII)
# a model's directories are its name and NAME_image, _net, _pre and _topk (aft_export.serving.repository):
# the longest suffix must fit too
MAX_MODEL_NAME = NAME_MAX - len(IMAGE_SUFFIX)


def model_name(path: str | Path) -> str:
    """The Triton model name of an artifact: its file name without the suffix, every run
    of characters other than letters, digits, ``_`` and ``-`` made one ``_``
    (``model.int8.onnx`` -> ``model_int8``)."""
    stem = Path(path).name
    kind = kind_of(stem)
    stem = kind.stem(stem) if kind in (ONNX, ENGINE) else stem
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_")
    if not name:
        raise AFTExportError(f"cannot make a Triton model name from {path}; rename the file")
    if len(name) > MAX_MODEL_NAME:
        raise AFTExportError(f"the Triton model name is made from the file's name, and {Path(path).name[:60]}... makes "
                             f"one of {len(name)} characters, more than the {MAX_MODEL_NAME} a model name may have (its "
                             f"model directories add up to {len(IMAGE_SUFFIX)} characters to it, and a directory name "
                             f"holds {NAME_MAX}); rename the file")  # fmt: skip
    return name


def topk(logits: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest logits per row, largest first; ties keep the lower
    index first (a stable sort), so every server gives the same answer."""
    return np.argsort(-np.asarray(logits), axis=1, kind="stable")[:, :k].astype(np.int64)


@dataclass(frozen=True)
class ServedModel:
    """One artifact as Triton serves it."""

    name: str
    path: Path
    kind: FileKind  # ONNX or ENGINE (aft_export.artifacts.kinds)
    input_name: str
    output_name: str
    image_dims: tuple[int, ...]  # one image: (C, H, W), -1 where the artifact takes any size
    fixed_batch: int | None  # a fixed-batch export: every request is exactly this many images
    max_batch: int  # Triton's max_batch_size: 0 for a fixed batch
    classes: list[str]
    input_size: tuple[int, int, int]  # what an encoded image is decoded to (C, H, W)
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    precision: str = "fp32"
    manifest: dict = field(default_factory=dict)  # an engine's
    # an ONNX file another tool wrote: the preprocessing it is served with, for its runners
    # (None: the artifact describes itself)
    preprocessing: ForeignPreprocessing | None = None
    # what the artifact takes (aft_export.data.images.INPUT_FORMATS): a pixel file's tensor endpoint takes
    # raw pixels, uint8 [H, W, 3] or float [3, H, W] in 0-255
    input_format: str = NORMALIZED

    @property
    def tensor_type(self) -> str:
        """Triton's data type of the artifact's input (its format's dtype)."""
        return TRITON_TYPES[FORMATS[self.input_format].dtype]

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """One image as the artifact takes it, at its input size, in its format's layout."""
        return FORMATS[self.input_format].image(*self.input_size)

    @property
    def image_model(self) -> str:
        return self.name + IMAGE_SUFFIX

    @property
    def dims(self) -> list[int]:
        """Triton's ``dims`` of the artifact's input: one image's with a batch dimension,
        the whole input (batch included) for a fixed batch."""
        return ([self.fixed_batch] if self.fixed_batch else []) + list(self.image_dims)

    def batched(self, *dims: int) -> list[int]:
        """``dims`` of a per-image tensor, with the fixed batch in front where there is one."""
        return ([self.fixed_batch] if self.fixed_batch else []) + list(dims)

    def k(self, top_k: int) -> int:
        return min(top_k, len(self.classes))

    def to_json(self) -> str:
        """The description as JSON (what a Triton Python backend model of ``serve`` is
        given, so that it serves what the server described, without reading it again)."""
        return json.dumps({**asdict(self), "path": str(self.path), "kind": self.kind.name})

    @classmethod
    def from_json(cls, text: str) -> ServedModel:
        d = json.loads(text)
        tuples = ("image_dims", "input_size", "mean", "std")
        pre = d.get("preprocessing")
        if pre is not None:  # lists back to the tuples its values were
            pre = ForeignPreprocessing(**{k: tuple(v) if isinstance(v, list) else v for k, v in pre.items()})
        return cls(**{**d, "path": Path(d["path"]), "kind": NAMED[d["kind"]], **{k: tuple(d[k]) for k in tuples},
                      "preprocessing": pre})  # fmt: skip


def _dim(d) -> int:
    return d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1


def describe(path: str | Path, max_batch: int | None = None, name: str | None = None,
             preprocessing: ForeignPreprocessing | None = None) -> ServedModel:  # fmt: skip
    """What Triton needs to know of an ONNX file or an engine (with its manifest), read
    without running it. ``max_batch``: the largest batch to serve (default
    :data:`DEFAULT_MAX_BATCH` for a dynamic-batch ONNX file, the profile's maximum for an
    engine); ignored for a fixed-batch export (served without batching), refused above an
    engine's profile. ``name``: the Triton model name (default :func:`model_name`).
    ``preprocessing``: how an ONNX file another tool wrote is fed (else the JSON beside it,
    :func:`~aft_export.runners.onnx_info`)."""
    path = regular_file(path, "artifact")  # a FIFO or a device is said so, not "does not exist"
    kind = kind_of(path)
    if kind not in (ONNX, ENGINE):
        raise AFTExportError(f"{path}: Triton serves {expected(ONNX, ENGINE)}; export a checkpoint first: "
                             f"{command_line('export', 'CKPT', output='model.onnx')}")  # fmt: skip
    spec = _describe_onnx(path, max_batch, preprocessing) if kind is ONNX else _describe_engine(path, max_batch)
    return spec if name is None else replace(spec, name=name)


def _batching(path: Path, batch: tuple[int, int], max_batch: int | None, where: str) -> tuple[int | None, int]:
    """(fixed batch or None, max_batch_size) from the artifact's batch range (lo, hi; hi -1
    for unbounded)."""
    lo, hi = batch
    if hi != -1 and lo == hi:  # a fixed batch: no batching (max_batch is for the others)
        return lo, 0
    if lo > 1:
        raise AFTExportError(f"{path}: its smallest batch is {lo} ({where}) but Triton's dynamic batcher sends "
                             f"batches from 1; rebuild it with {command_line('build', batch_profile='1,OPT,MAX')}")  # fmt: skip
    chosen = max_batch if max_batch is not None else (hi if hi != -1 else DEFAULT_MAX_BATCH)
    if hi != -1 and chosen > hi:
        raise AFTExportError(said("{chosen} is above {path}'s largest batch {hi} ({where}); use {use} or rebuild it "
                                  "with a larger maximum ({line})", "triton-repo", chosen=Named("max_batch", chosen),
                                  path=path, hi=hi, where=where, use=Named("max_batch", hi),
                                  line=command_line("build", batch_profile="MIN,OPT,MAX")))  # fmt: skip
    return None, chosen


def _describe_onnx(path: Path, max_batch: int | None, preprocessing: ForeignPreprocessing | None) -> ServedModel:
    model = load_onnx(path, external_data=False)
    info = onnx_info(model, str(path), path, preprocessing)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1 or not model.graph.output:
        raise AFTExportError(f"{path} has {len(inputs)} inputs; aft-export serves image classifiers of one input")
    shape = [_dim(d) for d in inputs[0].type.tensor_type.shape.dim]
    if len(shape) != 4:
        raise AFTExportError(f"{path}: input {inputs[0].name} has shape {shape}; expected (N, C, H, W)")
    n = shape[0]
    _refuse_probabilities(path, info.output_format)
    fixed, chosen = _batching(path, (1, -1) if n == -1 else (n, n), max_batch, "its ONNX input's batch dimension")
    return ServedModel(model_name(path), path, ONNX, inputs[0].name, model.graph.output[0].name, tuple(shape[1:]),
                       fixed, chosen, info.classes, info.input_size, info.mean, info.std,
                       precision=graph_precision(model), input_format=info.input_format,
                       preprocessing=ForeignPreprocessing.of(Preprocessing(info.input_size[-1], info.mean, info.std,
                                                                           tuple(info.classes)), info.preprocessing_from)
                       if info.preprocessing_from else None)  # fmt: skip


def is_rtx_engine(path: Path, manifest: dict) -> bool:
    """A TensorRT-RTX engine (``*.rtx.engine``, or a manifest that says so): one Triton's tensorrt_plan backend
    does not load (its library's row, :data:`~aft_export.tensorrt.library.LIBRARIES`, says so)."""
    named = library_named(path.name.lower())
    return (named is not None and not named.triton_plan) or \
        not library_of(str(manifest.get("library", "")).lower()).triton_plan  # fmt: skip


def _describe_engine(path: Path, max_batch: int | None) -> ServedModel:
    manifest = check_manifest(path, {})  # exists, parses, the engine's sha256 matches; no TensorRT needed
    meta = ArtifactMeta(manifest.get("model", {}), str(path))
    try:
        bad = [k for k in manifest_problems(manifest) if k in ("input", "model", "precision")]
        if bad:
            raise ValueError(f"malformed {', '.join(bad)}")
        lo, hi = manifest["input"]["min"], manifest["input"]["max"]
        classes, size, mean, std = meta.classes, meta.input_size, meta.mean, meta.std
        input_format = engine_format(manifest["model"], manifest["input"], str(path)).name  # no graph: the manifest
        output_format = Claim.of_meta(meta).output_format or LOGITS
    except (KeyError, TypeError, ValueError) as exc:
        raise AFTExportError(f"the manifest of {path} lacks the engine's input profile or the model's metadata "
                             f"({reason(exc)}); rebuild it with `aft-export build`") from None  # fmt: skip
    _refuse_probabilities(path, output_format)
    fixed, chosen = _batching(path, (lo[0], hi[0]), max_batch, "its optimisation profile")
    dims = tuple(a if a == b else -1 for a, b in zip(lo[1:], hi[1:]))
    return ServedModel(model_name(path), path, ENGINE, manifest["input"].get("name", "image"), OUTPUT, dims, fixed,
                       chosen, classes, size, mean, std, precision=manifest.get("precision", "fp32"),
                       manifest=manifest, input_format=input_format)  # fmt: skip


def _refuse_probabilities(path: Path, output_format: str) -> None:
    """A file that gives probabilities is DeepStream's: Triton's models give logits (and top-k)."""
    if gives_probabilities(output_format):
        raise AFTExportError(f"{path} gives {output_format} (the DeepStream form); Triton serves logits and top-k: "
                             f"serve the same export with logits out (model.float-nchw*.onnx, or any other)")  # fmt: skip


def check_names(models: list[ServedModel]) -> None:
    """Refuse two artifacts that would be served under one name."""
    seen: dict[str, Path] = {}
    for m in models:
        for name in (m.name, m.image_model):
            if name in seen:
                raise AFTExportError(f"{seen[name]} and {m.path} would both be served as {name}; rename one")
            seen[name] = m.path


# ---------------------------------------------------------------- Triton containers and TensorRT

# NVIDIA's Triton Inference Server containers (nvcr.io/nvidia/tritonserver:<release>-py3, the
# image with the tensorrt_plan and onnxruntime backends) and the TensorRT each ships. A
# tensorrt_plan model loads only in a container whose TensorRT is the one the engine was
# built with (unless built version-compatible). NVIDIA publishes the pairs in its
# Frameworks Support Matrix (below). Rows are added here only as read from that matrix:
# the one table NVIDIA keeps in the server repository (docs/introduction/compatibility.md)
# covers the -trtllm-python-py3 images, which have no tensorrt_plan backend, so its
# TensorRT versions are not these. Until rows are added, the repository's README names
# the engine's TensorRT version and this matrix instead of a release.
# A release for repositories of ONNX files: the newest in NVIDIA's table of the ONNX Runtime
# each Triton release ships (26.08: ONNX Runtime 1.28.0); any from 24.05 (1.18.0, the oldest
# ONNX Runtime aft-export supports) runs them
ONNX_CONTAINER = "26.08"
ONNX_CONTAINER_SOURCE = ("https://github.com/triton-inference-server/server/blob/main/docs/introduction/"
                         "compatibility.md#onnx-runtime-versions")  # fmt: skip
TRITON_CONTAINERS_SOURCE = "https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html"
TRITON_CONTAINERS: tuple[tuple[str, str, str], ...] = ()  # (container release, Triton version, TensorRT version)


def containers_for_tensorrt(version: str) -> list[tuple[str, str, str]]:
    """The container releases whose TensorRT has the engine's major.minor.patch."""
    want = tuple(version.split(".")[:3])
    return [row for row in TRITON_CONTAINERS if tuple(row[2].split(".")[:3]) == want]


# ---------------------------------------------------------------- the endpoints that change a server

# Closed to every request, by serve's tritonserver and the triton-repo container alike: Triton
# takes a header name and value that a request must carry to use them
# (--http-restricted-api, --grpc-restricted-protocol); a name with a colon cannot be sent
# (HTTP ends a header's name at its first colon; HTTP/2 and gRPC forbid colons in names), so
# nothing passes.
CLOSED_APIS = ("model-repository", "shared-memory", "trace", "logging")
CLOSED = "aft-export:closed"


def closed_flags() -> list[str]:
    """``tritonserver``'s flags that close :data:`CLOSED_APIS` over HTTP and gRPC."""
    closed = f"{','.join(CLOSED_APIS)}:{CLOSED}=none"
    return [f"--http-restricted-api={closed}", f"--grpc-restricted-protocol={closed}"]


# ---------------------------------------------------------------- config.pbtxt: Triton's ModelConfig as text

# the endpoints of one artifact
TENSOR, IMAGE = "tensor", "image"
WARMUP_DIR = "warmup"  # Triton reads a warm-up request's input_data_file from here, in the model's directory
WARMUP_IMAGE = "image.bin"


@dataclass(frozen=True)
class Tensor:
    """One input or output of a model: its name, Triton's data type, its dims (without the
    batch dimension when the model has one)."""

    name: str
    dtype: str  # TYPE_FP32, TYPE_INT64, TYPE_STRING
    dims: tuple[int, ...]


def endpoint_input(spec: ServedModel, endpoint: str) -> Tensor:
    if endpoint == IMAGE:
        return Tensor(IMAGE_INPUT, "TYPE_STRING", tuple(spec.batched(1)))
    return Tensor(spec.input_name, spec.tensor_type, tuple(spec.dims))


def endpoint_outputs(spec: ServedModel, k: int) -> list[Tensor]:
    return [Tensor(spec.output_name, "TYPE_FP32", tuple(spec.batched(len(spec.classes)))),
            Tensor(TOPK_INDEX, "TYPE_INT64", tuple(spec.batched(k))),
            Tensor(TOPK_LABEL, "TYPE_STRING", tuple(spec.batched(k)))]  # fmt: skip


def endpoint_name(spec: ServedModel, endpoint: str) -> str:
    return spec.image_model if endpoint == IMAGE else spec.name


def dims_text(dims) -> str:
    return "[ " + ", ".join(str(int(d)) for d in dims) + " ]"


def _tensors(kind: str, tensors: list[Tensor]) -> str:
    body = ",\n".join(f'  {{\n    name: "{t.name}"\n    data_type: {t.dtype}\n    dims: {dims_text(t.dims)}\n  }}'
                      for t in tensors)  # fmt: skip
    return f"{kind} [\n{body}\n]"


def warmup_dims(spec: ServedModel, tensor: Tensor) -> tuple[int, ...]:
    """A warm-up request's dims: the input's, with the artifact's own size where it takes any."""
    if tensor.dtype == "TYPE_STRING":
        return tensor.dims
    concrete = list(spec.image_shape)
    lead = len(tensor.dims) - len(concrete)
    return tuple(d if d > 0 else concrete[i - lead] for i, d in enumerate(tensor.dims))


def warmup_text(spec: ServedModel, tensor: Tensor) -> str:
    """One warm-up request of one image (Triton sends it while loading the model, before
    the model is ready): zeros for a tensor, :data:`WARMUP_IMAGE` (see
    :func:`warmup_image_file`) for encoded images."""
    source = f'input_data_file: "{WARMUP_IMAGE}"' if tensor.dtype == "TYPE_STRING" else "zero_data: true"
    dims = dims_text(warmup_dims(spec, tensor))
    return (f'model_warmup [\n  {{\n    name: "one image"\n    batch_size: 1\n    inputs {{\n'
            f'      key: "{tensor.name}"\n      value: {{\n        data_type: {tensor.dtype}\n        dims: {dims}\n'
            f"        {source}\n      }}\n    }}\n  }}\n]")


def warmup_image_file(spec: ServedModel) -> bytes:
    """The warm-up request's encoded images as Triton reads a STRING input from a file: per
    element a 4-byte little-endian length, then the bytes (a mid-grey PNG of the model's
    input size; as many as a fixed batch takes)."""
    from PIL import Image

    _, h, w = spec.input_size
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (128, 128, 128)).save(buf, "PNG")
    png = buf.getvalue()
    return (len(png).to_bytes(4, "little") + png) * (spec.fixed_batch or 1)


def config_text(name: str, kind: str, spec: ServedModel, inputs: list[Tensor], outputs: list[Tensor], *,
                queue_delay_us: int | None = None, instances: tuple[int, str] | None = None,
                parameters: dict[str, str] | None = None, warmup: bool = False, extra: tuple[str, ...] = ()) -> str:
    """``config.pbtxt`` of one model: ``kind`` its ``backend:``/``platform:`` line;
    ``queue_delay_us``: dynamic batching with that delay (None, or a fixed-batch artifact:
    none); ``instances``: (count, KIND_CPU | KIND_GPU | KIND_AUTO); ``parameters``: the
    backend's string parameters; ``warmup``: one warm-up request of the first input."""
    lines = [f'name: "{name}"', kind, f"max_batch_size: {spec.max_batch}",
             _tensors("input", inputs), _tensors("output", outputs)]  # fmt: skip
    if queue_delay_us is not None and not spec.fixed_batch:
        lines.append(f"dynamic_batching {{\n  max_queue_delay_microseconds: {queue_delay_us}\n}}")
    if instances:
        lines.append(f"instance_group [\n  {{\n    count: {instances[0]}\n    kind: {instances[1]}\n  }}\n]")
    for key, value in (parameters or {}).items():
        lines.append(f'parameters {{\n  key: "{key}"\n  value: {{\n    string_value: "{value}"\n  }}\n}}')
    if warmup:
        lines.append(warmup_text(spec, inputs[0]))
    return "\n".join([*lines, *extra, ""])
