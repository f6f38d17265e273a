"""The ``aft-export`` command line. Commands are thin: build a config, call the library.

User errors (:class:`AFTExportError`) become one line on stderr and exit code 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import sys

import click

from aft_export import __version__
from aft_export.byo.cli import spec_file, user_model_from, user_model_options
from aft_export.errors import AFTExportError


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AFTExportError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="aft-export")
def main() -> None:
    """Export Attention Free Transformer classifiers to ONNX and TensorRT, verified."""


@main.command("models")
def models_cmd() -> None:
    """List the registered model configs."""
    from aft_export.models import count_params, create_model, get_config, list_models

    for name in list_models():
        cfg = get_config(name)
        n = count_params(create_model(name))
        extra = {"full": f"rank={cfg.rank}", "local": f"window={cfg.window}", "simple": "",
                 "conv": f"heads={cfg.heads} k={cfg.kernel_size}"}[cfg.variant]  # fmt: skip
        click.echo(
            f"{name:22s} {cfg.variant:6s} {cfg.img_size:>3d}px patch {cfg.patch_size:<2d} "
            f"dim {cfg.dim:<3d} depth {cfg.depth:<2d} {extra:16s} {n / 1e6:6.2f}M params"
        )


@main.command("info")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--config", "config_name", help="Registry config name, for plain state_dict files.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info_cmd(checkpoint: str, config_name: str | None, as_json: bool) -> None:
    """Print a checkpoint's config, parameter count, classes and metrics."""
    from aft_export.checkpoint import load_checkpoint
    from aft_export.models import count_params

    model, meta = load_checkpoint(checkpoint, config=config_name)
    prov = meta.provenance
    report = {
        "path": meta.path,
        "sha256": meta.sha256,
        "model_name": meta.model_name,
        "format_version": meta.format_version,
        "params": count_params(model),
        "input_size": list(meta.input_size),
        "mean": list(meta.mean),
        "std": list(meta.std),
        "classes": meta.classes,
        "config": meta.config.to_dict(),
        "metrics": prov.get("metrics", {}),
        "training": {k: prov[k] for k in ("data", "epochs", "seed", "wall_time_s", "torch") if k in prov},
    }
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"checkpoint   {meta.path}")
    click.echo(f"sha256       {meta.sha256}")
    click.echo(f"model        {meta.model_name or '(unnamed)'}  AFT-{meta.config.variant}")
    click.echo(f"params       {report['params']:,}")
    c, h, w = meta.input_size
    click.echo(f"input        {c}x{h}x{w} RGB, mean {list(meta.mean)}, std {list(meta.std)}")
    cfg = ", ".join(f"{k}={v}" for k, v in meta.config.to_dict().items())
    click.echo(f"config       {cfg}")
    click.echo(f"classes      {len(meta.classes)}: {', '.join(meta.classes)}")
    metrics = report["metrics"]
    click.echo(
        "metrics      " + (", ".join(f"{k}={v}" for k, v in metrics.items()) if metrics else "(none recorded)")
    )
    if report["training"]:
        click.echo("training     " + ", ".join(f"{k}={v}" for k, v in report["training"].items()))


