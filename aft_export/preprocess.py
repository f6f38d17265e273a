"""Preprocessing and class names said by the user, from values or a small file.

Our own checkpoints and ONNX files carry their input size, normalisation and class names.
A model trained with other code (:mod:`aft_export.byo`), or an ONNX file another tool wrote
(ModelOpt, ONNX Runtime's quantiser, Optimum), does not, so the user says them once, as
values or in a JSON/YAML file::

    input_size: 32                 # square side the model was trained at
    mean: [0.4914, 0.4822, 0.4465] # of x / 255, RGB
    std: [0.2470, 0.2435, 0.2616]
    classes_file: classes.txt      # one name per line (or classes: [cat, dog, ...])

An ONNX file from another tool may also have that file beside it, as JSON, named after it
(:func:`sidecar_path`: ``theirs.onnx`` -> ``theirs.preprocess.json``); every command that
runs such a file reads it there. Nothing is guessed: a missing input size or normalisation
is an error that names the option to give.

This module is the reader for both (the bring-your-own model code re-exports it from
:mod:`aft_export.byo.preprocess`); it lives on the model-and-data floor so the runners,
which feed such files, can read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aft_export.data import IMAGENET, Preprocessing
from aft_export.errors import AFTExportError

FIELDS = ("input_size", "mean", "std", "classes", "classes_file")
SIDECAR_SUFFIX = ".preprocess.json"


def read_mapping(path: str | Path) -> dict[str, Any]:
    """A JSON or YAML file holding one mapping."""
    path = Path(path)
    if not path.is_file():
        raise AFTExportError(f"preprocessing file {path} does not exist; check `preprocess`")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise AFTExportError(f"reading {path} needs PyYAML (pip install pyyaml), or write it as JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise AFTExportError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    elif path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AFTExportError(f"{path} is not valid JSON: {exc}") from None
    else:
        raise AFTExportError(f"{path}: preprocessing files are .json, .yaml or .yml")
    if not isinstance(data, dict):
        raise AFTExportError(f"{path} must hold a mapping (input_size, mean, std, classes_file), "
                             f"not a {type(data).__name__}")  # fmt: skip
    return data


def read_classes_file(path: str | Path) -> tuple[str, ...]:
    """One class name per line; blank lines and ``#`` comments are skipped."""
    path = Path(path)
    if not path.is_file():
        raise AFTExportError(f"class names file {path} does not exist; check `classes`")
    names = tuple(line.strip() for line in path.read_text().splitlines())
    names = tuple(n for n in names if n and not n.startswith("#"))
    if not names:
        raise AFTExportError(f"class names file {path} has no names (one per line)")
    return names


def _floats(value: Any, option: str) -> tuple[float, ...]:
    if isinstance(value, str):
        value = value.split(",")
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise AFTExportError(f"`{option}` takes three numbers, e.g. 0.485,0.456,0.406; got {value!r}") from None


def _int(value: Any, option: str) -> int:
    if isinstance(value, (list, tuple)):  # [C, H, W] or [H, W] as some configs write it
        sides = [int(v) for v in value[-2:]]
        if len(set(sides)) != 1:
            raise AFTExportError(f"`{option}` {list(value)} is not square; the exported graph takes square inputs")
        value = sides[0]
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise AFTExportError(f"`{option}` must be a number of pixels, got {value!r}") from None
    if out != value and not isinstance(value, str):
        raise AFTExportError(f"`{option}` must be a whole number of pixels, got {value!r}")
    return out


