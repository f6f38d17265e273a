"""The Python API: one plain function per command, importable from ``aft_export``.

    import aft_export

    aft_export.export("models/aft_conv_cifar.pt", "model.onnx")
    aft_export.quantize("model.onnx", "model.int8.onnx", calib="calibration/cifar10.json")
    aft_export.parity("models/aft_conv_cifar.pt", ["model.onnx", "model.int8.onnx"], data="cifar10:test")

Each function takes what its command takes (a checkpoint path, a user's ``nn.Module`` with its
preprocessing, an ONNX file, artifact paths) and its keyword arguments are the command's flags
(the flag eval-images is ``eval_images``; a repeatable flag is plural: precision is
``precisions``), but for the flags that only choose how a result is shown (:data:`NO_KEYWORD`).
Where a keyword names an options field of another name, :data:`KEYWORD_FIELDS` says which
(tests/test_api.py holds every command to this). Each returns a typed result with the paths
written, the figures, ``verdict`` (the one :class:`~aft_export.errors.Verdict`), ``passed``, and
``to_dict()``: exactly what the command prints as JSON. A user error raises
:class:`~aft_export.errors.AFTExportError` (one line, naming options by keyword). The library's
progress lines go to the ``aft_export`` logger (warnings show; ``logging.basicConfig(level=
logging.INFO)`` shows the rest).

Every keyword is checked at the function's door, before any work, against its command's
declaration (:mod:`aft_export.options.commands`, from which the command line's options are derived
too): a value of the wrong type or range is one :class:`~aft_export.options.params.ParamError`
naming the keyword, what it takes and what it got (text is not converted to a number; a repeatable
keyword takes one value or a list; a path is never a list). Defaults are the options dataclasses'
(:mod:`aft_export.options`), read from there. Stages are imported inside the functions: importing
this module loads no torch.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aft_export.errors import AFTExportError, Named, joined, listed, said
from aft_export.options.commands import declared
from aft_export.options import (DEFAULT_BACKEND, BenchOptions, BuildOptions, DeepStreamOptions, DoctorOptions, EvalOptions,
                                ExportOptions, ParityOptions, PipelineOptions, QuantizeOptions, ServeOptions,
                                TrainConfig, TritonRepoOptions)  # fmt: skip

if TYPE_CHECKING:  # the results' types, for the annotations alone: the stages load when a function runs
    from aft_export.results import (BenchResult, BuildResult, CheckResult, DeepStreamCheckResult, DeepStreamResult,
                                    DoctorResult, EvalResult, ExportResult,
                                    InferResult, InfoResult, ParityResult, PipelineResult, QuantizeResult, RepoResult,
                                    Server, TrainResult)
    from aft_export.serving.server import Served

__all__ = ["bench", "build", "check", "deepstream", "deepstream_check", "doctor", "evaluate", "export", "info", "infer",
           "parity", "pipeline", "quantize", "serve", "train", "triton_repo"]  # fmt: skip

# the command each function is (the command line's name where it differs: tests/test_api.py)
COMMANDS = {"export": "export", "quantize": "quantize", "check": "check", "build": "build", "parity": "parity",
            "evaluate": "eval", "bench": "bench", "infer": "infer", "pipeline": "pipeline", "serve": "serve",
            "triton_repo": "triton-repo", "deepstream": "deepstream", "deepstream_check": "deepstream-check",
            "train": "train", "info": "info",
            "doctor": "doctor"}  # fmt: skip
# flags with no keyword: they choose how the command line shows a result, which a result does not need
NO_KEYWORD = {"json": "to_dict() is what the command prints as JSON"}
# a repeatable flag's keyword is its name in the plural (+s, y -> ies), but for these: verbs, whose
# keyword is the verb (exclude=("a", "b")), and a word with no plural of its own
KEPT_SINGULAR = ("exclude", "exclude_regex", "keep_fp32")
PLURALS = {"trt": "trt_versions"}
# keyword -> the options field (or stage parameter) it fills, where the names differ, per function
KEYWORD_FIELDS = {
    "quantize": {"no_cache": 'QuantizeOptions.cache_dir=""'},
    "check": {"trt_versions": "trtcheck.check_model(versions)", "build": "tensorrt.build.real_check(build)"},
    "parity": {"tolerances": "verify.parity.run_parity(overrides)"},
    "evaluate": {"images": "verify.evaluate.evaluate_artifacts(limit)"},
}  # fmt: skip

logger = logging.getLogger("aft_export")
PROGRESS = "aft_export_progress"  # marks a record as a stage's progress line (the command line prints it where it did)
READY_BOUND = 120.0  # seconds serve() waits for Triton and every model to be ready


def _log(*args) -> None:
    """A stage's progress line to the ``aft_export`` logger (a ``warning:`` line as a warning)."""
    text = joined(" ", [a if isinstance(a, str) else str(a) for a in args])  # (a line said as data stays data)
    (logger.warning if text.startswith("warning: ") else logger.info)(text, extra={PROGRESS: True})


