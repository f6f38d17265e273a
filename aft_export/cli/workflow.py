"""aft-export pipeline and doctor: the whole job, and every check a GPU machine can make."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.byo import require_aft_option, user_model_options
from aft_export.cli.params import (
    BATCH,
    COUNT,
    THREADS,
    Finite,
    default,
    given,
)
from aft_export.options import (
    EXPORT_TARGETS,
    OP_FORMS,
    PRECISIONS,
    TARGETS,
    DoctorOptions,
    PipelineOptions,
)


@main.command("pipeline")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(file_okay=False),
              help="Run directory [default: runs/<model>-<UTC time>].")
@click.option("--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@click.option("--data", help=f"Labelled images for parity and eval [default: {PipelineOptions.data}].")
@click.option("--precision", "precisions", multiple=True, type=click.Choice(sorted(PRECISIONS)),
              help=f"Reduced precisions to build [default: {' and '.join(PipelineOptions.precisions)}].")
@click.option("--op-form", type=click.Choice(OP_FORMS), help=f"[default: {PipelineOptions.op_form}]")
@click.option("--target", "targets", multiple=True, type=click.Choice(TARGETS),
              help="Export target(s), repeatable: "
                   + ", ".join(f"{t.name} ({t.stem}*.onnx)" for t in EXPORT_TARGETS.values())
                   + f" [default: {', '.join(PipelineOptions.targets)}]; see export --help.")
@click.option("--calib-images", type=COUNT, help="Calibration images to sample [default: the recipe's].")
@click.option("--parity-images", type=COUNT,
              help=f"Real images parity compares [default: {PipelineOptions.parity_images}].")
@click.option("--eval-images", type=COUNT,
              help="Evaluate a fixed subset of N images [default: all].")
@click.option("--bench-batch-size", "bench_batch_sizes", multiple=True, type=BATCH,
              help=f"Bench batch sizes [default: {' and '.join(map(str, PipelineOptions.bench_batches))}].")
@click.option("--bench-iters", type=COUNT,
              help=f"Bench runs per batch size [default: {PipelineOptions.bench_iters}].")
@click.option("--threads", type=THREADS, help="CPU threads (0: the backend's default) [default: 0].")
@click.option("--tolerance", "tolerances", multiple=True, metavar="PREC.FIELD=VALUE", help="Parity limit override.")
@click.option("--triton-repo", is_flag=True, default=None,
              help="Also write RUN/triton: a Triton model repository of the artifacts (aft-export triton-repo).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@user_model_options
@require_aft_option
def pipeline_cmd(checkpoint, as_json, **kw) -> None:
    """Export, quantise, check, build engines (TensorRT with a GPU, else TensorRT-RTX on the CPU),
    check parity, evaluate, and say what to deploy where (every file on every runtime here, proven
    and timed, the fastest that passes marked) in one run directory. With no CHECKPOINT: the
    bundled zoo model.

    Exit 0: every artifact passed parity; 1: one failed (the run directory still has
    the full report); 3: none failed but one was not verified (an engine not run here for want
    of a GPU, an artifact skipped by parity, fp16 values that took NaN/Inf, or the offline TensorRT
    rules refusing or warning for a targeted version); 2: bad input.
    """
    from aft_export.api import pipeline
    from aft_export.workflow.report import format_pipeline_result

    result = pipeline(checkpoint, **given(kw))  # None: the bundled zoo model
    batches = tuple(dict.fromkeys(kw["bench_batch_sizes"])) or PipelineOptions.bench_batches
    print_json(result.to_dict()) if as_json else echo(format_pipeline_result(result, batches))
    return exit_status(result.verdict)


@main.command("doctor")
@click.argument("model", required=False, default="aft_conv_cifar")
@click.option("--output", "-o", type=click.Path(file_okay=False),
              help="Run directory [default: runs/doctor-<model>-<UTC time>].")
@click.option("--data", default=default(DoctorOptions, "data"), show_default=True,
              help="Labelled images for the export's verification, parity and eval.")
@click.option("--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@click.option("--calib-images", type=COUNT, help="Calibration images to sample [default: the recipe's].")
@click.option("--parity-images", type=COUNT, default=default(DoctorOptions, "parity_images"), show_default=True)
@click.option("--eval-images", type=COUNT, help="Evaluate a fixed subset of N images [default: all].")
@click.option("--bench-iters", type=COUNT, default=default(DoctorOptions, "bench_iters"), show_default=True,
              help="Bench runs per batch size.")
@click.option("--timeout", type=Finite(min=0, min_open=True), default=default(DoctorOptions, "timeout"),
              show_default=True, help="Seconds one check may take.")
@click.option("--json", "as_json", is_flag=True,
              help="Print doctor.json instead of the summary (the check lines go to stderr).")
def doctor_cmd(model, as_json, **kw) -> None:
    """Every check for a GPU or Jetson machine, one line each: export, quantise (fp16, int8),
    TensorRT engines, NVIDIA's trtexec/polygraphy on each file, parity, eval and bench on the
    CPU and on CUDA; writes RUN/doctor.json (environment, each check's command, exit status,
    time and output tail) to attach to a bug report. MODEL: a zoo name or a checkpoint.

    Exit 0: every check passed; 1: one failed (the others still ran); 3: none failed but one
    was skipped (no GPU, TensorRT or trtexec here: not everything was verified); 2: bad input.
    """
    from aft_export.api import doctor

    result = doctor(model, **given(kw))
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)
