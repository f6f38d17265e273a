"""Weight files as users have them: read safely, find the state_dict, fit it to a model.

Training code stores weights in many layouts: a bare ``state_dict``; ``{"model": ...}``
beside an optimizer, an epoch and (DeiT and others) an ``argparse.Namespace`` of the
training arguments; ``{"state_dict": ...}``; an EMA copy under ``model_ema``/``ema``;
keys prefixed by the wrapper that trained it (``module.`` from DataParallel/DDP,
``_orig_mod.`` from ``torch.compile``, ``model.`` from Lightning-style wrappers);
safetensors files. This module finds the weights in all of these without unpickling
code: files are read with ``torch.load(weights_only=True)``, and exactly one class,
``argparse.Namespace`` (plain data), is allowed through the weights-only unpickler.

It sits below :mod:`aft_export.models.checkpoint` and knows nothing of models but
``nn.Module.state_dict``.
"""

from __future__ import annotations

import argparse
import logging
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aft_export.errors import AFTExportError, said
from aft_export.readers import regular_file

# Where training code puts the weights, in the order they are tried. EMA copies are
# never taken silently over the model (an EMA is often better, but it is a choice).
MODEL_KEYS = ("state_dict", "model", "model_state_dict", "model_state", "net", "network", "weights")
EMA_KEYS = ("model_ema", "ema", "state_dict_ema", "ema_state_dict", "ema_model")
PREFIXES = ("module.", "_orig_mod.", "model.")
# the only class the weights-only unpickler may build: DeiT-style files hold the
# training arguments as a Namespace, which is plain data
ALLOWED_GLOBALS = (argparse.Namespace,)

log = logging.getLogger("aft_export")


@dataclass(frozen=True)
class Selected:
    """The state_dict found in a weights file, and how it was found."""

    state: dict[str, torch.Tensor]
    key: str | None  # top-level key it came from; None for a bare state_dict
    note: str = ""  # which entry was used, and what was left unused
    choice: bool = False  # True when the file held another state_dict (an EMA...) that was not taken


def read_weights_file(path: str | Path, what: str = "weights file") -> Any:
    """The file's payload, from safetensors or ``torch.load(weights_only=True)``; ``what``
    names the file in errors (checkpoints are read here too).

    Pickled code is refused before anything runs, with the class it would have needed."""
    path = Path(path)
    if not path.exists():
        raise AFTExportError(f"{what} {path} does not exist; check the path")
    if path.is_dir():
        raise AFTExportError(f"{what} {path} is a directory, not a file; give the file")
    regular_file(path, what)  # a FIFO or a device is said so (its size, 0, is not the file's)
    if path.stat().st_size == 0:
        raise AFTExportError(f"{what} {path} is empty (0 bytes); re-save or re-download it")
    if path.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise AFTExportError("reading .safetensors needs: pip install safetensors") from None
        try:
            return load_file(str(path))
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
            raise AFTExportError(f"{what} {path} is not a valid safetensors file: {exc}") from None
    try:
        with torch.serialization.safe_globals(list(ALLOWED_GLOBALS)):  # argparse.Namespace only (DeiT-style)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "Unsupported global" in text or "GLOBAL" in text:
            found = re.search(r"GLOBAL ([\w.]+)", text)
            needed = f" ({found.group(1)})" if found else ""
            raise AFTExportError(
                f"refused to load {path}: it contains pickled Python objects{needed}, not only tensors "
                f"and plain data; nothing was executed. Re-save it as a state_dict or safetensors"
            ) from None
        raise AFTExportError(f"{what} {path} is corrupt or not a PyTorch file; re-download or re-save it") from None
    except Exception as exc:  # noqa: BLE001 - garbage reaches the unpickler's internals (IndexError,
        # KeyError, struct errors...); the weights-only unpickler has executed nothing
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AFTExportError(f"{what} {path} is corrupt or truncated ({first}); re-download or re-save it") from None


def _is_state(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
    )


def _describe(payload: dict) -> str:
    keys = [str(k) for k in payload]
    return f"{keys[:12]}" + (f" (+{len(keys) - 12} more)" if len(keys) > 12 else "")


def select_state_dict(payload: Any, path: str | Path, key: str | None = None) -> Selected:
    """Find the state_dict in a loaded payload; ``key`` names the top-level entry to use.

    Without ``key``: a bare state_dict is used as it is; else the first of
    :data:`MODEL_KEYS` that holds tensors; an EMA copy only when it is the one state_dict
    in the file, and both choices are said in ``Selected.note``."""
    if key is not None:
        if not isinstance(payload, dict) or key not in payload:
            top = _describe(payload) if isinstance(payload, dict) else type(payload).__name__
            raise AFTExportError(f"{path} has no top-level key {key!r}; its keys are {top}")
        inner = payload[key]
        if _is_state(inner):
            return Selected(dict(inner), key)
        if isinstance(inner, dict):  # e.g. {"model": {"state_dict": ...}}
            found = select_state_dict(inner, f"{path}[{key!r}]")
            return Selected(found.state, f"{key}/{found.key}" if found.key else key, found.note)
        raise AFTExportError(f"{path}[{key!r}] is a {type(inner).__name__}, not a state_dict of tensors")
    if _is_state(payload):
        return Selected(dict(payload), None)
    if not isinstance(payload, dict):
        raise AFTExportError(f"{path} holds a {type(payload).__name__}, not a state_dict of tensors")
    models = [k for k in MODEL_KEYS if _is_state(payload.get(k))]
    emas = [k for k in EMA_KEYS if _is_state(payload.get(k))]
    if not models:  # one level deeper: {"model": {"state_dict": ...}}
        for k in MODEL_KEYS:
            if isinstance(payload.get(k), dict):
                try:
                    found = select_state_dict(payload[k], f"{path}[{k!r}]")
                except AFTExportError:
                    continue
                return Selected(found.state, f"{k}/{found.key}" if found.key else k, found.note)
    if models:
        chosen = models[0]
        note = f"weights: {chosen!r} of {Path(path).name}"
        others = models[1:] + emas
        if others:
            note += said(" (it also holds {others}, not used; {weights_key} chooses)", None, others=others)
        return Selected(dict(payload[chosen]), chosen, note, choice=bool(others))
    if emas:
        chosen = emas[0]
        return Selected(dict(payload[chosen]), chosen,
                        f"weights: {chosen!r} of {Path(path).name}, an EMA copy, the only state_dict in the file",
                        choice=True)  # fmt: skip
    raise AFTExportError(
        said("{path} holds no state_dict of tensors under any key this tool knows; its top-level keys are {value}; "
             "name the one with the weights with {weights_key}", None, path=path, value=_describe(payload))
    )