@main.command("train")
@click.option("--model", "model_name", required=True, help="Registry config name (`aft-export models`).")
@click.option("--data", required=True, type=click.Path(), help="ImageFolder directory or tar.")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="Checkpoint to write.")
@click.option("--test-data", type=click.Path(), help="Labelled test set evaluated at the end.")
@click.option("--epochs", default=12, show_default=True)
@click.option("--batch-size", default=128, show_default=True)
@click.option("--lr", default=2e-3, show_default=True)
@click.option("--weight-decay", default=0.05, show_default=True)
@click.option("--warmup-epochs", default=1.0, show_default=True)
@click.option("--label-smoothing", default=0.1, show_default=True)
@click.option("--val-fraction", default=0.1, show_default=True, help="Held-out validation share.")
@click.option("--seed", default=0, show_default=True)
@click.option("--threads", default=0, help="Torch CPU threads (0: default).")
@click.option("--limit", type=int, help="Use only the first N images (smoke tests).")
@click.option("--resume", type=click.Path(dir_okay=False), help="Continue from an epoch checkpoint.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def train_cmd(model_name, data, out, test_data, epochs, batch_size, lr, weight_decay, warmup_epochs,
              label_smoothing, val_fraction, seed, threads, limit, resume, no_progress) -> None:  # fmt: skip
    """Train a classifier; writes the checkpoint atomically after every epoch."""
    from aft_export.train import TrainConfig, train

    cfg = TrainConfig(
        model=model_name, data=data, out=out, epochs=epochs, batch_size=batch_size, lr=lr,
        weight_decay=weight_decay, warmup_epochs=warmup_epochs, label_smoothing=label_smoothing,
        val_fraction=val_fraction, seed=seed, threads=threads, test_data=test_data, limit=limit,
        resume=resume, progress=not no_progress,
    )  # fmt: skip
    metrics = train(cfg)
    click.echo(json.dumps(metrics))


@main.command("export")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--config", "config_name", help="Registry config name, for plain state_dict files.")
@click.option("--opset", default=18, show_default=True, help="ONNX opset (18 or newer).")
@click.option("--batch", default="dynamic", show_default=True, help="'dynamic' or a fixed batch size.")
@click.option("--dynamic-hw", is_flag=True, help="AFT-conv only: dynamic height and width.")
@click.option("--op-form", type=click.Choice(["custom", "decomposed"]), default="custom", show_default=True,
              help="custom: one com.aft node per AFT layer; decomposed: plain ONNX ops.")
@click.option("--target", type=click.Choice(["tensorrt", "tensorrt8"]), default="tensorrt", show_default=True,
              help="tensorrt: TensorRT 10.3+/11 (opset 18, com.aft functions); tensorrt8: TensorRT 8.5/8.6 "
                   "(JetPack 5.1/6.0) and newer (opset 17, functions inlined, LayerNorm decomposed).")
