"""The ``aft-export`` command line. Commands are thin: build the options, call the library,
print what :mod:`aft_export.report` renders.

Defaults come from the options dataclasses (or the library function's signature), never
written twice. User errors (:class:`AFTExportError`) become one line on stderr and exit
code 2; anything else is a bug and keeps its traceback. Library modules are imported
inside the commands so that ``aft-export --help`` starts without loading torch.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys

import click

from aft_export.byo.cli import USER_MODEL_KEYS, spec_file, user_model_from, user_model_options
from aft_export.errors import AFTExportError
from aft_export.options import (HW_LEVELS, LIBRARIES, METHODS, OP_FORMS, TARGETS, BenchOptions, BuildOptions,
                                EvalOptions, ExportOptions, ParityOptions, PipelineOptions, QuantizeOptions,
                                TrainConfig)  # fmt: skip
from aft_export.version import __version__

PROVIDERS = click.Choice(["cpu", "cuda", "tensorrt"])
PROVIDER_HELP = ("cpu, cuda or tensorrt: ONNX Runtime's execution provider for .onnx artifacts (cuda/tensorrt "
                 "need onnxruntime-gpu); cuda/tensorrt also run checkpoints in PyTorch on the GPU.")  # fmt: skip


class _Group(click.Group):
    def invoke(self, ctx):
        from aft_export.runners.ort import ort_conflict

        conflict = ort_conflict()
        if conflict:
            click.echo(f"warning: {conflict}", err=True)
        try:
            return super().invoke(ctx)
        except AFTExportError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)


def default(owner, name: str):
    """The default of a dataclass field or of a function's keyword parameter."""
    if dataclasses.is_dataclass(owner):
        return next(f.default for f in dataclasses.fields(owner) if f.name == name)
    return inspect.signature(owner).parameters[name].default


def _echo(lines: list[str]) -> None:
    click.echo("\n".join(lines))


def _log(as_json: bool):
    return (lambda *a: click.echo(*a, err=True)) if as_json else click.echo


def _json(data) -> None:
    click.echo(json.dumps(data, indent=2))


def _floats3(value: str | None, name: str):
    if value is None:
        return None
    try:
        parts = tuple(float(v) for v in value.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3:
        raise AFTExportError(f"{name} takes three comma-separated numbers, e.g. 0.485,0.456,0.406; got {value!r}")
    return parts


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="aft-export")
def main() -> None:
    """Export Attention Free Transformer classifiers to ONNX and TensorRT, verified."""


@main.command("models")
def models_cmd() -> None:
    """List the registered model configs."""
    from aft_export.models import describe_models

    _echo(describe_models())


@main.command("info")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--config", "config_name", help="Registry config name, for plain state_dict files.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info_cmd(checkpoint: str, config_name: str | None, as_json: bool) -> None:
    """Print a checkpoint's config, parameter count, classes and metrics."""
    from aft_export.checkpoint import describe
    from aft_export.report import format_info

    d = describe(checkpoint, config=config_name)
    _json(d) if as_json else _echo(format_info(d))


def _train_options():
    T = TrainConfig
    return [
        click.option("--epochs", default=default(T, "epochs"), show_default=True),
        click.option("--batch-size", default=default(T, "batch_size"), show_default=True),
        click.option("--lr", default=default(T, "lr"), show_default=True),
        click.option("--weight-decay", default=default(T, "weight_decay"), show_default=True),
        click.option("--warmup-epochs", default=default(T, "warmup_epochs"), show_default=True),
        click.option("--label-smoothing", default=default(T, "label_smoothing"), show_default=True),
        click.option("--val-fraction", default=default(T, "val_fraction"), show_default=True,
                     help="Held-out validation share."),
        click.option("--seed", default=default(T, "seed"), show_default=True),
        click.option("--threads", default=default(T, "threads"), help="Torch CPU threads (0: default)."),
    ]  # fmt: skip


def _apply(options):
    def wrap(fn):
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return wrap