def _paths(value, what: str = "", required: bool = True) -> list[str]:
    """One path or several, as a list of strings (none: an error naming ``what``, where ``required``)."""
    if value is None or isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        value = [] if value is None else [value]
    paths = [str(v) for v in value]
    if not paths and required:
        raise AFTExportError(f"give one or more {what}")
    return paths


def _foreign(preprocess, input_size, mean, std, classes, input_format=None, files=None):
    """How an ONNX file another tool wrote is fed, or None where nothing was given. ``files``: the
    command's files; given preprocessing that none of them takes is an error, not ignored."""
    if all(v is None for v in (preprocess, input_size, mean, std, classes, input_format)):
        return None
    from aft_export.data.preprocess import ForeignPreprocessing

    pre = ForeignPreprocessing(preprocess, input_size, mean, std, classes, input_format)
    if files is not None:
        from aft_export.artifacts.info import refuse_unused_preprocessing

        refuse_unused_preprocessing(pre, [str(f) for f in files])
    return pre


def _is_module(value) -> bool:
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__") or value is None:
        return False
    from torch import nn

    return isinstance(value, nn.Module)


def _preprocessing(preprocess, input_size, mean, std, classes):
    from aft_export.data.preprocess import resolve

    return resolve(preprocess, input_size=input_size, mean=mean, std=std, classes=classes)


def _module(model, preprocess, input_size, mean, std, classes):
    """A user's in-memory classifier: its UserModel and the (model, ModelMeta) pair the stages run."""
    from aft_export.byo.spec import UserModel, meta_for

    pre = _preprocessing(preprocess, input_size, mean, std, classes)
    model.eval()
    user = UserModel(f"{type(model).__module__}.{type(model).__qualname__}", pre, name=type(model).__name__)
    return user, (model, meta_for(model, user, _log))


def _user_model(model_def, weights, weights_key, preprocess, input_size, mean, std, classes):
    """The UserModel of ``model_def`` (or of a whole model spec given as ``preprocess``), or None."""
    from aft_export.data.preprocess import read_mapping, resolve
    from aft_export.byo.spec import SPEC_KEYS, UserModel, read_spec

    spec = read_spec(preprocess) if preprocess and not model_def and "model_def" in read_mapping(preprocess) else None
    if not model_def and spec is None:
        given = [name for name, v in (("weights", weights), ("weights_key", weights_key), ("preprocess", preprocess),
                                      ("input_size", input_size), ("mean", mean), ("std", std), ("classes", classes))
                 if v is not None]  # fmt: skip
        if given:
            raise AFTExportError(said("{given} describe a model trained elsewhere; give {model_def} too", None,
                                      given=listed(given)))  # fmt: skip
        return None
    pre = resolve(preprocess, input_size=input_size, mean=mean, std=std, classes=classes, extra_keys=SPEC_KEYS)
    return UserModel(model_def or spec.model_def, pre, weights=weights or (spec.weights if spec else None),
                     weights_key=weights_key or (spec.weights_key if spec else None))  # fmt: skip


