"""A DeepStream ``nvinfer`` config for a classifier, per release, and its labels file (``aft-export deepstream``);
the check, on the device, that the engine a config names is the one to run (``aft-export deepstream-check``).

``nvinfer`` computes ``net-scale-factor * (x - offsets)`` with one scalar scale, so it cannot divide by our
per-channel std: the file it runs is the DeepStream form, which takes float (N, 3, H, W) RGB pixels in 0-255
and normalises them itself, and gives probabilities (a Softmax), which its default classifier parser compares
with ``classifier-threshold`` (an export with ``input_format`` float-nchw and ``output_format`` probabilities;
the pipeline's ``pixel_forms`` deepstream writes ``model.deepstream*.onnx``). What a file takes and gives is
read from its graph (:func:`~aft_export.artifacts.ends.ends_of`), never from its metadata alone.

A config is written for one release (:data:`~aft_export.serving.nvinfer.RELEASES`): only the keys its parser
reads, the TensorRT it ships checked against the file by the rules (``trtcheck``), and in 9.x
``strongly-typed``. ``model-engine-file`` names the engine ``aft-export build`` makes on the device under a
name of ours, ``<onnx stem>.b<batch>.gpu<id>.engine``, not the one ``nvinfer`` gives an engine it builds
itself (``<onnx>_b<batch>_gpu<id>_<mode>.engine``): a rebuild by ``nvinfer`` lands beside it and never
replaces the engine aft-export built and proved. The header of each config says, only as NVIDIA's sources
show, what that rebuild does. ``tests/test_deepstream.py`` parses every release's config as GKeyFile does and
holds it to that release's keys. DeepStream cannot run here: nothing here ran it.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from aft_export import readers
from aft_export.artifacts.ends import Ends, ends_of
from aft_export.artifacts.kinds import is_onnx
from aft_export.artifacts.onnxio import ArtifactMeta, external_files, graph_precision, load_onnx
from aft_export.errors import AFTExportError, Judged, Named, RuntimeMissing, Verdict, said
from aft_export.fileio import atomic_directory, atomic_write_text, claim_output, sha256_file
from aft_export.options import DEFAULT_TARGET, EXPORT_TARGETS, PIXEL_FORMS, ExportTarget
from aft_export.options.commands import command_line
from aft_export.options.deepstream import SECONDARY_DEFAULTS, DeepStreamCheckOptions, DeepStreamOptions
from aft_export.serving.nvinfer import (COMPUTE, FILTERS, KEYS, MAX_BATCH, NETWORK_MODE, NVINFER_DEFAULT_FILTER,
                                        RELEASES, SECONDARY_KEYS, Release, nvinfer_engine_name, own_build)  # fmt: skip
from aft_export.version import __version__

CONFIG_PREFIX = "config_infer_"
LABELS = "labels.txt"
FORM_TAG = "deepstream"  # the pipeline's DeepStream files: model*.deepstream*.onnx
DEEPSTREAM_FORM = PIXEL_FORMS[FORM_TAG]  # (input format, output format): float pixels in, probabilities out
# what a value of a GKeyFile cannot hold as it is: a line break ends it, a backslash starts an escape, a NUL ends
# the C string; leading or trailing blanks are trimmed
_NOT_IN_A_VALUE = readers.LINE_BREAKS | {"\\", "\x00", "\t"}


@dataclass
class DeepStreamResult(Judged):
    """``deepstream``: the directory written, each config with the file, the release and the engine it names and
    the build command to run on the device, and where measured, each file's top-1 under nvinfer's scaling beside
    aft-export's preprocessing (``scaling``); nothing here ran DeepStream."""

    path: str
    configs: list[dict] = field(default_factory=list)
    labels: str = ""
    scaling: list[dict] = field(default_factory=list)
    verdict: Verdict = field(default_factory=Verdict)

    def to_dict(self) -> dict:
        return {"path": self.path, "configs": [dict(c) for c in self.configs], "labels": self.labels,
                "scaling": [dict(r) for r in self.scaling], "verdict": self.verdict.to_dict()}  # fmt: skip

    def lines(self) -> list[str]:
        """What was written, what to run on the device, and any measurement."""
        n = len(self.configs)
        lines = [f"wrote {self.path}: {n} config{'' if n == 1 else 's'} and {self.labels}"]
        for c in self.configs:
            lines += [f"  {c['config']}: DeepStream {c['release']}, {c['precision']}, engine {c['engine']}",
                      f"    build it on the device, beside {Path(c['onnx']).name}: {c['build']}"]  # fmt: skip
        for m in self.scaling:
            size = f", each resized to {m['object_size']}x{m['object_size']} first" if m.get("object_size") else ""
            lines.append(f"  top-1 of {Path(m['file']).name} on {m['images']} images of {m['data']}{size}: "
                         f"{m['aft_export_top1']:.2f} with aft-export's preprocessing (bicubic, centre crop); "
                         f"{m['nvinfer_top1']:.2f} stretched with {m['filter']}; {m['nvinfer_default_top1']:.2f} "
                         f"with nvinfer's default, nearest ({m['stand_in']} stands in for the GPU's and VIC's "
                         f"filters: {m['approximation']}; not bit-exact)")  # fmt: skip
        lines.append("DeepStream did not run here: on the device, run the build line, then aft-export "
                     "deepstream-check on the configs, then deepstream-app (docs/jetson.md)")  # fmt: skip
        return lines


