"""aft-export parity, eval and bench: artifacts compared, evaluated and timed."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json, was_given
from aft_export.cli.byo import user_model_options
from aft_export.cli.params import (
    BACKEND_HELP,
    BATCH,
    COUNT,
    NONNEGATIVE,
    THREADS,
    backend_from,
    backend_options,
    bound,
    foreign_options,
    given,
)
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
@bound(ParityOptions, "images", "--images", type=COUNT, help="Number of real images.")
@click.option("--tolerance", "tolerances", multiple=True, metavar="PREC.FIELD=VALUE",
              help="Override a limit, e.g. fp16.max_abs=0.1 (repeatable).")
@backend_options(ParityOptions)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@user_model_options
def parity_cmd(checkpoint, artifacts, backend, provider, as_json, **kw) -> None:
    """Compare artifacts with the fp32 PyTorch checkpoint (or, with --model-def and --weights,
    the user's own module: then every argument is an artifact). An ONNX file another tool wrote
    (ModelOpt, ONNX Runtime's quantiser: no aft-export metadata) is fed as the reference is.

    Exit 0: all passed; 1: one failed; 3: none failed but one was skipped (its runtime
    is missing here); 2: bad input (a reference whose outputs are not finite, too).
    """
    from aft_export.api import parity
    from aft_export.workflow.report import format_parity

    result = parity(checkpoint, artifacts, backend=backend_from(backend, provider), **given(kw))
    print_json(result.to_dict()) if as_json else echo(format_parity(result.to_dict()))
    return exit_status(result.verdict)


@main.command("bench")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@bound(BenchOptions, "batch_sizes", "--batch-size", "batch_sizes", multiple=True, type=BATCH,
       help="Batch size to time (repeatable).")
@bound(BenchOptions, "warmup", "--warmup", type=NONNEGATIVE)
@bound(BenchOptions, "iters", "--iters", type=COUNT)
@click.option("--threads", type=THREADS, default=0, help="CPU threads (0: the backend's default).")
@backend_options(BenchOptions, BACKEND_HELP + " With --reference: every runtime here unless --backend is given.")
@bound(BenchOptions, "reference", "--reference", type=click.Path(dir_okay=False),
       help="The checkpoint the files were made from: the deploy table, every file on every runtime here, proven "
            "against it (parity, top-1) and timed, the fastest that passes marked per device.")
@bound(BenchOptions, "data", "--data", help="With --reference: labelled images for parity and top-1 [default: the "
                                            "checkpoint's test data, else cifar10:test].")
@bound(BenchOptions, "images", "--images", type=COUNT,
       help="With --reference: labelled images for top-1 (parity: the first 64).")
@click.option("--profile", is_flag=True, help="Also ONNX Runtime's time per op type for each ONNX file and batch "
              "(its profiler, in a session of its own; fused ops under their own names).")
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def bench_cmd(ctx, artifacts, backend, provider, reference, data, images, as_json, **kw) -> None:
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
    from aft_export.api import bench
    from aft_export.workflow.report import deploy_lines, format_bench

    explicit = was_given(ctx, "backend") or provider is not None  # with --reference: else every runtime here
    result = bench(artifacts, backend=backend_from(backend, provider) if explicit or reference is None else None,
                   reference=reference, data=data, images=images if was_given(ctx, "images") else None,
                   **given(kw))  # fmt: skip
    if as_json:
        print_json(result.to_dict())
    else:
        echo(format_bench(result.to_dict()) if reference is None else deploy_lines(result.to_dict(), markdown=False))
    return exit_status(result.verdict)


@main.command("eval")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Labelled ImageFolder directory or tar.")
@bound(EvalOptions, "batch_size", "--batch-size", type=BATCH)
@click.option("--images", type=COUNT, help="Evaluate a fixed subset of N images [default: all].")
@backend_options(EvalOptions)
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def eval_cmd(artifacts, backend, provider, as_json, **kw) -> None:
    """Top-1/top-5 of each checkpoint, ONNX file or engine on a labelled set, side by side, with
    each one's top-1 agreement with the first.

    Exit 0: every artifact evaluated; 3: one was skipped (its runtime or a GPU is missing
    here); 2: bad input (an artifact whose outputs are not finite, too).
    """
    from aft_export.api import evaluate
    from aft_export.workflow.report import format_eval

    result = evaluate(artifacts, backend=backend_from(backend, provider), **given(kw))
    print_json(result.to_dict()) if as_json else echo(format_eval(result.to_dict()))
    return exit_status(result.verdict)
