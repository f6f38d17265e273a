"""aft-export export and quantize: an ONNX file from a model, an int8 or fp16 file from it."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.byo import USER_MODEL_KEYS
from aft_export.cli.params import declared_options, given
from aft_export.errors import AFTExportError


@main.command("export")
@declared_options("export", {"data": [click.option("--json", "as_json", is_flag=True,
                                                   help="Print the report as JSON.")]})
def export_cmd(checkpoint, output, as_json, **kw) -> None:
    """Export a checkpoint (or, with --model-def, a model trained elsewhere) to ONNX, simplify
    it and verify it against PyTorch.

    Exit 1: the verification failed, or the offline rules of every targeted TensorRT refuse the
    graph; 3: not verified (--images 0), or the rules of a targeted TensorRT version refuse or warn.
    """
    from aft_export.api import export

    if checkpoint is None and all(kw[k] is None for k in USER_MODEL_KEYS):
        raise AFTExportError("give a CHECKPOINT to export, or --model-def and --weights for a model trained elsewhere")
    # `export W.pt --model-def ...`: with --model-def the positional file is the weights
    result = export(checkpoint, output, **given(kw))
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("quantize")
@declared_options("quantize", {"std": [click.option("--json", "as_json", is_flag=True,
                                                    help="Print the report as JSON.")]})
def quantize_cmd(model, output, as_json, **kw) -> None:
    """Write an int8 (Q/DQ) or fp16 graph from an fp32 ONNX export, calibrated on real images.

    Exit 1: the offline rules of every targeted TensorRT refuse the graph; 3: fp16 values took
    NaN/Inf on the calibration images, or the rules of a targeted TensorRT version refuse or warn.
    """
    from aft_export.api import quantize

    result = quantize(model, output, **given(kw))
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)