@dataclass(frozen=True)
class Described:
    """A DeepStream file as its config needs it, read from its graph and checked for the release."""

    path: Path
    ends: Ends
    classes: tuple[str, ...]
    chw: tuple[int, int, int]
    precision: str
    target: ExportTarget
    release: Release


def engine_name(onnx: Path, batch: int, gpu: int) -> str:
    """The engine a config names, beside ``onnx``: ``<onnx stem>.b<batch>.gpu<id>.engine``, a name of ours that
    nvinfer never gives an engine it builds itself (:func:`~aft_export.serving.nvinfer.nvinfer_engine_name`)."""
    return f"{onnx.name.removesuffix('.onnx')}.b{batch}.gpu{gpu}.engine"


def config_name(onnx: Path) -> str:
    return CONFIG_PREFIX + onnx.name.removesuffix(".onnx").replace(".", "_").replace("-", "_") + ".txt"


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


def default_release(target: ExportTarget) -> Release:
    """The oldest release whose TensorRT reads files of ``target`` (its oldest TensorRT): nobody on an older
    JetPack is given a newer release's keys."""
    return next(r for r in RELEASES.values() if _version(r.jetpack.column) >= target.oldest_tensorrt)


def _version(column: str) -> tuple[int, int]:
    major, minor = column.split(".")
    return int(major), int(minor)


