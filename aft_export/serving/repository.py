"""``aft-export triton-repo``: a model repository for NVIDIA Triton Inference Server's container.

Per artifact ``NAME`` (see :mod:`aft_export.serving.spec`; the same models, tensors and names
``aft-export serve`` answers with, so one client works against both)::

    REPO/NAME_net/config.pbtxt, 1/model.onnx | 1/model.plan   onnxruntime_onnx | openvino | tensorrt_plan
    REPO/NAME_pre/config.pbtxt, 1/model.py     Python backend: encoded images -> the normalised tensor
    REPO/NAME_pre/warmup/image.bin             its warm-up request (a grey PNG)
    REPO/NAME_topk/config.pbtxt, 1/model.py    Python backend: logits -> topk_index, topk_label
    REPO/NAME/config.pbtxt, 1/                 ensemble NAME_net -> NAME_topk (input: the tensor)
    REPO/NAME_image/config.pbtxt, 1/           ensemble NAME_pre -> NAME_net -> NAME_topk (input: encoded images)
    REPO/Dockerfile                            Triton's container with Pillow baked in, the models copied in
    REPO/README.md, REPO/client.py             how to build and run it, and a client

Every model loads on any machine the container runs on: ``NAME_net``'s instances are of
the kind the user names (``device``: ``gpu``, ``cpu``) or Triton's ``KIND_AUTO`` (the
default: the GPUs where there are any, else the CPU; engines: always the GPU), with ONNX
Runtime's thread parameters; with ``backend`` openvino, ``NAME_net`` is Triton's ``openvino``
backend instead (CPU instances; a complete ``config.pbtxt``, as that backend does not complete
one; ``model.onnx`` is the file with any model-local functions inlined, standard ops only:
that backend reads the file as it is and has no ``com.aft`` functions; LATENCY with one
instance, one OpenVINO stream per instance with more). Every model but the ensembles has a ``model_warmup`` request,
so Triton reports it ready only once it has run. Requests are batched once, at
``NAME_net`` (the model worth batching): ``NAME_pre`` and ``NAME_topk`` take each request as
it comes, so the image path waits for one dynamic batcher, not three.

The preprocessing model's ``model.py`` is generated from this project's own decoding code
(the source of :func:`aft_export.data.images.load_image` and :func:`~aft_export.data.images.square_crop`,
copied in at generation time, and the artifact's mean and std), so it decodes exactly as
``eval`` does; it answers each request on its own, so an undecodable image fails only its
own request. The Python backend was chosen over DALI because the decoding must be
Pillow's (DALI's JPEG decoder and resize are not bit-identical to Pillow's) and it runs in
every Triton container. Needs Pillow in the container (the README's command installs it).

The repository is built under a temporary name beside ``REPO`` and renamed when complete;
``REPO`` must not exist (or be empty), so nothing, an artifact least of all, is overwritten.
TensorRT-RTX engines are refused: Triton's ``tensorrt_plan`` backend loads standard TensorRT
engines only.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aft_export.data import images as data
from aft_export.errors import AFTExportError, Judged, Named, Verdict, said
from aft_export.fileio import (atomic_directory, atomic_write_bytes, atomic_write_text, claim_output, copy_file,
                               make_dirs)
from aft_export.artifacts.graph import inline_functions, int8_weight_bits
from aft_export.artifacts.kinds import ENGINE, ONNX
from aft_export.artifacts.onnxio import ExternalFile, external_files, load_onnx, save_onnx
from aft_export.options import TritonRepoOptions
from aft_export.runtimes import RUNTIMES, TRITON_BACKENDS, TritonBackend
from aft_export.data.preprocess import BESIDE_ONLY
from aft_export.serving.spec import (IMAGE, IMAGE_INPUT, ONNX_CONTAINER, ONNX_CONTAINER_SOURCE, TENSOR, TOPK_INDEX,
                                   TOPK_LABEL, TRITON_CONTAINERS_SOURCE, WARMUP_DIR, WARMUP_IMAGE, ServedModel, Tensor,
                                   check_names, closed_flags, config_text, dims_text, containers_for_tensorrt,
                                   describe, endpoint_input, endpoint_outputs, is_rtx_engine, topk,
                                   warmup_image_file)  # fmt: skip
from aft_export.version import __version__
from aft_export.options.commands import command_line

PREPROCESSED = "preprocessed"  # the ensemble's tensor between NAME_pre and NAME_net
PILLOW = "pillow"


@dataclass
class RepoResult(Judged):
    path: str
    models: list[str]
    verdict: Verdict = field(default_factory=Verdict)  # writing it checks nothing that can fail

    def to_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict.to_dict()}

    def lines(self) -> list[str]:
        return [f"wrote {self.path}: " + ", ".join(self.models), f"see {self.path}/README.md to run it"]


def model_dirs(spec: ServedModel) -> dict[str, str]:
    return {"net": f"{spec.name}_net", "pre": f"{spec.name}_pre", "topk": f"{spec.name}_topk",
            "tensor": spec.name, "image": spec.image_model}  # fmt: skip


# ---------------------------------------------------------------- config.pbtxt

KINDS = {"gpu": "KIND_GPU", "cpu": "KIND_CPU", "auto": "KIND_AUTO"}


def _triton(spec: ServedModel, opts: TritonRepoOptions) -> TritonBackend | None:
    """The Triton backend that runs ``spec``: the backend's (an ONNX file), or None (an engine: tensorrt_plan)."""
    return RUNTIMES[opts.backend].triton_backend if spec.kind is ONNX else None


