"""Where a model comes from: one idea, :class:`ModelSource`, for every kind.

A source loads to one ``(module in eval mode, ModelMeta)`` pair
(:class:`~aft_export.models.checkpoint.ModelMeta`), and every command takes that pair and hands
it on. The kinds:

* a checkpoint of ours, or a plain ``state_dict`` file with a registry config name:
  :class:`CheckpointSource`;
* a ``model_def`` factory with a weights file, or a JSON/YAML model spec file naming
  both: :class:`aft_export.byo.spec.UserModel`, which plugs in from above (the core never
  imports the bring-your-own code): importing :mod:`aft_export.byo` registers the spec
  file suffixes here with :func:`register_reader`, and a user model is itself a source.

This module imports nothing heavy: the command line registers readers before torch loads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from aft_export.errors import AFTExportError
from aft_export.readers import regular_file

SPEC_SUFFIXES = (".yaml", ".yml", ".json")  # model spec files (aft_export.byo reads them)


@runtime_checkable
class ModelSource(Protocol):
    """Anything that loads to ``(module, ModelMeta)``.

    ``path``: the one file that stands for the model in reports and run directories (a
    checkpoint, a spec file, a weights file); ``inputs``: every file it reads, so no
    command writes over one."""

    @property
    def path(self) -> str: ...

    @property
    def inputs(self) -> tuple[str, ...]: ...

    def load(self, log=None) -> tuple[Any, Any]: ...


@dataclass(frozen=True)
class CheckpointSource:
    """A checkpoint of ours, or a plain state_dict file with the registry ``config`` it was trained with."""

    checkpoint: str
    config: str | None = None
    weights_key: str | None = None

    def __str__(self) -> str:
        return self.checkpoint

    @property
    def path(self) -> str:
        return self.checkpoint

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.checkpoint,)

    def load(self, log=None):
        from aft_export.models.checkpoint import load_checkpoint  # torch: only when a model is loaded

        return load_checkpoint(self.checkpoint, config=self.config, weights_key=self.weights_key)

    def weight_bytes(self) -> int | None:
        """The weights' bytes, told without loading them (None: not cheaply); optional for a source."""
        from aft_export.models.checkpoint import weight_bytes

        return weight_bytes(self.checkpoint, self.weights_key)


_READERS: dict[str, tuple[Callable[[str], ModelSource], str]] = {}


def register_reader(suffixes: tuple[str, ...], reader: Callable[[str], ModelSource], what: str) -> None:
    """Files with these suffixes are read by ``reader(path) -> ModelSource`` (``what`` names
    them in messages). The bring-your-own code registers model spec files this way."""
    for suffix in suffixes:
        _READERS[suffix.lower()] = (reader, what)


def source_suffixes() -> tuple[str, ...]:
    """The file suffixes a registered reader takes (beyond checkpoints)."""
    return tuple(_READERS)


def open_source(source, config: str | None = None) -> ModelSource:
    """The :class:`ModelSource` for ``source``: a source already, a file a registered reader
    takes (a model spec), or a checkpoint path (``config`` for plain state_dict files)."""
    if isinstance(source, ModelSource):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise AFTExportError(f"a model is a checkpoint path or a model source, not a {type(source).__name__}")
    suffix = Path(source).suffix.lower()
    if suffix in _READERS:
        reader, what = _READERS[suffix]
        regular_file(source, what)  # missing, a directory, a FIFO or a device: said as what it is
        return reader(str(source))
    if suffix in SPEC_SUFFIXES:
        raise AFTExportError(f"{source} is a model spec file; its reader is aft_export.byo (import aft_export.byo "
                             f"first in Python; the command line does)")  # fmt: skip
    return CheckpointSource(str(source), config)


def load_model(source, config: str | None = None, log=None):
    """``(module in eval mode, ModelMeta)`` of any source (see :func:`open_source`)."""
    return open_source(source, config).load(log)