def _checked_flags(command: str, given: dict, message: str) -> None:
    bad = [k for k, v in given.items() if v not in (None, False, ())]
    if bad:
        raise AFTExportError(said(message, command, option=Named(bad[0])))  # ``message``: a template of ours


# ---------------------------------------------------------------- make


@declared("export")
def export(checkpoint=None, output=None, *, config: str | None = None, opset: int = ExportOptions.opset,
           batch_dim: str = ExportOptions.batch_dim, dynamic_hw: bool = ExportOptions.dynamic_hw,
           op_form: str = ExportOptions.op_form, target: str = ExportOptions.target,
           input_format: str = ExportOptions.input_format, output_format: str = ExportOptions.output_format,
           simplify: bool = ExportOptions.simplify, allow_unsimplified: bool = ExportOptions.allow_unsimplified,
           images: int = ExportOptions.images, data: str | None = ExportOptions.data,
           model_def: str | None = None, weights: str | None = None, weights_key: str | None = None,
           preprocess: str | None = None, input_size: int | None = None, mean=None, std=None, classes=None,
           require_aft: bool = ExportOptions.require_aft) -> ExportResult:  # fmt: skip
    """``aft-export export``: a checkpoint (or ``model_def``, or an ``nn.Module`` with ``input_size``,
    ``mean``, ``std`` and ``classes``) to ONNX at ``output``, simplified and verified against PyTorch
    on ``images`` real images. Returns :class:`~aft_export.exporting.exporter.ExportResult`."""
    from aft_export.exporting.exporter import export_checkpoint

    if output is None:
        raise AFTExportError(said("give {output}, the ONNX file to write", "export"))
    opts = export.declaration.options_of(locals())
    if _is_module(checkpoint):
        from aft_export.byo.export import export_model

        _checked_flags("export", {"model_def": model_def, "weights": weights, "weights_key": weights_key,
                                  "config": config},
                       "{option} names a model to load; an nn.Module is already loaded: leave it out")  # fmt: skip
        pre = _preprocessing(preprocess, input_size, mean, std, classes)
        return export_model(checkpoint, str(output), pre, opts, log=_log)
    user = _user_model(model_def, weights, weights_key, preprocess, input_size, mean, std, classes)
    if user is not None:
        if checkpoint is not None:  # export(W.pt, model_def=...): the positional file is the weights
            if weights:
                raise AFTExportError(said("give the weights once: {checkpoint_got} or {weights_got}", "export",
                                          weights_got=Named('weights', weights), checkpoint_got=checkpoint))
            from dataclasses import replace

            user = replace(user, weights=str(checkpoint))
        return export_checkpoint(user, str(output), opts, log=_log)
    if checkpoint is None:
        raise AFTExportError(said("give a checkpoint to export, an nn.Module, or {model_def} and {weights} for a "
                                  "model trained elsewhere", "export"))  # fmt: skip
    return export_checkpoint(str(checkpoint), str(output), opts, config, log=_log)


@declared("quantize")
def quantize(model, output, *, precision: str = QuantizeOptions.precision, calib: str | None = None,
             method: str = QuantizeOptions.method, percentile: float = QuantizeOptions.percentile,
             images: int | None = QuantizeOptions.images, batch_size: int = QuantizeOptions.batch_size,
             seed: int | None = QuantizeOptions.seed, per_channel: bool = QuantizeOptions.per_channel,
             exclude: Sequence[str] = (), exclude_regex: Sequence[str] = (), exclude_op_types: Sequence[str] = (),
             quantize_op_types: Sequence[str] = (), keep_fp32: Sequence[str] = (), target: str | None = None,
             weight_bits: int | None = None, rest_precision: str | None = None,
             quantize_aft_core: bool = False, sensitivity: bool = False, budget: float = QuantizeOptions.budget,
             allow_fewer: bool = False, cache_dir: str | None = None, no_cache: bool = False,
             input_size: int | None = None, mean=None, std=None) -> QuantizeResult:  # fmt: skip
    """``aft-export quantize``: an int8 (Q/DQ, calibrated on ``calib``) or fp16 graph from the fp32
    ONNX file ``model``, at ``output``. Returns :class:`~aft_export.quantization.stage.QuantizeResult`
    (``aft_export.results.Quantized``)."""
    from aft_export.quantization.stage import quantize_model

    values = {k: v for k, v in locals().items() if k != "cache_dir"}
    opts = quantize.declaration.options_of(values, cache_dir="" if no_cache else cache_dir)
    return quantize_model(str(model), str(output), None if calib is None else str(calib), opts, log=_log)