def resolve(file: str | Path | None = None, *, input_size=None, mean=None, std=None, classes=None,
            base: Path | None = None, extra_keys: tuple[str, ...] = (), missing: str | None = None) -> Preprocessing:  # fmt: skip
    """Preprocessing from a file and values; a value overrides the file.

    ``classes`` is a file of names (a path) or a list of names. ``extra_keys`` are other
    keys the file may hold (a full model spec adds ``model_def``, ``weights``...);
    ``missing``: the error when the input size or normalisation is missing (default: the
    one for a model trained elsewhere)."""
    data: dict[str, Any] = {}
    where = "the options"
    if file is not None:
        data = read_mapping(file)
        unknown = sorted(set(data) - set(FIELDS) - set(extra_keys))
        if unknown:
            raise AFTExportError(f"{file} has unknown keys {unknown}; known: {sorted(FIELDS + extra_keys)}")
        base = Path(file).resolve().parent
        where = str(file)
    if "classes" in data and "classes_file" in data:
        raise AFTExportError(f"{where} gives both classes and classes_file; keep one")
    size = input_size if input_size is not None else data.get("input_size")
    mean = mean if mean is not None else data.get("mean")
    std = std if std is not None else data.get("std")
    absent = [f"`{name}`" for name, v in (("input_size", size), ("mean", mean), ("std", std)) if v is None]
    if absent:
        raise AFTExportError(missing or (
            f"a model trained elsewhere needs its preprocessing: give {', '.join(absent)} (or a `preprocess` "
            f"JSON/YAML file with input_size, mean, std); ImageNet-trained models use {IMAGENET}"))
    names = None
    if classes is not None:
        names = tuple(classes) if isinstance(classes, (list, tuple)) else read_classes_file(classes)
    elif "classes" in data:
        if not isinstance(data["classes"], list):
            raise AFTExportError(f"{where}: classes must be a list of names")
        names = tuple(str(c) for c in data["classes"])
    elif "classes_file" in data:
        path = Path(data["classes_file"])
        names = read_classes_file(path if path.is_absolute() or base is None else base / path)
    return Preprocessing(_int(size, "input_size"), _floats(mean, "mean"), _floats(std, "std"), names)


# ---------------------------------------------------------------- files another tool wrote


def sidecar_path(artifact: str | Path) -> Path:
    """Where the preprocessing of an ONNX file without our metadata may lie: beside it, named
    after it (``theirs.onnx`` -> ``theirs.preprocess.json``)."""
    artifact = Path(artifact)
    stem = artifact.name[: -len(artifact.suffix)] if artifact.suffix else artifact.name
    return artifact.with_name(stem + SIDECAR_SUFFIX)


@dataclass(frozen=True)
class ForeignPreprocessing:
    """How to feed files that carry no preprocessing of their own (an ONNX file another tool
    wrote): a ``preprocess`` file and values, a value overriding the file; without a file, the
    JSON beside each artifact (:func:`sidecar_path`) fills what the values leave out. A file
    with our metadata describes itself and ignores this. ``origin`` names where complete
    values came from (e.g. the checkpoint a parity run compares against), for messages."""

    preprocess: str | None = None
    input_size: int | None = None
    mean: tuple[float, ...] | str | None = None
    std: tuple[float, ...] | str | None = None
    classes: str | tuple[str, ...] | None = None  # a file of names, or the names
    origin: str = ""

    @classmethod
    def of(cls, pre: Preprocessing, origin: str) -> ForeignPreprocessing:
        """Exactly ``pre`` (no file is read): a checkpoint's preprocessing serving another file."""
        return cls(None, pre.input_size, tuple(pre.mean), tuple(pre.std), pre.classes, origin)

    @property
    def complete(self) -> bool:
        """Every value given: no file needs reading."""
        return None not in (self.input_size, self.mean, self.std, self.classes)

    def for_artifact(self, artifact: str | Path | None, where: str = "") -> tuple[Preprocessing, str]:
        """The preprocessing of ``artifact`` (a file without our metadata; None: a graph in
        memory) and where it came from: the values, the ``preprocess`` file, or the JSON beside
        the artifact. No preprocessing at all is one error that says what to give."""
        where = where or str(artifact or "the graph")
        file = self.preprocess
        beside = sidecar_path(artifact) if artifact is not None else None
        if file is None and beside is not None and beside.is_file() and not self.complete:
            file = str(beside)
        given = [name for name in ("input_size", "mean", "std", "classes") if getattr(self, name) is not None]
        missing = (f"{where} has no aft-export metadata, so it does not say how to preprocess images; give "
                   f"`input_size`, `mean` and `std` (and `classes`) or a `preprocess` JSON/YAML file"
                   + (f", or write {beside.name} beside it" if beside is not None else "")
                   + " with input_size, mean, std and classes (docs/parity.md, 'Files other tools wrote')")
        pre = resolve(file, input_size=self.input_size, mean=self.mean, std=self.std, classes=self.classes,
                      missing=missing)  # fmt: skip
        sources = ([self.origin or "the options (" + ", ".join(f"`{g}`" for g in given) + ")"] if given else []) + (
            [Path(file).name if file == str(beside) else str(file)] if file is not None else [])  # fmt: skip
        return pre, " and ".join(sources)
