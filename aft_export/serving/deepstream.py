"""A DeepStream ``nvinfer`` config for a classifier, and its labels file (``aft-export deepstream``).

``nvinfer`` computes ``net-scale-factor * (x - offsets)`` with one scalar scale, so it cannot
divide by our per-channel std: the file it runs is the DeepStream form, which takes float (N, 3,
H, W) RGB pixels in 0-255 and normalises them itself, and gives probabilities (a Softmax), which
its default classifier parser compares with ``classifier-threshold``
(an export with ``input_format`` float-nchw and ``output_format`` probabilities; the pipeline's
``pixel_forms`` deepstream writes ``model.deepstream*.onnx``). The config sets
``net-scale-factor=1`` and zero ``offsets`` so the pixels reach the graph as they are.

``model-engine-file`` names the engine ``aft-export build`` makes on the device, under the name
``nvinfer`` gives its own (``<onnx>_b<batch>_gpu<id>_<mode>.engine``, beside the ONNX file), so it
is found and not rebuilt. Were it missing, ``nvinfer`` would build one from ``onnx-file`` itself: a
weakly typed network with the fp16 flag, not the strongly typed engine with the layers aft-export
pins to fp32; and for an int8 file with no ``int8-calib-file`` it falls back to fp16
(DeepStream 6.3 ``nvdsinfer_model_builder.cpp``: "INT8 calibration file not specified. Trying FP16
mode."). The config's header says so.

:data:`KEYS` is our table of every key written and its value type, each citing the release's
``gstnvinfer_property_parser`` it comes from (:data:`RELEASES`); ``tests/serving/test_deepstream.py``
holds the written config to it. DeepStream cannot run here: nothing here ran it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from aft_export.artifacts.ends import ends_of
from aft_export.artifacts.onnxio import ArtifactMeta, external_files, graph_precision, load_onnx
from aft_export.errors import AFTExportError, Judged, Verdict, said
from aft_export.fileio import atomic_directory, atomic_write_text, claim_output
from aft_export.options import DEFAULT_TARGET, EXPORT_TARGETS, PIXEL_FORMS, DeepStreamOptions
from aft_export.options.commands import command_line
from aft_export.version import __version__


@dataclass(frozen=True)
class Release:
    """A DeepStream release we write configs for, the JetPack it ships with, and where its key
    parser's source was read."""

    name: str
    jetpack: str
    tensorrt: str
    source: str


RELEASES = {r.name: r for r in (
    Release("DeepStream 6.3", "JetPack 5.1.2 (5.1.3)", "TensorRT 8.5.2",
            "sources/gst-plugins/gst-nvinfer/gstnvinfer_property_parser.h and .cpp of DeepStream 6.3 (the SDK's "
            "sources, as extracted from its container in github.com/hiennguyen9874/deepstream-sources, branch 6.3): "
            "the key names (#define CONFIG_GROUP_INFER_*) and how each is read (g_key_file_get_*)"),
    Release("DeepStream 7.0", "JetPack 6.0", "TensorRT 8.6.2",
            "docs.nvidia.com/metropolis/deepstream/7.0/sdk-api/gstnvinfer__property__parser_8h_source.html: the key "
            "names; how each is read was checked in 6.3's .cpp only"),
)}  # fmt: skip
PINNED = "DeepStream 6.3"  # the release whose parser source every key and type below was checked against


@dataclass(frozen=True)
class Key:
    """A key of nvinfer's ``[property]`` group that we write: its GKeyFile type, the values it
    takes (empty: any of the type), and the line of the parser that reads it."""

    name: str
    type: str  # integer, double, boolean, string, integer list, double list, string list
    values: tuple = ()
    meaning: str = ""
    source: str = ""