def describe(path: Path, opts: DeepStreamOptions) -> Described:
    """``path`` as its config needs it, or one line saying why no config can be written for it: not the DeepStream
    form (by its graph), metadata its graph contradicts, classes that do not match the graph's output, a file
    made for CPUs, or a file the release's TensorRT does not read (the rules of ``trtcheck``)."""
    from aft_export.trtcheck import check_model

    if not is_onnx(path) or not path.is_file():
        raise AFTExportError(f"{path} is not an ONNX file; give the DeepStream form of a model (an ONNX file) or a "
                             f"run directory holding one")  # fmt: skip
    model = load_onnx(path, external_data=False)
    meta = ArtifactMeta.of(model, str(path))
    fix = command_line("export", "CKPT", output="model.deepstream.onnx", input_format=DEEPSTREAM_FORM[0],
                       output_format=DEEPSTREAM_FORM[1])  # fmt: skip
    ends = ends_of(model, str(path))  # what it takes and gives: the graph's word, its metadata held to it
    if (ends.takes.name, ends.gives) != DEEPSTREAM_FORM:
        raise AFTExportError(f"{path} takes {ends.takes.name} input and gives {ends.gives}; DeepStream's nvinfer "
                             f"feeds float RGB pixels in 0-255 (one scalar scale: it cannot divide by a per-channel "
                             f"std) and its classifier parser reads probabilities: export the DeepStream form with "
                             f"{fix}")  # fmt: skip
    try:
        classes, size = tuple(meta.classes), meta.input_size
    except (KeyError, ValueError):
        raise AFTExportError(f"{path} has no aft-export metadata (classes, input size); export it with {fix}") from None
    if ends.width is not None and ends.width != len(classes):
        raise AFTExportError(f"{path}'s metadata names {len(classes)} classes but its graph gives {ends.width} "
                             f"probabilities; a labels file must name each: export it again with {fix}")  # fmt: skip
    if external_files(model, path):
        raise AFTExportError(f"{path} keeps its weights in external data files; DeepStream's configs name one file: "
                             f"export it again (models under 2 GiB are written as one file)")  # fmt: skip
    bad = [c for c in classes if ";" in c or not _NOT_IN_A_VALUE.isdisjoint(c)]
    if bad:
        raise AFTExportError(f"class names {[readers.one_line(c) for c in bad[:3]]} hold ';', a backslash or a line "
                             f"break, which nvinfer's labels file uses to separate labels; rename them in the "
                             f"checkpoint")  # fmt: skip
    c, h, w = ends.chw
    chw = (c or 3, h or size[-2], w or size[-1])  # a dynamic height and width: the size the model was trained at
    precision = graph_precision(model)
    target = EXPORT_TARGETS.get(meta.export_target, EXPORT_TARGETS[DEFAULT_TARGET])
    if target.name == "portable" and precision == "int8":
        line = command_line("quantize", "model.deepstream.onnx", output="model.deepstream.int8.onnx", precision="int8",
                            target="tensorrt")  # fmt: skip
        raise AFTExportError(f"{path} is the portable target's int8 file, made for CPUs (7-bit weights, the rest in "
                             f"fp32); DeepStream runs TensorRT: quantise the DeepStream form for it with {line}")
    release = RELEASES[opts.release] if opts.release else default_release(target)
    column = release.jetpack.column
    report = check_model(model, [column])
    if report.status.get(column) == "refuses":
        first = next((f for f in report.findings if f.severity == "error" and column in f.versions), None)
        why = f" ({first.rule}: {readers.one_line(first.message)[:160]})" if first else ""
        remedy = (said("give it the file of {line}", "deepstream", line=command_line(
                      "export", "CKPT", output="model.trt8.deepstream.onnx", target="tensorrt8",
                      input_format=DEEPSTREAM_FORM[0], output_format=DEEPSTREAM_FORM[1]))
                  if _version(column) < (10, 3) else said("give a newer {release}", "deepstream"))  # fmt: skip
        raise AFTExportError(said("{path} is for {runtimes} (export target {target}), and the TensorRT {trt} of {title} "
                                  "(JetPack {jp}) does not read it{why}; {remedy}", "deepstream", path=path,
                                  runtimes=target.runtimes, target=target.name, trt=release.jetpack.tensorrt,
                                  title=release.title, jp=release.jetpack.name, why=why, remedy=remedy))  # fmt: skip
    return Described(path, ends, classes, chw, precision, target, release)


def _checked_value(text: str, what: str) -> str:
    """``text`` where it lands in a GKeyFile value, or one line saying it cannot: a file's name with a line break
    would write lines of its own into the config."""
    if not _NOT_IN_A_VALUE.isdisjoint(text) or text != text.strip() or not _utf8(text):
        raise AFTExportError(f"{what} {readers.one_line(text)!r} holds a line break, a tab, a backslash, a NUL, a "
                             f"byte that is not UTF-8 or blanks at its ends, which a DeepStream config's value cannot "
                             f"hold as it is; rename the file (or the folders on its path from the output)")  # fmt: skip
    return text


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a byte of a file name that was not UTF-8 (surrogateescape)
        return False
    return True


