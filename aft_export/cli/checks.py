"""aft-export parity, eval and bench: artifacts compared, evaluated and timed."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import JSON, backend_from, declared_options, given


@main.command("parity")
@declared_options("parity", {"backend": [click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")]})
def parity_cmd(checkpoint, artifacts, backend, provider, as_json, **kw) -> None:
    """Compare artifacts with the fp32 PyTorch checkpoint (or, with --model-def and --weights,
    the user's own module: then every argument is an artifact). An ONNX file another tool wrote
    (ModelOpt, ONNX Runtime's quantiser: no aft-export metadata) is fed as the reference is.

    Exit 0: all passed; 1: one failed; 3: none failed but one was skipped (its runtime
    is missing here); 2: bad input (a reference whose outputs are not finite, too).
    """
    from aft_export.api import parity

    result = parity(checkpoint, artifacts, backend=backend_from(backend, provider), **given(kw))
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("bench")
@declared_options("bench", {"classes": [JSON]})
def bench_cmd(artifacts, backend, provider, reference, as_json, **kw) -> None:
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
    from aft_export.workflow.report import deploy_lines

    result = bench(artifacts, backend=backend_from(backend, provider), reference=reference, **given(kw))
    if as_json:
        print_json(result.to_dict())
    else:
        echo(result.lines() if reference is None else deploy_lines(result.to_dict(), markdown=False))
    return exit_status(result.verdict)


@main.command("eval")
@declared_options("eval", {"classes": [JSON]})
def eval_cmd(artifacts, backend, provider, as_json, **kw) -> None:
    """Top-1/top-5 of each checkpoint, ONNX file or engine on a labelled set, side by side, with
    each one's top-1 agreement with the first.

    Exit 0: every artifact evaluated; 3: one was skipped (its runtime or a GPU is missing
    here); 2: bad input (an artifact whose outputs are not finite, too).
    """
    from aft_export.api import evaluate

    result = evaluate(artifacts, backend=backend_from(backend, provider), **given(kw))
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)