_CPP = "gstnvinfer_property_parser.cpp (DeepStream 6.3) "
KEYS = {k.name: k for k in (
    Key("gpu-id", "integer", (), "the GPU", _CPP + "CONFIG_GROUP_INFER_GPU_ID: g_key_file_get_integer"),
    Key("gie-unique-id", "integer", (), "this element's id (> 0)",
        _CPP + "CONFIG_GROUP_INFER_UNIQUE_ID: g_key_file_get_integer, 'should be > 0'"),
    Key("process-mode", "integer", (1, 2), "1 primary (whole frames), 2 secondary (objects a detector found)",
        _CPP + "CONFIG_GROUP_INFER_PROCESS_MODE: g_key_file_get_integer; case 1: process_full_frame, case 2: not"),
    Key("network-type", "integer", (1,), "1 classifier",
        _CPP + "CONFIG_GROUP_INFER_NETWORK_TYPE: g_key_file_get_integer (NvDsInferNetworkType_Classifier = 1)"),
    Key("onnx-file", "string", (), "the ONNX file nvinfer would build an engine from",
        _CPP + "CONFIG_GROUP_INFER_ONNX: g_key_file_get_string, relative to the config file"),
    Key("model-engine-file", "string", (), "the engine nvinfer deserialises",
        _CPP + "CONFIG_GROUP_INFER_MODEL_ENGINE: g_key_file_get_string, relative to the config file"),
    Key("labelfile-path", "string", (), "the labels file", _CPP + "CONFIG_GROUP_INFER_LABEL: g_key_file_get_string"),
    Key("batch-size", "integer", (), "the largest batch", _CPP + "CONFIG_GROUP_INFER_BATCH_SIZE: g_key_file_get_integer"),
    Key("network-mode", "integer", (0, 1, 2), "0 fp32, 1 int8, 2 fp16",
        _CPP + "CONFIG_GROUP_INFER_NETWORK_MODE: g_key_file_get_integer; NvDsInferNetworkMode_FP32/INT8/FP16"),
    Key("infer-dims", "integer list", (), "the input's C;H;W",
        _CPP + "CONFIG_GROUP_INFER_INFER_DIMENSIONS: g_key_file_get_integer_list, 3 values"),
    Key("model-color-format", "integer", (0,), "0 RGB",
        _CPP + "CONFIG_GROUP_INFER_MODEL_COLOR_FORMAT: g_key_file_get_integer; case 0: NvDsInferFormat_RGB"),
    Key("net-scale-factor", "double", (), "y = net-scale-factor * (x - offsets)",
        _CPP + "CONFIG_GROUP_INFER_SCALE_FACTOR: g_key_file_get_double"),
    Key("offsets", "double list", (), "per-channel offsets",
        _CPP + "CONFIG_GROUP_INFER_OFFSETS: g_key_file_get_double_list"),
    Key("maintain-aspect-ratio", "boolean", (), "pad to keep the aspect ratio (0: stretch)",
        _CPP + "CONFIG_GROUP_INFER_MAINTAIN_ASPECT_RATIO: g_key_file_get_boolean"),
    Key("output-blob-names", "string list", (), "the output the classifier parser reads",
        _CPP + "CONFIG_GROUP_INFER_OUTPUT_BLOB_NAMES: g_key_file_get_string_list"),
    Key("classifier-threshold", "double", (), "a label is attached above this probability (>= 0)",
        _CPP + "CONFIG_GROUP_INFER_CLASSIFIER_THRESHOLD: g_key_file_get_double, 'Negative value' refused"),
)}  # fmt: skip
NETWORK_MODE = {"fp32": 0, "int8": 1, "fp16": 2}
PROCESS_MODE = {"primary": 1, "secondary": 2}
CONFIG_PREFIX = "config_infer_"
LABELS = "labels.txt"
FORM_TAG = "deepstream"  # the pipeline's DeepStream files: model*.deepstream*.onnx
DEEPSTREAM_FORM = PIXEL_FORMS[FORM_TAG]  # (input format, output format): float pixels in, probabilities out


@dataclass
class DeepStreamResult(Judged):
    """``deepstream``: the directory written, each config with the file and engine it names, and
    the build command to run on the device; nothing here ran DeepStream."""

    path: str
    configs: list[dict] = field(default_factory=list)
    labels: str = ""
    verdict: Verdict = field(default_factory=Verdict)

    def to_dict(self) -> dict:
        return {"path": self.path, "configs": [dict(c) for c in self.configs], "labels": self.labels,
                "verdict": self.verdict.to_dict()}  # fmt: skip