def _net_kind(spec: ServedModel, opts: TritonRepoOptions) -> str:
    if spec.kind is ENGINE:
        return "KIND_GPU"
    return "KIND_CPU" if _triton(spec, opts).cpu_only else KINDS[opts.device]


def openvino_parameters(opts: TritonRepoOptions) -> dict[str, str]:
    """Triton's openvino backend's parameters: its instances share one compiled model, one infer
    request each, so one instance gets the LATENCY hint (every thread on its request) and N
    instances N streams (one request each, as that backend's README advises); the threads are
    the model's in all, ``threads`` per instance (0: OpenVINO's default, the container's cores)."""
    params = {"PERFORMANCE_HINT": "LATENCY"} if opts.instances == 1 else {"NUM_STREAMS": str(opts.instances)}
    if opts.threads:
        params["INFERENCE_NUM_THREADS"] = str(opts.threads * opts.instances)
    return params


def _ort_parameters(opts: TritonRepoOptions) -> dict[str, str]:
    """Triton's onnxruntime backend's thread parameters: ``threads`` per instance (0: its default)."""
    return {"intra_op_thread_count": str(opts.threads), "inter_op_thread_count": "1", "execution_mode": "0"}


# each Triton backend's parameters (TRITON), from the options
PARAMETERS = {"onnxruntime_onnx": _ort_parameters, "openvino": openvino_parameters}


def net_config(spec: ServedModel, opts: TritonRepoOptions) -> str:
    """The artifact itself in ONNX Runtime, OpenVINO or TensorRT; dynamically batched (the one
    batcher of both endpoints); the backend's thread parameters; a warm-up request of zeros."""
    if spec.kind is ENGINE:
        kind, params = 'platform: "tensorrt_plan"', None
    else:
        triton = _triton(spec, opts)
        kind, params = triton.config, PARAMETERS[triton.name](opts)
    return config_text(model_dirs(spec)["net"], kind, spec, [endpoint_input(spec, TENSOR)],
                       [endpoint_outputs(spec, 1)[0]], queue_delay_us=opts.queue_delay_us,
                       instances=(opts.instances, _net_kind(spec, opts)), parameters=params, warmup=True)  # fmt: skip


