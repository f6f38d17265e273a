"""aft-export parity, eval and bench: artifacts compared, evaluated and timed."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, was_given, main, print_json, say
from aft_export.cli.byo import model_source_from, user_model_options
from aft_export.cli.params import (
    BACKEND_HELP,
    BATCH,
    COUNT,
    NONNEGATIVE,
    THREADS,
    backend_options,
    foreign_from,
    foreign_options,
)
from aft_export.errors import AFTExportError, Verdict
from aft_export.options import (
    BenchOptions,
    EvalOptions,
    ParityOptions,
)


@main.command("parity")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("artifacts", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--data", type=click.Path(), help="Images: ImageFolder directory or tar [default: the checkpoint's test "
              "data, else cifar10:test].")
@click.option("--images", type=COUNT, default=ParityOptions.images, show_default=True, help="Number of real images.")
@click.option("--tolerance", "overrides", multiple=True, metavar="PREC.FIELD=VALUE",
              help="Override a limit, e.g. fp16.max_abs=0.1 (repeatable).")
@backend_options(ParityOptions)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@user_model_options
def parity_cmd(checkpoint, artifacts, data, images, overrides, backend, provider, as_json, **byo) -> None:
    """Compare artifacts with the fp32 PyTorch checkpoint (or, with --model-def and --weights,
    the user's own module: then every argument is an artifact). An ONNX file another tool wrote
    (ModelOpt, ONNX Runtime's quantiser: no aft-export metadata) is fed as the reference is.

    Exit 0: all passed; 1: one failed; 3: none failed but one was skipped (its runtime
    is missing here); 2: bad input (a reference whose outputs are not finite, too).
    """
    from aft_export.verify.parity import run_parity
    from aft_export.workflow.report import format_parity

    # with --model-def the reference is the user's own module and every argument is an artifact
    reference, first = model_source_from(checkpoint, byo, role="artifact")
    artifacts = (first, *artifacts) if first is not None else artifacts
    report = run_parity(reference, list(artifacts), data, images=images, overrides=list(overrides), backend=backend,
                        providers=provider)  # fmt: skip
    print_json(report) if as_json else echo(format_parity(report))
    return exit_status(Verdict.from_dict(report["verdict"]))


@main.command("bench")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--batch-size", "batches", multiple=True, type=BATCH, default=BenchOptions.batches,
              show_default=True, help="Batch size to time (repeatable).")
@click.option("--warmup", type=NONNEGATIVE, default=BenchOptions.warmup, show_default=True)
@click.option("--iters", type=COUNT, default=BenchOptions.iters, show_default=True)
@click.option("--threads", type=THREADS, default=0, help="CPU threads (0: the backend's default).")
@backend_options(BenchOptions, BACKEND_HELP + " With --reference: every runtime here unless --backend is given.")
@click.option("--reference", type=click.Path(dir_okay=False),
              help="The checkpoint the files were made from: the deploy table, every file on every runtime here, "
                   "proven against it (parity, top-1) and timed, the fastest that passes marked per device.")
@click.option("--data", help="With --reference: labelled images for parity and top-1 [default: the checkpoint's "
                             "test data, else cifar10:test].")
@click.option("--images", type=COUNT, default=BenchOptions.images, show_default=True,
              help="With --reference: labelled images for top-1 (parity: the first 64).")
@click.option("--profile", is_flag=True, help="Also ONNX Runtime's time per op type for each ONNX file and batch "
              "(its profiler, in a session of its own; fused ops under their own names).")
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def bench_cmd(ctx, artifacts, batches, warmup, iters, threads, backend, provider, reference, data, images, profile,
              as_json, **kw) -> None:  # fmt: skip
    """Latency p50/p90/p99 and throughput of checkpoints, ONNX files and engines.

    With --reference CHECKPOINT: what to deploy where. Every file on every runtime here (PyTorch,
    ONNX Runtime, OpenVINO; TensorRT and the CUDA providers where a GPU is), each row proven
    against the checkpoint (parity within its precision's limits, top-1) and timed in interleaved
    rounds at batch 1 and the largest batch; the fastest row that passes is marked per device.

    Exit 0: every artifact timed at every batch size (with --reference: no row failed parity);
    1: with --reference, a row failed parity; 3: one was skipped (its runtime or a GPU is missing
    here, or a fixed-batch graph at another batch size; with --reference, a runtime could not
    read a file); 2: bad input.
    """
    from aft_export.workflow.report import deploy_lines, format_bench

    if reference is not None:
        from aft_export.verify.deploy import bench_against

        if profile or foreign_from(kw) is not None:
            raise AFTExportError("`reference` compares our files with their checkpoint: give neither `profile` nor "
                                 "another tool's preprocessing with it (bench those files without `reference`)")
        from aft_export.options import backend_of

        explicit = was_given(ctx, "backend") or provider is not None
        table = bench_against(reference, list(artifacts), data, images=images, batches=tuple(batches),
                              warmup=warmup, iters=iters, threads=threads,
                              backend=backend_of(backend, provider) if explicit else None,
                              log=lambda m: say(m, err=True))  # fmt: skip
        print_json(table.to_dict()) if as_json else echo(deploy_lines(table.to_dict(), markdown=False))
        return exit_status(table.verdict)
    given = [name for name in ("data", "images") if was_given(ctx, name)]
    if given:
        raise AFTExportError(f"`{given[0]}` gives the labelled images of the deploy table: give `reference` (the "
                             f"checkpoint the files were made from) with it")  # fmt: skip
    from aft_export.verify.bench import bench

    report = bench(list(artifacts), list(batches), warmup=warmup, iters=iters, threads=threads, backend=backend,
                   providers=provider, profile=profile, preprocessing=foreign_from(kw))  # fmt: skip
    print_json(report) if as_json else echo(format_bench(report))
    return exit_status(Verdict.from_dict(report["verdict"]))


@main.command("eval")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Labelled ImageFolder directory or tar.")
@click.option("--batch-size", type=BATCH, default=EvalOptions.batch_size, show_default=True)
@click.option("--images", "limit", type=COUNT, help="Evaluate a fixed subset of N images [default: all].")
@backend_options(EvalOptions)
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def eval_cmd(artifacts, data, batch_size, limit, backend, provider, as_json, **kw) -> None:
    """Top-1/top-5 of each checkpoint, ONNX file or engine on a labelled set, side by side, with
    each one's top-1 agreement with the first.

    Exit 0: every artifact evaluated; 3: one was skipped (its runtime or a GPU is missing
    here); 2: bad input (an artifact whose outputs are not finite, too).
    """
    from aft_export.verify.evaluate import eval_verdict, evaluate_artifacts
    from aft_export.workflow.report import format_eval

    rows = evaluate_artifacts(list(artifacts), data, batch_size=batch_size, limit=limit, backend=backend,
                              providers=provider, preprocessing=foreign_from(kw))  # fmt: skip
    print_json(rows) if as_json else echo(format_eval(rows))
    return exit_status(eval_verdict(rows))