def engine_name(onnx: Path, batch: int, gpu: int, precision: str) -> str:
    """The engine name nvinfer would give its own build of ``onnx`` (nvdsinfer_model_builder.cpp:
    ``modelPath + "_b" + maxBatchSize + "_gpu" + id + "_" + networkMode2Str``)."""
    return f"{onnx.name}_b{batch}_gpu{gpu}_{precision}.engine"


def deepstream_files(artifacts: list[str]) -> list[Path]:
    """The ONNX files named, a run directory standing for its DeepStream files (``*.deepstream*.onnx``)."""
    files: list[Path] = []
    for a in artifacts:
        p = Path(a)
        if p.is_dir():
            found = sorted(f for f in p.glob("*.onnx") if f".{FORM_TAG}." in f.name)
            if not found:
                raise AFTExportError(said("{dir} holds no DeepStream files (model.deepstream*.onnx); run the pipeline "
                                          "with {line}", "deepstream", dir=p,
                                          line=command_line("pipeline", pixel_forms=FORM_TAG)))  # fmt: skip
            files += found
        else:
            files.append(p)
    return files


def _described(path: Path) -> tuple[ArtifactMeta, str]:
    """The file's metadata and precision; a file not in the DeepStream form is refused, saying how
    to export one."""
    if path.suffix.lower() != ".onnx" or not path.is_file():
        raise AFTExportError(f"{path} is not an ONNX file; give the DeepStream form of a model (an ONNX file) or a "
                             f"run directory holding one")  # fmt: skip
    model = load_onnx(path, external_data=False)
    meta = ArtifactMeta.of(model, str(path))
    fix = command_line("export", "CKPT", output="model.deepstream.onnx", input_format=DEEPSTREAM_FORM[0],
                       output_format=DEEPSTREAM_FORM[1])  # fmt: skip
    ends = ends_of(model, str(path))  # what it takes and gives: the graph's word, its metadata held to it
    form = (ends.takes.name, ends.gives)
    try:
        classes, size = meta.classes, meta.input_size
    except (KeyError, ValueError):
        raise AFTExportError(f"{path} has no aft-export metadata (classes, input size); export it with {fix}") from None
    if form != DEEPSTREAM_FORM:
        raise AFTExportError(f"{path} takes {form[0]} input and gives {form[1]}; DeepStream's nvinfer feeds float RGB "
                             f"pixels in 0-255 (one scalar scale: it cannot divide by a per-channel std) and its "
                             f"classifier parser reads probabilities: export the DeepStream form with {fix}")  # fmt: skip
    if external_files(model, path):
        raise AFTExportError(f"{path} keeps its weights in external data files; DeepStream's configs name one file: "
                             f"export it again (models under 2 GiB are written as one file)")  # fmt: skip
    bad = [c for c in classes if ";" in c or "\n" in c]
    if bad:
        raise AFTExportError(f"class names {bad[:3]} hold ';' or a line break, which nvinfer's labels file uses to "
                             f"separate labels; rename them in the checkpoint")  # fmt: skip
    if len(size) != 3:
        raise AFTExportError(f"{path}'s input size {list(size)} is not C, H, W; export it again")
    return meta, graph_precision(model)


