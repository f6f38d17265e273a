"""A model trained elsewhere, as one value every command can take in place of a checkpoint.

:class:`UserModel` is the user's model definition, weights and preprocessing
(``model_def``, ``weights``, ``weights_key``, ``preprocess``/``input_size``/
``mean``/``std``/``classes``). Written down as a JSON/YAML *model spec* file it
is the same thing on disk::

    model_def: mynet.py:build      # relative paths are relative to this file
    weights: runs/best.pt
    weights_key: model             # optional: which entry of the file holds the weights
    input_size: 32
    mean: [0.4914, 0.4822, 0.4465]
    std: [0.2470, 0.2435, 0.2616]
    classes_file: classes.txt

A :class:`UserModel` is a :class:`~aft_export.models.sources.ModelSource`, and importing
:mod:`aft_export.byo` registers the spec file suffixes with
:func:`aft_export.models.sources.register_reader`, so the PyTorch reference of ``parity``,
``eval``, ``bench`` and ``pipeline`` is the user's own, unmodified module. Loading a spec
imports the code it names, as ``model_def`` does: use only specs you wrote or trust,
as you would a Python file.

For export, the loaded model's ``ModelMeta.prepare`` is
:func:`aft_export.byo.verify.prepare_export`: it swaps the public AFT layers for ours
and verifies the swap before the exporter writes anything.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from aft_export import readers
from aft_export.byo.modeldef import build_model
from aft_export.data.images import Preprocessing
from aft_export.data.preprocess import read_mapping, resolve
from aft_export.byo.swap import layer_variants, plan_swap, quiet_stdout
from aft_export.byo.verify import prepare_export
from aft_export.models.checkpoint import ModelMeta
from aft_export.errors import AFTExportError, said
from aft_export.models.weights import load_weights

SPEC_KEYS = ("model_def", "weights", "weights_key", "name")

logger = logging.getLogger("aft_export")


@dataclass(frozen=True)
class UserModel:
    """The user's model: how to build it, its weights and its preprocessing. A
    :class:`~aft_export.models.sources.ModelSource`."""

    model_def: str
    preprocessing: Preprocessing
    weights: str | None = None  # None: the parameters the factory itself sets (or loads)
    weights_key: str | None = None
    name: str = ""
    spec: str | None = None  # the model spec file it was read from, if any

    def __str__(self) -> str:
        return self.spec or self.model_def + (f" with {self.weights}" if self.weights else "")

    @property
    def code(self) -> str | None:
        """The Python file of ``model_def`` (None for an importable module)."""
        target = self.model_def.rpartition(":")[0]
        return target if target.endswith(".py") else None

    @property
    def path(self) -> str:
        """The file that stands for the model in reports: the spec, else the weights, else the code."""
        return self.spec or self.weights or self.code or self.model_def

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(p for p in (self.spec, self.weights, self.code) if p)

    def load(self, log=None) -> tuple[nn.Module, ModelMeta]:
        """The original module in eval mode, and its metadata."""
        note = log or logger.info
        model = build_model(self.model_def)
        if self.weights:
            load_weights(model, self.weights, self.weights_key, log_fn=log)
        else:
            note(said("no {weights}: {model_def_got} keeps the parameters its factory gave it", None,
                      model_def_got=self.model_def))
        model.eval()
        return model, meta_for(model, self, note)


def meta_for(model: nn.Module, user: UserModel, note=logger.info) -> ModelMeta:
    """Check the model is a classifier at the input size; its metadata for the exporter and runners."""
    size = user.preprocessing.input_size
    try:
        with torch.no_grad(), quiet_stdout():
            out = model(torch.zeros(1, 3, size, size))
    except Exception:  # noqa: BLE001 - their forward raised
        plan_swap(model, torch.zeros(1, 3, size, size))  # raises: a refusal by name, or the failing layer
        raise  # pragma: no cover - plan_swap runs the same forward
    if not isinstance(out, torch.Tensor):
        raise AFTExportError(f"{user.model_def} returns a {type(out).__name__}, not a tensor of logits")
    if out.dim() != 2 or out.shape[0] != 1:
        raise AFTExportError(f"{user.model_def} returns a tensor of shape {tuple(out.shape)} for one "
                             f"{size}x{size} image; a classifier returns (N, classes) logits")  # fmt: skip
    p = user.preprocessing
    classes = p.class_names(int(out.shape[1]))
    if p.classes is None:
        note(said("classes: numbered 0..{value} (give {classes}, a file, for names)", None, value=len(classes) - 1))
    config = ForeignConfig(img_size=size, model_def=user.model_def, weights=user.weights or "",
                           weights_key=user.weights_key or "", variant="+".join(layer_variants(model)) or "none")
    return ModelMeta(config, classes, tuple(p.mean), tuple(p.std), model_name=user.name or user.model_def,
                     format_version=0, path=user.weights or "", sha256=state_sha256(model),
                     prepare=prepare_export)  # fmt: skip


@dataclass
class ForeignConfig:
    """Stands where a registry :class:`~aft_export.models.ModelConfig` stands for our own
    checkpoints: the exporter reads the input size from it and records ``to_dict()``."""

    img_size: int
    model_def: str
    weights: str = ""
    weights_key: str = ""
    in_chans: int = 3
    patch_size: int = 1
    variant: str = "none"  # the AFT variants found, e.g. "full" or "full+simple"; set by byo.verify.prepare_export
    swap: dict = field(default_factory=dict)

    @property
    def fixed_input_size(self) -> bool:
        return True  # public layers are mapped at the token count the input size gives

    def to_dict(self) -> dict:
        return {"source": "model trained elsewhere", "model_def": self.model_def, "weights": Path(self.weights).name,
                "weights_key": self.weights_key, "img_size": self.img_size, "in_chans": self.in_chans,
                "variant": self.variant, **self.swap}  # fmt: skip


def state_sha256(model: nn.Module) -> str:
    """A digest of the weights (names, dtypes, shapes, bytes): the same model gives the
    same digest however its file was laid out."""
    h = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        t = value.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def read_spec(path: str | os.PathLike) -> UserModel:
    """A model spec file (JSON or YAML): model_def, weights, weights_key, name, preprocessing."""
    path = Path(path)
    pre = resolve(path, extra_keys=SPEC_KEYS)
    data = read_mapping(path)
    if not data.get("model_def"):
        raise AFTExportError(f"{path} is not a model spec: it has no model_def (MODULE:FACTORY or FILE.py:FACTORY)")
    where = str(path)
    # each value checked by its key, named with the file (readers): text where text is meant
    given = {k: readers.text(data[k], where, k) for k in ("model_def", "weights", "weights_key", "name")
             if data.get(k) is not None}  # fmt: skip
    base = path.resolve().parent
    target, _, factory = given["model_def"].rpartition(":")
    if target.endswith(".py") and not Path(target).is_absolute():
        target = str(base / target)
    weights = given.get("weights")
    if weights and not Path(weights).is_absolute():
        weights = str(base / weights)
    return UserModel(f"{target}:{factory}", pre, weights=weights, weights_key=given.get("weights_key"),
                     name=given.get("name") or path.stem, spec=str(path))  # fmt: skip
