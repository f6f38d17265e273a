"""The checkpoint format: one file, loaded without unpickling code.

A checkpoint is a ``torch.save``d dict of plain data (strings, numbers, lists,
dicts) and tensors, so ``torch.load(weights_only=True)`` reads it and refuses any
file that carries pickled Python objects. Layout (format version 1)::

    format          "aft-export-checkpoint"
    format_version  1
    model_name      registry name, e.g. "aft_conv_cifar" (informational)
    config          ModelConfig as a dict: enough to rebuild the network
    classes         class names, by output index
    input_size      [C, H, W] the model was trained at
    mean, std       per-channel normalisation of [0, 1] RGB pixels
    provenance      data, epochs, seed, command, wall time, metrics ...
    state_dict      the weights
    train_state     (optional) optimizer/scheduler/epoch/RNG for resuming

Plain ``state_dict`` files (``.pt``/``.pth`` or ``.safetensors``) load too, given a
registry config name; the prefixes DataParallel/DDP (``module.``),
``torch.compile`` (``_orig_mod.``) and wrappers (``model.``) add are stripped, and the
weights are found in the layouts training code writes (``{"model": ...}``, EMA copies,
an ``argparse.Namespace`` of arguments beside them: see :mod:`aft_export.models.weights`).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from aft_export.data.images import CIFAR10_MEAN, CIFAR10_STD, Preprocessing
from aft_export.errors import AFTExportError, Named, said
from aft_export.fileio import atomic_write, sha256_file
from aft_export.models.classifier import AFTClassifier, ModelConfig, count_params
from aft_export.models.registry import get_config
from aft_export.models.weights import dtype_problem, nonfinite_problem, read_weights_file, select_state_dict

FORMAT = "aft-export-checkpoint"
FORMAT_VERSION = 1
_PREFIXES = ("module.", "_orig_mod.", "model.")  # DDP, torch.compile, Lightning-style wrappers


@dataclass
class ModelMeta:
    """Everything about a loaded model except the weights, whatever its source (a checkpoint of
    ours, a registry config with weights, a model trained elsewhere: :mod:`aft_export.models.sources`).

    ``config`` is a registry :class:`~aft_export.models.ModelConfig`, or for a model trained
    elsewhere what stands for one (``img_size``, ``in_chans``, ``variant``,
    ``fixed_input_size``, ``to_dict()``). ``prepare``, when set, is what the exporter runs
    first, ``prepare(model, meta, images, options, log) -> (module to export, report)``: the
    source's own step (a model trained elsewhere has its public AFT layers swapped for ours
    and the swap verified), plugged in by the source so the exporter knows none of them."""

    config: Any  # ModelConfig, or a stand-in for a model trained elsewhere
    classes: list[str]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    model_name: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    path: str = ""
    sha256: str = ""
    prepare: Callable | None = field(default=None, repr=False, compare=False)

    @property
    def input_size(self) -> tuple[int, int, int]:
        c = self.config
        return (c.in_chans, c.img_size, c.img_size)

    @property
    def preprocessing(self) -> Preprocessing:
        """The model's input size, normalisation and class names as the one preprocessing type."""
        return Preprocessing(self.config.img_size, tuple(self.mean), tuple(self.std), tuple(self.classes))


CheckpointMeta = ModelMeta  # the name of earlier releases


