"""Preprocessing and class names of a model trained elsewhere, from flags or a small file.

Our own checkpoints carry their input size, normalisation and class names; a model
trained with other code does not, so the user says them once, on the command line or
in a JSON/YAML file::

    input_size: 32                 # square side the model was trained at
    mean: [0.4914, 0.4822, 0.4465] # of x / 255, RGB
    std: [0.2470, 0.2435, 0.2616]
    classes_file: classes.txt      # one name per line (or classes: [cat, dog, ...])

They end up in the ONNX metadata under the same keys as for our own checkpoints, so
every later command reads them the same way. Nothing is guessed: a missing input size
or normalisation is an error that says which flag to give.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aft_export.data import IMAGENET, Preprocessing  # noqa: F401 (the one preprocessing type; this name is the API)
from aft_export.errors import AFTExportError

FIELDS = ("input_size", "mean", "std", "classes", "classes_file")


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


def _floats(value: Any, name: str) -> tuple[float, ...]:
    if isinstance(value, str):
        value = value.split(",")
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise AFTExportError(f"{name} takes three numbers, e.g. 0.485,0.456,0.406; got {value!r}") from None


def _int(value: Any, name: str) -> int:
    if isinstance(value, (list, tuple)):  # [C, H, W] or [H, W] as some configs write it
        sides = [int(v) for v in value[-2:]]
        if len(set(sides)) != 1:
            raise AFTExportError(f"{name} {list(value)} is not square; the exported graph takes square inputs")
        value = sides[0]
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise AFTExportError(f"{name} must be a number of pixels, got {value!r}") from None
    if out != value and not isinstance(value, str):
        raise AFTExportError(f"{name} must be a whole number of pixels, got {value!r}")
    return out


def resolve(file: str | Path | None = None, *, input_size=None, mean=None, std=None, classes=None,
            base: Path | None = None, extra_keys: tuple[str, ...] = ()) -> Preprocessing:  # fmt: skip
    """Preprocessing from a file and flags; a flag overrides the file.

    ``classes`` is a file of names (a path) or a list of names. ``extra_keys`` are other
    keys the file may hold (a full model spec adds ``model_def``, ``weights``...)."""
    data: dict[str, Any] = {}
    where = "flags"
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
    missing = [f"`{option}`" for option, v in (("input_size", size), ("mean", mean), ("std", std)) if v is None]
    if missing:
        raise AFTExportError(
            f"a model trained elsewhere needs its preprocessing: give {', '.join(missing)} (or a `preprocess` "
            f"JSON/YAML file with input_size, mean, std); ImageNet-trained models use {IMAGENET}"
        )
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