def config_values(d: Described, out: Path, opts: DeepStreamOptions) -> dict:
    """The ``[property]`` keys of ``d``'s config for its release, in :data:`~aft_export.serving.nvinfer.KEYS`'
    order: only those the release's parser reads; the object filters in secondary mode only."""
    onnx_rel = Path(os.path.relpath(d.path.resolve(), out.resolve()))
    engine_rel = onnx_rel.with_name(engine_name(d.path, opts.batch_size, opts.gpu_id))
    release = d.release
    secondary = opts.mode == "secondary"
    filters = {**SECONDARY_DEFAULTS, **{k: getattr(opts, k) for k in SECONDARY_DEFAULTS if getattr(opts, k) is not None}}
    c, h, w = d.chw
    values = {
        "gpu-id": opts.gpu_id, "gie-unique-id": opts.unique_id, "process-mode": 2 if secondary else 1,
        "network-type": 1, "onnx-file": _checked_value(onnx_rel.as_posix(), "the ONNX file's path"),
        "model-engine-file": _checked_value(engine_rel.as_posix(), "the engine's path"), "labelfile-path": LABELS,
        "batch-size": opts.batch_size,
        # strongly typed (9.x): no precision flag, the graph's types decide; else the flags the precision maps to
        "network-mode": 0 if release.strongly_typed else NETWORK_MODE[d.precision], "strongly-typed": 1,
        "infer-dims": f"{c};{h};{w}", "model-color-format": 0, "net-scale-factor": 1.0, "offsets": "0;0;0",
        "maintain-aspect-ratio": 0, "scaling-filter": FILTERS[opts.scaling_filter].value,
        "scaling-compute-hw": COMPUTE[opts.scaling_hw].value,
        "output-blob-names": _checked_value(d.ends.output, "the graph's output name"),
        "classifier-threshold": opts.threshold, "operate-on-gie-id": filters["operate_on_gie_id"],
        "operate-on-class-ids": ";".join(map(str, opts.operate_on_class_ids)),
        "input-object-min-width": filters["min_object_size"], "input-object-min-height": filters["min_object_size"],
    }  # fmt: skip
    assert set(values) == set(KEYS), "a value for every key of KEYS"
    written = {k: v for k, v in values.items() if k in release.reads}
    if not secondary:
        written = {k: v for k, v in written.items() if k not in SECONDARY_KEYS}
    if not opts.operate_on_class_ids:
        written.pop("operate-on-class-ids", None)  # absent: objects of every class
    return {k: written[k] for k in KEYS if k in written}


