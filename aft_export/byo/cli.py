"""The command-line options for a model trained elsewhere, shared by export, parity and pipeline.

``aft_export.cli`` adds them with :func:`user_model_options` and turns them into a
:class:`~aft_export.byo.spec.UserModel` with :func:`user_model_from`; everything else
happens in the library.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

import click

from aft_export.byo.preprocess import read_mapping, resolve
from aft_export.errors import AFTExportError
from aft_export.fileio import atomic_write_text

# option destination -> flag, for messages
FLAGS = {"weights": "--weights", "weights_key": "--weights-key", "preprocess": "--preprocess",
         "byo_input_size": "--input-size", "byo_mean": "--mean", "byo_std": "--std", "classes": "--classes"}
USER_MODEL_KEYS = ("model_def", *FLAGS)  # the parameters user_model_options adds


def user_model_options(command):
    """``--model-def``, ``--weights``, ``--weights-key`` and the preprocessing flags."""
    options = [
        click.option("--model-def", help="A model trained elsewhere: MODULE:FACTORY or path/to/file.py:FACTORY, "
                     "called with no arguments, returning the nn.Module."),
        click.option("--weights", type=click.Path(dir_okay=False), help="With --model-def: its weights "
                     "(.pt/.pth read weights-only, or .safetensors)."),
        click.option("--weights-key", help="With --model-def: the entry of the weights file that holds the "
                     "state_dict (e.g. model, model_ema) [default: found, and said]."),
        click.option("--preprocess", type=click.Path(dir_okay=False), help="With --model-def: JSON/YAML file with "
                     "input_size, mean, std, classes_file (or a whole model spec with model_def and weights)."),
        click.option("--input-size", "byo_input_size", type=click.IntRange(1, 8192),
                     help="With --model-def: square input size."),
        click.option("--mean", "byo_mean", help="With --model-def: r,g,b mean of (x / 255)."),
        click.option("--std", "byo_std", help="With --model-def: r,g,b std."),
        click.option("--classes", type=click.Path(dir_okay=False), help="With --model-def: class names, one per line."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def user_model_from(values: dict):
    """The UserModel the flags describe, or None when no --model-def (nor spec) was given."""
    from aft_export.byo.spec import SPEC_KEYS, UserModel, read_spec  # loads torch: only when a command runs

    model_def = values.get("model_def")
    pre_file = values.get("preprocess")
    spec = read_spec(pre_file) if pre_file and not model_def and "model_def" in read_mapping(pre_file) else None
    if not model_def and spec is None:
        given = [flag for dest, flag in FLAGS.items() if values.get(dest) is not None]
        if given:
            raise AFTExportError(f"{', '.join(given)} describe a model trained elsewhere; give --model-def too")
        return None
    weights = values.get("weights") or (spec.weights if spec else None)
    key = values.get("weights_key") or (spec.weights_key if spec else None)
    pre = resolve(pre_file, input_size=values.get("byo_input_size"), mean=values.get("byo_mean"),
                  std=values.get("byo_std"), classes=values.get("classes"), extra_keys=SPEC_KEYS)  # fmt: skip
    model_def = model_def or spec.model_def
    return UserModel(model_def, pre, weights=weights, weights_key=key)


@contextlib.contextmanager
def spec_file(user):
    """The user model written as a spec file, for commands that take a path (pipeline)."""
    target, _, factory = user.model_def.rpartition(":")
    if target.endswith(".py"):
        target = str(Path(target).resolve())
    p = user.preprocessing
    data = {"model_def": f"{target}:{factory}", "weights": str(Path(user.weights).resolve()) if user.weights else None,
            "weights_key": user.weights_key, "input_size": p.input_size, "mean": list(p.mean), "std": list(p.std),
            "classes": list(p.classes) if p.classes else None}  # fmt: skip
    stem = Path(target).stem if target.endswith(".py") else target.rsplit(".", 1)[-1]
    with tempfile.TemporaryDirectory(prefix="aft-byo-") as tmp:
        path = Path(tmp) / f"{stem}.json"
        atomic_write_text(path, json.dumps({k: v for k, v in data.items() if v is not None}, indent=2))
        yield path