class NeedsConfig(AFTExportError):
    """A plain state_dict loaded without a config: it does not say its architecture. ``path``: the
    file, for a caller that takes no config and says what to give instead."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def save_checkpoint(
    path: str | os.PathLike,
    model: AFTClassifier,
    classes: list[str],
    mean=CIFAR10_MEAN,
    std=CIFAR10_STD,
    model_name: str = "",
    provenance: dict | None = None,
    train_state: dict | None = None,
) -> None:
    cfg = model.cfg
    if len(classes) != cfg.num_classes:
        raise AFTExportError(f"{len(classes)} class names for a {cfg.num_classes}-class model")
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_name": model_name,
        "config": cfg.to_dict(),
        "classes": list(classes),
        "input_size": [cfg.in_chans, cfg.img_size, cfg.img_size],
        "mean": [float(m) for m in mean],
        "std": [float(s) for s in std],
        "provenance": provenance or {},
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
    }
    if train_state is not None:
        payload["train_state"] = train_state
    _check_plain(payload, "checkpoint")
    atomic_write(path, lambda tmp: torch.save(payload, tmp))


def _check_plain(obj: Any, where: str) -> None:
    """Refuse to write anything ``torch.load(weights_only=True)`` would refuse to read."""
    if obj is None or type(obj) in (str, int, float, bool, torch.Tensor):
        return
    if type(obj) in (list, tuple):
        for i, item in enumerate(obj):
            _check_plain(item, f"{where}[{i}]")
    elif type(obj) is dict:
        for key, item in obj.items():
            _check_plain(key, f"{where} key")
            _check_plain(item, f"{where}[{key!r}]")
    else:
        raise TypeError(f"{where} is a {type(obj).__name__}; checkpoints hold only plain data")


def _read(path: Path) -> Any:
    """Load a file with ``weights_only=True`` (or safetensors), with clear errors."""
    return read_weights_file(path, what="checkpoint")


def _strip_prefixes(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        changed = True
        while changed:
            changed = False
            for prefix in _PREFIXES:
                if key.startswith(prefix):
                    key, changed = key[len(prefix):], True
        out[key] = value
    return out


def _load_weights(model: AFTClassifier, state: dict, path: Path) -> None:
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise AFTExportError(f"{path} does not hold a state_dict of tensors")
    state = model.upgrade_state_dict(_strip_prefixes(state))  # layouts of earlier releases
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong = [
        f"{k} {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    problems = []
    if missing:
        problems.append(f"missing keys {missing[:3]}" + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""))
    if unexpected:
        problems.append(
            f"unexpected keys {unexpected[:3]}" + (f" (+{len(unexpected) - 3} more)" if len(unexpected) > 3 else "")
        )
    if wrong:
        problems.append(f"shape mismatch {wrong[:3]}" + (f" (+{len(wrong) - 3} more)" if len(wrong) > 3 else ""))
    if problems:
        raise AFTExportError(
            f"weights in {path} do not fit config {model.cfg.variant!r}: " + "; ".join(problems)
            + said("; give the config the weights were trained with ({config_set})", None,
                   config_set=Named('config', 'NAME'))
        )
    problem = dtype_problem(expected, state, path) or nonfinite_problem(state, path)
    if problem:
        raise AFTExportError(problem)
    model.load_state_dict(state, strict=True)


def _meta_from_payload(payload: dict, path: Path) -> ModelMeta:
    version = payload.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise AFTExportError(
            f"{path} has checkpoint format version {version!r}; this aft-export reads up to "
            f"{FORMAT_VERSION}. Upgrade aft-export"
        )
    try:
        config = ModelConfig.from_dict(dict(payload["config"]))
        meta = ModelMeta(
            config=config,
            classes=[str(c) for c in payload["classes"]],
            mean=tuple(float(v) for v in payload["mean"]),
            std=tuple(float(v) for v in payload["std"]),
            model_name=payload.get("model_name", ""),
            provenance=dict(payload.get("provenance", {})),
            format_version=version,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AFTExportError(f"{path} is missing or has a malformed checkpoint field ({exc}); re-save it with "
                             f"aft-export's save_checkpoint") from None  # fmt: skip
    if len(meta.classes) != config.num_classes:
        raise AFTExportError(f"{path} names {len(meta.classes)} classes for a model of {config.num_classes} outputs; "
                             f"re-save it with one class name per output")  # fmt: skip
    if len(meta.mean) != 3 or len(meta.std) != 3 or not all(math.isfinite(v) for v in meta.mean + meta.std) or min(
            meta.std) <= 0:  # fmt: skip
        raise AFTExportError(f"{path} has a malformed normalisation (mean {meta.mean}, std {meta.std}); re-save it "
                             f"with three finite numbers each, std > 0")  # fmt: skip
    return meta


def load_checkpoint(
    path: str | os.PathLike,
    config: str | ModelConfig | None = None,
    classes: list[str] | None = None,
    mean=CIFAR10_MEAN,
    std=CIFAR10_STD,
    return_payload: bool = False,
    weights_key: str | None = None,
):
    """Load a checkpoint and return ``(model in eval mode, CheckpointMeta)``.

    ``config`` (a registry name or a ModelConfig) is needed only for plain state-dict
    files; ``classes``, ``mean`` and ``std`` then describe them (default: CIFAR-10).
    With ``return_payload`` the raw dict comes back third (for resuming training).
    Other sources (a model spec file, ``model_def``) load through
    :func:`aft_export.models.sources.load_model`.
    """
    path = Path(path)
    payload = _read(path)
    if isinstance(payload, dict) and payload.get("format") == FORMAT:
        meta = _meta_from_payload(payload, path)
        state = payload.get("state_dict")
        given = get_config(config) if isinstance(config, str) else config
        if given is not None and given != meta.config:  # said, not ignored: the file's own config decides
            raise AFTExportError(said("{path} records its architecture ({value}); {config} ({value2}) names the "
                                      "architecture of a plain state_dict only: leave it out", None, path=path,
                                      value=meta.model_name or meta.config.variant,
                                      value2=config if isinstance(config, str) else 'the one given'))  # fmt: skip
    else:
        if weights_key is not None or not (isinstance(payload, dict) and all(
                isinstance(v, torch.Tensor) for v in payload.values())):  # {"model": ...}, {"state_dict": ...}, EMA
            selected = select_state_dict(payload, path, weights_key)
            if selected.choice:
                logging.getLogger("aft_export").warning(selected.note)
            payload = selected.state
        if config is None:
            raise NeedsConfig(said("{path} is a plain state_dict; say which architecture it is with a config name "
                                   "({config_set}; `aft-export models` lists them)", None, path=path,
                                   config_set=Named("config", "NAME")), path)
        cfg = get_config(config) if isinstance(config, str) else config
        names = classes or [str(i) for i in range(cfg.num_classes)]
        if len(names) != cfg.num_classes:
            raise AFTExportError(f"{len(names)} class names for a {cfg.num_classes}-class model")
        meta = ModelMeta(cfg, names, tuple(mean), tuple(std),
                              model_name=config if isinstance(config, str) else "")  # fmt: skip
        state = payload
    model = AFTClassifier(meta.config)
    _load_weights(model, state, path)
    model.eval()
    meta.path = str(path)
    meta.sha256 = sha256_file(path)
    if return_payload:
        return model, meta, payload
    return model, meta


def weight_bytes(path: str | os.PathLike, weights_key: str | None = None) -> int | None:
    """The bytes of the weights a checkpoint or state_dict file holds, from the tensors' sizes
    alone (memory-mapped: nothing is read, nothing is built), so a command can refuse a model
    before loading it; None where that cannot be told cheaply (the full load says why)."""
    path = Path(path)
    try:
        if path.suffix == ".safetensors" or not path.is_file():
            return None
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        state = payload.get("state_dict") if isinstance(payload, dict) and payload.get("format") == FORMAT else None
        if state is None:
            state = select_state_dict(payload, path, weights_key).state
        return sum(t.nbytes for t in state.values() if isinstance(t, torch.Tensor))
    except Exception:  # noqa: BLE001 - anything unreadable: the full load gives the one clear error
        return None


def describe(path: str | os.PathLike, config: str | None = None, loaded=None) -> dict:
    """What a checkpoint holds: config, parameter count, classes, preprocessing, metrics.
    ``loaded``: the ``(model, ModelMeta)`` pair of any source, already loaded."""
    model, meta = loaded if loaded is not None else load_checkpoint(path, config=config)
    prov = meta.provenance
    return {
        "path": meta.path, "sha256": meta.sha256, "model_name": meta.model_name,
        "format_version": meta.format_version, "params": count_params(model),
        "input_size": list(meta.input_size), "mean": list(meta.mean), "std": list(meta.std),
        "classes": meta.classes, "config": meta.config.to_dict(), "metrics": prov.get("metrics", {}),
        "training": {k: prov[k] for k in ("data", "epochs", "seed", "wall_time_s", "torch") if k in prov},
    }  # fmt: skip