@declared("build")
def build(model, output=None, *, batch_profile: str | None = BuildOptions.batch_profile,
          hw_profile: str | None = BuildOptions.hw_profile, workspace_mb: int = BuildOptions.workspace_mb,
          timing_cache: str | None = None, dla_core: int | None = None, version_compatible: bool = False,
          tf32: bool = False, hardware_compatibility: str = BuildOptions.hardware_compatibility,
          library: str = BuildOptions.library, compute_capabilities: Sequence[str] = (),
          preprocess: str | None = None, input_size: int | None = None, mean=None, std=None,
          classes=None, input_format: str | None = None) -> BuildResult:  # fmt: skip
    """``aft-export build``: a TensorRT or TensorRT-RTX engine and its manifest from the ONNX file
    ``model``. Returns :class:`~aft_export.tensorrt.build.BuildResult`."""
    from aft_export.tensorrt.build import build_engine

    opts = build.declaration.options_of(locals())
    return build_engine(str(model), None if output is None else str(output), opts, log=_log,
                        preprocessing=_foreign(preprocess, input_size, mean, std, classes, input_format,
                                               files=[model]))  # fmt: skip


@declared("train")
def train(*, model: str, data: str, output: str, test_data: str | None = None, epochs: int = TrainConfig.epochs,
          batch_size: int = TrainConfig.batch_size, lr: float = TrainConfig.lr,
          weight_decay: float = TrainConfig.weight_decay, warmup_epochs: float = TrainConfig.warmup_epochs,
          label_smoothing: float = TrainConfig.label_smoothing, val_fraction: float = TrainConfig.val_fraction,
          seed: int = TrainConfig.seed, threads: int = TrainConfig.threads, images: int | None = None,
          resume: str | None = None, progress: bool = TrainConfig.progress) -> TrainResult:  # fmt: skip
    """``aft-export train``: a classifier of registry config ``model`` trained on ``data``, written
    to ``output`` after every epoch (``progress``: a progress bar on stderr). Returns
    :class:`~aft_export.results.TrainResult`."""
    from aft_export.models.training import train as run_training

    return run_training(train.declaration.options_of(locals()))


@declared("triton-repo")
def triton_repo(artifacts, output, *, max_batch: int | None = None, instances: int = TritonRepoOptions.instances,
                top_k: int = TritonRepoOptions.top_k, queue_delay_us: int = TritonRepoOptions.queue_delay_us,
                device: str = TritonRepoOptions.device, backend: str = TritonRepoOptions.backend,
                threads: int = TritonRepoOptions.threads) -> RepoResult:  # fmt: skip
    """``aft-export triton-repo``: a Triton model repository for the artifacts at ``output``.
    Returns :class:`~aft_export.serving.repository.RepoResult`."""
    from aft_export.serving.repository import write_repository

    opts = triton_repo.declaration.options_of(locals())
    return write_repository(_paths(artifacts, "ONNX files or engines"), str(output), opts)


