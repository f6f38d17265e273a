"""The command-line options for a model trained elsewhere, shared by export, parity and pipeline.

``aft_export.cli`` adds them with :func:`user_model_options` and turns a command's
arguments into the one model source it works on with :func:`model_source_from` (a
:class:`~aft_export.byo.spec.UserModel` is a :class:`~aft_export.models.sources.ModelSource`
like a checkpoint); everything else happens in the library.
"""

from __future__ import annotations

import click

from aft_export.data.preprocess import read_mapping, resolve
from aft_export.errors import AFTExportError
from aft_export.models.sources import open_source
from aft_export.readers import MAX_SIDE

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
        click.option("--input-size", "byo_input_size", type=click.IntRange(1, MAX_SIDE),
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


def require_aft_option(command):
    """``--require-aft`` (export, pipeline): a layer that looks like AFT but does not compute it,
    or a model with no AFT layer, is an error instead of plain ops with a warning."""
    return click.option("--require-aft", is_flag=True, default=None,
                        help="Fail (exit 2) unless every AFT-like layer exports as a com.aft node: a layer with "
                             "the parameters of a known AFT layer that does not compute it, or a model with no "
                             "AFT layer, is an error instead of plain ONNX ops with a warning.")(command)  # fmt: skip


def model_source_from(model_arg: str | None, values: dict, config: str | None = None, role: str = "model"):
    """The one model a command works on, and what is left of its positional arguments.

    ``values``: the :func:`user_model_options` values (taken out of the command's).
    Without ``--model-def`` (or a whole spec given to ``--preprocess``) the positional
    argument is the model: a checkpoint (``config`` for plain state_dict files) or a model
    spec file. With it the model is the user's, and the positional argument is what the
    command says ``role`` is: ``"weights"`` (export: ``export W.pt --model-def ...``) or
    ``"artifact"`` (parity: every argument is an artifact). Returns ``(source or None, the
    positional argument if it was not used)``."""
    user = user_model_from(values)
    if user is None:
        return (open_source(model_arg, config) if model_arg is not None else None), None
    if model_arg is not None and role == "weights":
        if values.get("weights"):
            raise AFTExportError(f"give the weights once: {model_arg} or --weights {values['weights']}")
        from dataclasses import replace

        return replace(user, weights=model_arg), None
    return user, model_arg