def config_text(d: Described, out: Path, opts: DeepStreamOptions) -> tuple[str, str, str]:
    """The config (GKeyFile text) for ``d``, written in ``out``, the engine it names and the build command to run
    beside the ONNX file on the device (quoted for a POSIX shell)."""
    values = config_values(d, out, opts)
    release, jp = d.release, d.release.jetpack
    engine = engine_name(d.path, opts.batch_size, opts.gpu_id)
    onnx_dir = Path(values["onnx-file"]).parent.as_posix()
    build = shlex.join(["aft-export", "build", d.path.name, "--output", engine, "--batch-profile",
                        f"1,{opts.batch_size},{opts.batch_size}", "--library", "tensorrt"])  # fmt: skip
    config = config_name(d.path)
    nvinfer_own = nvinfer_engine_name(d.path.name, opts.batch_size, opts.gpu_id, values["network-mode"],
                                      fallback_fp16=values["network-mode"] == 1)  # fmt: skip
    filt, hw = FILTERS[opts.scaling_filter], COMPUTE[opts.scaling_hw]
    keys = (f"only the keys {release.title}'s gstnvinfer_property_parser reads ({release.source})" if release.sourced
            else f"{release.title}: {release.source}")  # fmt: skip
    header = [
        f"{release.title} nvinfer config for {d.path.name}: an AFT classifier, {d.precision}, written by aft-export "
        f"{__version__}.",
        f"For JetPack {jp.name} ({jp.l4t}, TensorRT {jp.tensorrt}; on x86 TensorRT {release.dgpu_tensorrt}). The file "
        f"is export target {d.target.name}'s ({d.target.runtimes}); the rules of TensorRT {jp.column} accept it.",
        f"Keys: {keys}.",
        "Not run here: DeepStream cannot be installed where aft-export was tested. On the device, in this config's "
        "folder, first:",
        f"  (cd {shlex.quote(onnx_dir)} && {build})",
        f"  aft-export deepstream-check {shlex.quote(config)}",
        "The check says whether the engine deserialises with the TensorRT installed there, whether its profile covers "
        "batch-size, and whether it is the engine of onnx-file (its manifest's sha256).",
        f"model-engine-file is that engine, named {engine}: a name nvinfer never gives its own. When the engine is "
        "missing, does not deserialise, or its profile is smaller than batch-size, nvinfer warns ('... failed, try "
        "rebuild' or '... failed to match config params, trying rebuild') and builds one from onnx-file itself "
        f"(nvdsinfer_context_impl.cpp generateBackendContext), saving it as {nvinfer_own} beside the ONNX file "
        "(nvdsinfer_model_builder.cpp): never over the engine named here, which every start tries first, and warns "
        "about, until it is built again with the line above.",
        *own_build(release, d.precision),
        f"Scaling: scaling-filter={filt.value} ({opts.scaling_filter}: {filt.gpu} on the GPU, {filt.vic} on VIC) and "
        f"scaling-compute-hw={hw.value} ({hw.meaning}). nvinfer's default is {FILTERS[NVINFER_DEFAULT_FILTER].value}, "
        "nearest neighbour on both, which aliases a downscaled frame; the model was trained and proven on a bicubic "
        "resize (nvbufsurftransform.h NvBufSurfTransform_Inter; gstnvinfer.cpp sets the default).",
        "nvinfer stretches each frame or object to the input size (maintain-aspect-ratio=0); aft-export's own "
        "preprocessing resizes the shorter side and centre-crops: crops of another aspect ratio are seen differently "
        f"(measure both on your images: {command_line('deepstream', d.path.name, output='DIR', data='IMAGES')}).",
        "The graph takes float RGB pixels in 0-255 and normalises them itself, so net-scale-factor=1 and offsets 0. "
        "The output is probabilities (a Softmax): a label is attached when its probability is above "
        "classifier-threshold.",
    ]
    if opts.mode == "secondary":
        ids = values.get("operate-on-class-ids")
        classes = f"class ids {ids}" if ids else "every class (operate-on-class-ids not written)"
        header.append(f"Secondary: objects of the element whose gie-unique-id is {values.get('operate-on-gie-id')} "
                      f"(-1: any), of {classes}, at least {values.get('input-object-min-width')} pixels wide and high; "
                      f"{release.title}'s own floor: {release.min_object}.")  # fmt: skip
    body = [f"{k}={_text(v)}" for k, v in values.items()]
    lines = [line for text in header for line in _wrapped(text)]
    return "\n".join(lines + ["", "[property]"] + body) + "\n", engine, build


