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
    from aft_export.workflow.report import format_predictions

    result = infer(artifact, images, backend=backend_from(backend, provider), **kw)
    print_json(result.to_dict()) if as_json else echo(format_predictions(result.to_dict()))
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
@declared_options("deepstream", {"unique_id": [click.option("--json", "as_json", is_flag=True, help="Print JSON.")]})
def deepstream_cmd(artifacts, output, as_json, **kw) -> None:
    """Write a DeepStream nvinfer config per file (the DeepStream form: float RGB pixels in,
    probabilities out; or a run directory of the pipeline's --pixel-form deepstream) and its labels
    file, naming the engine aft-export build makes on the device; see docs/jetson.md."""
    from aft_export.api import deepstream

    result = deepstream(artifacts, output, **given(kw))
    if as_json:
        return print_json(result.to_dict())
    n = len(result.configs)
    lines = [f"wrote {result.path}: {n} config{'' if n == 1 else 's'} and {result.labels}"]
    for c in result.configs:
        lines += [f"  {c['config']}: {c['precision']}, engine {c['engine']}", f"    build it on the device: {c['build']}"]
    lines.append("DeepStream did not run here: run the build line on the Jetson, then deepstream-app (docs/jetson.md)")
    echo(lines)
    return exit_status(result.verdict)


@main.command("triton-repo")
@declared_options("triton-repo")
def triton_repo_cmd(artifacts, output, **kw) -> None:
    """Write a Triton model repository (config.pbtxt per model, onnxruntime_onnx, openvino or
    tensorrt_plan, dynamic batching, warm-up requests, a preprocessing model and ensembles
    for encoded images, a Dockerfile, README.md and client.py) for a Triton container."""
    from aft_export.api import triton_repo

    result = triton_repo(artifacts, output, **given(kw))
    echo([f"wrote {result.path}: " + ", ".join(result.models), f"see {result.path}/README.md to run it"])
