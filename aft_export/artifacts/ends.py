"""What a file takes and gives, read from its graph: the one reading every command trusts.

Metadata is text anyone can edit, and another tool's file can carry our keys; the graph is what
runs. :func:`graph_ends` reads what the graph itself says:

- the input's type and layout: a uint8 (N, H, W, 3) input is raw pixels (``uint8-nhwc``); a float
  (N, 3, H, W) input is raw pixels in 0-255 (``float-nchw``) when a pixel prologue normalises it,
  else normalised images (``normalized``), whatever the metadata says;
- the pixel prologue, recognised by its mark (``aft.module=pixel_input``, which
  :mod:`aft_export.exporting.pixels` sets) or, since tools that rewrite graphs drop node metadata, by
  its nodes: the input (through a Cast to float and a Transpose to NCHW) divided by 255 (or
  multiplied by 1/255);
- the final Softmax: a file whose output a Softmax makes gives probabilities, else logits.

:func:`ends_of` holds a claim to it (:class:`Claim`: our metadata, or the preprocessing a user gave
for another tool's file): a claim the graph contradicts is one error naming both, "its metadata says
uint8-nhwc; its graph takes float32 [N, 3, 32, 32]". An engine has no graph: its manifest decides,
held to the engine's input profile and, where TensorRT loads it, to the engine's own input
(:func:`engine_input_problem`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aft_export import readers
from aft_export.artifacts.graph import node_module
from aft_export.artifacts.onnxio import ArtifactMeta
from aft_export.data.formats import (FLOAT_NCHW, FORMATS, INPUT_FORMATS, LOGITS, NORMALIZED, OUTPUT_FORMATS,
                                     PROBABILITIES, UINT8_NHWC, InputFormat, gives_probabilities)  # fmt: skip
from aft_export.errors import AFTExportError, said

PIXEL_MODULE = ("pixel_input", "PixelInput")  # the prologue's aft.module and aft.module_type
PROBABILITY_MODULE = ("probabilities", "Probabilities")
SEEN_THROUGH = ("Identity", "Cast")  # between the Softmax and the output, and before the prologue's scale
EXPORT_AGAIN = "export it again with `aft-export export`"


class Contradicted(AFTExportError):
    """A file whose description (its metadata, its manifest, what a user said of it) its graph or engine
    contradicts: refused by every command (exit 2), never shown as a failed row."""


@dataclass(frozen=True)
class Ends:
    """What a graph takes and gives, as the graph says it: ``takes`` the format of its input (the
    ``normalized`` entry where no format describes the input: ``fits`` is then False, and the
    runners' own checks say what it takes), ``gives`` logits or probabilities, the input's ``name``,
    ``elem`` type and ``shape`` (its declared dimensions, None where free; None for an undeclared
    rank), the ``output``'s name and its fixed ``width`` (the class count), and how the pixel
    ``prologue`` was found ("mark", "nodes", or "")."""

    takes: InputFormat
    gives: str
    name: str = ""
    elem: str = ""
    shape: tuple | None = None
    output: str = ""
    width: int | None = None
    prologue: str = ""
    fits: bool = True

    @property
    def said(self) -> str:
        """The input as a message shows it: ``float32 [N, 3, 32, 32]``."""
        if self.shape is None:
            return f"{self.elem} of undeclared shape"
        dims = ", ".join("N" if i == 0 and d is None else "?" if d is None else str(d) for i, d in enumerate(self.shape))
        return f"{self.elem} [{dims}]"

    @property
    def what(self) -> str:
        """What the input is, for a message: its type and shape and what the graph does with it."""
        if not self.fits:
            return f"{self.said}, which no input format describes"
        if self.takes.pixels:
            how = {"mark": "its pixel prologue normalises them", "nodes": "its first nodes divide by 255"}
            return f"{self.said} raw pixels ({how.get(self.prologue, 'the graph normalises them')})"
        return f"{self.said} normalised images (no pixel prologue: nothing divides the input by 255)"

    @property
    def chw(self) -> tuple:
        """(C, H, W) of the input where the graph fixes them (None where free, or unknown)."""
        if self.shape is None or len(self.shape) != 4:
            return None, None, None
        return self.takes.chw(self.shape)


@dataclass(frozen=True)
class Claim:
    """What a description says a file takes and gives, and the image size (None: it does not say): our metadata
    (:meth:`of_meta`), or the preprocessing a user gave for another tool's file. ``by`` names the
    description in a message ("its metadata"), ``fix`` says what to do when the graph contradicts it."""

    by: str
    fix: str = EXPORT_AGAIN
    input_format: str | None = None
    output_format: str | None = None
    input_size: tuple[int, ...] | None = None  # (C, H, W)

    @classmethod
    def of_meta(cls, meta, malformed: list[str] | None = None) -> Claim:
        """The claims of an :class:`~aft_export.artifacts.onnxio.ArtifactMeta`: its ``input_format`` and
        ``output_format`` where it has them, each a name of its table, and its ``input_size``. An unknown or
        unreadable one is malformed metadata
        (:class:`~aft_export.readers.Malformed`) on every command; ``malformed``: a list that takes the key
        instead (``info`` shows the rest of the file)."""
        values = {}
        for key, choices in (("input_format", INPUT_FORMATS), ("output_format", OUTPUT_FORMATS)):
            if key in meta:
                value = meta.values.get(key)
                if value in choices:
                    values[key] = value
                elif malformed is not None:
                    malformed.append(key)
                else:
                    raise readers.Malformed(f"{meta.where}'s metadata", key, f"is {readers.shown(value)}, not one of "
                                            f"{', '.join(choices)}", meta.fix)  # fmt: skip
        if "input_size" in meta:
            try:
                values["input_size"] = tuple(meta.input_size)
            except readers.Malformed:
                if malformed is None:
                    raise
                if "input_size" not in malformed:  # info's reading of the describing keys may have found it first
                    malformed.append("input_size")
        return cls("its metadata", meta.fix, **values)


def graph_ends(model) -> Ends:
    """What ``model``'s graph takes and gives (see the module's docstring). Reads no weights but the
    one constant the prologue's scale names."""
    from onnx import TensorProto

    graph = model.graph
    output = graph.output[0].name if graph.output else ""
    gives = PROBABILITIES if output and _made_by_softmax(graph, output) else LOGITS
    width = _dims(graph.output[0]) if graph.output else None
    width = width[1] if width is not None and len(width) == 2 else None
    inits = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in inits]
    if len(inputs) != 1:
        return Ends(FORMATS[NORMALIZED], gives, output=output, width=width, fits=False,
                    elem=f"{len(inputs)} inputs")  # fmt: skip
    value = inputs[0]
    elem_type = value.type.tensor_type.elem_type if value.type.HasField("tensor_type") else 0
    elem = {TensorProto.FLOAT: "float32"}.get(elem_type) or (
        TensorProto.DataType.Name(elem_type).lower() if elem_type else "untyped")  # fmt: skip
    shape = _dims(value)
    prologue = _prologue(graph, value.name, elem == "uint8")
    takes = None
    if shape is None or len(shape) == 4:
        if elem == "uint8" and (shape is None or shape[3] in (3, None)):
            takes = UINT8_NHWC
        elif elem == "float32":
            takes = FLOAT_NCHW if prologue and (shape is None or shape[1] in (3, None)) else NORMALIZED
    return Ends(FORMATS[takes or NORMALIZED], gives, value.name, elem, shape, output, width, prologue,
                fits=takes is not None)  # fmt: skip