def _wrapped(text: str, width: int = 116) -> list[str]:
    """``text`` as ``#`` comment lines (a line that is already a command stays whole)."""
    if text.startswith("  "):
        return ["#" + text]
    out, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            out.append("# " + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return out + ["# " + line]


def _text(value) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def labels_text(classes) -> str:
    """nvinfer's classifier labels: one line per output layer, its labels separated by ';'."""
    return ";".join(classes) + "\n"


def _check_options(opts: DeepStreamOptions) -> None:
    """What no file can change: secondary mode's filters in primary mode, a filter the chosen hardware ignores,
    measurement options without labelled images."""
    given = [k for k in ("operate_on_gie_id", "min_object_size") if getattr(opts, k) is not None]
    given += ["operate_on_class_ids"] if opts.operate_on_class_ids else []
    if opts.mode == "primary" and given:
        names = " and ".join(f"{{{k}}}" for k in given)
        raise AFTExportError(said(names + " filter the objects a secondary classifier is given, and a primary one "
                                  "classifies whole frames; give {mode} secondary or leave them out", "deepstream",
                                  mode=Named("mode")))  # fmt: skip
    if opts.scaling_filter == "nicest" and opts.scaling_hw == "gpu":
        raise AFTExportError(said("{scaling_filter} nicest is VIC's (the GPU ignores it: NvBufSurfTransformInter_Algo4, "
                                  "'GPU-Ignored'); give {scaling_hw} vic, or another filter", "deepstream"))  # fmt: skip
    if opts.data is None and opts.object_size is not None:
        raise AFTExportError(said("{object_size} sizes the labelled images of a measurement; give {data} too, or "
                                  "leave it out", "deepstream"))  # fmt: skip


def write_deepstream(artifacts: list[str], output: str, opts: DeepStreamOptions | None = None,
                     log=lambda *a: None) -> DeepStreamResult:  # fmt: skip
    """A config per DeepStream file (``config_infer_<file>.txt``) and the labels file, in the new directory
    ``output``; a run directory stands for its DeepStream files. With ``opts.data``, each file's top-1 under
    nvinfer's scaling beside aft-export's preprocessing (:func:`measure_scaling`), before anything is written."""
    opts = opts or DeepStreamOptions()
    _check_options(opts)
    files = list(dict.fromkeys(deepstream_files(artifacts)))  # a file given twice is one config
    described = [describe(f, opts) for f in files]
    names: dict[str, Path] = {}
    for d in described:
        other = names.setdefault(config_name(d.path), d.path)
        if other != d.path:
            raise AFTExportError(f"{other} and {d.path} would both be written as {config_name(d.path)}; give files "
                                 f"whose names differ by more than '.', '-' and '_' (one of them renamed), or write "
                                 f"them into two directories")  # fmt: skip
    classes = {d.classes for d in described}
    if len(classes) > 1:
        raise AFTExportError("the files name different classes; write a directory per model")
    result = DeepStreamResult(str(output))
    if opts.data is not None:
        result.scaling = measure_scaling([str(d.path) for d in described], opts, log)
    with claim_output(output, [str(f) for f in files], directory=True) as out, atomic_directory(out) as work:
        for d in described:
            text, engine, build = config_text(d, out, opts)
            atomic_write_text(work / config_name(d.path), text)
            result.configs.append({"config": str(out / config_name(d.path)), "onnx": str(d.path),
                                   "precision": d.precision, "release": d.release.name, "engine": engine,
                                   "build": build})  # fmt: skip
        atomic_write_text(work / LABELS, labels_text(next(iter(classes))))
    result.labels = str(out / LABELS)
    return result


# ---------------------------------------------------------------- nvinfer's scaling, measured


def measure_scaling(files: list[str], opts: DeepStreamOptions, log=lambda *a: None) -> list[dict]:
    """Each file's top-1 on ``opts.images`` labelled images of ``opts.data`` under aft-export's own preprocessing
    (the shorter side resized, bicubic, then centre-cropped) and under nvinfer's (the whole image stretched to the
    input size) with ``opts.scaling_filter`` and with nvinfer's default, nearest neighbour. nvinfer's GPU and VIC
    filters are approximated on the CPU by PIL's filter of the same name (``Filter.pil``): not bit-exact.
    ``opts.object_size``: each image resized to that square first, as a camera sees an object larger than the
    input. Run in ONNX Runtime on the CPU."""
    from aft_export.data.datasets import load_labelled
    from aft_export.data.images import cropped, stretched
    from aft_export.runners import load_runner
    from aft_export.verify.evaluate import evaluate_artifacts

    rows = []
    for f in files:
        runner = load_runner(f, "onnxruntime")
        size = runner.info.input_size[1]
        ways = {"aft-export": cropped(opts.object_size),
                opts.scaling_filter: stretched(FILTERS[opts.scaling_filter].pil, opts.object_size),
                NVINFER_DEFAULT_FILTER: stretched(FILTERS[NVINFER_DEFAULT_FILTER].pil, opts.object_size)}
        top1, source, count = {}, str(opts.data), 0
        for way, resize in ways.items():
            if way in top1:
                continue
            images = load_labelled(opts.data, size, limit=opts.images, resize=resize)
            (row,) = evaluate_artifacts([f], images, runners={f: runner}, workers=1)
            top1[way], source, count = row["top1"], images.source, len(images)
        filt = FILTERS[opts.scaling_filter]
        rows.append({"file": f, "images": count, "data": source, "object_size": opts.object_size,
                     "aft_export_top1": top1["aft-export"], "filter": opts.scaling_filter,
                     "nvinfer_top1": top1[opts.scaling_filter], "nvinfer_default_top1": top1[NVINFER_DEFAULT_FILTER],
                     "stand_in": f"PIL {filt.pil}", "approximation": filt.approximates or "the same filter"})  # fmt: skip
        log(f"{Path(f).name}: top-1 {top1['aft-export']:.2f} with aft-export's preprocessing, "
            f"{top1[opts.scaling_filter]:.2f} stretched with {opts.scaling_filter}, {top1[NVINFER_DEFAULT_FILTER]:.2f} "
            f"with nvinfer's default (nearest), on {count} images of {source}")  # fmt: skip
    return rows


# ---------------------------------------------------------------- on the device: the engine a config names


@dataclass
class DeepStreamCheckResult(Judged):
    """``deepstream-check``: per config, each check (``ok``, ``failed`` or ``skipped``, with what it saw)."""

    configs: list[dict] = field(default_factory=list)
    verdict: Verdict = field(default_factory=Verdict)

    def to_dict(self) -> dict:
        return {"configs": [dict(c) for c in self.configs], "verdict": self.verdict.to_dict()}

    def lines(self) -> list[str]:
        """Each config's checks, one line each."""
        lines = []
        for c in self.configs:
            lines.append(f"{c['config']}: engine {Path(c['engine']).name}, batch-size {c['batch_size']}")
            lines += [f"  {k['status']:<8} {k['check']:<12} {k['detail']}" for k in c["checks"]]
        return lines


def config_files(paths: list[str]) -> list[Path]:
    """The configs named, a directory standing for its ``config_infer_*.txt``."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob(CONFIG_PREFIX + "*.txt"))
            if not found:
                raise AFTExportError(f"{p} holds no DeepStream configs ({CONFIG_PREFIX}*.txt); give the directory "
                                     f"aft-export deepstream wrote, or a config")  # fmt: skip
            out += found
        else:
            out.append(readers.regular_file(p, "DeepStream config", "give a config aft-export deepstream wrote"))
    return out


def check_config(path: Path, opts: DeepStreamCheckOptions) -> dict:
    """The checks of one config, before ``deepstream-app`` runs: its engine exists; it is the engine of its
    ``onnx-file`` (the manifest's sha256 of the ONNX file, and the engine's own); its profile covers
    ``batch-size`` and takes ``infer-dims``; and it deserialises with the TensorRT installed here, whose engine
    itself says the same of its profile. A check that needs what this machine lacks (a GPU, TensorRT) is skipped,
    saying so."""
    from aft_export.environment import tensorrt_environment
    from aft_export.runners.engine import engine_input, load_engine
    from aft_export.tensorrt.manifest import check_manifest, manifest_path

    prop = readers.read_keyfile(path, "DeepStream config").get("property")
    where = f"DeepStream config {path}"
    if prop is None:
        raise AFTExportError(f"{where} has no [property] group; give a config aft-export deepstream wrote")
    base = path.parent
    try:  # as nvinfer resolves them: joined to the config's folder (get_absolute_file_path), '..' left to the system
        onnx, engine = (base / prop[k] for k in ("onnx-file", "model-engine-file"))
        batch = readers.whole_text(prop["batch-size"], where, "batch-size", 1, MAX_BATCH)
        dims = [readers.whole_text(v, where, "infer-dims", 1, readers.MAX_SIDE) for v in prop["infer-dims"].split(";")
                if v.strip()]  # fmt: skip
    except KeyError as exc:
        raise AFTExportError(f"{where} has no {exc.args[0]}; give a config aft-export deepstream wrote") from None
    checks: list[dict] = []

    def said_check(name: str, status: str, detail: str) -> None:
        checks.append({"check": name, "status": status, "detail": detail})

    row = {"config": str(path), "engine": str(engine), "onnx": str(onnx), "batch_size": batch, "checks": checks}
    build = shlex.join(["aft-export", "build", onnx.name, "--output", engine.name, "--batch-profile",
                        f"1,{batch},{batch}", "--library", "tensorrt"])  # fmt: skip
    if not engine.is_file():
        said_check("engine", "failed", f"{engine} does not exist; build it beside the ONNX file: cd "
                                       f"{shlex.quote(str(engine.parent))} && {build}")
        return row
    try:
        manifest = check_manifest(engine, {})  # exists, parses, the engine's sha256 is the one it was built as
    except AFTExportError as exc:
        said_check("manifest", "failed", exc.message)
        return row
    said_check("engine", "ok", f"{engine.name}: sha256 {manifest['engine_sha256'][:16]}..., as {manifest_path(engine).name} "
                               f"records")  # fmt: skip
    if not onnx.is_file():
        said_check("onnx-file", "failed", f"{onnx} does not exist: nvinfer could not rebuild from it")
    elif sha256_file(onnx) != manifest.get("onnx_sha256"):
        said_check("onnx-file", "failed", f"{engine.name} was built from another file than {onnx.name} (its manifest's "
                                          f"onnx_sha256 differs); rebuild it: {build}")  # fmt: skip
    else:
        said_check("onnx-file", "ok", f"{engine.name} was built from {onnx.name} (sha256 {manifest['onnx_sha256'][:16]}...)")
    _profile_checks(said_check, manifest.get("input") or {}, batch, dims, "its manifest's profile")
    env = tensorrt_environment()
    try:
        manifest = check_manifest(engine, env)  # the library, its version and the GPU this machine has
        trt, library, loaded = load_engine(str(engine), manifest, env)
    except RuntimeMissing as exc:
        said_check("deserialise", "skipped", f"{exc.message} (only the device it runs on can show it)")
        return row
    except AFTExportError as exc:
        said_check("deserialise", "failed", exc.message)
        return row
    seen = engine_input(trt, loaded)
    said_check("deserialise", "ok", f"{library} deserialised {engine.name}")
    _profile_checks(said_check, {"min": list(seen.min), "max": list(seen.max)}, batch, dims, "the engine's profile")
    return row


def _profile_checks(said_check, profile: dict, batch: int, dims: list[int], whose: str) -> None:
    lo, hi = profile.get("min") or [], profile.get("max") or []
    if not hi:
        said_check("batch-size", "skipped", f"{whose} is not recorded")
        return
    if hi[0] < batch or lo[0] > 1:
        said_check("batch-size", "failed", f"{whose} takes batches {lo[0]} to {hi[0]}, and nvinfer sends 1 to "
                                           f"batch-size {batch}: it would rebuild ('Backend has maxBatchSize ...')")
    else:
        said_check("batch-size", "ok", f"{whose} takes batches {lo[0]} to {hi[0]}, batch-size {batch} among them")
    image = list(hi[1:]) == list(dims) and list(lo[1:]) == list(dims)
    said_check("infer-dims", "ok" if image else "failed",
               f"{whose} takes {'x'.join(map(str, hi[1:]))} images; infer-dims {';'.join(map(str, dims))}")


def check_deepstream(paths: list[str], opts: DeepStreamCheckOptions | None = None) -> DeepStreamCheckResult:
    """:func:`check_config` of each config (a directory: its ``config_infer_*.txt``)."""
    opts = opts or DeepStreamCheckOptions()
    rows = [check_config(p, opts) for p in config_files(paths)]
    failed = [f"{Path(r['config']).name}: {c['detail']}" for r in rows for c in r["checks"] if c["status"] == "failed"]
    skipped = [f"{Path(r['config']).name}: {c['detail']}" for r in rows for c in r["checks"] if c["status"] == "skipped"]
    return DeepStreamCheckResult(rows, Verdict.of(failed, skipped))
