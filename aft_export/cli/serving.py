"""aft-export infer, serve and triton-repo."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import (
    BACKEND_LIST,
    BATCH,
    COUNT,
    NONNEGATIVE,
    PORT,
    THREADS,
    apply_options,
    backend_from,
    backend_options,
    bound,
    foreign_options,
    given,
)
from aft_export.errors import EXIT_OK, EXIT_SIGNAL_BASE
from aft_export.options import (
    TRITON_BACKENDS,
    TRITON_DEVICES,
    ServeOptions,
    TritonRepoOptions,
)


@main.command("infer")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.argument("images", nargs=-1, required=True, type=click.Path())
@click.option("--top-k", type=COUNT, default=5, show_default=True)
@backend_options()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def infer_cmd(artifact, images, backend, provider, as_json, **kw) -> None:
    """Top-k classes from a checkpoint, ONNX file or engine for images or folders of images."""
    from aft_export.api import infer
    from aft_export.workflow.report import format_predictions

    result = infer(artifact, images, backend=backend_from(backend, provider), **kw)
    print_json(result.to_dict()) if as_json else echo(format_predictions(result.to_dict()))
    return exit_status(result.verdict)


def _triton_options(owner):
    return [
        bound(owner, "max_batch", "--max-batch", type=BATCH,
              help="Largest batch [default: 32 for a dynamic-batch ONNX file, an engine's profile maximum; a "
                   "fixed-batch export is served without batching]."),
        bound(owner, "instances", "--instances", type=COUNT, help="Model instances (one runner each)."),
        bound(owner, "top_k", "--top-k", type=COUNT, help="Classes in topk_index and topk_label."),
        bound(owner, "queue_delay_us", "--queue-delay-us", type=NONNEGATIVE,
              help="How long the dynamic batcher holds a request for others to join it."),
    ]  # fmt: skip


@main.command("serve")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@bound(ServeOptions, "host", "--host", help="Address HTTP, gRPC and metrics listen on (0.0.0.0: every interface).")
@bound(ServeOptions, "http_port", "--http-port", type=PORT)
@bound(ServeOptions, "grpc_port", "--grpc-port", type=PORT)
@bound(ServeOptions, "metrics_port", "--metrics-port", type=PORT)
@apply_options(_triton_options(ServeOptions))
@backend_options(ServeOptions, help_text=f"Where ONNX files run, inside Triton's Python backend stub: {BACKEND_LIST}; "
                                         f"engines run in TensorRT.")
@bound(ServeOptions, "threads", "--threads", type=THREADS,
       help="Threads per model instance, ONNX Runtime's or OpenVINO's (0: the CPUs this process may use, shared out "
            "among the instances of every model; printed at start).")
@bound(ServeOptions, "drain_seconds", "--drain-seconds", type=click.IntRange(0, 3600),
       help="On SIGINT/SIGTERM, how long Triton waits for the requests in flight.")
@foreign_options
def serve_cmd(artifacts, backend, provider, **kw) -> int:
    """Serve ONNX files or engines with NVIDIA Triton (the tritonserver of the serve extra;
    the models run in its Python backend): per artifact NAME, model NAME takes normalised
    FP32 [3,H,W] images and NAME_image encoded ones (BYTES); both return logits, topk_index,
    topk_label. Prints one line once every model is ready. SIGINT/SIGTERM stop it: the
    requests in flight are answered, every process it started ends, and the exit status
    is 130/143."""
    from aft_export.api import serve_until_stopped

    served = serve_until_stopped(artifacts, backend=backend_from(backend, provider), **given(kw))
    return EXIT_SIGNAL_BASE + served.signal if served.signal else EXIT_OK


@main.command("triton-repo")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False),
              help="Repository directory to create (must not exist, or be empty).")
@apply_options(_triton_options(TritonRepoOptions))
@bound(TritonRepoOptions, "device", "--device", type=click.Choice(TRITON_DEVICES),
       help="Where ONNX models run (instance_group kind; auto: Triton's KIND_AUTO, the GPUs where there are any, "
            "else the CPU); engines always on the GPU.")
@bound(TritonRepoOptions, "backend", "--backend", type=click.Choice(TRITON_BACKENDS),
       help="Triton's backend for ONNX files: onnxruntime (onnxruntime_onnx, CPU or GPU) or openvino (CPU; the file "
            "with its functions inlined, a complete config).")
@bound(TritonRepoOptions, "threads", "--threads", type=THREADS,
       help="Threads per instance: ONNX Runtime's intra_op_thread_count, OpenVINO's INFERENCE_NUM_THREADS (0: the "
            "backend's default, the container's cores; with --instances N give cores/N).")
def triton_repo_cmd(artifacts, output, **kw) -> None:
    """Write a Triton model repository (config.pbtxt per model, onnxruntime_onnx, openvino or
    tensorrt_plan, dynamic batching, warm-up requests, a preprocessing model and ensembles
    for encoded images, a Dockerfile, README.md and client.py) for a Triton container."""
    from aft_export.api import triton_repo

    result = triton_repo(artifacts, output, **given(kw))
    echo([f"wrote {result.path}: " + ", ".join(result.models), f"see {result.path}/README.md to run it"])