def config_text(onnx: Path, out: Path, meta: ArtifactMeta, precision: str, opts: DeepStreamOptions) -> tuple[str, str]:
    """The config (GKeyFile text) for ``onnx``, written in ``out``, and the build command to run."""
    rel = Path(os.path.relpath(onnx.resolve(), out.resolve()))
    engine = rel.with_name(engine_name(onnx, opts.batch_size, opts.gpu_id, precision))
    build = command_line("build", str(onnx.name), output=engine.name, batch_profile=f"1,{opts.batch_size},{opts.batch_size}",
                         library="tensorrt")  # fmt: skip
    c, h, w = meta.input_size
    target = EXPORT_TARGETS.get(meta.export_target, EXPORT_TARGETS[DEFAULT_TARGET])
    values = {
        "gpu-id": opts.gpu_id, "gie-unique-id": opts.unique_id, "process-mode": PROCESS_MODE[opts.mode],
        "network-type": 1, "onnx-file": rel.as_posix(), "model-engine-file": engine.as_posix(),
        "labelfile-path": LABELS, "batch-size": opts.batch_size, "network-mode": NETWORK_MODE[precision],
        "infer-dims": f"{c};{h};{w}", "model-color-format": 0, "net-scale-factor": 1.0, "offsets": "0;0;0",
        "maintain-aspect-ratio": 0, "output-blob-names": "probabilities", "classifier-threshold": opts.threshold,
    }  # fmt: skip
    assert list(values) == list(KEYS), "write every key of KEYS, in its order"
    header = [
        f"# DeepStream nvinfer config for {onnx.name}: an AFT classifier, {precision}, written by aft-export "
        f"{__version__}.",
        f"# The file is for {target.runtimes} (export target {target.name}); on JetPack 5.1/6.0 (TensorRT 8.5/8.6) use the",
        "# tensorrt8 target's (the pipeline's model.trt8.deepstream*.onnx).",
        f"# Keys and value types as {PINNED}'s gstnvinfer_property_parser reads them ({RELEASES[PINNED].jetpack}); the",
        f"# key names are also those of {'; '.join(r for r in RELEASES if r != PINNED)}.",
        "# Not run here: DeepStream cannot be installed where aft-export was tested. On the Jetson, next to this file:",
        f"#   cd {rel.parent.as_posix()} && {build}",
        f"#   deepstream-app -c <your deepstream-app config, [primary-gie] or [secondary-gie0] config-file={CONFIG_PREFIX}...>",
        "# model-engine-file is the engine that build writes, named as nvinfer names its own so that it is found and not",
        "# rebuilt. Without it nvinfer builds one from onnx-file itself: a weakly typed network with the fp16 flag, not",
        "# the strongly typed engine aft-export builds and proves (its fp32 layers pinned); for an int8 file without",
        "# int8-calib-file it builds fp16 instead (nvdsinfer_model_builder.cpp).",
        "# The graph takes float RGB pixels in 0-255 and normalises them itself, so net-scale-factor=1 and offsets 0.",
        "# nvinfer stretches each frame or object to the input size (maintain-aspect-ratio=0); aft-export's own",
        "# preprocessing resizes the shorter side and centre-crops: crops of another aspect ratio are seen differently.",
        "# The output is probabilities (a Softmax): a label is attached when its probability is above classifier-threshold.",
        "",
        "[property]",
    ]
    body = [f"{k}={_text(v)}" for k, v in values.items()]
    return "\n".join(header + body) + "\n", build


def _text(value) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def labels_text(classes: list[str]) -> str:
    """nvinfer's classifier labels: one line per output layer, its labels separated by ';'."""
    return ";".join(classes) + "\n"


def write_deepstream(artifacts: list[str], output: str, opts: DeepStreamOptions | None = None) -> DeepStreamResult:
    """A config per DeepStream file (``config_infer_<file>.txt``) and the labels file, in the new
    directory ``output``; a run directory stands for its DeepStream files."""
    opts = opts or DeepStreamOptions()
    files = deepstream_files(artifacts)
    described = [(f, *_described(f)) for f in files]
    classes = {tuple(m.classes) for _, m, _ in described}
    if len(classes) > 1:
        raise AFTExportError("the files name different classes; write a directory per model")
    result = DeepStreamResult(str(output))
    with claim_output(output, [str(f) for f in files], directory=True) as out, atomic_directory(out) as work:
        for f, meta, precision in described:
            name = CONFIG_PREFIX + f.name.removesuffix(".onnx").replace(".", "_").replace("-", "_") + ".txt"
            text, build = config_text(f, out, meta, precision, opts)
            atomic_write_text(work / name, text)
            result.configs.append({"config": str(out / name), "onnx": str(f), "precision": precision,
                                   "engine": engine_name(f, opts.batch_size, opts.gpu_id, precision),
                                   "build": build})  # fmt: skip
        atomic_write_text(work / LABELS, labels_text(list(next(iter(classes)))))
    result.labels = str(out / LABELS)
    return result
