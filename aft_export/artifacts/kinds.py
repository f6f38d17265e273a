"""What kind of file a path names, decided in one place, by its name (:func:`kind_of`): an ONNX file,
a TensorRT engine, a checkpoint, or another model source (a model spec, or a file of any suffix a
reader is registered for, :func:`aft_export.models.sources.register_reader`). Every module that
must know what a path is asks here; none compares a suffix to decide it. What is *in* the file is
read elsewhere (:mod:`aft_export.artifacts.ends`, the manifests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aft_export.models.sources import SPEC_SUFFIXES, source_suffixes


@dataclass(frozen=True)
class FileKind:
    name: str  # the word in reports and JSON
    title: str  # for sentences
    suffixes: tuple[str, ...]  # lower case, the first the one we write
    model_source: bool  # PyTorch runs it (a checkpoint or a model source), not a runtime of an exported file

    def described(self) -> str:
        """``an engine (.engine, .plan)``: the kind and its suffixes, for messages."""
        return f"{self.title} ({', '.join(self.suffixes)})"

    def stem(self, name: str) -> str:
        """``name`` without this kind's suffix (any case), where it has one."""
        lower = name.lower()
        return next((name[: -len(s)] for s in self.suffixes if lower.endswith(s)), name)


ONNX = FileKind("onnx", "an ONNX file", (".onnx",), False)
ENGINE = FileKind("engine", "an engine", (".engine", ".plan"), False)
CHECKPOINT = FileKind("checkpoint", "a checkpoint", (".pt", ".pth", ".safetensors"), True)
SOURCE = FileKind("source", "a model spec", SPEC_SUFFIXES, True)  # and every suffix a reader is registered for
KINDS = (ONNX, ENGINE, CHECKPOINT, SOURCE)
NAMED = {k.name: k for k in KINDS}  # a kind by the word a report or a JSON file holds


def kind_of(path) -> FileKind | None:
    """The kind of file ``path`` names, by its suffix (any case); None: no kind of ours."""
    suffix = Path(str(path)).suffix.lower()
    found = next((k for k in KINDS if suffix in k.suffixes), None)
    return found or (SOURCE if suffix and suffix in source_suffixes() else None)


def is_onnx(path) -> bool:
    return kind_of(path) is ONNX


def is_model_source(path) -> bool:
    """A checkpoint or another model source: what PyTorch runs."""
    kind = kind_of(path)
    return kind is not None and kind.model_source


def expected(*kinds: FileKind) -> str:
    """``a checkpoint (.pt, .pth, .safetensors), an ONNX file (.onnx) or an engine (.engine, .plan)``."""
    said = [k.described() for k in kinds or KINDS]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " or " + said[-1]
