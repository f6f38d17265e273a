"""Preprocessing and class names said by the user, from values or a small file.

Our own checkpoints and ONNX files carry their input size, normalisation and class names.
A model trained with other code (:mod:`aft_export.byo`), or an ONNX file another tool wrote
(ModelOpt, ONNX Runtime's quantiser, Optimum), does not, so the user says them once, as
values or in a JSON/YAML file::

    input_size: 32                 # square side the model was trained at
    mean: [0.4914, 0.4822, 0.4465] # of x / 255, RGB
    std: [0.2470, 0.2435, 0.2616]
    classes_file: classes.txt      # one name per line (or classes: [cat, dog, ...])
    input_format: uint8-nhwc       # optional: what the file takes (normalized, uint8-nhwc, float-nchw)

An ONNX file from another tool may also have that file beside it, as JSON, named after it
(:func:`sidecar_path`: ``theirs.onnx`` -> ``theirs.preprocess.json``); every command that
runs such a file reads it there. Nothing is guessed: a missing input size or normalisation
is an error that names the option to give. What the file takes is read from its graph
(:mod:`aft_export.artifacts.ends`); a stated ``input_format`` is held to it, as our own metadata is.

This module is the reader for both (the bring-your-own model code reads it too); it lives on the model-and-data floor so the runners,
which feed such files, can read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aft_export import readers
from aft_export.data.images import IMAGENET, INPUT_FORMATS, Preprocessing
from aft_export.errors import AFTExportError, Named, joined, listed, said

FIELDS = ("input_size", "mean", "std", "classes", "classes_file", "input_format")
SIDECAR_SUFFIX = ".preprocess.json"


def read_mapping(path: str | Path, fix: str = said("check {preprocess}", None)) -> dict[str, Any]:
    """A JSON or YAML file holding one mapping, read with the bounds of :mod:`aft_export.readers`."""
    return readers.read_mapping(path, "preprocessing file", fix)


def read_classes_file(path: str | Path, fix: str = said("check {classes}", None)) -> tuple[str, ...]:
    """One class name per line; blank lines and ``#`` comments are skipped. ``fix``: what to do
    about a path that is not a readable file (it names where the path came from)."""
    path = Path(path)
    text = readers.read_text(path, "class names file", fix + ": give a file with one class name per line")
    names = tuple(line.strip() for line in text.splitlines())
    names = tuple(n for n in names if n and not n.startswith("#"))
    if not names:
        raise AFTExportError(f"class names file {path} has no names; write one name per line")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise AFTExportError(f"class names file {path}: class names repeat: {dup[:5]}; give each class once")
    return names


def _floats(value: Any, option: str) -> tuple[float, ...]:
    if isinstance(value, str):
        value = value.split(",")
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise AFTExportError(said("{option} takes three numbers, e.g. 0.485,0.456,0.406; got {value!r}", None,
                                  option=Named(option), value=value)) from None


def _int(value: Any, option: str) -> int:
    if isinstance(value, (list, tuple)):  # [C, H, W] or [H, W] as some configs write it
        sides = [int(v) for v in value[-2:]]
        if len(set(sides)) != 1:
            raise AFTExportError(said("{option} {value} is not square; the exported graph takes square inputs",
                                      None, option=Named(option), value=list(value)))
        value = sides[0]
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise AFTExportError(said("{option} must be a number of pixels, got {value!r}", None, option=Named(option),
                                  value=value)) from None
    if out != value and not isinstance(value, str):
        raise AFTExportError(said("{option} must be a whole number of pixels, got {value!r}", None,
                                  option=Named(option), value=value))
    return out


def file_values(data: dict[str, Any], where: str, base: Path) -> dict[str, Any]:
    """The preprocessing a file holds, each value checked and named by the file and its key (a
    key in a file is not an option the user typed): ``input_size`` a whole number of pixels (or
    text of its digits, ``"224"``; or the shape of a square, ``[N, C, H, W]``, ``[C, H, W]`` or
    ``[H, W]``), ``mean`` and ``std`` three finite numbers (a list, or text ``"0.5,0.5,0.5"``;
    std > 0), ``classes`` a list of names or ``classes_file`` a file of them (relative to
    ``base``, the file's directory)."""
    out: dict[str, Any] = {}
    if "input_size" in data:
        size = data["input_size"]
        if isinstance(size, (list, tuple)):
            sides = readers.wholes(size, where, "input_size", 1, readers.MAX_SIDE)
            if len(sides) not in (2, 3, 4) or sides[-1] != sides[-2]:
                raise readers.Malformed(where, "input_size", f"{list(sides)} is not the shape of a square, [N, C, H, "
                                                             f"W], [C, H, W] or [H, W] (the exported graph takes "
                                                             f"square inputs)")  # fmt: skip
            size = sides[-1]
        elif isinstance(size, str) and size.strip().isascii() and size.strip().isdigit():  # "224", as YAML may quote it
            size = int(size) if len(size.strip()) <= readers.MAX_DIGITS else size
        out["input_size"] = readers.whole(size, where, "input_size", 1, readers.MAX_SIDE, "a whole number of pixels")
    for key in ("mean", "std"):
        if key in data:
            value = data[key]
            if isinstance(value, str):  # "0.485,0.456,0.406", as the options take it
                try:
                    value = [float(v) for v in value.split(",")]
                except ValueError:
                    pass  # refused below, as it was written
            out[key] = readers.numbers(value, where, key, 3, positive=key == "std")
    if "classes" in data:
        yaml = Path(where).suffix.lower() in (".yaml", ".yml")
        out["classes"] = readers.names(data["classes"], where, "classes", yaml=yaml)
    elif "classes_file" in data:
        name = readers.text(data["classes_file"], where, "classes_file")
        path = Path(name) if os.path.isabs(name) else base / name
        out["classes"] = read_classes_file(path, f"correct classes_file in {where}")
    if "input_format" in data:
        value = data["input_format"]
        if value not in INPUT_FORMATS:
            raise readers.Malformed(where, "input_format", f"is {readers.shown(value)}, not one of "
                                                           f"{', '.join(INPUT_FORMATS)}")  # fmt: skip
        out["input_format"] = value
    return out


def resolve(file: str | Path | None = None, *, input_size=None, mean=None, std=None, classes=None,
            input_format: str | None = None, base: Path | None = None, extra_keys: tuple[str, ...] = (),
            missing: str | None = None, fix: str = said("check {preprocess}", None)) -> Preprocessing:  # fmt: skip
    """Preprocessing from a file and values; a value overrides the file.

    ``classes`` is a file of names (a path) or a list of names. ``extra_keys`` are other
    keys the file may hold (a full model spec adds ``model_def``, ``weights``...);
    ``missing``: the error when the input size or normalisation is missing (default: the
    one for a model trained elsewhere). The file's values are checked by key, and a bad one is
    said with the file's name and its key; a value given here is checked as the option it is.
    ``fix``: what to do about a ``file`` that is no readable file (default: the option that names
    it; the JSON beside another tool's file is not named by an option)."""
    from_file: dict[str, Any] = {}
    if file is not None:
        data = read_mapping(file, fix)
        where = str(file)
        unknown = sorted(set(data) - set(FIELDS) - set(extra_keys))
        if unknown:
            raise AFTExportError(f"{where} has unknown keys {unknown}; known: {sorted(FIELDS + extra_keys)}")
        if "classes" in data and "classes_file" in data:
            raise AFTExportError(f"{where} gives both classes and classes_file; keep one")
        from_file = file_values(data, where, Path(file).resolve().parent)
    size = _int(input_size, "input_size") if input_size is not None else from_file.get("input_size")
    mean = _floats(mean, "mean") if mean is not None else from_file.get("mean")
    std = _floats(std, "std") if std is not None else from_file.get("std")
    absent = [name for name, v in (("input_size", size), ("mean", mean), ("std", std)) if v is None]
    if absent:
        raise AFTExportError(missing or (
            said("a model trained elsewhere needs its preprocessing: give {absent} (or a {preprocess} JSON/YAML "
                 "file with input_size, mean, std); ImageNet-trained models use {IMAGENET}", None,
                 absent=listed(absent), IMAGENET=IMAGENET)))
    names = from_file.get("classes")
    if classes is not None:
        names = tuple(classes) if isinstance(classes, (list, tuple)) else read_classes_file(classes)
    return Preprocessing(size, mean, std, names, stated_format=input_format or from_file.get("input_format"))


# ---------------------------------------------------------------- files another tool wrote


def sidecar_path(artifact: str | Path) -> Path:
    """Where the preprocessing of an ONNX file without our metadata may lie: beside it, named
    after it (``theirs.onnx`` -> ``theirs.preprocess.json``)."""
    artifact = Path(artifact)
    stem = artifact.name[: -len(artifact.suffix)] if artifact.suffix else artifact.name
    return artifact.with_name(stem + SIDECAR_SUFFIX)


# what a caller may give for a file another tool wrote (ForeignPreprocessing.takes), by field
GIVEN = ("preprocess", "input_size", "mean", "std", "classes", "input_format")


@dataclass(frozen=True)
class ForeignPreprocessing:
    """How to feed files that carry no preprocessing of their own (an ONNX file another tool
    wrote): a ``preprocess`` file and values, a value overriding the file; without a file, the
    JSON beside each artifact (:func:`sidecar_path`) fills what the values leave out. A file
    with our metadata describes itself and ignores this. ``origin`` names where complete
    values came from (e.g. the checkpoint a parity run compares against), for messages.
    ``takes``: the fields of :data:`GIVEN` the caller can give at all (a stage whose options have
    no preprocessing reads only the JSON beside the file: :data:`BESIDE_ONLY`), so that a message
    asks for nothing it cannot take."""

    preprocess: str | None = None
    input_size: int | None = None
    mean: tuple[float, ...] | str | None = None
    std: tuple[float, ...] | str | None = None
    classes: str | tuple[str, ...] | None = None  # a file of names, or the names
    input_format: str | None = None  # what the file takes, held to its graph (None: the graph says it alone)
    origin: str = ""
    takes: tuple[str, ...] = GIVEN

    @classmethod
    def of(cls, pre: Preprocessing, origin: str) -> ForeignPreprocessing:
        """Exactly ``pre`` (no file is read): a checkpoint's preprocessing serving another file."""
        return cls(None, pre.input_size, tuple(pre.mean), tuple(pre.std), pre.classes, origin=origin)

    @property
    def complete(self) -> bool:
        """Every value the caller needs given (``input_size``, ``mean``, ``std``, and ``classes``
        where it ``takes`` them): no file needs reading."""
        needed = ("input_size", "mean", "std") + (("classes",) if "classes" in self.takes else ())
        return all(getattr(self, name) is not None for name in needed)

    def missing_message(self, where: str, beside: Path | None, what: str = "") -> str:
        """The one line for a file with no preprocessing at all: what the file is first (``what``,
        e.g. "fp32 graph", from :func:`aft_export.artifacts.onnxio.foreign_kind`), then what to give, among
        what the caller takes."""
        values = [option for option in ("input_size", "mean", "std") if option in self.takes]
        give = ""
        if values:
            give = "give " + (listed(values[:-1]) + " and " + listed(values[-1:]) if len(values) > 1
                              else listed(values))  # fmt: skip
            give += said(" (and {classes})", None) if "classes" in self.takes else ""
        if "preprocess" in self.takes:
            give = (give + " or " if give else "give ") + said("a {preprocess} JSON/YAML file", None)
        write = f"write {beside.name} beside it" if beside is not None else ""
        advice = joined(", or ", [part for part in (give, write) if part]) or "describe it"
        so = f": it is another tool's {what}, and it" if what else ", so it"
        return said("{where} has no aft-export metadata{so} does not say how to preprocess images; {advice} with "
                    "input_size, mean, std and classes (docs/parity.md, 'Files other tools wrote')", None,
                    where=where, so=so, advice=advice)  # fmt: skip

    def for_artifact(self, artifact: str | Path | None, where: str = "", what: str = "") -> tuple[Preprocessing, str]:
        """The preprocessing of ``artifact`` (a file without our metadata; None: a graph in
        memory) and where it came from: the values, the ``preprocess`` file, or the JSON beside
        the artifact. No preprocessing at all is one error that says what the file is (``what``)
        and what to give."""
        where = where or str(artifact or "the graph")
        file = self.preprocess
        beside = sidecar_path(artifact) if artifact is not None else None
        from_beside = (file is None and beside is not None and not self.complete
                       and (beside.exists() or beside.is_symlink()))  # fmt: skip
        if from_beside:
            file = str(beside)  # a directory or a FIFO there is refused by the reader, not ignored
        given = [name for name in ("input_size", "mean", "std", "classes", "input_format")
                 if getattr(self, name) is not None]  # fmt: skip
        # the JSON beside the file came from no option: a directory or a FIFO there is said as what to remove
        fix = (f"correct or remove {beside.name} beside {Path(artifact).name}" if from_beside
               else said("check {preprocess}", None))  # fmt: skip
        pre = resolve(file, input_size=self.input_size, mean=self.mean, std=self.std, classes=self.classes,
                      input_format=self.input_format, missing=self.missing_message(where, beside, what),
                      fix=fix)  # fmt: skip
        sources = ([self.origin or "the options (" + listed(given) + ")"] if given else []) + (
            [Path(file).name if file == str(beside) else str(file)] if file is not None else [])  # fmt: skip
        return pre, joined(" and ", sources)


# for a stage whose options have no preprocessing (infer, a Triton repository): only the JSON
# beside the file describes another tool's file, and a message asks for that alone
BESIDE_ONLY = ForeignPreprocessing(takes=())


def preprocessing_note(artifact: str, source: str) -> str:
    """Where the preprocessing of a file another tool wrote came from, as a result's text says it."""
    return f"{artifact}: no aft-export metadata; preprocessing from {source}"