def disagreements(ends: Ends, claim: Claim, where: str) -> list[str]:
    """Each way ``claim`` contradicts the graph, one line each naming both (none: they agree)."""
    out = []
    line = "{where}: {by} says {key} {claimed}; its graph {does}; {fix}"  # by and fix may name parameters
    if claim.input_format is not None and claim.input_format != ends.takes.name:
        out.append(said(line, None, where=where, by=claim.by, key="input_format", claimed=claim.input_format,
                        does=f"takes {ends.what}", fix=claim.fix))  # fmt: skip
    if claim.output_format is not None and claim.output_format != ends.gives:
        gives = ("probabilities (a Softmax makes its output)" if gives_probabilities(ends.gives)
                 else f"logits (no Softmax makes its output {readers.shown(ends.output)})")  # fmt: skip
        out.append(said(line, None, where=where, by=claim.by, key="output_format", claimed=claim.output_format,
                        does=f"gives {gives}", fix=claim.fix))  # fmt: skip
    fixed = ends.chw if ends.fits else (None, None, None)  # (C, H, W) where the graph fixes them
    if claim.input_size is not None and any(isinstance(g, int) and g != c for g, c in zip(fixed, claim.input_size)):
        out.append(said(line, None, where=where, by=claim.by, key="input_size", claimed=list(claim.input_size),
                        does=f"takes {ends.said}", fix=claim.fix))  # fmt: skip
    return out


def ends_of(model, where: str, claim: Claim | None = None) -> Ends:
    """What ``model`` takes and gives, from its graph, with ``claim`` (default: its own metadata's,
    :meth:`Claim.of_meta`) held to it: a contradiction is one error naming both, before anything runs
    or is written."""
    if claim is None:
        claim = Claim.of_meta(ArtifactMeta.of(model, where))
    ends = graph_ends(model)
    problems = disagreements(ends, claim, where)
    if problems:
        raise Contradicted(problems[0])
    return ends