def strip_prefixes(state: dict[str, torch.Tensor], expected: set[str] | None = None) -> dict[str, torch.Tensor]:
    """Remove wrapper prefixes (``module.``, ``_orig_mod.``, ``model.``) that every key carries.

    With ``expected`` (the model's own keys) a prefix the model itself uses is kept:
    a user module may well have a child called ``model``."""
    out = dict(state)
    changed = True
    while changed and out:
        changed = False
        for prefix in PREFIXES:
            if all(k.startswith(prefix) for k in out):
                if expected is not None and expected and all(k.startswith(prefix) for k in expected):
                    continue
                out = {k[len(prefix):]: v for k, v in out.items()}
                changed = True
    return out


def _listed(what: str, items: list[str]) -> str:
    return f"{what} {items[:4]}" + (f" (+{len(items) - 4} more)" if len(items) > 4 else "")


def fit_problems(expected: dict[str, torch.Tensor], state: dict[str, torch.Tensor]) -> list[str]:
    """Missing keys, unexpected keys and shape mismatches, each named."""
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong = [f"{k} {tuple(state[k].shape)} vs model {tuple(v.shape)}" for k, v in expected.items()
             if k in state and state[k].shape != v.shape]  # fmt: skip
    problems = []
    if missing:
        problems.append(_listed("missing keys", missing))
    if unexpected:
        problems.append(_listed("unexpected keys", unexpected))
    if wrong:
        problems.append(_listed("shape mismatch", wrong))
    return problems


def _kind(t: torch.Tensor) -> str:
    if t.is_complex():
        return "complex"
    if t.is_floating_point():
        return "floating-point"
    return "boolean" if t.dtype == torch.bool else "integer"


def dtype_problem(expected: dict[str, torch.Tensor], state: dict[str, torch.Tensor], path) -> str | None:
    """A weights file whose tensors are of another kind than the model's (int32 for a float
    model): never cast. Floating-point widths (fp16, bf16, fp64 for an fp32 model) are
    converted by ``load_state_dict`` as training code expects."""
    wrong = [k for k, v in expected.items() if k in state and _kind(state[k]) != _kind(v)]
    if not wrong:
        return None
    k = wrong[0]
    return (f"weights in {path} are {str(state[k].dtype).replace('torch.', '')} where the model holds "
            f"{str(expected[k].dtype).replace('torch.', '')} ({len(wrong)} tensors, e.g. {k}); aft-export does not "
            f"cast weights between kinds: give the file the model was trained with")  # fmt: skip


def nonfinite_problem(tensors: dict[str, torch.Tensor], path) -> str | None:
    """NaN or infinite values among the weights: a model that cannot give finite logits."""
    bad = {k: int((~torch.isfinite(v)).sum()) for k, v in tensors.items() if v.is_floating_point() or v.is_complex()}
    bad = {k: n for k, n in bad.items() if n}
    if not bad:
        return None
    k = next(iter(bad))
    return (f"weights in {path} hold {sum(bad.values())} NaN or infinite values ({len(bad)} tensors, e.g. {k}); "
            f"the model is damaged (training diverged?): use an earlier checkpoint or retrain it")


def load_weights(model: torch.nn.Module, path: str | Path, key: str | None = None, log_fn=None) -> Selected:
    """Read ``path``, select its state_dict, strip wrapper prefixes and load it strictly."""
    selected = select_state_dict(read_weights_file(path), path, key)
    expected = model.state_dict()
    state = strip_prefixes(selected.state, set(expected))
    for name, module in model.named_modules():  # our layers' layouts of earlier releases (AFT-local's dense bias)
        if hasattr(module, "upgrade_state"):
            module.upgrade_state(state, f"{name}." if name else "")
    problems = fit_problems(expected, state)
    if problems:
        where = f"{path}" + (f" (key {selected.key!r})" if selected.key else "")
        raise AFTExportError(f"weights in {where} do not fit the model: " + "; ".join(problems)
                             + said("; check {model_def} builds the model the weights were trained for", None))  # fmt: skip
    problem = dtype_problem(expected, state, path)
    if problem is None:  # the parameters only: a model's own buffers may hold -inf masks on purpose
        params = {name for name, _ in model.named_parameters()}
        problem = nonfinite_problem({k: v for k, v in state.items() if k in params}, path)
    if problem:
        raise AFTExportError(problem)
    model.load_state_dict(state, strict=True)
    if selected.note and log_fn is not None:
        log_fn(selected.note)
    elif selected.choice:  # never silent about an EMA taken or left, even where nobody passed a log
        log.warning(selected.note)
    return selected