@main.command("train")
@click.option("--model", "model_name", required=True, help="Registry config name (`aft-export models`).")
@click.option("--data", required=True, type=click.Path(), help="ImageFolder directory or tar.")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="Checkpoint to write.")
@click.option("--test-data", type=click.Path(), help="Labelled test set evaluated at the end.")
@_apply(_train_options())
@click.option("--limit", type=int, help="Use only the first N images (smoke tests).")
@click.option("--resume", type=click.Path(dir_okay=False), help="Continue from an epoch checkpoint.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def train_cmd(model_name, data, out, test_data, no_progress, **kw) -> None:
    """Train a classifier; writes the checkpoint atomically after every epoch."""
    from aft_export.train import train

    metrics = train(TrainConfig(model=model_name, data=data, out=out, test_data=test_data, progress=not no_progress,
                                **kw))  # fmt: skip
    click.echo(json.dumps(metrics))


def _export_options():
    E = ExportOptions
    return [
        click.option("--opset", default=default(E, "opset"), show_default=True, help="ONNX opset (18 or newer)."),
        click.option("--batch", default=default(E, "batch"), show_default=True, help="'dynamic' or a fixed batch size."),
        click.option("--dynamic-hw", is_flag=True, help="AFT-conv only: dynamic height and width."),
        click.option("--op-form", type=click.Choice(OP_FORMS), default=default(E, "op_form"), show_default=True,
                     help="custom: one com.aft node per AFT layer; decomposed: plain ONNX ops."),
        click.option("--target", type=click.Choice(TARGETS), default=default(E, "target"), show_default=True,
                     help="tensorrt: TensorRT 10.3+/11 (opset 18, com.aft functions); tensorrt8: TensorRT 8.5/8.6 "
                          "(JetPack 5.1/6.0) and newer (opset 17, functions inlined, LayerNorm decomposed)."),
        click.option("--simplify/--no-simplify", default=default(E, "simplify"), show_default=True, help="Run onnxsim."),
        click.option("--allow-unsimplified", is_flag=True, help="Keep the unsimplified graph if onnxsim fails."),
        click.option("--verify-images", default=default(E, "verify_images"), show_default=True,
                     help="Real images for verification (0: skip)."),
        click.option("--verify-data", type=click.Path(), help="ImageFolder directory or tar for verification."),
    ]  # fmt: skip


@main.command("export")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--config", "config_name", help="Registry config name, for plain state_dict files.")
@_apply(_export_options())
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@user_model_options
def export_cmd(checkpoint, output, config_name, as_json, **kw) -> None:
    """Export a checkpoint (or, with --model-def, a model trained elsewhere) to ONNX, simplify
    it and verify it against PyTorch."""
    from aft_export.export.exporter import export_checkpoint
    from aft_export.report import format_export

    byo = {k: kw.pop(k) for k in list(kw) if k in USER_MODEL_KEYS}
    if byo["model_def"] and checkpoint:  # `export W.pt --model-def ...`: the positional file is the weights
        if byo["weights"]:
            raise AFTExportError(f"give the weights once: {checkpoint} or --weights {byo['weights']}")
        byo["weights"] = checkpoint
    user = user_model_from(byo)
    if user is not None:  # a model trained elsewhere (aft_export/byo)
        from aft_export.byo.export import export_user_model

        result = export_user_model(user, output, ExportOptions(**kw), log=_log(as_json))
    elif checkpoint is None:
        raise AFTExportError("give a CHECKPOINT to export, or --model-def and --weights for a model trained elsewhere")
    else:
        result = export_checkpoint(checkpoint, output, ExportOptions(**kw), config=config_name, log=_log(as_json))
    _json(result.to_dict()) if as_json else _echo(format_export(result.to_dict()))


def _quantize_options():
    Q = QuantizeOptions
    return [
        click.option("--method", type=click.Choice(METHODS), default=default(Q, "method"), show_default=True,
                     help="int8 range calibration."),
        click.option("--percentile", default=default(Q, "percentile"), show_default=True,
                     help="For --method percentile."),
        click.option("--count", type=int, help="Calibration images to sample [default: the recipe's, else 512]."),
        click.option("--batch-size", default=default(Q, "batch_size"), show_default=True,
                     help="Calibration batch size."),
        click.option("--seed", type=int, help="Seed of the calibration sample [default: the recipe's, else 0]."),
        click.option("--per-channel/--per-tensor", default=default(Q, "per_channel"), show_default=True,
                     help="int8 weight scales."),
        click.option("--exclude", multiple=True, help="Node name to keep in floating point (repeatable)."),
        click.option("--quantize-aft-core", is_flag=True,
                     help="int8: quantise the AFT core too (inlines the com.aft functions; ONNX Runtime "
                          "does not fuse those MatMuls, so slower on CPU; not advised)."),
        click.option("--sensitivity", is_flag=True, help="int8: rank nodes, keep the worst in float until --budget."),
        click.option("--budget", default=default(Q, "budget"), show_default=True,
                     help="Sensitivity: allowed %% top-1 disagreement with fp32 on the calibration images."),
        click.option("--allow-fewer", is_flag=True, help="Use fewer calibration images if the source has fewer."),
    ]  # fmt: skip


@main.command("quantize")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--precision", type=click.Choice(["int8", "fp16"]), required=True,
              help="int8: explicit Q/DQ; fp16: mixed precision (AFT core and LayerNorm in fp32).")