@declared("deepstream")
def deepstream(artifacts, output, *, mode: str = DeepStreamOptions.mode, release: str | None = None,
               batch_size: int = DeepStreamOptions.batch_size, gpu_id: int = DeepStreamOptions.gpu_id,
               threshold: float = DeepStreamOptions.threshold, unique_id: int = DeepStreamOptions.unique_id,
               scaling_filter: str = DeepStreamOptions.scaling_filter, scaling_hw: str = DeepStreamOptions.scaling_hw,
               operate_on_gie_id: int | None = None, operate_on_class_ids: Sequence[int] = (),
               min_object_size: int | None = None, data: str | None = None, images: int = DeepStreamOptions.images,
               object_size: int | None = None) -> DeepStreamResult:  # fmt: skip
    """``aft-export deepstream``: DeepStream nvinfer configs (one per file, for ``release``; default the oldest
    whose TensorRT reads the file) and the labels file at ``output``, for the DeepStream form of a model (ONNX
    files, or run directories holding ``model*.deepstream*.onnx``); with ``data``, each file's top-1 under
    nvinfer's scaling beside aft-export's preprocessing. Returns
    :class:`~aft_export.serving.deepstream.DeepStreamResult`."""
    from aft_export.serving.deepstream import write_deepstream

    opts = deepstream.declaration.options_of(locals())
    return write_deepstream([str(a) for a in _paths(artifacts, "DeepStream files or run directories")], str(output),
                            opts, log=_log)  # fmt: skip


@declared("deepstream-check")
def deepstream_check(configs, *, library: str = "auto") -> DeepStreamCheckResult:
    """``aft-export deepstream-check``, on the device before ``deepstream-app``: for each nvinfer config (a
    directory: its ``config_infer_*.txt``), whether its engine is the one built from its ``onnx-file``, whether its
    profile covers ``batch-size`` and ``infer-dims``, and whether it deserialises with the TensorRT installed here
    (skipped where there is no GPU or no TensorRT). Returns
    :class:`~aft_export.serving.deepstream.DeepStreamCheckResult`."""
    from aft_export.serving.deepstream import check_deepstream

    return check_deepstream([str(c) for c in _paths(configs, "DeepStream configs or the directory holding them")],
                            deepstream_check.declaration.options_of(locals()))  # fmt: skip


# ---------------------------------------------------------------- check and measure


@declared("check")
def check(models=(), *, trt_versions: Sequence[str] = (), rules: bool = False, library: str = "auto",
          offline_only: bool = False, build: bool = False, strict: bool = False) -> CheckResult:  # fmt: skip
    """``aft-export check``: ONNX files against the offline rules of TensorRT's parser and builder,
    one column per version; where TensorRT or TensorRT-RTX is installed, also its own parser (and
    with ``build`` its builder). ``rules``: the rules themselves. Returns
    :class:`~aft_export.results.CheckResult`."""
    from aft_export.tensorrt.checks import check_files, rules_result

    versions = list(trt_versions) or None
    if rules:
        return rules_result(versions)
    return check_files(_paths(models, required=False), versions, library=library, build=build,
                       offline_only=offline_only, strict=strict)  # fmt: skip


@declared("parity")
def parity(checkpoint, artifacts=(), *, data=None, images: int = ParityOptions.images, tolerances: Sequence[str] = (),
           backend: str = ParityOptions.backend, model_def: str | None = None, weights: str | None = None,
           weights_key: str | None = None, preprocess: str | None = None, input_size: int | None = None,
           mean=None, std=None, classes=None) -> ParityResult:  # fmt: skip
    """``aft-export parity``: each artifact against the fp32 PyTorch model (a checkpoint, an
    ``nn.Module`` with its preprocessing, or ``model_def``) on ``images`` images of ``data`` and
    stress inputs. Returns :class:`~aft_export.results.ParityResult`."""
    from aft_export.verify.parity import run_parity

    artifacts = _paths(artifacts, required=False)
    data = None if data is None else str(data)  # None: the checkpoint's test data, else cifar10:test
    common = dict(images=images, overrides=list(tolerances), backend=backend)
    if _is_module(checkpoint):
        from aft_export.runners import TorchRunner

        user, loaded = _module(checkpoint, preprocess, input_size, mean, std, classes)
        reference = TorchRunner(user.name, loaded=loaded)
        cpu_notes(artifacts, backend)
        return run_parity(user.name, artifacts, data, reference=reference, **common)
    user = _user_model(model_def, weights, weights_key, preprocess, input_size, mean, std, classes)
    if user is not None:  # the reference is the user's module, and every positional path is an artifact
        artifacts = ([str(checkpoint)] if checkpoint is not None else []) + artifacts
        cpu_notes(artifacts, backend)
        return run_parity(user, artifacts, data, **common)
    from aft_export.models.sources import open_source

    cpu_notes(artifacts, backend)
    return run_parity(open_source(str(checkpoint)), artifacts, data, **common)