# ---------------------------------------------------------------- engines: no graph, the manifest decides


def engine_format(model_entry, input_entry: dict, where: str) -> InputFormat:
    """The format an engine takes, from its manifest: the ``input_format`` its ``model`` entry records
    (normalised where it records none: every engine built before pixel inputs), held to the input
    profile it records (a uint8 (N, H, W, 3) profile for ``uint8-nhwc``, (N, 3, H, W) for the
    others, and the input's ``dtype`` where recorded): a contradiction is one error naming both."""
    name = model_entry.get("input_format", NORMALIZED) if isinstance(model_entry, dict) else NORMALIZED
    if name not in FORMATS:
        raise readers.Malformed(f"the manifest of {where}", "model.input_format",
                                f"is {readers.shown(name)}, not one of {', '.join(INPUT_FORMATS)}",
                                "rebuild the engine with `aft-export build`")  # fmt: skip
    fmt = FORMATS[name]
    shape = input_entry.get("min") if isinstance(input_entry, dict) else None
    problem = engine_input_problem(fmt, input_entry.get("dtype") if isinstance(input_entry, dict) else None, shape)
    if problem:
        raise Contradicted(f"the manifest of {where} says input_format {name}, but {problem}; rebuild the engine "
                           f"with `aft-export build`")  # fmt: skip
    return fmt


def engine_input_problem(fmt: InputFormat, dtype: str | None, shape) -> str | None:
    """How an engine's input (its ``dtype`` by NumPy's name, None where unknown, and a ``shape`` of
    it) contradicts ``fmt``, in words (None: it does not)."""
    if dtype is not None and dtype != fmt.dtype:
        return f"its input is {dtype}, not {fmt.dtype}"
    if isinstance(shape, (list, tuple)) and len(shape) == 4:
        channels = shape[3] if fmt.layout == "NHWC" else shape[1]
        if channels not in (3, -1, None):
            return f"its input profile {list(shape)} is not {fmt.layout} with 3 channels"
    return None


# ---------------------------------------------------------------- reading the graph


def _dims(value) -> tuple | None:
    t = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in t.shape.dim)


def _producer(graph) -> dict:
    return {out: node for node in graph.node for out in node.output}


def _made_by_softmax(graph, output: str) -> bool:
    producer = _producer(graph)
    node = producer.get(output)
    while node is not None and node.op_type in SEEN_THROUGH and node.input:
        node = producer.get(node.input[0])
    return node is not None and node.op_type == "Softmax"


def _prologue(graph, name: str, uint8: bool) -> str:
    """How the pixel prologue at input ``name`` is found: "mark" (a node marked as the pixel input),
    "nodes" (the input, through a Cast and a Transpose to NCHW, divided by 255), or "" (none)."""
    if any(node_module(n) is not None and node_module(n)[0] == PIXEL_MODULE[0] for n in graph.node):
        return "mark"
    consumers: dict[str, list] = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    value, seen = name, 0
    while seen < 4:  # Cast, Transpose, then the scale
        seen += 1
        following = consumers.get(value, [])
        if len(following) != 1:
            return ""
        node = following[0]
        if node.op_type == "Cast" or (node.op_type == "Transpose" and _perm(node) == [0, 3, 1, 2] and uint8):
            value = node.output[0]
            continue
        if node.op_type in ("Div", "Mul") and len(node.input) == 2 and node.input[0] == value:
            scale = _constant(graph, node.input[1])
            want = 255.0 if node.op_type == "Div" else 1 / 255.0
            if scale is not None and scale.size and abs(float(scale.max()) - want) <= 1e-3 * want and \
                    abs(float(scale.min()) - want) <= 1e-3 * want:  # fmt: skip
                return "nodes"
        return ""
    return ""


def _perm(node) -> list[int]:
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), [])


def _constant(graph, name: str):
    """The value of the constant ``name`` (an initializer or a Constant node's), as a NumPy array; None
    for anything else or anything larger than a few values."""
    from onnx import numpy_helper

    for t in graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t) if _count(t.dims) <= 16 else None
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            for a in node.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t) if _count(a.t.dims) <= 16 else None
                if a.name == "value_float":
                    import numpy as np

                    return np.array(a.f, np.float32)
    return None


def _count(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


__all__ = ["Claim", "Contradicted", "Ends", "PIXEL_MODULE", "PROBABILITY_MODULE", "disagreements", "engine_format",
           "engine_input_problem", "ends_of", "graph_ends"]