@click.option("--calib", help="Calibration images: folder, tar, .npy/.npz, cifar10:train, or a recipe "
              "such as calibration/cifar10.json (needed for int8).")
@_apply(_quantize_options())
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Calibration cache [default: ~/.cache/aft-export/calibration].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the calibration cache.")
@click.option("--input-size", type=int, help="For models without aft-export metadata: square input size.")
@click.option("--mean", help="For models without metadata: r,g,b mean of (x / 255).")
@click.option("--std", help="For models without metadata: r,g,b std.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def quantize_cmd(model, output, calib, exclude, cache_dir, no_cache, mean, std, as_json, **kw) -> None:
    """Write an int8 (Q/DQ) or fp16 graph from an fp32 ONNX export, calibrated on real images."""
    from aft_export.quantize import quantize_model
    from aft_export.report import format_quantize

    opts = QuantizeOptions(exclude=tuple(exclude), cache_dir="" if no_cache else cache_dir,
                           mean=_floats3(mean, "--mean"), std=_floats3(std, "--std"), **kw)  # fmt: skip
    result = quantize_model(model, output, calib, opts, log=_log(as_json))
    _json(result.to_dict()) if as_json else _echo(format_quantize(result.to_dict()))


@main.command("parity")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("artifacts", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Images: ImageFolder directory or tar.")
@click.option("--images", default=ParityOptions.images, show_default=True, help="Number of real images.")
@click.option("--tolerance", "overrides", multiple=True, metavar="PREC.FIELD=VALUE",
              help="Override a limit, e.g. fp16.max_abs=0.1 (repeatable).")
@click.option("--provider", type=PROVIDERS, default="cpu", show_default=True, help=PROVIDER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@user_model_options
def parity_cmd(checkpoint, artifacts, data, images, overrides, provider, as_json, **byo) -> None:
    """Compare artifacts with the fp32 PyTorch checkpoint (or, with --model-def and --weights,
    the user's own module: then every argument is an artifact).

    Exit 0: all passed; 1: one failed; 3: none failed but one was skipped (its runtime
    is missing here); 2: bad input.
    """
    from aft_export.parity import run_parity
    from aft_export.report import format_parity

    user = user_model_from(byo)
    if user is not None:  # the reference is the user's own module (aft_export/byo)
        checkpoint, artifacts = user, (checkpoint, *artifacts)
    report = run_parity(checkpoint, list(artifacts), data, images=images, overrides=list(overrides),
                        providers=provider)  # fmt: skip
    _json(report) if as_json else _echo(format_parity(report))
    if any(r["status"] == "fail" for r in report["artifacts"]):
        sys.exit(1)
    if report["skipped"]:
        sys.exit(3)


@main.command("bench")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--batch", "batches", multiple=True, type=int, default=BenchOptions.batches, show_default=True,
              help="Batch size (repeatable).")
@click.option("--warmup", default=BenchOptions.warmup, show_default=True)
@click.option("--iters", default=BenchOptions.iters, show_default=True)
@click.option("--threads", default=0, help="CPU threads (0: the backend's default).")
@click.option("--provider", type=PROVIDERS, default="cpu", show_default=True, help=PROVIDER_HELP)
@click.option("--profile", is_flag=True, help="Also ONNX Runtime's time per op type for each ONNX file and batch "
              "(its profiler, in a session of its own; fused ops under their own names).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def bench_cmd(artifacts, batches, warmup, iters, threads, provider, profile, as_json) -> None:
    """Latency p50/p90/p99 and throughput of checkpoints, ONNX files and engines.

    Exit 3 when an artifact could not run here (its runtime or a GPU is missing): reported
    skipped with the reason, never timed.
    """
    from aft_export.bench import bench
    from aft_export.report import format_bench

    report = bench(list(artifacts), list(batches), warmup=warmup, iters=iters, threads=threads, providers=provider,
                   profile=profile)  # fmt: skip
    _json(report) if as_json else _echo(format_bench(report))
    if any(s["batch"] is None for s in report["skipped"]):
        sys.exit(3)


@main.command("pipeline")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), help="Run directory [default: runs/<model>-<UTC time>].")
@click.option("--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@click.option("--data", help=f"Labelled images for parity and eval [default: {PipelineOptions.data}].")
@click.option("--precision", "precisions", multiple=True, type=click.Choice(["fp16", "int8"]),
              help="Reduced precisions to build [default: fp16 and int8].")
@click.option("--op-form", type=click.Choice(OP_FORMS), help=f"[default: {PipelineOptions.op_form}]")
@click.option("--target", "targets", multiple=True, type=click.Choice(TARGETS),
              help="Export target(s), repeatable: tensorrt (TensorRT 10.3+/11: model*.onnx), tensorrt8 (8.5+, "
                   "JetPack 5.1/6.0: model.trt8*.onnx) [default: tensorrt].")
@click.option("--eval-limit", type=int, help="Evaluate a fixed subset of N images [default: all].")
@click.option("--parity-images", type=int, help=f"[default: {PipelineOptions.parity_images}]")
@click.option("--batch", "bench_batches", multiple=True, type=int,
              help=f"Bench batch sizes [default: {' and '.join(map(str, PipelineOptions.bench_batches))}].")
@click.option("--iters", "bench_iters", type=int, help=f"Bench runs per batch size [default: {PipelineOptions.bench_iters}].")
@click.option("--threads", type=int, help="CPU threads (0: the backend's default) [default: 0].")
@click.option("--tolerance", "tolerances", multiple=True, metavar="PREC.FIELD=VALUE", help="Parity limit override.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@user_model_options
def pipeline_cmd(checkpoint, as_json, **kw) -> None:
    """Export, quantise, check, build engines (TensorRT with a GPU, else TensorRT-RTX on the CPU),
    check parity, evaluate and benchmark in one run directory. With no CHECKPOINT: the bundled zoo model.

    Exit 0: every artifact passed parity; 1: one failed (the run directory still has
    the full report); 3: none failed but one was not run here (an engine with no GPU); 2: bad input.
    """
    from aft_export.pipeline import run_pipeline
    from aft_export.report import summary_table

    user = user_model_from({k: kw.pop(k) for k in list(kw) if k in USER_MODEL_KEYS})
    if user is not None and checkpoint:
        raise AFTExportError(f"give either CHECKPOINT ({checkpoint}) or --model-def, not both")
    given = {k: tuple(dict.fromkeys(v)) if isinstance(v, tuple) else v for k, v in kw.items() if v not in (None, ())}
    opts = PipelineOptions(**given)
    if user is not None:  # a model trained elsewhere, as a spec file the stages take (aft_export/byo)
        with spec_file(user) as spec:
            result = run_pipeline(str(spec), opts, log=_log(as_json))
    else:
        result = run_pipeline(checkpoint, opts, log=_log(as_json))
    if as_json:
        _json({"run_dir": result.run_dir, "passed": result.passed, "unverified": result.unverified,
               "summary": result.summary})
    else:
        verdict = "FAIL" if not result.passed else "PASS, NOT ALL VERIFIED" if result.unverified else "PASS"
        _echo(["", *summary_table(result.summary, opts.bench_batches),
               *[f"not run here: {name}: {why}" for name, why in result.unverified.items()],
               f"\n{verdict}: run directory {result.run_dir} (report.md, manifest.json, plots/)"])  # fmt: skip
    if not result.passed:
        sys.exit(1)
    if result.unverified:
        sys.exit(3)


@main.command("check")
@click.argument("models", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--trt", "trt_versions", multiple=True, metavar="VERSION",
              help="TensorRT version to check (repeatable) [default: every supported one the file's export "
                   "target is for: 8.5, 8.6, 10.3, 10.13, 11.4].")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@click.option("--rules", "list_rules", is_flag=True,
              help="List every rule the check applies, with the versions it exists in and its source.")
@click.option("--library", type=click.Choice(LIBRARIES), default="auto", show_default=True,
              help="Where TensorRT or TensorRT-RTX is installed, its own ONNX parser reads each file too: which one.")
@click.option("--offline-only", is_flag=True, help="Only the offline rules, even where a TensorRT library is installed.")
@click.option("--build", "also_build", is_flag=True,
              help="Also build each file with the installed library (in memory; nothing is written).")
@click.option("--strict", is_flag=True,
              help="Exit 1 when the offline rules for the installed parser disagree with the parser itself.")
def check_cmd(models, trt_versions, as_json, list_rules, library, offline_only, also_build, strict) -> None:
    """Check ONNX files offline against TensorRT's parser rules, one column per version; where
    TensorRT or TensorRT-RTX is installed, also with its real parser (and, with --build, builder),
    reported beside the rules' column for that parser.

    Exit 0: every checked version accepts every file; 1: a version (or the real parser) refuses
    one, or, with --strict, the rules and the real parser disagree; 3: no refusal but warnings
    remain (or a version the check has no rules for); 2: bad input.
    """
    from aft_export.trtcheck import check_model, format_report, format_rules, rules_table

    if list_rules:
        rows = rules_table(list(trt_versions) or None)
        _json(rows) if as_json else click.echo("\n".join(format_rules(rows)))
        return
    if not models:
        raise click.UsageError("give one or more ONNX files to check (or --rules to list the rules)")
    reports = [check_model(m, list(trt_versions) or None) for m in models]
    real = _real_checks(models, reports, library, also_build, offline_only)
    if as_json:
        data = [{**r.to_dict(), **({"real": x} if x else {})} for r, x in zip(reports, real)]
        _json(data if len(data) > 1 else data[0])
    else:
        click.echo("\n\n".join("\n".join(format_report(r) + _format_real(x)) for r, x in zip(reports, real)))
    codes = [r.exit_code for r in reports]
    if any(x and (x["verdict"] == "refuses" or (strict and not x["agrees"])) for x in real):
        sys.exit(1)
    sys.exit(1 if 1 in codes else 3 if 3 in codes else 0)


def _real_checks(models, reports, library: str, also_build: bool, offline_only: bool) -> list:
    """Each file through the installed library's parser (None per file where none is installed,
    or with --offline-only; --library naming a missing one is an error)."""
    from aft_export.errors import RuntimeMissing
    from aft_export.trt import import_library

    if offline_only:
        return [None] * len(models)
    try:
        _, name, version = import_library(library)
    except RuntimeMissing:
        if library != "auto":
            raise
        return [None] * len(models)
    from aft_export.build import offline_column, real_check
    from aft_export.trtcheck import check_model

    column = offline_column(name, version)
    out = []
    for model, report in zip(models, reports):
        status = report.status.get(column)
        if status in (None, "not targeted"):
            status = check_model(model, [column]).status[column]
        out.append(real_check(model, status, column, name, also_build))
    return out


def _format_real(x: dict | None) -> list[str]:
    if not x:
        return []
    from aft_export.trt import TITLES

    title = f"{TITLES[x['library']]} {x['version']}"
    warned = "warnings not captured" if x["warnings"] is None else f"{len(x['warnings'])} warnings"
    lines = [f"real parser, {title}: {'parses' if x['parses'] else 'REFUSES'} ({len(x['errors'])} errors, {warned})"]
    if x["builds"] is not None:
        lines.append(f"real build, {title}: " + (f"builds ({x['engine_bytes'] / 1e6:.2f} MB engine, in memory)"
                                                 if x["builds"] else "FAILS"))  # fmt: skip
    lines += [f"  - {e}" for e in x["errors"][:10]]
    lines.append(f"rules for this parser (column {x['column']}) vs the real one: "
                 + ("agree" if x["agrees"] else f"DISAGREE ({x['disagreement']})"))
    return lines


def _build_options():
    B = BuildOptions
    return [
        click.option("--batch", default=default(B, "batch"), show_default=True,
                     help="Batch profile MIN,OPT,MAX (or one number)."),
        click.option("--hw", help="AFT-conv exported with --dynamic-hw: height/width profile MIN,OPT,MAX."),
        click.option("--workspace-mb", default=default(B, "workspace_mb"), show_default=True,
                     help="Builder workspace limit."),
        click.option("--timing-cache", type=click.Path(dir_okay=False),
                     help="Timing cache file: loaded if present, saved after."),
        click.option("--dla-core", type=int, help="Jetson: build for this DLA core, with GPU fallback."),
        click.option("--version-compatible", is_flag=True,
                     help="Engine loadable by later TensorRT of the same major, and 10.x engines by 11.x (8.6 by "
                          "10.x); needs TensorRT 8.6+."),
        click.option("--tf32", is_flag=True, help="Allow TF32 for fp32 math (Ampere+: faster, ~1e-3 relative error)."),
        click.option("--hardware-compatibility", type=click.Choice(sorted(HW_LEVELS)),
                     default=default(B, "hardware_compatibility"), show_default=True,
                     help="Engine loadable on other GPUs of that level."),
        click.option("--library", type=click.Choice(LIBRARIES), default=default(B, "library"), show_default=True,
                     help="tensorrt: standard TensorRT (builds on the GPU it is for; Hopper, Jetson); tensorrt-rtx: "
                          "TensorRT for RTX (builds ahead of time on any CPU, runs on RTX GPUs); auto: TensorRT "
                          "where installed, else TensorRT-RTX."),
        click.option("--compute-capability", "compute_capabilities", multiple=True, metavar="X.Y",
                     help="TensorRT-RTX: target GPU (repeatable; 7.5, 8.0, 8.6, 8.9, 12.0, 12.1) [default: the "
                          "library's, 8.6 and later]."),
    ]  # fmt: skip


@main.command("build")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Engine file to write [default: MODEL.engine, or MODEL.rtx.engine for TensorRT-RTX].")
@_apply(_build_options())
def build_cmd(model, output, compute_capabilities, **kw) -> None:
    """Build a TensorRT or TensorRT-RTX engine (precision as the ONNX graph says) and its manifest.

    TensorRT-RTX builds on a machine with no GPU; such an engine is built, not run.
    """
    from aft_export.build import build_engine

    build_engine(model, output, BuildOptions(compute_capabilities=tuple(compute_capabilities), **kw), log=click.echo)


@main.command("infer")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.argument("images", nargs=-1, required=True, type=click.Path())
@click.option("--top-k", default=5, show_default=True)
@click.option("--provider", type=PROVIDERS, default="cpu", show_default=True, help=PROVIDER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def infer_cmd(artifact, images, top_k, provider, as_json) -> None:
    """Top-k classes from a checkpoint, ONNX file or engine for images or folders of images."""
    from aft_export.predict import classify
    from aft_export.report import format_predictions

    result = classify(artifact, images, top_k=top_k, providers=provider)
    _json(result) if as_json else _echo(format_predictions(result))


@main.command("eval")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Labelled ImageFolder directory or tar.")
@click.option("--batch-size", default=EvalOptions.batch_size, show_default=True)
@click.option("--limit", type=int, help="Evaluate a fixed subset of N images.")
@click.option("--provider", type=PROVIDERS, default="cpu", show_default=True, help=PROVIDER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def eval_cmd(artifacts, data, batch_size, limit, provider, as_json) -> None:
    """Top-1/top-5 of each checkpoint, ONNX file or engine on a labelled set, side by side, with
    each one's top-1 agreement with the first.

    Exit 3 when an artifact could not run here (its runtime or a GPU is missing): reported
    skipped with the reason, never evaluated.
    """
    from aft_export.evaluate import evaluate_artifacts
    from aft_export.report import format_eval

    rows = evaluate_artifacts(list(artifacts), data, batch_size=batch_size, limit=limit, providers=provider)
    _json(rows) if as_json else _echo(format_eval(rows))
    if any(r.get("status") == "skipped" for r in rows):
        sys.exit(3)


if __name__ == "__main__":  # pragma: no cover
    main()
