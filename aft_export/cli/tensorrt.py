"""aft-export check and build: TensorRT's rules and parser, and engines."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import (
    COUNT,
    NONNEGATIVE,
    apply_options,
    bound,
    foreign_options,
    given,
)
from aft_export.options import (
    HW_LEVELS,
    LIBRARIES,
    BuildOptions,
)


@main.command("check")
@click.argument("models", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--trt", "trt_versions", multiple=True, metavar="VERSION",
              help="TensorRT version to check (repeatable) [default: every supported one the file's export "
                   "target is for: 8.5, 8.6, 10.3, 10.13, 11.4]; rtx-1.7: TensorRT-RTX's column (10.13's rules "
                   "plus its documented differences).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@click.option("--rules", is_flag=True,
              help="List every rule the check applies, with the versions it exists in and its source.")
@click.option("--library", type=click.Choice(LIBRARIES), default="auto", show_default=True,
              help="Where TensorRT or TensorRT-RTX is installed, its own ONNX parser reads each file too: which one.")
@click.option("--offline-only", is_flag=True, help="Only the offline rules, even where a TensorRT library is installed.")
@click.option("--build", is_flag=True,
              help="Also build each file with the installed library (in memory; nothing is written).")
@click.option("--strict", is_flag=True,
              help="Exit 1 when the offline rules for the installed parser disagree with the parser itself.")
def check_cmd(models, as_json, **kw) -> None:
    """Check ONNX files offline against the rules of TensorRT's parser and builder, one column
    per version (no TensorRT runs); where TensorRT or TensorRT-RTX is installed, also with its own
    parser (and, with --build, its builder), reported beside the rules' column for that parser.

    Exit 0: the rules of every checked version pass every file (and the parser, where installed,
    parses it); 1: a version's rules (or the parser, or the builder) refuse one, or, with --strict,
    the rules and the parser disagree; 3: no refusal but warnings remain (or a version the check
    has no rules for); 2: bad input.
    """
    from aft_export.api import check

    if not models and not kw["rules"]:
        raise click.UsageError("give one or more ONNX files to check (or --rules to list the rules)")
    result = check(models, **kw)
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


def _build_options():
    B = BuildOptions
    return [
        bound(B, "batch_profile", "--batch-profile", help="The engine's batch sizes MIN,OPT,MAX (or one number)."),
        bound(B, "hw_profile", "--hw-profile", help="AFT-conv exported with --dynamic-hw: height/width MIN,OPT,MAX."),
        bound(B, "workspace_mb", "--workspace-mb", type=COUNT, help="Builder workspace limit."),
        bound(B, "timing_cache", "--timing-cache", type=click.Path(dir_okay=False),
              help="Timing cache file: loaded if present, saved after."),
        bound(B, "dla_core", "--dla-core", type=NONNEGATIVE,
              help="Jetson: build for this DLA core, with GPU fallback."),
        bound(B, "version_compatible", "--version-compatible", is_flag=True,
              help="Engine loadable by later TensorRT of the same major, and 10.x engines by 11.x (8.6 by "
                   "10.x); needs TensorRT 8.6+."),
        bound(B, "tf32", "--tf32", is_flag=True,
              help="Allow TF32 for fp32 math (Ampere+: faster, ~1e-3 relative error)."),
        bound(B, "hardware_compatibility", "--hardware-compatibility", type=click.Choice(sorted(HW_LEVELS)),
              help="Engine loadable on other GPUs of that level."),
        bound(B, "library", "--library", type=click.Choice(LIBRARIES),
              help="tensorrt: standard TensorRT (builds on the GPU it is for; Hopper, Jetson); tensorrt-rtx: "
                   "TensorRT for RTX (builds ahead of time on any CPU, runs on RTX GPUs); auto: TensorRT where "
                   "installed, else TensorRT-RTX."),
        bound(B, "compute_capabilities", "--compute-capability", "compute_capabilities", multiple=True, metavar="X.Y",
              help="TensorRT-RTX: target GPU (repeatable; 7.5, 8.0, 8.6, 8.9, 12.0, 12.1) [default: the "
                   "library's, 8.6 and later]."),
    ]  # fmt: skip


@main.command("build")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Engine file to write [default: MODEL.engine, or MODEL.rtx.engine for TensorRT-RTX].")
@apply_options(_build_options())
@foreign_options
def build_cmd(model, output, **kw) -> None:
    """Build a TensorRT or TensorRT-RTX engine (precision as the ONNX graph says) and its manifest.

    TensorRT-RTX builds on a machine with no GPU; such an engine is built, not run. An ONNX file
    another tool wrote needs its preprocessing (the flags below, or NAME.preprocess.json beside
    it): the manifest records it, so the engine is fed as the file was.
    """
    from aft_export.api import build

    build(model, output, **given(kw))
