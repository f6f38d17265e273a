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
    bound,
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


P = PipelineOptions


@main.command("pipeline")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@bound(P, "output", "--output", "-o", type=click.Path(file_okay=False),
       help="Run directory [default: runs/<model>-<UTC time>].")
@bound(P, "calib", "--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@bound(P, "data", "--data", help="Labelled images for parity and eval [default: the checkpoint's test data, else "
                                 "cifar10:test].")
@bound(P, "precisions", "--precision", "precisions", multiple=True, type=click.Choice(sorted(PRECISIONS)),
       show_default=False, help=f"Reduced precisions to build [default: {' and '.join(P.precisions)}].")
@bound(P, "op_form", "--op-form", type=click.Choice(OP_FORMS), show_default=False, help=f"[default: {P.op_form}]")
@bound(P, "targets", "--target", "targets", multiple=True, type=click.Choice(TARGETS), show_default=False,
       help="Export target(s), repeatable: " + ", ".join(f"{t.name} ({t.stem}*.onnx)" for t in EXPORT_TARGETS.values())
            + f" [default: {', '.join(P.targets)}]; see export --help.")
@bound(P, "calib_images", "--calib-images", type=COUNT, help="Calibration images to sample [default: the recipe's].")
@bound(P, "parity_images", "--parity-images", type=COUNT, show_default=False,
       help=f"Real images parity compares [default: {P.parity_images}].")
@bound(P, "eval_images", "--eval-images", type=COUNT, help="Evaluate a fixed subset of N images [default: all].")
@bound(P, "bench_batch_sizes", "--bench-batch-size", "bench_batch_sizes", multiple=True, type=BATCH, show_default=False,
       help=f"Bench batch sizes [default: {' and '.join(map(str, P.bench_batch_sizes))}].")
@bound(P, "bench_iters", "--bench-iters", type=COUNT, show_default=False,
       help=f"Bench runs per batch size [default: {P.bench_iters}].")
@bound(P, "threads", "--threads", type=THREADS, show_default=False,
       help=f"CPU threads (0: the backend's default) [default: {P.threads}].")
@bound(P, "tolerances", "--tolerance", "tolerances", multiple=True, metavar="PREC.FIELD=VALUE",
       help="Parity limit override.")
@bound(P, "triton_repo", "--triton-repo", is_flag=True,
       help="Also write RUN/triton: a Triton model repository of the artifacts (aft-export triton-repo).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@user_model_options
@require_aft_option(P)
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
    batches = tuple(dict.fromkeys(kw["bench_batch_sizes"]))
    print_json(result.to_dict()) if as_json else echo(format_pipeline_result(result, batches))
    return exit_status(result.verdict)


@main.command("doctor")
@click.argument("model", required=False, default="aft_conv_cifar")
@bound(DoctorOptions, "output", "--output", "-o", type=click.Path(file_okay=False),
       help="Run directory [default: runs/doctor-<model>-<UTC time>].")
@bound(DoctorOptions, "data", "--data", help="Labelled images for the export's verification, parity and eval.")
@bound(DoctorOptions, "calib", "--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@bound(DoctorOptions, "calib_images", "--calib-images", type=COUNT,
       help="Calibration images to sample [default: the recipe's].")
@bound(DoctorOptions, "parity_images", "--parity-images", type=COUNT)
@bound(DoctorOptions, "eval_images", "--eval-images", type=COUNT,
       help="Evaluate a fixed subset of N images [default: all].")
@bound(DoctorOptions, "bench_iters", "--bench-iters", type=COUNT, help="Bench runs per batch size.")
@bound(DoctorOptions, "timeout", "--timeout", type=Finite(min=0, min_open=True), help="Seconds one check may take.")
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
