"""aft-export pipeline and doctor: the whole job, and every check a GPU machine can make."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import declared_options, given


@main.command("pipeline")
@declared_options("pipeline", {"triton_repo": [click.option("--json", "as_json", is_flag=True,
                                                            help="Print the summary as JSON.")]})
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

    result = pipeline(checkpoint, **given(kw))  # None: the bundled zoo model
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("doctor")
@declared_options("doctor", {"timeout": [click.option(
    "--json", "as_json", is_flag=True, help="Print doctor.json instead of the summary (the check lines go to stderr).")]})
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
