"""aft-export export and quantize: an ONNX file from a model, an int8 or fp16 file from it."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.byo import USER_MODEL_KEYS, require_aft_option, user_model_options
from aft_export.cli.params import (
    BATCH,
    COUNT,
    NONNEGATIVE,
    SEED,
    Finite,
    apply_options,
    bound,
    given,
)
from aft_export.errors import AFTExportError
from aft_export.options import (
    CALIB_COUNT,
    CALIB_SEED,
    EXPORT_TARGETS,
    METHODS,
    OP_FORMS,
    PRECISIONS,
    QUANTIZED_OP_TYPES,
    REST_PRECISIONS,
    TARGETS,
    ExportOptions,
    QuantizeOptions,
)
from aft_export.readers import MAX_SIDE


def _export_options():
    E = ExportOptions
    return [
        bound(E, "opset", "--opset", type=int, help="ONNX opset (18 or newer)."),
        bound(E, "batch_dim", "--batch-dim",
              help="The graph's batch dimension: 'dynamic' or a fixed batch size."),
        bound(E, "dynamic_hw", "--dynamic-hw", is_flag=True, help="AFT-conv only: dynamic height and width."),
        bound(E, "op_form", "--op-form", type=click.Choice(OP_FORMS),
              help="custom: one com.aft node per AFT layer; decomposed: plain ONNX ops."),
        bound(E, "target", "--target", type=click.Choice(TARGETS),
              help="; ".join(f"{t.name}: {t.summary}" for t in EXPORT_TARGETS.values()) + "."),
        bound(E, "simplify", "--simplify/--no-simplify", help="Run onnxsim."),
        bound(E, "allow_unsimplified", "--allow-unsimplified", is_flag=True,
              help="Keep the unsimplified graph if onnxsim fails."),
        bound(E, "images", "--images", type=NONNEGATIVE,
              help="Real images to verify the export on (0: skip; the exit status is then 3, not verified)."),
        bound(E, "data", "--data", type=click.Path(),
              help="Images to verify on: ImageFolder directory or tar [default: a zoo checkpoint's test set]."),
    ]  # fmt: skip


@main.command("export")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--config", help="Registry config name, for plain state_dict files.")
@apply_options(_export_options())
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@user_model_options
@require_aft_option(ExportOptions)
def export_cmd(checkpoint, output, as_json, **kw) -> None:
    """Export a checkpoint (or, with --model-def, a model trained elsewhere) to ONNX, simplify
    it and verify it against PyTorch.

    Exit 1: the verification failed, or the offline rules of every targeted TensorRT refuse the
    graph; 3: not verified (--images 0), or the rules of a targeted TensorRT version refuse or warn.
    """
    from aft_export.api import export
    from aft_export.workflow.report import format_export

    if checkpoint is None and all(kw[k] is None for k in USER_MODEL_KEYS):
        raise AFTExportError("give a CHECKPOINT to export, or --model-def and --weights for a model trained elsewhere")
    # `export W.pt --model-def ...`: with --model-def the positional file is the weights
    result = export(checkpoint, output, **given(kw))
    print_json(result.to_dict()) if as_json else echo(format_export(result.to_dict()))
    return exit_status(result.verdict)


def _quantize_options():
    Q = QuantizeOptions
    return [
        bound(Q, "method", "--method", type=click.Choice(METHODS),
              help="int8 range calibration."),
        bound(Q, "percentile", "--percentile", type=Finite(0, 100, min_open=True), help="For --method percentile."),
        bound(Q, "images", "--images", type=COUNT,
              help=f"Calibration images to sample [default: the recipe's, else {CALIB_COUNT}]."),
        bound(Q, "batch_size", "--batch-size", type=BATCH,
              help="Calibration batch size."),
        bound(Q, "seed", "--seed", type=SEED,
              help=f"Seed of the calibration sample [default: the recipe's, else {CALIB_SEED}]."),
        bound(Q, "per_channel", "--per-channel/--per-tensor",
              help="int8 weight scales."),
        bound(Q, "exclude", "--exclude", multiple=True,
              help="Node name to keep out of int8 (int8), or in fp32 (fp16) (repeatable)."),
        bound(Q, "exclude_regex", "--exclude-regex", multiple=True, metavar="REGEX",
              help="int8: keep the nodes whose names this regular expression matches (from the start, as "
                   "re.match and ModelOpt's --nodes_to_exclude) out of int8 (repeatable)."),
        bound(Q, "exclude_op_types", "--exclude-op-type", "exclude_op_types", multiple=True, metavar="OP",
              help="int8: keep every node of this op type out of int8 (repeatable)."),
        bound(Q, "quantize_op_types", "--quantize-op-type", "quantize_op_types", multiple=True, metavar="OP",
              help=f"int8: an op type to quantise (repeatable) [default: {', '.join(QUANTIZED_OP_TYPES)}]."),
        bound(Q, "keep_fp32", "--keep-fp32", multiple=True, metavar="REGEX",
              help="Keep the nodes whose names this regular expression matches in fp32: out of int8 and "
                   "out of fp16 (repeatable)."),
        bound(Q, "target", "--target", type=click.Choice(TARGETS),
              help="The export target the file is for; it decides int8's defaults (--rest-precision, "
                   "--weight-bits). Another target than the fp32 file's puts the graph in that target's form "
                   "first (from the default tensorrt export only): --target portable makes the CPU's int8 "
                   "(rest fp32, 7-bit weights) [default: the fp32 file's target]."),
        bound(Q, "weight_bits", "--weight-bits", type=click.Choice(["7", "8"]), convert=int,
              help="int8: weights in 8 bits, or 7 (no overflow in OpenVINO's int8 kernels on CPUs without "
                   "VNNI) [default: " + ", ".join(f"{t.int8_weight_bits} for {n}" for n, t in
                                                  EXPORT_TARGETS.items()) + "]."),
        bound(Q, "rest_precision", "--rest-precision", type=click.Choice(REST_PRECISIONS),
              help="int8: what the graph computes in outside its int8 layers; fp16 keeps the AFT core and "
                   "LayerNorm in fp32 (opset 19, fp16 scales) [default: "
                   + ", ".join(f"{t.int8_rest} for {n}" for n, t in EXPORT_TARGETS.items()) + "]."),
        bound(Q, "quantize_aft_core", "--quantize-aft-core", is_flag=True,
              help="int8: quantise the AFT core too (inlines the com.aft functions; ONNX Runtime "
                   "does not fuse those MatMuls, so slower on CPU; not advised)."),
        bound(Q, "sensitivity", "--sensitivity", is_flag=True,
              help="int8: rank nodes, keep the worst in float until --budget."),
        bound(Q, "budget", "--budget", type=Finite(0, 100),
              help="Sensitivity: allowed % top-1 disagreement with fp32 on the calibration images."),
        bound(Q, "allow_fewer", "--allow-fewer", is_flag=True,
              help="Use fewer calibration images if the source has fewer."),
    ]  # fmt: skip


@main.command("quantize")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@bound(QuantizeOptions, "precision", "--precision", type=click.Choice(PRECISIONS), required=True,
       help="int8: explicit Q/DQ, the rest in --rest-precision; fp16: mixed precision (AFT core and LayerNorm in "
            "fp32).")
@click.option("--calib", help="Calibration images: folder, tar, .npy/.npz, cifar10:train, or a recipe "
              "such as calibration/cifar10.json (needed for int8).")
@apply_options(_quantize_options())
@bound(QuantizeOptions, "cache_dir", "--cache-dir", type=click.Path(file_okay=False),
       help="Calibration cache [default: ~/.cache/aft-export/calibration].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the calibration cache.")
@bound(QuantizeOptions, "input_size", "--input-size", type=click.IntRange(1, MAX_SIDE),
       help="For models without aft-export metadata: square input size.")
@click.option("--mean", help="For models without metadata: r,g,b mean of (x / 255).")
@click.option("--std", help="For models without metadata: r,g,b std.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def quantize_cmd(model, output, as_json, **kw) -> None:
    """Write an int8 (Q/DQ) or fp16 graph from an fp32 ONNX export, calibrated on real images.

    Exit 1: the offline rules of every targeted TensorRT refuse the graph; 3: fp16 values took
    NaN/Inf on the calibration images, or the rules of a targeted TensorRT version refuse or warn.
    """
    from aft_export.api import quantize
    from aft_export.workflow.report import format_quantize

    result = quantize(model, output, **given(kw))
    print_json(result.to_dict()) if as_json else echo(format_quantize(result.to_dict()))
    return exit_status(result.verdict)
