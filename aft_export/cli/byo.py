"""The command-line options for a model trained elsewhere, shared by export, parity and pipeline:
``--model-def``, ``--weights``, ``--weights-key`` and its preprocessing. Their destinations are the
API's keywords of the same names (:func:`aft_export.api.export`, ...), which turns them into the one
model source a command works on."""

from __future__ import annotations

import click

from aft_export.cli.params import bound
from aft_export.readers import MAX_SIDE

# the parameters user_model_options adds
USER_MODEL_KEYS = ("model_def", "weights", "weights_key", "preprocess", "input_size", "mean", "std", "classes")


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
        click.option("--input-size", type=click.IntRange(1, MAX_SIDE), help="With --model-def: square input size."),
        click.option("--mean", help="With --model-def: r,g,b mean of (x / 255)."),
        click.option("--std", help="With --model-def: r,g,b std."),
        click.option("--classes", type=click.Path(dir_okay=False), help="With --model-def: class names, one per line."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def require_aft_option(owner):
    """``--require-aft`` (export, pipeline: ``owner``'s field): a layer that looks like AFT but does not
    compute it, or a model with no AFT layer, is an error instead of plain ops with a warning."""
    return bound(owner, "require_aft", "--require-aft", is_flag=True,
                 help="Fail (exit 2) unless every AFT-like layer exports as a com.aft node: a layer with the "
                      "parameters of a known AFT layer that does not compute it, or a model with no AFT layer, is "
                      "an error instead of plain ONNX ops with a warning.")  # fmt: skip