@declared("eval")
def evaluate(artifacts, *, data, batch_size: int = EvalOptions.batch_size, images: int | None = None,
             backend: str = EvalOptions.backend, preprocess: str | None = None, input_size: int | None = None,
             mean=None, std=None, classes=None, input_format: str | None = None) -> EvalResult:  # fmt: skip
    """``aft-export eval``: top-1/top-5 of each checkpoint, ONNX file or engine on the labelled
    ``data`` (the first ``images``; None: all), and each one's top-1 agreement with the first.
    Returns :class:`~aft_export.results.EvalResult`."""
    from aft_export.verify.evaluate import evaluate as run_evaluation

    paths = _paths(artifacts, "checkpoints or ONNX files to evaluate")
    cpu_notes(paths, backend)
    return run_evaluation(paths, str(data), batch_size=batch_size, limit=images, backend=backend,
                          preprocessing=_foreign(preprocess, input_size, mean, std, classes, input_format,
                                                 files=paths))  # fmt: skip


@declared("bench")
def bench(artifacts, *, batch_sizes: Sequence[int] = BenchOptions.batch_sizes, warmup: int = BenchOptions.warmup,
          iters: int = BenchOptions.iters, threads: int = 0, backend: str | None = None,
          reference: str | None = None, data: str | None = None, images: int | None = None, profile: bool = False,
          preprocess: str | None = None, input_size: int | None = None, mean=None, std=None,
          classes=None, input_format: str | None = None) -> BenchResult:  # fmt: skip
    """``aft-export bench``: latency and throughput of each artifact at each batch size (``backend``
    None: onnxruntime). With ``reference``, the checkpoint the files were made from: the deploy
    table, every file on every runtime here (or ``backend``'s), proven against it on ``images``
    labelled images of ``data`` and timed. Returns :class:`~aft_export.results.BenchResult` (with
    ``reference``, the table is its ``deploy``)."""
    artifacts = _paths(artifacts, "checkpoints, ONNX files or engines to time")
    pre = _foreign(preprocess, input_size, mean, std, classes, input_format,
                   files=None if reference is not None else artifacts)
    if reference is not None:
        from aft_export.verify.deploy import bench_against

        if profile or pre is not None:
            raise AFTExportError(said("{reference} compares our files with their checkpoint: give neither "
                                      "{profile} nor another tool's preprocessing with it (bench those files "
                                      "without {reference})", "bench"))
        return bench_against(str(reference), artifacts, data, batches=tuple(batch_sizes),
                             images=BenchOptions.images if images is None else images, warmup=warmup, iters=iters,
                             threads=threads, backend=backend, log=_log)  # fmt: skip
    given = [name for name, v in (("data", data), ("images", images)) if v is not None]
    if given:
        raise AFTExportError(said("{given} gives the labelled images of the deploy table: give {reference} (the "
                                  "checkpoint the files were made from) with it", "bench", given=Named(given[0])))  # fmt: skip
    from aft_export.verify.bench import bench as run_bench

    cpu_notes(artifacts, backend)  # (with `reference` the deploy table times every file on every runtime: it says)
    return run_bench(artifacts, list(batch_sizes), warmup=warmup, iters=iters, threads=threads,
                     backend=backend or DEFAULT_BACKEND, profile=profile, preprocessing=pre)  # fmt: skip