@click.option("--simplify/--no-simplify", default=True, show_default=True, help="Run onnxsim.")
@click.option("--allow-unsimplified", is_flag=True, help="Keep the unsimplified graph if onnxsim fails.")
@click.option("--verify-images", default=64, show_default=True, help="Real images for verification (0: skip).")
@click.option("--verify-data", type=click.Path(), help="ImageFolder directory or tar for verification.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@user_model_options
def export_cmd(checkpoint, output, config_name, opset, batch, dynamic_hw, op_form, target, simplify,
               allow_unsimplified, verify_images, verify_data, as_json, **byo) -> None:  # fmt: skip
    """Export a checkpoint (or, with --model-def, a model trained elsewhere) to ONNX, simplify
    it and verify it against PyTorch."""
    from aft_export.export.exporter import ExportOptions, export_checkpoint

    opts = ExportOptions(
        opset=opset, batch=batch, dynamic_hw=dynamic_hw, op_form=op_form, target=target, simplify=simplify,
        allow_unsimplified=allow_unsimplified, verify_images=verify_images, verify_data=verify_data,
    )  # fmt: skip
    log = (lambda *a: click.echo(*a, err=True)) if as_json else click.echo
    if byo["model_def"] and checkpoint:  # `export W.pt --model-def ...`: the positional file is the weights
        if byo["weights"]:
            raise AFTExportError(f"give the weights once: {checkpoint} or --weights {byo['weights']}")
        byo["weights"] = checkpoint
    user = user_model_from(byo)
    if user is not None:  # a model trained elsewhere (aft_export/byo)
        from aft_export.byo.export import export_user_model

        result = export_user_model(user, output, opts, log=log)
    elif checkpoint is None:
        raise AFTExportError("give a CHECKPOINT to export, or --model-def and --weights for a model trained elsewhere")
    else:
        result = export_checkpoint(checkpoint, output, opts, config=config_name, log=log)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(f"wrote {result.path} ({result.bytes / 1e6:.2f} MB, sha256 {result.sha256[:16]}...)")
    click.echo(f"nodes: {result.nodes_exported} exported, {result.nodes_final} final, "
               f"{result.aft_nodes} com.aft nodes")  # fmt: skip
    if result.simplify:
        s = result.simplify
        click.echo(f"onnxsim: {s['nodes_before']} -> {s['nodes_after']} nodes" if s["applied"]
                   else f"onnxsim: not applied ({s['reason']})")  # fmt: skip
    if result.parity:
        p = result.parity
        click.echo(f"verify: {p['images']} images from {p['data']}: max abs {p['max_abs']:.3g}, "
                   f"mean abs {p['mean_abs']:.3g}, min cosine {p['cosine_min']:.6f}, "
                   f"top-1 agreement {100 * p['top1_agreement']:.1f}%")  # fmt: skip
    if result.trt_check:
        click.echo("TensorRT check: " + ", ".join(f"{v} {s}" for v, s in result.trt_check["status"].items())
                   + f" (aft-export check {result.path})")  # fmt: skip
    click.echo("time: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.seconds.items()))


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


@main.command("quantize")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--precision", type=click.Choice(["int8", "fp16"]), required=True,
              help="int8: explicit Q/DQ; fp16: mixed precision (AFT core and LayerNorm in fp32).")
@click.option("--calib", help="Calibration images: folder, tar, .npy/.npz, cifar10:train, or a recipe "
              "such as calibration/cifar10.json (needed for int8).")
@click.option("--method", type=click.Choice(["minmax", "entropy", "percentile"]), default="percentile",
              show_default=True, help="int8 range calibration.")
@click.option("--percentile", default=99.999, show_default=True, help="For --method percentile.")
@click.option("--count", type=int, help="Calibration images to sample [default: the recipe's, else 512].")
@click.option("--batch-size", default=32, show_default=True, help="Calibration batch size.")
@click.option("--seed", type=int, help="Seed of the calibration sample [default: the recipe's, else 0].")
@click.option("--per-channel/--per-tensor", default=True, show_default=True, help="int8 weight scales.")
@click.option("--exclude", multiple=True, help="Node name to keep in floating point (repeatable).")
@click.option("--quantize-aft-core", is_flag=True, help="int8: quantise the AFT core too (not advised).")
@click.option("--sensitivity", is_flag=True, help="int8: rank nodes, keep the worst in float until --budget.")
@click.option("--budget", default=0.5, show_default=True,
              help="Sensitivity: allowed %% top-1 disagreement with fp32 on the calibration images.")
@click.option("--allow-fewer", is_flag=True, help="Use fewer calibration images if the source has fewer.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Calibration cache (default ~/.cache/aft-export).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the calibration cache.")
@click.option("--input-size", type=int, help="For models without aft-export metadata: square input size.")
@click.option("--mean", help="For models without metadata: r,g,b mean of (x / 255).")
@click.option("--std", help="For models without metadata: r,g,b std.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def quantize_cmd(model, output, precision, calib, method, percentile, count, batch_size, seed, per_channel,
                 exclude, quantize_aft_core, sensitivity, budget, allow_fewer, cache_dir, no_cache,
                 input_size, mean, std, as_json) -> None:  # fmt: skip
    """Write an int8 (Q/DQ) or fp16 graph from an fp32 ONNX export, calibrated on real images."""
    from aft_export.quantize import QuantizeOptions, quantize_model

    opts = QuantizeOptions(
        precision=precision, method=method, percentile=percentile, count=count, batch_size=batch_size,
        seed=seed, per_channel=per_channel, exclude=tuple(exclude), quantize_aft_core=quantize_aft_core,
        sensitivity=sensitivity, budget=budget, allow_fewer=allow_fewer,
        cache_dir="" if no_cache else cache_dir, input_size=input_size,
        mean=_floats3(mean, "--mean"), std=_floats3(std, "--std"),
    )  # fmt: skip
    log = (lambda *a: click.echo(*a, err=True)) if as_json else click.echo
    result = quantize_model(model, output, calib, opts, log=log)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    r = result.recipe
    click.echo(f"wrote {result.path} ({result.precision}, sha256 {result.sha256[:16]}...)")
    if precision == "int8":
        click.echo(f"int8: {r['quantized_nodes']} nodes quantised, {len(r['excluded_nodes'])} kept in float "
                   f"({', '.join(r['excluded_modules']) or 'none'})")  # fmt: skip
    else:
        click.echo(f"fp16: fp32 kept for {', '.join(r['fp32_op_types'])} and {len(r['fp32_nodes'])} AFT-core nodes")
        if result.nonfinite:
            for bad in result.nonfinite:
                click.echo(f"fp16 NaN/Inf: {bad['count']} values in {bad['value']} (node {bad['node']}, "
                           f"module {bad['module'] or '?'})")  # fmt: skip
        elif result.agreement:
            click.echo("fp16: no NaN or Inf in any fp16 value on the calibration images")
    if result.agreement:
        a = result.agreement
        click.echo(f"vs fp32 on {a['images']} calibration images: top-1 agreement {a['top1_agreement']:.2f}%, "
                   f"max abs {a['max_abs']:.3g}")  # fmt: skip
    click.echo("time: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.seconds.items()))


@main.command("parity")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("artifacts", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Images: ImageFolder directory or tar.")
@click.option("--images", default=64, show_default=True, help="Number of real images.")
@click.option("--tolerance", "overrides", multiple=True, metavar="PREC.FIELD=VALUE",
              help="Override a limit, e.g. fp16.max_abs=0.1 (repeatable).")
@click.option("--provider", type=click.Choice(["cpu", "cuda", "tensorrt"]), default="cpu", show_default=True,
              help="ONNX Runtime execution provider for .onnx artifacts (cuda/tensorrt need onnxruntime-gpu).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@user_model_options
def parity_cmd(checkpoint, artifacts, data, images, overrides, provider, as_json, **byo) -> None:
    """Compare artifacts with the fp32 PyTorch checkpoint (or, with --model-def and --weights,
    the user's own module: then every argument is an artifact).

    Exit 0: all passed; 1: one failed; 3: none failed but one was skipped (its runtime
    is missing here); 2: bad input.
    """
    from aft_export.parity import run_parity

    user = user_model_from(byo)
    if user is not None:  # the reference is the user's own module (aft_export/byo)
        checkpoint, artifacts = user, (checkpoint, *artifacts)
    report = run_parity(checkpoint, list(artifacts), data, images=images, overrides=list(overrides),
                        providers=provider)  # fmt: skip
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"reference {report['reference']} (torch fp32), {report['images']} images from {report['data']}")
        click.echo(f"{'artifact':32s} {'backend':12s} {'prec':5s} {'max abs':>9s} {'mean abs':>9s} "
                   f"{'max rel':>9s} {'cos min':>9s} {'SQNR dB':>8s} {'top1':>7s} {'top5':>6s} {'NaN':>4s}  result")
        for row in report["artifacts"]:
            if row["status"] == "skipped":
                click.echo(f"{row['artifact'][-32:]:32s} SKIPPED: {row['reason']}")
                continue
            m = row["inputs"]["real"]
            click.echo(f"{row['artifact'][-32:]:32s} {row['backend']:12s} {row['precision']:5s} {m['max_abs']:9.2e} "
                       f"{m['mean_abs']:9.2e} {m['max_rel']:9.2e} {m['cosine_min']:9.6f} {m['sqnr_db']:8.1f} "
                       f"{100 * m['top1_agreement']:6.1f}% {100 * m['top5_overlap']:5.1f}% {m['nonfinite']:4d}  "
                       + ("pass" if row["passed"] else "FAIL: " + "; ".join(row["failures"])))  # fmt: skip
            div = row.get("divergence")
            if div and div.get("first"):
                f = div["first"]
                click.echo(f"    diverges first at node {f['node']} ({f['op_type']}) from module "
                           f"{f['module'] or '(root)'} [{f['module_type']}]: relative error {f['rel']:.3g} > "
                           f"{div['limit_rel']:g} ({div['compared']} values compared with {div['reference']})")  # fmt: skip
            elif div and div.get("error"):
                click.echo(f"    could not localise the divergence: {div['error']}")
            elif div and div.get("worst"):
                w = div["worst"][0]
                click.echo(f"    no intermediate value leaves {div['limit_rel']:g} relative error "
                           f"({div['compared']} compared); the largest, {w['rel']:.3g}, is at node {w['node']} "
                           f"({w['op_type']}) from module {w['module'] or '(root)'} [{w['module_type']}]")  # fmt: skip
    if any(r["status"] == "fail" for r in report["artifacts"]):
        sys.exit(1)
    if report["skipped"]:
        sys.exit(3)


@main.command("bench")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--batch", "batches", multiple=True, type=int, default=(1, 32), show_default=True,
              help="Batch size (repeatable).")
@click.option("--warmup", default=10, show_default=True)
@click.option("--iters", default=50, show_default=True)
@click.option("--threads", default=0, help="CPU threads (0: the backend's default).")
@click.option("--provider", type=click.Choice(["cpu", "cuda", "tensorrt"]), default="cpu", show_default=True,
              help="ONNX Runtime execution provider for .onnx artifacts (cuda/tensorrt need onnxruntime-gpu).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def bench_cmd(artifacts, batches, warmup, iters, threads, provider, as_json) -> None:
    """Latency p50/p90/p99 and throughput of checkpoints and ONNX files."""
    from aft_export.bench import bench

    report = bench(list(artifacts), list(batches), warmup=warmup, iters=iters, threads=threads, providers=provider)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"{'artifact':32s} {'backend':12s} {'prec':5s} {'batch':>5s} {'thr':>3s} {'p50 ms':>8s} "
               f"{'p90 ms':>8s} {'p99 ms':>8s} {'img/s':>9s}")  # fmt: skip
    for r in report["rows"]:
        click.echo(f"{r['artifact'][-32:]:32s} {r['backend']:12s} {r['precision']:5s} {r['batch']:5d} "
                   f"{r['threads']:3d} {r['p50_ms']:8.2f} {r['p90_ms']:8.2f} {r['p99_ms']:8.2f} "
                   f"{r['images_per_s']:9.1f}")  # fmt: skip
    for s in report["skipped"]:
        click.echo(f"{s['artifact'][-32:]:32s} {'batch ' + str(s['batch']) if s['batch'] else 'all batches'}: "
                   f"skipped ({s['reason']})")  # fmt: skip


@main.command("pipeline")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), help="Run directory [default: runs/<model>-<UTC time>].")
@click.option("--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@click.option("--data", default="cifar10:test", show_default=True, help="Labelled images for parity and eval.")
@click.option("--precision", "precisions", multiple=True, type=click.Choice(["fp16", "int8"]),
              help="Reduced precisions to build [default: fp16 and int8].")
@click.option("--op-form", type=click.Choice(["custom", "decomposed"]), default="custom", show_default=True)
@click.option("--target", "targets", multiple=True, type=click.Choice(["tensorrt", "tensorrt8"]),
              help="Export target(s), repeatable: tensorrt (TensorRT 10.3+/11: model*.onnx), tensorrt8 (8.5+, "
                   "JetPack 5.1/6.0: model.trt8*.onnx) [default: tensorrt].")
@click.option("--eval-limit", type=int, help="Evaluate a fixed subset of N images [default: all].")
@click.option("--parity-images", default=64, show_default=True)
@click.option("--batch", "batches", multiple=True, type=int, help="Bench batch sizes [default: 1 and 32].")
@click.option("--iters", default=30, show_default=True, help="Bench runs per batch size.")
@click.option("--threads", default=0, show_default=True, help="CPU threads (0: the backend's default).")
@click.option("--tolerance", "overrides", multiple=True, metavar="PREC.FIELD=VALUE", help="Parity limit override.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@user_model_options
def pipeline_cmd(checkpoint, out, calib, data, precisions, op_form, targets, eval_limit, parity_images, batches,
                 iters, threads, overrides, as_json, **byo) -> None:  # fmt: skip
    """Export, quantise, build engines (where TensorRT exists), check parity, evaluate and
    benchmark in one run directory. With no CHECKPOINT: the bundled zoo model.

    Exit 0: every artifact passed parity; 1: one failed (the run directory still has
    the full report); 2: bad input.
    """
    from aft_export.pipeline import PipelineOptions, run_pipeline, summary_table

    kw = {k: v for k, v in dict(out=out, calib=calib, data=data, op_form=op_form, eval_limit=eval_limit,
                                parity_images=parity_images, bench_iters=iters, threads=threads,
                                tolerances=tuple(overrides)).items() if v is not None}  # fmt: skip
    if precisions:
        kw["precisions"] = tuple(dict.fromkeys(precisions))
    if batches:
        kw["bench_batches"] = tuple(batches)
    if targets:
        kw["targets"] = tuple(dict.fromkeys(targets))
    opts = PipelineOptions(**kw)
    log = (lambda *a: click.echo(*a, err=True)) if as_json else click.echo
    user = user_model_from(byo)
    if user is not None and checkpoint:
        raise AFTExportError(f"give either CHECKPOINT ({checkpoint}) or --model-def, not both")
    if user is not None:  # a model trained elsewhere, as a spec file the stages take (aft_export/byo)
        with spec_file(user) as spec:
            result = run_pipeline(str(spec), opts, log=log)
    else:
        result = run_pipeline(checkpoint, opts, log=log)
    if as_json:
        click.echo(json.dumps({"run_dir": result.run_dir, "passed": result.passed, "summary": result.summary},
                              indent=2))  # fmt: skip
    else:
        click.echo("")
        for line in summary_table(result.summary, opts.bench_batches):
            click.echo(line)
        click.echo(f"\n{'PASS' if result.passed else 'FAIL'}: run directory {result.run_dir} "
                   f"(report.md, manifest.json, plots/)")  # fmt: skip
    if not result.passed:
        sys.exit(1)


@main.command("check")
@click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--trt", "trt_versions", multiple=True, metavar="VERSION",
              help="TensorRT version to check (repeatable) [default: every supported one the file's export "
                   "target is for: 8.5, 8.6, 10.3, 10.13, 11.4].")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
def check_cmd(models, trt_versions, as_json) -> None:
    """Check ONNX files offline against TensorRT's parser rules, one column per version.

    Exit 0: every checked version accepts every file; 1: a version refuses one; 3: no
    refusal but warnings remain (or a version the check has no rules for); 2: bad input.
    """
    from aft_export.trtcheck import check_model, format_report

    reports = [check_model(m, list(trt_versions) or None) for m in models]
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in reports] if len(reports) > 1 else reports[0].to_dict(),
                              indent=2))  # fmt: skip
    else:
        click.echo("\n\n".join("\n".join(format_report(r)) for r in reports))
    codes = [r.exit_code for r in reports]
    sys.exit(1 if 1 in codes else 3 if 3 in codes else 0)


