"""aft-export infer, serve and triton-repo."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import backend_from, declared_options, given
from aft_export.errors import EXIT_OK, EXIT_SIGNAL_BASE


@main.command("infer")
@declared_options("infer", {"backend": [click.option("--json", "as_json", is_flag=True, help="Print JSON.")]})
def infer_cmd(artifact, images, backend, provider, as_json, **kw) -> None:
    """Top-k classes from a checkpoint, ONNX file or engine for images or folders of images."""
    from aft_export.api import infer

    result = infer(artifact, images, backend=backend_from(backend, provider), **kw)
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("serve")
@declared_options("serve")
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


@main.command("deepstream")
@declared_options("deepstream", {"object_size": [click.option("--json", "as_json", is_flag=True, help="Print JSON.")]})
def deepstream_cmd(artifacts, output, as_json, **kw) -> None:
    """Write a DeepStream nvinfer config per file (the DeepStream form: float RGB pixels in,
    probabilities out; or a run directory of the pipeline's --pixel-form deepstream) for one DeepStream
    release, and its labels file, naming the engine aft-export build makes on the device; with --data,
    measure each file's top-1 under nvinfer's scaling beside aft-export's preprocessing; see
    docs/jetson.md."""
    from aft_export.api import deepstream

    result = deepstream(artifacts, output, **given(kw))
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("deepstream-check")
@declared_options("deepstream-check", {"library": [click.option("--json", "as_json", is_flag=True,
                                                                help="Print JSON.")]})
def deepstream_check_cmd(configs, as_json, **kw) -> None:
    """On the device, before deepstream-app: for each nvinfer config aft-export deepstream wrote (or
    the directory holding them), check that its engine was built from its onnx-file, that its profile
    covers batch-size and infer-dims, and that it deserialises with the TensorRT installed here.
    Exit 0: every check passed; 1: one failed (the line says what to run); 3: one could not run here
    (no GPU, no TensorRT)."""
    from aft_export.api import deepstream_check

    result = deepstream_check(configs, **given(kw))
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("triton-repo")
@declared_options("triton-repo")
def triton_repo_cmd(artifacts, output, **kw) -> None:
    """Write a Triton model repository (config.pbtxt per model, onnxruntime_onnx, openvino or
    tensorrt_plan, dynamic batching, warm-up requests, a preprocessing model and ensembles
    for encoded images, a Dockerfile, README.md and client.py) for a Triton container."""
    from aft_export.api import triton_repo

    result = triton_repo(artifacts, output, **given(kw))
    echo(result.lines())