def pre_config(spec: ServedModel, opts: TritonRepoOptions) -> str:
    """Encoded images -> the tensor, each request as it comes (no batcher of its own)."""
    return config_text(model_dirs(spec)["pre"], 'backend: "python"', spec, [endpoint_input(spec, IMAGE)],
                       [Tensor(PREPROCESSED, spec.tensor_type, tuple(spec.batched(*spec.image_shape)))],
                       instances=(opts.instances, "KIND_CPU"), warmup=True)  # fmt: skip


def topk_config(spec: ServedModel, opts: TritonRepoOptions) -> str:
    """Logits -> top-k, each request as it comes."""
    outputs = endpoint_outputs(spec, spec.k(opts.top_k))
    return config_text(model_dirs(spec)["topk"], 'backend: "python"', spec, [outputs[0]], outputs[1:],
                       instances=(opts.instances, "KIND_CPU"), warmup=True)  # fmt: skip


def _step(model: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    maps = [f'      input_map {{\n        key: "{k}"\n        value: "{v}"\n      }}' for k, v in inputs.items()]
    maps += [f'      output_map {{\n        key: "{k}"\n        value: "{v}"\n      }}' for k, v in outputs.items()]
    return f'    {{\n      model_name: "{model}"\n      model_version: -1\n' + "\n".join(maps) + "\n    }"


def ensemble_config(spec: ServedModel, opts: TritonRepoOptions, image: bool) -> str:
    d, out, k = model_dirs(spec), spec.output_name, spec.k(opts.top_k)
    steps = [_step(d["net"], {spec.input_name: PREPROCESSED if image else spec.input_name}, {out: out}),
             _step(d["topk"], {out: out}, {TOPK_INDEX: TOPK_INDEX, TOPK_LABEL: TOPK_LABEL})]  # fmt: skip
    if image:
        steps.insert(0, _step(d["pre"], {IMAGE_INPUT: IMAGE_INPUT}, {PREPROCESSED: PREPROCESSED}))
    scheduling = "ensemble_scheduling {\n  step [\n" + ",\n".join(steps) + "\n  ]\n}"
    return config_text(d["image" if image else "tensor"], 'platform: "ensemble"', spec,
                       [endpoint_input(spec, IMAGE if image else TENSOR)], endpoint_outputs(spec, k),
                       extra=(scheduling,))  # fmt: skip


# ---------------------------------------------------------------- the Python models


def _header(what: str, spec: ServedModel) -> str:
    return (f'"""{what} for {spec.name}: generated by aft-export {__version__} from {spec.path.name}; do not edit\n'
            f'(regenerate with aft-export triton-repo)."""\n\nfrom __future__ import annotations\n\n')  # fmt: skip


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _decoder_source(root=None) -> str:
    """:func:`aft_export.data.images.load_image` and everything of its module it uses (functions,
    limits, imports), copied from the source: the generated model decodes with the very code
    eval runs, and a name the decoder starts to use is copied with it. The one project name,
    AFTExportError, becomes a local exception class of the same name."""
    import types

    root = root or data.load_image
    space = vars(data)
    imports, constants, functions, seen = [], [], [], set()
    todo = [root.__name__]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in space:
            continue
        seen.add(name)
        obj = space[name]
        if isinstance(obj, types.FunctionType) and obj.__module__ == data.__name__:
            functions.append(inspect.getsource(obj))
            todo += sorted(_code_names(obj.__code__))
        elif isinstance(obj, types.ModuleType):
            imports.append(f"import {obj.__name__} as {name}" if obj.__name__ != name else f"import {name}")
        elif obj is AFTExportError:
            continue
        elif isinstance(obj, type) and obj.__module__ != data.__name__:
            alias = "" if obj.__qualname__ == name else f" as {name}"
            imports.append(f"from {obj.__module__} import {obj.__qualname__}{alias}")
        elif isinstance(obj, (int, float, str, tuple)):
            constants.append(f"{name} = {obj!r}")
        else:
            raise RuntimeError(f"tritonrepo cannot copy {name} of aft_export.data.images into a Triton model")
    local = ('class AFTExportError(Exception):\n'
             '    """An image that cannot be decoded (the name aft-export\'s decoder raises)."""\n')  # fmt: skip
    return "\n".join(sorted(set(imports)) + [""] + constants + ["", ""] + [local, ""] + functions[::-1])


def preprocess_source(spec: ServedModel) -> str:
    """``model.py`` of NAME_pre: this project's image decoding, copied in from its source,
    then ``(x / 255 - mean) / std`` in float32 (bit-identical to
    :func:`aft_export.data.images.normalize`, which the tests check)."""
    return "".join([
        _header("Triton Python backend model: encoded images -> the normalised float32 tensor", spec),
        _decoder_source(),
        "\n\nimport json\n\ntry:\n    import triton_python_backend_utils as pb_utils\n"
        "except ImportError:  # imported outside Triton (aft-export's tests)\n    pb_utils = None\n\n",
        f"SIZE = {spec.input_size[1]}\nMEAN = np.array({list(spec.mean)}, dtype=np.float32).reshape(3, 1, 1)\n"
        f"STD = np.array({list(spec.std)}, dtype=np.float32).reshape(3, 1, 1)\n"
        f'INPUT = "{IMAGE_INPUT}"\nOUTPUT = "{PREPROCESSED}"\nINPUT_FORMAT = "{spec.input_format}"\n\n\n',
        '''def preprocess(encoded: bytes, index: int = 0) -> np.ndarray:
    """One encoded image (number index of its request) -> what the model takes, as aft-export's
    eval preprocesses it: float32 (3, SIZE, SIZE) normalised, or for a file that takes raw pixels
    its pixels, uint8 (SIZE, SIZE, 3) or float32 (3, SIZE, SIZE) in 0-255 (INPUT_FORMAT). This code runs in
    Triton's Python backend, which cannot import aft_export: it names the formats of the package's table
    (aft_export.data.formats) itself, the one place outside that table that does."""
    pixels = load_image(encoded, SIZE, name=f"{index} of this request")
    if INPUT_FORMAT == "uint8-nhwc":
        return pixels
    x = pixels.transpose(2, 0, 1).astype(np.float32)
    if INPUT_FORMAT == "float-nchw":
        return x
    return (x / np.float32(255.0) - MEAN) / STD


class TritonPythonModel:
    def execute(self, requests):
        """Each request on its own: an image that cannot be decoded fails its request only."""
        responses = []
        for request in requests:
            encoded = pb_utils.get_input_tensor_by_name(request, INPUT).as_numpy()
            try:
                x = np.stack([preprocess(bytes(b), i) for i, b in enumerate(encoded.reshape(-1))])
            except AFTExportError as exc:  # an image that cannot be decoded: this request's error, a 400
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            x = x.reshape(encoded.shape[:-1] + x.shape[1:])
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(OUTPUT, x)]))
        return responses
''',
    ])  # fmt: skip


def topk_source(spec: ServedModel, k: int) -> str:
    """``model.py`` of NAME_topk: :func:`aft_export.serving.spec.topk`, copied in, and the labels."""
    return "".join([
        _header("Triton Python backend model: logits -> top-k class indices and labels", spec),
        "import json\n\nimport numpy as np\n\ntry:\n    import triton_python_backend_utils as pb_utils\n"
        "except ImportError:  # imported outside Triton (aft-export's tests)\n    pb_utils = None\n\n",
        f"K = {k}\nCLASSES = json.loads({json.dumps(json.dumps(spec.classes))})\n"
        f'LOGITS, INDEX, LABEL = "{spec.output_name}", "{TOPK_INDEX}", "{TOPK_LABEL}"\n\n\n',
        inspect.getsource(topk), "\n\n",
        '''def labels(index: np.ndarray) -> np.ndarray:
    return np.array([CLASSES[i].encode() for i in index.reshape(-1)], dtype=object).reshape(index.shape)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            logits = pb_utils.get_input_tensor_by_name(request, LOGITS).as_numpy()
            flat = logits.reshape(-1, logits.shape[-1])
            bad = int((~np.isfinite(flat).all(axis=1)).sum())
            if bad:  # NaN or infinite input, or a computation that overflowed: a 400, not a top-k of NaN
                message = (f"the model gives NaN or infinite logits for {bad} of {len(flat)} images of this request; "
                           f"send finite, normalised images")
                error = pb_utils.TritonError(message, pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            index = topk(flat, K).reshape(logits.shape[:-1] + (K,))
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(INDEX, index),
                                                                        pb_utils.Tensor(LABEL, labels(index))]))
        return responses
''',
    ])  # fmt: skip


# ---------------------------------------------------------------- README and client


def _container_line(spec: ServedModel) -> str:
    version = spec.manifest.get("tensorrt") or "unknown"
    found = containers_for_tensorrt(version) if version != "unknown" else []
    if found:
        tags = ", ".join(f"`nvcr.io/nvidia/tritonserver:{c}-py3` (Triton {t}, TensorRT {v})" for c, t, v in found)
        return f"- `{spec.name}_net/1/model.plan` was built with TensorRT {version}: run it in {tags}."
    return (f"- `{spec.name}_net/1/model.plan` was built with TensorRT {version} (its manifest) for "
            f"{spec.manifest.get('gpu') or 'an unrecorded GPU'} (compute capability "
            f"{spec.manifest.get('compute_capability') or '?'}). It loads only in a Triton container whose TensorRT is "
            f"{version} (unless it was built version-compatible): aft-export's table of containers has no such release "
            f"yet, so pick the `-py3` release with TensorRT {version} from NVIDIA's Frameworks Support Matrix "
            f"({TRITON_CONTAINERS_SOURCE}) and check it with "
            f"`docker run --rm nvcr.io/nvidia/tritonserver:<release>-py3 "
            f"bash -c 'ls /usr/lib/*-linux-gnu/libnvinfer.so.*'`.")


def _release(specs: list[ServedModel]) -> str | None:
    """The container release to build from: the ONNX one, an engine's from the table, or
    None where the table has none (the user names it)."""
    if not any(s.kind is ENGINE for s in specs):
        return ONNX_CONTAINER
    tags = {c for s in specs if s.kind is ENGINE
            for c, _, _ in containers_for_tensorrt(s.manifest.get("tensorrt") or "")}  # fmt: skip
    return next(iter(tags)) if len(tags) == 1 else None


def pillow_version() -> str:
    from importlib.metadata import version

    return version("pillow")


def dockerfile(specs: list[ServedModel]) -> str:
    """Triton's container with what the models need baked in (Pillow, the version the
    decoding was written and tested with) and the models copied in; the server started
    with model control off, strict readiness and the endpoints that change it closed."""
    release = _release(specs)
    return "\n".join([
        f"# Written by aft-export {__version__} (aft-export triton-repo): Triton with this repository's models.",
        "#   docker build -t aft-export-triton" + ("" if release else " --build-arg RELEASE=<release>") + " .",
        f"ARG RELEASE{'=' + release if release else ''}",
        "FROM nvcr.io/nvidia/tritonserver:${RELEASE}-py3",
        f"# {model_dirs(specs[0])['pre']} decodes images with Pillow, the version eval decoded with: installed here, once",
        f"RUN pip install --no-cache-dir {PILLOW}=={pillow_version()}",
        "COPY . /models",
        "CMD " + json.dumps(["tritonserver", "--model-repository=/models", "--model-control-mode=none",
                             "--strict-readiness=true", *closed_flags()]), "",
    ])  # fmt: skip


RUNTIME_NAMES = {name: RUNTIMES[name].title for name in TRITON_BACKENDS}


def _noted(specs: list[ServedModel], opts: TritonRepoOptions) -> dict[str, list[ServedModel]]:
    """The models of each Triton backend that has notes of its own (:data:`NOTES`)."""
    by = {name: [s for s in specs if (t := _triton(s, opts)) is not None and t.name == name] for name in NOTES}
    return {name: ours for name, ours in by.items() if ours}


def _openvino_notes(ours: list[ServedModel], bits: dict[str, int | None]) -> list[str]:
    """What the container's openvino backend does differently from aft-export's own OpenVINO runs."""
    notes = ["OpenVINO notes:", "",
             "- Triton's openvino backend cannot ask for fp32 inference (its one precision parameter, `HINT_BF16`, "
             "only turns bf16 on): on a CPU with bf16 units (AVX512_BF16 or AMX-BF16: `grep -oE "
             "'avx512_bf16|amx_bf16' /proc/cpuinfo` prints something) OpenVINO computes the fp32 parts of every "
             "model here in bf16, as aft-export's openvino-bf16 runtime does, and elsewhere in fp32, as its "
             "openvino runtime does. Prove a model as that host will run it: "
             f"`{command_line('parity', 'CHECKPOINT', 'FILE', backend='openvino-bf16')}` on such a CPU (bf16's "
             f"limits), `{command_line('parity', 'CHECKPOINT', 'FILE', backend='openvino')}` on another. Where bf16 "
             "must not be used, write the repository for ONNX Runtime (the default of `aft-export triton-repo`)."]  # fmt: skip
    eight = [s.name for s in ours if bits.get(s.name) == 8]
    if eight:
        notes.append(f"- {', '.join(f'`{n}`' for n in eight)}: int8 with 8-bit weights, which OpenVINO computes "
                     f"wrongly on x86 CPUs without VNNI (check the host: `grep -oE 'avx512_vnni|avx_vnni|amx_int8' "
                     f"/proc/cpuinfo` prints something); on such a CPU serve the portable int8 (7-bit weights) "
                     f"instead.")  # fmt: skip
    notes.append("- The release line below is ONNX Runtime's; the OpenVINO a release ships is in NVIDIA's release "
                 "notes for it. `*_net/1/model.onnx` is standard ops only (any model-local functions, such as the "
                 "default export's `com.aft` layers, inlined): that backend reads a file as it is.")  # fmt: skip
    return [*notes, ""]


# the notes a Triton backend's models get in the repository's README (TRITON), from its models and their int8 bits
NOTES = {"openvino": _openvino_notes}


def readme(specs: list[ServedModel], opts: TritonRepoOptions, bits: dict[str, int | None] | None = None) -> str:
    gpu = any(s.kind is ENGINE for s in specs) or opts.device == "gpu"
    release = _release(specs)
    models = []
    for s in specs:
        d = model_dirs(s)
        batch = f"fixed batch {s.fixed_batch} (no batching)" if s.fixed_batch else f"batches up to {s.max_batch}"
        runtime = "TensorRT engine" if s.kind is ENGINE else RUNTIME_NAMES[opts.backend]
        models += [f"- `{d['tensor']}`: `{s.input_name}` FP32 {dims_text(s.dims)} (normalised) -> `{s.output_name}`, "
                   f"`{TOPK_INDEX}`, `{TOPK_LABEL}`; {batch}",
                   f"- `{d['image']}`: `{IMAGE_INPUT}` BYTES {dims_text(s.batched(1))} (encoded images) -> the same",
                   f"- `{d['net']}` ({runtime}, {s.precision}; logits only; instances {_net_kind(s, opts)}), "
                   f"`{d['pre']}`, `{d['topk']}`: the ensembles' steps"]  # fmt: skip
    engines = [_container_line(s) for s in specs if s.kind is ENGINE]
    first = specs[0]
    lines = [
        "# Triton model repository", "",
        f"Written by aft-export {__version__} (`aft-export triton-repo`). Models:", "", *models, "",
        *(line for name, ours in _noted(specs, opts).items() for line in NOTES[name](ours, bits or {})),
        "Each `config.pbtxt` is Triton's ModelConfig in protobuf text format; `*_pre/1/model.py` decodes images with "
        f"aft-export's own code (Pillow). The `Dockerfile` bakes Pillow {pillow_version()} (the version aft-export eval "
        "decoded with) into Triton's container and copies the models in: nothing is installed when a container "
        "starts. Every model but the ensembles has a warm-up request (model_warmup in its config): Triton reports a model ready "
        "once it has run.", "",
        "## Build and run it", "",
        "```bash",
        f"docker build -t aft-export-triton {'' if release else '--build-arg RELEASE=<release> '}.",
        f"docker run --rm {'--gpus all ' if gpu else ''}-p 127.0.0.1:8000:8000 -p 127.0.0.1:8001:8001 "
        f"-p 127.0.0.1:8002:8002 aft-export-triton",
        "```", "",
        (f"`{ONNX_CONTAINER}`: the newest release in NVIDIA's table of the ONNX Runtime each Triton release ships "
         f"({ONNX_CONTAINER_SOURCE}); any from 24.05 (ONNX Runtime 1.18) runs these ONNX files "
         f"(`--build-arg RELEASE=24.05`)." if not engines else
         "The release must have the TensorRT your engines were built with:"), *engines, "",
        "## Query it", "",
        "```bash",
        "pip install 'tritonclient[http]'",
        f"python client.py --model {first.image_model} photo.jpg  # the same client works with `aft-export serve`",
        f"curl -s localhost:8000/v2/models/{first.name}/stats",
        "```", "",
    ]  # fmt: skip
    return "\n".join(lines)


def client_source() -> str:
    """The repository's client.py: :mod:`aft_export.serving.client`, a standalone file (numpy and
    tritonclient only), read rather than imported so that writing a repository needs neither."""
    return (Path(__file__).parent / "client.py").read_text()


# ---------------------------------------------------------------- the repository


NET_FILES = ("model.onnx", "model.plan")  # the names of NAME_net/1/'s own files


def _external_data(spec: ServedModel) -> list[ExternalFile]:
    """The external data files of an ONNX file, checked (:func:`~aft_export.artifacts.onnxio.external_files`):
    each a regular file in the file's own folder, none named as the version directory's own files,
    so that copying each under its name writes inside that directory and nowhere else."""
    if spec.kind is not ONNX:
        return []
    return external_files(load_onnx(spec.path, external_data=False), spec.path, reserved=NET_FILES)


def _copy_external(data: ExternalFile, net: Path) -> None:
    """One checked data file copied under its location in ``net``, the folders the location names
    made (``sub/../w.bin`` needs ``sub``, as Triton's runtime resolves it), none of them outside."""
    folder = net
    for part in data.location.split("/")[:-1]:
        if part not in ("", ".", ".."):
            folder = make_dirs(folder / part)
        elif part == "..":
            folder = folder.parent
    copy_file(data.path, net / data.name)


def _has_local_functions(path: Path) -> bool:
    """Whether the ONNX file calls a model-local function (the default export's com.aft layers)."""
    model = load_onnx(path, external_data=False)
    local = {(f.domain, f.name) for f in model.functions}
    return any((n.domain, n.op_type) in local for n in model.graph.node)


def standard_ops(path: Path):
    """The ONNX file at ``path`` with its model-local functions inlined (as TensorRT's parser and
    aft-export's OpenVINO runner inline them) and the opset imports of the domains no node uses
    any more left out: what a runtime that reads the file as it is can take."""
    model = inline_functions(load_onnx(path, whole=(said("triton-repo with {backend_set}", "triton-repo",
                                                         backend_set=Named('backend', 'openvino')),
                                                    f"export with {command_line('export', target='portable')}")))  # fmt: skip
    used = {n.domain for n in model.graph.node} | {"", "ai.onnx"}
    kept = [o for o in model.opset_import if o.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(kept)
    return model


def check_artifacts(specs: list[ServedModel], opts: TritonRepoOptions) -> None:
    for s in specs:
        if s.kind is ENGINE and is_rtx_engine(s.path, s.manifest):
            raise AFTExportError(f"{s.path} is a TensorRT-RTX engine; Triton's tensorrt_plan backend loads standard "
                                 f"TensorRT engines only: give the ONNX file it was built from (onnxruntime_onnx) or "
                                 f"an engine built with TensorRT")  # fmt: skip
    check_names(specs)
    dirs = [d for s in specs for d in model_dirs(s).values()]
    twice = sorted({d for d in dirs if dirs.count(d) > 1})
    if twice:
        raise AFTExportError(f"two artifacts would share the model directory {twice[0]}; rename one")


def write_repository(artifacts: list[str], out: str | Path, opts: TritonRepoOptions | None = None,
                     names: dict[str, str] | None = None) -> RepoResult:
    """Write the repository for ``artifacts`` at ``out`` (see the module doc). ``names``:
    model names by artifact path, where the file names would not do (the pipeline's
    ``model.onnx`` and ``model.engine``)."""
    opts = opts or TritonRepoOptions()
    if not artifacts:
        raise AFTExportError("give one or more ONNX files or engines")
    # another tool's ONNX file is described by the JSON beside it: these options take no preprocessing
    specs = [describe(a, opts.max_batch, (names or {}).get(str(a)), BESIDE_ONLY) for a in artifacts]
    check_artifacts(specs, opts)
    if opts.device == "cpu" and any(s.kind is ENGINE for s in specs):
        raise AFTExportError(said("{device_set}: TensorRT engines run on the GPU only; leave it out or give ONNX "
                                  "files", "triton-repo", device_set=Named('device', 'cpu')))
    # every location a file names, checked before anything is written: a file never chooses where we write
    external = {s.name: _external_data(s) for s in specs}
    out = Path(out)
    # claimed for the run (a second run writing the same repository fails at its start), then built under a
    # temporary name and renamed
    with claim_output(out, [a for a in artifacts], directory=True), atomic_directory(out) as work:
        for s in specs:
            d = model_dirs(s)
            k = s.k(opts.top_k)
            net = make_dirs(work / d["net"] / "1")
            if s.kind is ENGINE:
                copy_file(s.path, net / "model.plan")
            elif not _triton(s, opts).reads_functions and _has_local_functions(s.path):  # standard ops only
                save_onnx(standard_ops(s.path), net / "model.onnx")
            else:
                copy_file(s.path, net / "model.onnx")
                for location in external[s.name]:
                    _copy_external(location, net)
            atomic_write_text(work / d["net"] / "config.pbtxt", net_config(s, opts))
            atomic_write_text(make_dirs(work / d["pre"] / "1") / "model.py", preprocess_source(s))
            atomic_write_text(work / d["pre"] / "config.pbtxt", pre_config(s, opts))
            atomic_write_bytes(make_dirs(work / d["pre"] / WARMUP_DIR) / WARMUP_IMAGE, warmup_image_file(s))
            atomic_write_text(make_dirs(work / d["topk"] / "1") / "model.py", topk_source(s, k))
            atomic_write_text(work / d["topk"] / "config.pbtxt", topk_config(s, opts))
            make_dirs(work / d["tensor"] / "1")  # an ensemble's version directory is empty
            atomic_write_text(work / d["tensor"] / "config.pbtxt", ensemble_config(s, opts, image=False))
            make_dirs(work / d["image"] / "1")
            atomic_write_text(work / d["image"] / "config.pbtxt", ensemble_config(s, opts, image=True))
        bits = {s.name: int8_weight_bits(load_onnx(s.path, external_data=False), str(s.path.parent))
                for ours in _noted(specs, opts).values() for s in ours}  # fmt: skip
        atomic_write_text(work / "README.md", readme(specs, opts, bits))
        atomic_write_text(work / "Dockerfile", dockerfile(specs))
        atomic_write_text(work / "client.py", client_source())
    return RepoResult(str(out), sorted(d for s in specs for d in model_dirs(s).values()))