@main.command("build")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Engine file to write.")
@click.option("--batch", default="1,8,32", show_default=True, help="Batch profile MIN,OPT,MAX (or one number).")
@click.option("--hw", help="AFT-conv exported with --dynamic-hw: height/width profile MIN,OPT,MAX.")
@click.option("--workspace-mb", default=1024, show_default=True, help="Builder workspace limit.")
@click.option("--timing-cache", type=click.Path(dir_okay=False), help="Timing cache file: loaded if present, saved after.")
@click.option("--dla-core", type=int, help="Jetson: build for this DLA core, with GPU fallback.")
@click.option("--version-compatible", is_flag=True,
              help="Engine loadable by later TensorRT of the same major, and 10.x engines by 11.x (8.6 by 10.x); "
                   "needs TensorRT 8.6+.")
@click.option("--tf32", is_flag=True, help="Allow TF32 for fp32 math (Ampere+: faster, ~1e-3 relative error).")
@click.option("--hardware-compatibility", type=click.Choice(["none", "ampere+", "same-cc"]), default="none",
              show_default=True, help="Engine loadable on other GPUs of that level.")
def build_cmd(model, output, batch, hw, workspace_mb, timing_cache, dla_core, version_compatible, tf32,
              hardware_compatibility) -> None:  # fmt: skip
    """Build a TensorRT engine (precision as the ONNX graph says) and its manifest."""
    from aft_export.trt import BuildOptions, build_engine

    opts = BuildOptions(batch=batch, hw=hw, workspace_mb=workspace_mb, timing_cache=timing_cache,
                        dla_core=dla_core, version_compatible=version_compatible, tf32=tf32,
                        hardware_compatibility=hardware_compatibility)  # fmt: skip
    build_engine(model, output, opts, log=click.echo)


