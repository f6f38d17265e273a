"""ONNX files: load, check, save (atomically, with external data), metadata, precision.

The ONNX floor: everything that reads or writes an ONNX file goes through here, so a
file that cannot be read is one clear error everywhere, a file that is written appears
whole or not at all, and "what precision is this graph" has one answer.

External data: weights over the threshold go to ``<name>.onnx.<sha12>.data`` beside the
file, named after their content. The new data file is in place before the ``.onnx``
that names it is renamed over the old one, and the old data file is removed after, so
a reader at any moment sees an ``.onnx`` whose data file exists and matches.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from aft_export import readers
from aft_export.errors import AFTExportError
from aft_export.fileio import atomic_write_bytes, check_output_path, file_mode
from aft_export.artifacts.graph import inline_functions, props, set_props
from aft_export.readers import regular_file

TWO_GB = 2**31  # protobuf's limit on one message: an ONNX graph held in memory, weights included


def load_onnx(path: str | os.PathLike, external_data: bool = True, whole: tuple[str, str] | None = None):
    """The ModelProto at ``path``, or an AFTExportError that says what is wrong. ``whole``:
    ``(the stage, what to do instead)`` for a caller that works on the whole graph in memory:
    a file whose weights exceed protobuf's 2 GiB is refused before its external data is read
    (:func:`protobuf_limit_problem`)."""
    import onnx

    path = Path(path)
    if path.is_dir():
        raise AFTExportError(f"model {path} is a directory; give an .onnx file")
    if not path.exists():
        raise AFTExportError(f"model {path} does not exist; check the path")
    regular_file(path, "model", "give an .onnx file")  # a FIFO or a device is said so, not "does not exist"
    if path.stat().st_size == 0:
        raise AFTExportError(f"model {path} is empty (0 bytes); export it again")
    try:
        model = onnx.load(str(path), load_external_data=False)
        if model.ir_version == 0 or not model.HasField("graph"):
            raise AFTExportError(f"{path} is not an ONNX model (no IR version or no graph); export it again")
        external_files(model, path)  # every location it names, checked before anything reads one
        if whole is not None:
            problem = protobuf_limit_problem(weight_bytes(model), str(path))
            if problem:
                raise AFTExportError(f"{problem}, and {whole[0]} works on the whole graph in memory; {whole[1]}")
        if external_data:
            onnx.load_external_data_for_model(model, str(path.parent))
    except AFTExportError:
        raise
    except Exception as exc:  # protobuf's DecodeError, a missing or short external data file
        raise AFTExportError(f"{path} is not a readable ONNX file ({str(exc).splitlines()[0][:300]}); "
                             f"export it again") from None  # fmt: skip
    return model


EXTERNAL_FIX = ("keep the data files in the model's folder, named relative to it (as `onnx.save(model, path, "
                "save_as_external_data=True)` writes them), and give the model with them")


class ExternalFile(NamedTuple):
    location: str  # as the ONNX file writes it
    name: str  # normalised: the same file, relative to the model's folder ("sub/w.bin")
    path: Path  # where it is, links followed


def external_files(model, path: str | os.PathLike, reserved: tuple[str, ...] = ()) -> list[ExternalFile]:
    """The external data files the ONNX file at ``path`` (read as ``model``, without its external
    data) names, of its initializers, Constant nodes and function bodies alike: their names,
    normalised, and where each is, links followed (:func:`aft_export.readers.contained_file`).
    Every one must be a regular file in the folder of ``path``, as ``onnx`` requires (ONNX Runtime,
    OpenVINO and TensorRT's parser read the same locations, each with its own rule): a location
    that leaves it, is absolute, missing, not a regular file, or (``reserved``) the name of a file
    of the output it is to be copied into is one error, naming the file and the tensor. Every
    reader of an ONNX file checks this (:func:`load_onnx`), so no runtime is handed a file whose
    data lies elsewhere, and a copy of a file's data (``aft-export triton-repo``) writes only under
    the names checked here."""
    path = Path(path)
    found: dict[str, ExternalFile] = {}
    for tensor in _external(model):
        location = next((e.value for e in tensor.external_data if e.key == "location"), None)
        if location in found:
            continue
        said = f"{path}: tensor {readers.shown(tensor.name)} keeps its data in"
        name, where = readers.contained_file(path.parent, location, said, EXTERNAL_FIX, reserved)
        found[location] = ExternalFile(location, name, where)
    return list(found.values())


def weight_bytes(model) -> int:
    """The bytes of a ModelProto with its weights: the message itself, plus the tensors it keeps
    in external data files, as their shapes say (nothing is read from those files)."""
    import math

    from onnx.helper import tensor_dtype_to_np_dtype

    external = sum(math.prod(t.dims) * tensor_dtype_to_np_dtype(t.data_type).itemsize for t in _external(model))
    return model.ByteSize() + external


def protobuf_limit_problem(nbytes: int, what: str) -> str | None:
    """What is wrong with a model of ``nbytes`` (weights and graph) as one ONNX graph in memory,
    if anything: protobuf, which ONNX is, holds at most 2 GiB in one message."""
    if nbytes <= TWO_GB:
        return None
    return (f"{what} holds {nbytes / 2**30:.2f} GiB of weights ({nbytes:,} bytes), more than the 2 GiB protobuf "
            f"lets one ONNX graph hold")


def check_graph(model) -> None:
    """Full ONNX check, strict shape inference, and a shape for every graph value."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise RuntimeError(f"graph is invalid: {exc}") from exc
    typed = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    missing = [
        out for node in inferred.graph.node for out in node.output
        if out and (out not in typed or not typed[out].type.tensor_type.HasField("shape"))
    ]  # fmt: skip
    if missing:
        raise RuntimeError(f"shape inference left {len(missing)} values without a shape: {missing[:5]}")


read_metadata = props  # a model's metadata_props as a dict
set_metadata = set_props  # replace them (sorted: deterministic files)




class ArtifactMeta:
    """aft-export's metadata of an artifact, read and written in one place: an ONNX file's
    ``metadata_props`` (:meth:`of`, :meth:`write`), or the ``model`` entry an engine
    manifest copies from them (``ArtifactMeta(manifest["model"])``). Values are strings;
    the typed properties parse the JSON ones through :mod:`aft_export.readers` (bounded size
    and nesting, typed items) and raise ``KeyError`` (missing) or
    :class:`~aft_export.readers.Malformed` (a ``ValueError`` and a one-line user error: not
    JSON, too deep, or items of the wrong type), which each caller turns into its own
    one-line error or, as ``aft-export info`` does, shows as malformed. An entry that is not a
    mapping of strings (a hand-edited manifest) holds nothing, and says so as malformed."""

    def __init__(self, values: dict[str, str] | None = None, where: str = "the model",
                 fix: str = "export it again with `aft-export export`") -> None:  # fmt: skip
        self.where = where
        self.fix = fix
        self.broken = "" if values is None or isinstance(values, dict) else f"a {type(values).__name__}"
        values = values if isinstance(values, dict) else {}
        self.values = {k: v for k, v in values.items() if isinstance(k, str) and isinstance(v, str)}
        self.not_text = sorted(str(k) for k, v in values.items() if not (isinstance(k, str) and isinstance(v, str)))

    @classmethod
    def of(cls, model, where: str = "the model") -> ArtifactMeta:
        """The metadata of a ModelProto."""
        return cls(props(model), where)

    def write(self, model) -> None:
        """Replace ``model``'s metadata with these values (sorted: deterministic files)."""
        set_props(model, self.values)

    # the keys a file's description needs; a file that has none of them was written by another tool
    DESCRIBING = ("classes", "input_size", "mean", "std")

    @property
    def ours(self) -> bool:
        """Whether these are aft-export's metadata: a file another tool wrote from scratch has none
        of the describing keys (one it made from ours may have copied them through, as ONNX
        Runtime's quantiser does: then it describes itself)."""
        return "aft_export.format" in self.values or any(k in self.values for k in self.DESCRIBING)

    def __contains__(self, key: str) -> bool:
        """Whether the key is there, its value text or not (a value that is not text is malformed:
        :meth:`__getitem__` and :meth:`json` say so)."""
        return key in self.values or key in self.not_text

    def __getitem__(self, key: str) -> str:
        """The text under ``key``: KeyError if absent, :class:`~aft_export.readers.Malformed` if
        not text, as for every key ``in`` says is there."""
        if key in self.not_text:
            raise readers.Malformed(self._where, key, "is not text (a JSON value written as text)", self.fix)
        return self.values[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.values[key] = str(value)

    def get(self, key: str, default=None):
        return self.values.get(key, default)

    @property
    def _where(self) -> str:
        return f"{self.where}'s metadata"

    def json(self, key: str):
        """The JSON value under ``key`` (KeyError if absent, :class:`~aft_export.readers.Malformed`
        if it is not bounded, valid JSON text)."""
        if self.broken:
            raise readers.Malformed(self._where, None, f"is {self.broken}, not a mapping of keys to text", self.fix)
        return readers.parse_json(self[key], self._where, key, self.fix)

    @property
    def classes(self) -> list[str]:
        return list(readers.names(self.json("classes"), self._where, "classes", self.fix))

    @property
    def input_size(self) -> tuple[int, ...]:
        return readers.wholes(self.json("input_size"), self._where, "input_size", 1, readers.MAX_SIDE, fix=self.fix)

    @property
    def mean(self) -> tuple[float, ...]:
        return readers.numbers(self.json("mean"), self._where, "mean", fix=self.fix)

    @property
    def std(self) -> tuple[float, ...]:
        return readers.numbers(self.json("std"), self._where, "std", positive=True, fix=self.fix)

    @property
    def source_sha256(self) -> str:
        return self.values.get("source_sha256", "")

    @property
    def export_target(self) -> str:
        return self.values.get("export_target", "tensorrt")  # options.DEFAULT_TARGET (a floor above)

    @property
    def op_form(self) -> str:
        return self.values.get("aft_op_form", "custom")


# ONNX's QDQ form: float ops between QuantizeLinear/DequantizeLinear pairs (ours, TensorRT's, ModelOpt's,
# ONNX Runtime's QuantFormat.QDQ); the QOperator form: integer ops in their place (ONNX Runtime's
# QuantFormat.QOperator and its dynamic quantisation; the com.microsoft ops included)
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
QOPERATOR_OPS = frozenset({
    "QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", "QGemm",
    "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax", "QLinearConcat",
    "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearReduceMean", "QLinearWhere", "QAttention",
    "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QEmbedLayerNormalization", "DynamicQuantizeLSTM",
})  # fmt: skip


def quantized_form(model) -> tuple[str, list[str]] | None:
    """``("QOperator" or "QDQ", the op types that say so)`` for a graph already quantised to int8,
    else None."""
    ops = {n.op_type for n in model.graph.node}
    integer = sorted(ops & QOPERATOR_OPS)
    if integer:
        return "QOperator", integer
    qdq = [o for o in QDQ_OPS if o in ops]
    return ("QDQ", qdq) if qdq else None


def graph_precision(model) -> str:
    """fp32, fp16 or int8, from what the graph itself says (precision lives in the graph): int8 in
    either quantised form (:func:`quantized_form`), fp16 weights, else fp32."""
    from onnx import TensorProto

    if quantized_form(model):
        return "int8"
    if any(t.data_type == TensorProto.FLOAT16 for t in model.graph.initializer):
        return "fp16"
    return "fp32"


# ops that hold, move, select, reshape, convert or (de)quantise data: not compute (compute_precisions)
DATA_OPS = frozenset((
    "Constant", "ConstantOfShape", "Identity", "Dropout", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten",
    "Expand", "Tile", "Pad", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "ScatterElements",
    "ScatterND", "Compress", "Where", "Shape", "Size", "Range", "Cast", "CastLike", "DepthToSpace", "SpaceToDepth",
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
))  # fmt: skip
# what a value is traced back through to its DequantizeLinear: reshapes, transposes, casts (as
# aft_export.tensorrt.build.network_summary sees through TensorRT's shuffles and casts)
SEEN_THROUGH = ("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast")
# ops that compute on quantised integers themselves: ONNX's QOperator form, ONNX Runtime's contrib ops
INTEGER_OPS = ("MatMulInteger", "ConvInteger", "QGemm", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QAttention")
PRODUCT_OPS = ("MatMul", "Gemm", "Conv", "ConvTranspose")  # inputs 0 and 1 (data, weights) are what they compute on


def compute_nodes(compute: dict) -> str:
    """Compute nodes (or layers) per precision: ``28 int8, 64 fp16, 97 fp32`` (and any other precision)."""
    return ", ".join(f"{compute.get(k, 0)} {k}" for k in ("int8", "fp16", "fp32")) + "".join(
        f", {v} {k}" for k, v in compute.items() if k not in ("int8", "fp16", "fp32"))  # fmt: skip


def compute_precisions(model) -> dict[str, int]:
    """How many of the graph's compute nodes compute in each precision: ``{"int8": 28, "fp16": 64,
    "fp32": 97}`` (int8, fp16, fp32 first, then any other). Read from the graph alone, so it says
    the same of our files and of other tools' files (ModelOpt's int8 whose rest is fp16 shows
    mostly fp16): what :func:`graph_precision` calls "int8" is any graph with Q/DQ in it.

    A *compute node* is a node that does arithmetic on floating-point or quantised values: every
    node but those that only hold, move, select, reshape, convert or (de)quantise data
    (:data:`DATA_OPS`: Constant, Reshape, Transpose, Concat, Slice, Gather, Where, Shape, Cast,
    Q/DQ, ...) and but those whose output is not floating point (shape arithmetic on int64,
    comparisons), counted after the model-local functions are inlined (the ``com.aft`` bodies count
    node by node). Its precision: int8 when it is a QOperator op (``QLinearMatMul``,
    ``QLinearConv``, ``MatMulInteger``, ... ``QLinear*``), or when what it computes on is fed by
    a DequantizeLinear of int8 (seen through reshapes, transposes and casts: :data:`SEEN_THROUGH`):
    a MatMul/Gemm/Conv's data and weights, any other node's every floating-point input (a
    DequantizeLinear of 4-bit or fp8 values says int4 or fp8); else its output's type: fp16
    (float16), bf16, fp32 (float), fp64. The definition is ``check``'s on TensorRT's parsed network
    (:func:`aft_export.tensorrt.build.network_summary`), in ONNX ops; the two counts differ where TensorRT
    fuses or splits nodes into layers."""
    import onnx
    from onnx import TensorProto as T

    graph_model = inline_functions(model) if model.functions else model
    try:
        inferred = onnx.shape_inference.infer_shapes(graph_model)
    except Exception:  # noqa: BLE001 - a graph shape inference cannot read: the types the file holds
        inferred = graph_model
    g = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    types.update({t.name: t.data_type for t in g.initializer})
    for node in g.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            types[node.output[0]] = node.attribute[0].t.data_type
    floats = {T.FLOAT: "fp32", T.FLOAT16: "fp16", T.BFLOAT16: "bf16", T.DOUBLE: "fp64"}
    quantised = {T.INT8: "int8", T.UINT8: "int8", T.INT4: "int4", T.UINT4: "int4", T.INT16: "int16",
                 T.UINT16: "int16", T.FLOAT8E4M3FN: "fp8", T.FLOAT8E4M3FNUZ: "fp8", T.FLOAT8E5M2: "fp8",
                 T.FLOAT8E5M2FNUZ: "fp8"}  # fmt: skip
    producer = {o: n for n in g.node for o in n.output if o}

    def dequantised(value: str) -> str | None:
        node = producer.get(value)
        while node is not None and node.op_type in SEEN_THROUGH and node.input:
            node = producer.get(node.input[0])
        if node is not None and node.op_type == "DequantizeLinear":
            return quantised.get(types.get(node.input[0]), "int8")
        return None

    counts: dict[str, int] = {}
    for node in g.node:
        op = node.op_type
        if op in INTEGER_OPS or op.startswith("QLinear"):
            kind = "int8"
        elif op in DATA_OPS or not node.output:
            continue
        else:
            known = [types.get(i) for i in node.input if types.get(i) in floats]
            out = types.get(node.output[0]) or (known[0] if known else None)  # an op shape inference does not know
            if out not in floats:
                continue
            read = [i for i in (node.input[:2] if op in PRODUCT_OPS else node.input) if i and types.get(i) in floats]
            sources = {dequantised(i) for i in read}
            kind = sources.pop() if read and len(sources) == 1 and None not in sources else floats[out]
        counts[kind] = counts.get(kind, 0) + 1
    first = [k for k in ("int8", "fp16", "fp32") if k in counts]
    return {k: counts[k] for k in first + sorted(set(counts) - set(first))}


def foreign_kind(model) -> str:
    """What a graph is, in a few words, for messages about a file another tool wrote: its
    precision, and for int8 the form that says so ("int8 graph, already quantised (QOperator
    form: ConvInteger, MatMulInteger)")."""
    form = quantized_form(model)
    if form:
        return f"int8 graph, already quantised ({form[0]} form: {', '.join(form[1][:4])})"
    return f"{graph_precision(model)} graph"


def image_input_problem(model) -> str | None:
    """What keeps a graph from being an image classifier aft-export can feed (None: nothing), as what
    the graph does ("takes 2 inputs"): more than one input, or an input that is neither a float32
    (N, 3, H, W) image batch nor uint8 (N, H, W, 3) pixels (:data:`~aft_export.data.formats.FORMATS`). No
    preprocessing can change either. An input whose rank the graph does not declare is let through
    (the runtime says what it takes)."""
    from onnx import TensorProto

    inits = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in inits]
    if len(inputs) != 1:
        return f"takes {len(inputs)} inputs ({', '.join(repr(v.name) for v in inputs[:5])})"
    v = inputs[0]
    t = v.type.tensor_type
    dims = ["?" if not d.HasField("dim_value") else str(d.dim_value) for d in t.shape.dim]
    ranked = t.HasField("shape")  # no shape at all: a rank not declared
    shape = f"[{', '.join(dims)}]" if ranked else "unknown rank"
    pixels = t.elem_type == TensorProto.UINT8 and (not ranked or (len(dims) == 4 and dims[3] in ("?", "3")))
    if pixels:
        return None
    if not v.type.HasField("tensor_type") or t.elem_type != TensorProto.FLOAT or (ranked and len(dims) != 4):
        elem = TensorProto.DataType.Name(t.elem_type).lower() if t.elem_type else "an untyped value"
        return (f"takes {elem} of shape {shape} as its input {v.name!r}, not a float32 (N, C, H, W) image batch or "
                f"uint8 (N, H, W, 3) pixels")  # fmt: skip
    if ranked and dims[1] not in ("?", "3"):
        return f"takes {dims[1]}-channel images of shape {shape} as its input {v.name!r}, not RGB (3 channels)"
    return None


def unfeedable(model, where: str) -> str | None:
    """The one line for another tool's file that no preprocessing can feed (:func:`image_input_problem`),
    saying what it is first; None for a graph of one image input."""
    problem = image_input_problem(model)
    if problem is None:
        return None
    return (f"{where} has no aft-export metadata: it is another tool's {foreign_kind(model)} that {problem}, and "
            f"no preprocessing changes what a graph takes; aft-export feeds image classifiers of one input, float32 "
            f"(N, 3, H, W) images or uint8 (N, H, W, 3) pixels: give one of those")


def nonfinite_weights(model) -> list[tuple[str, int, int]]:
    """The floating-point weights that hold NaN or infinite values, as ``(name, NaNs,
    infinities)``: every initializer, and every Constant in the graph and its functions."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    floats = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)
    tensors = [(t.name, t) for t in model.graph.initializer]
    for node in [*model.graph.node, *(n for f in model.functions for n in f.node)]:
        if node.op_type == "Constant":
            tensors += [(node.output[0], a.t) for a in node.attribute if a.name == "value"]
    bad = []
    for name, tensor in tensors:
        if tensor.data_type not in floats:
            continue
        values = numpy_helper.to_array(tensor).astype(np.float32, copy=False)
        nans, infs = int(np.isnan(values).sum()), int(np.isinf(values).sum())
        if nans or infs:
            bad.append((name, nans, infs))
    return bad


def save_onnx(model, path: str | os.PathLike, threshold: int = TWO_GB) -> str | None:
    """Write ``model`` to ``path`` atomically; weights above ``threshold`` bytes go to an
    external data file beside it (see the module doc). Returns that file's name, or None
    for one self-contained file. Byte-identical for the same model."""
    import onnx

    path = check_output_path(path)
    old_data = sorted(path.parent.glob(f"{path.name}.*data"))
    if weight_bytes(model) <= threshold:
        atomic_write_bytes(path, model.SerializeToString(deterministic=True))
        _remove(old_data)
        return None
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        onnx.save_model(copy, work / path.name, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="weights.data", size_threshold=1024)  # fmt: skip
        digest = hashlib.sha256((work / "weights.data").read_bytes()).hexdigest()[:12]
        data_name = f"{path.name}.{digest}.data"
        for t in _external(copy):
            for entry in t.external_data:
                if entry.key == "location":
                    entry.value = data_name
        os.chmod(work / "weights.data", file_mode())
        os.replace(work / "weights.data", path.parent / data_name)  # first the data, under a new name
        atomic_write_bytes(path, copy.SerializeToString(deterministic=True))  # then the file naming it
    finally:
        for leftover in work.iterdir():
            leftover.unlink()
        work.rmdir()
    _remove([p for p in old_data if p.name != data_name])
    return data_name


def _external(model):
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    return [t for t in _get_all_tensors(model) if uses_external_data(t)]


def _remove(paths) -> None:
    for p in paths:
        p.unlink(missing_ok=True)