@declared("infer")
def infer(artifact, images, *, top_k: int = 5, backend: str = DEFAULT_BACKEND) -> InferResult:
    """``aft-export infer``: the ``top_k`` classes of each image (files or folders) from a
    checkpoint, ONNX file or engine. Returns :class:`~aft_export.results.InferResult`."""
    from aft_export.serving.predict import classify

    cpu_notes([artifact], backend)
    return classify(str(artifact), _paths(images, "images or folders of images"), top_k=top_k, backend=backend)


@declared("info")
def info(artifact, *, config: str | None = None, preprocess: str | None = None, input_size: int | None = None,
         mean=None, std=None, classes=None, input_format: str | None = None) -> InfoResult:  # fmt: skip
    """``aft-export info``: what an artifact is (a checkpoint's config and metrics, an ONNX file's
    target, precision and recipe, an engine's manifest). Returns :class:`~aft_export.results.InfoResult`."""
    from aft_export.artifacts.info import artifact_info

    return artifact_info(str(artifact), config=config,
                         preprocessing=_foreign(preprocess, input_size, mean, std, classes, input_format))  # fmt: skip


# ---------------------------------------------------------------- the whole job


@declared("pipeline")
def pipeline(checkpoint=None, *, output: str | None = None, calib: str | None = None,
             data: str | None = PipelineOptions.data, precisions: Sequence[str] = PipelineOptions.precisions,
             op_form: str = PipelineOptions.op_form, targets: Sequence[str] = PipelineOptions.targets,
             calib_images: int | None = None, parity_images: int = PipelineOptions.parity_images,
             eval_images: int | None = None, bench_batch_sizes: Sequence[int] = PipelineOptions.bench_batch_sizes,
             bench_iters: int = PipelineOptions.bench_iters, threads: int = PipelineOptions.threads,
             tolerances: Sequence[str] = (), triton_repo: bool = False, pixel_forms: Sequence[str] = (),
             model_def: str | None = None,
             weights: str | None = None, weights_key: str | None = None, preprocess: str | None = None,
             input_size: int | None = None, mean=None, std=None, classes=None,
             require_aft: bool = PipelineOptions.require_aft) -> PipelineResult:  # fmt: skip
    """``aft-export pipeline``: export, quantise, check, build engines, parity, eval and the deploy
    table in one run directory (``output``; default runs/<model>-<UTC time>), for a checkpoint
    (None: the bundled zoo model) or ``model_def``. Returns
    :class:`~aft_export.workflow.pipeline.PipelineResult`."""
    from aft_export.workflow.pipeline import run_pipeline

    if _is_module(checkpoint):
        raise AFTExportError(said("the pipeline names its run and its reference after a file: save the module's "
                                  "weights and give {model_def} and {weights} (or a checkpoint)", "pipeline"))  # fmt: skip
    user = _user_model(model_def, weights, weights_key, preprocess, input_size, mean, std, classes)
    if user is not None and checkpoint is not None:
        raise AFTExportError(said("give either a checkpoint ({checkpoint_got}) or {model_def}, not both",
                                  "pipeline", checkpoint_got=checkpoint))
    if user is None and checkpoint is not None:
        from aft_export.models.sources import open_source

        user = open_source(str(checkpoint))
    values = {k: tuple(dict.fromkeys(v)) if isinstance(v, tuple) else v for k, v in locals().items()}  # each once
    opts = pipeline.declaration.options_of(values)
    return run_pipeline(user, opts, log=_log)