@main.command("infer")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.argument("images", nargs=-1, required=True, type=click.Path())
@click.option("--top-k", default=5, show_default=True)
@click.option("--provider", type=click.Choice(["cpu", "cuda", "tensorrt"]), default="cpu", show_default=True,
              help="ONNX Runtime execution provider for .onnx artifacts (cuda/tensorrt need onnxruntime-gpu).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def infer_cmd(artifact, images, top_k, provider, as_json) -> None:
    """Top-k classes from a checkpoint, ONNX file or engine for images or folders of images."""
    from pathlib import Path

    import numpy as np

    from aft_export.data import IMAGE_EXTENSIONS, load_image, normalize
    from aft_export.runners import load_runner

    runner = load_runner(artifact, providers=provider)
    info = runner.info
    files = []
    for item in images:
        p = Path(item)
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix.lower() in IMAGE_EXTENSIONS)
        elif p.is_file():
            files.append(p)
        else:
            raise AFTExportError(f"image {p} does not exist")
    if not files:
        raise AFTExportError(f"no images found in {', '.join(images)}")
    x = normalize(np.stack([load_image(str(f), info.input_size[1]) for f in files]), info.mean, info.std).numpy()
    logits = runner.logits(x, batch_size=runner.fixed_batch or 64)
    z = logits - logits.max(1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    k = min(top_k, len(info.classes))
    results = []
    for f, p in zip(files, probs):
        order = np.argsort(-p)[:k]
        results.append({"image": str(f), "top": [{"class": info.classes[i], "index": int(i),
                                                   "probability": round(float(p[i]), 5)} for i in order]})  # fmt: skip
    if as_json:
        click.echo(json.dumps({"artifact": artifact, "backend": runner.backend, "precision": info.precision,
                               "results": results}, indent=2))  # fmt: skip
        return
    for r in results:
        click.echo(f"{r['image']}: " + ", ".join(f"{t['class']} {100 * t['probability']:.1f}%" for t in r["top"]))


@main.command("eval")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Labelled ImageFolder directory or tar.")
@click.option("--batch-size", default=500, show_default=True)
@click.option("--limit", type=int, help="Evaluate a fixed subset of N images.")
@click.option("--provider", type=click.Choice(["cpu", "cuda", "tensorrt"]), default="cpu", show_default=True,
              help="ONNX Runtime execution provider for .onnx artifacts (cuda/tensorrt need onnxruntime-gpu).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def eval_cmd(artifacts, data, batch_size, limit, provider, as_json) -> None:
    """Top-1/top-5 of each checkpoint or ONNX file on a labelled set, side by side, with
    each one's top-1 agreement with the first."""
    from aft_export.evaluate import evaluate_artifacts

    rows = evaluate_artifacts(list(artifacts), data, batch_size=batch_size, limit=limit, providers=provider)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'artifact':40s} {'backend':12s} {'prec':5s} {'images':>6s} {'top1':>6s} {'top5':>6s} "
               f"{'agree':>6s}")  # fmt: skip
    for r in rows:
        if r["status"] == "skipped":
            click.echo(f"{r['artifact']:40s} SKIPPED: {r['reason']}")
            continue
        click.echo(f"{r['artifact']:40s} {r['backend']:12s} {r['precision']:5s} {r['images']:6d} "
                   f"{r['top1']:6.2f} {r['top5']:6.2f} {r['agreement']:6.2f}")  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    main()