@declared("doctor")
def doctor(model: str = "aft_conv_cifar", *, output: str | None = None, data: str | None = DoctorOptions.data,
           calib: str | None = None, calib_images: int | None = None,
           parity_images: int = DoctorOptions.parity_images, eval_images: int | None = None,
           bench_iters: int = DoctorOptions.bench_iters,
           timeout: float = DoctorOptions.timeout) -> DoctorResult:  # fmt: skip
    """``aft-export doctor``: every check for a GPU or Jetson machine, each as a child command, in
    one run directory with doctor.json. Returns :class:`~aft_export.workflow.doctor.DoctorResult`."""
    from aft_export.workflow.doctor import run_doctor

    opts = doctor.declaration.options_of(locals())
    return run_doctor(str(model), opts, log=_log)


@declared("serve")
def serve(artifacts, *, host: str = ServeOptions.host, http_port: int = ServeOptions.http_port,
          grpc_port: int = ServeOptions.grpc_port, metrics_port: int = ServeOptions.metrics_port,
          max_batch: int | None = None, instances: int = ServeOptions.instances, top_k: int = ServeOptions.top_k,
          queue_delay_us: int = ServeOptions.queue_delay_us, backend: str = ServeOptions.backend,
          threads: int = ServeOptions.threads, drain_seconds: int = ServeOptions.drain_seconds,
          preprocess: str | None = None, input_size: int | None = None, mean=None, std=None,
          classes=None, input_format: str | None = None) -> Server:  # fmt: skip
    """``aft-export serve``, without blocking: NVIDIA Triton serving the artifacts (on 127.0.0.1
    unless ``host`` says otherwise), returned once every model is ready (at most
    :data:`READY_BOUND` seconds) as a :class:`~aft_export.results.Server`, a context manager whose
    ``stop()`` stops it::

        with aft_export.serve(["model.onnx"], http_port=8000) as server:
            ...  # requests to server.http
    """
    from aft_export.results import Server
    from aft_export.serving.server import _Stop
    from aft_export.serving.server import serve as run_server

    paths = _paths(artifacts, "ONNX files or engines to serve")
    cpu_notes(paths, backend)
    opts = serve.declaration.options_of(locals(), preprocessing=_foreign(preprocess, input_size, mean, std, classes,
                                                                       input_format, files=paths))  # fmt: skip
    if _blocking.get():  # serve_until_stopped: here, until a signal
        return run_server(paths, opts, log=_log)
    stop, outcome = _Stop(), {}

    def serving() -> None:
        try:
            run_server(paths, opts, log=_log, stop=stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=serving, name="aft-export serve", daemon=True)
    thread.start()
    handle = Server(thread, stop, outcome)
    deadline = time.monotonic() + READY_BOUND
    while not stop.ready.wait(0.1):
        if not thread.is_alive():
            raise outcome.get("error") or AFTExportError("the server stopped while starting; see the log above")
        if time.monotonic() > deadline:
            handle.stop()
            raise AFTExportError(said("Triton was not ready after {READY_BOUND:.0f} s; nothing is left running: "
                                      "try fewer {instances}, or see the log above", "serve",
                                      READY_BOUND=READY_BOUND))  # fmt: skip
    return handle


_blocking = contextvars.ContextVar("aft_export.api.blocking", default=False)


def serve_until_stopped(artifacts, **keywords) -> Served:
    """What ``aft-export serve`` runs: :func:`serve`'s server (the same keywords), in this thread
    until SIGINT or SIGTERM (the main thread's: it installs their handlers; a second signal stops at
    once), with no bound on start-up. Returns the :class:`~aft_export.serving.server.Served`, whose
    ``signal`` is the signal that stopped it."""
    token = _blocking.set(True)
    try:
        return serve(artifacts, **keywords)
    finally:
        _blocking.reset(token)


# ---------------------------------------------------------------- for the command line (no command of their own)


def describe_models() -> list[str]:
    """The registered model configs, a line each (``aft-export models``)."""
    from aft_export.models import describe_models as lines

    return lines()


def cpu_notes(paths, backend: str | None) -> None:
    """Before ``paths`` run on ``backend``: :func:`aft_export.artifacts.purpose.cpu_notes`, said to our logger."""
    from aft_export.artifacts.purpose import cpu_notes as notes

    notes(paths, backend, logger)
