"""The whole job in one call: export, simplify, quantise, check, engines, parity, eval, bench.

Writes a run directory::

    RUN/model.onnx, model.fp16.onnx, model.int8.onnx   the artifacts (model.trt8.* for ``targets``
                          tensorrt8, model.portable.* for portable: options.EXPORT_TARGETS)
    RUN/model*.engine + .json   TensorRT engines where TensorRT and a GPU exist, else TensorRT-RTX
                          engines (model*.rtx.engine) where it is installed: built ahead of time on
                          the CPU, and reported *built, not run* when no GPU is here
    RUN/<artifact>.verify.sh  trtexec/polygraphy command lines to check each with NVIDIA's tools
    RUN/manifest.json     tool versions, options, input hashes, every step and result
    RUN/report.md         the summary table and the plots, for people
    RUN/triton/           with ``triton_repo``: a Triton model repository of the artifacts
    RUN/plots/*.svg       error histograms, accuracy and latency per artifact

Data moves once: the checkpoint is loaded once, the labelled set decoded once, each
artifact's runner made once and shared by parity, eval and bench, and the plots use
the differences parity measured. Stages hand on what they already hold: the calibration
set is decoded once for every quantisation (and the fp32 logits on it computed once per
fp32 file), each artifact is checked by the offline TensorRT check once, when it is made
(the report also covers the engine library's column, so the check step and the build
reuse it), and parity compares with PyTorch's logits from the export's verification. The
directory is built under a temporary name and renamed when complete; a run that stops on bad input leaves nothing behind. A parity
failure is a result, not an error: the run completes, the report says which artifact
failed, and the exit code is 1. An engine that cannot run here (no GPU) stays out of the
side-by-side parity, eval and bench runs and is reported *skipped, no GPU*, never passed; the
run then exits 3 (nothing failed, something was not verified).

The run is a list of declared steps (:func:`pipeline_steps`: each a name, the earlier
results it takes, a run function and the result it produces), run in order by one loop
(:func:`run_steps`) that times and records them; :mod:`aft_export.workflow.report` renders what
people read. Thread counts go to the runners, which hold them for their own calls only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import numpy as np

from aft_export.tensorrt.build import build_engine, offline_column
from aft_export.verify.compare import tolerances_with
from aft_export.verify.deploy import Measured, deploy_table, make_runner, runtimes_here
from aft_export.data.formats import takes_pixels
from aft_export.data.images import model_input, normalize_array
from aft_export.data.datasets import is_named, load_labelled, verification_data
from aft_export.environment import distributions, has_gpu, ort_distributions, platform_facts, tensorrt_environment, tensorrt_libraries
from aft_export.errors import AFTExportError, Verdict, said
from aft_export.verify.evaluate import evaluate_artifacts, side_by_side
from aft_export.exporting.exporter import ExportOptions, export_checkpoint, refuse_over_protobuf_limit
from aft_export.fileio import atomic_directory, atomic_write_text, claim_output, sha256_file
from aft_export.tensorrt.nvtools import write_verification_commands
from aft_export.artifacts.kinds import is_onnx
from aft_export.artifacts.ends import graph_ends
from aft_export.artifacts.onnxio import load_onnx
from aft_export.verify.parity import ParityRow, run_parity
from aft_export.artifacts.purpose import engine_made_for, file_purpose
from aft_export.serving.deepstream import FORM_TAG, write_deepstream
from aft_export.options import QuantizeOptions
from aft_export.runtimes import DEFAULT_BACKEND, REFERENCE, title_of
from aft_export.quantization.cache import write_cache_entries
from aft_export.quantization.stage import apply_recipe, quantize_model
from aft_export.workflow.plots import deploy_plots, pipeline_plots
from aft_export.workflow.report import report_markdown, summary_rows
from aft_export.options import (DEFAULT_TARGET, EXPORT_TARGETS, PIXEL_FORMS, PRECISIONS, TARGETS, BenchOptions,
                                PipelineOptions, TritonRepoOptions)  # fmt: skip
from aft_export.models.resources import bundled_name, default_calibration, default_checkpoint
from aft_export.errors import RuntimeMissing
from aft_export.runners import OrtRunner, TorchRunner, TrtRunner
from aft_export.models.sources import CheckpointSource, open_source
from aft_export.tensorrt.library import (INSTALL_HINT, LIBRARIES, RTX_INSTALL_HINT, BuildOptions, engine_name,
                                         import_library, library_of)  # fmt: skip
from aft_export.trtcheck import check_model
from aft_export.trtcheck.versions import parse_version
from aft_export.serving.repository import write_repository
from aft_export.serving.spec import is_rtx_engine, model_name
from aft_export.version import __version__
from aft_export.workflow.steps import (Context, DeployRun, Engines, Made, Outcome, ParityRun, PipelineResult,
                                       PipelineStep, Step, run_steps)  # fmt: skip


def _versions() -> dict:
    """The versions the manifest records (None: not installed); ``onnxruntime``: whichever of its
    wheels is installed (:data:`aft_export.environment.ORT_DISTRIBUTIONS`)."""
    facts = platform_facts()
    found = distributions(("torch", "onnx", "onnxsim", "onnxscript", "numpy", "tensorrt"))
    ort = ort_distributions()
    out = {"aft-export": __version__, "python": facts["python"], "platform": facts["platform"]}
    found = {**found, "onnxruntime": next(iter(ort.values()), None)}
    for name in ("torch", "onnx", "onnxruntime", "onnxsim", "onnxscript", "numpy", "tensorrt"):
        out[name] = found.get(name)
    out["tensorrt_rtx"] = tensorrt_environment()["tensorrt_rtx"]
    return out


def _environment() -> dict:
    facts = platform_facts()
    return {**tensorrt_environment(), "cpu_count": facts["cpu_count"], "machine": facts["machine"]}


def engine_library(installed, gpu: bool) -> tuple[str | None, str]:
    """The library the engine step builds with, or None and why not (one line). Standard TensorRT
    where it is installed and a GPU is visible (it builds on the GPU the engine is for); else
    TensorRT-RTX where it is installed (it builds ahead of time on the CPU, for RTX GPUs)."""
    for lib in LIBRARIES.values():  # in the table's order: standard TensorRT first
        if lib.name in installed and (gpu or lib.builds_without_gpu):
            return lib.name, ""
    if any(name in installed for name in LIBRARIES):  # installed, but it builds on a GPU and none is here
        return None, (f"TensorRT is installed but no CUDA GPU is visible, and TensorRT-RTX (which builds on a CPU) "
                      f"is not ({RTX_INSTALL_HINT}); no engines built")  # fmt: skip
    return None, (f"neither TensorRT nor TensorRT-RTX is installed here (TensorRT: {INSTALL_HINT}; TensorRT-RTX: "
                  f"{RTX_INSTALL_HINT}); no engines built")  # fmt: skip


def _build_column(library: str | None) -> str | None:
    """The offline check's column for the parser the engine step will build with (None: no
    engines, or a library the check has no column for, which the build then reports)."""
    if library is None:
        return None
    try:
        return offline_column(library, import_library(library)[2])
    except AFTExportError:
        return None


def run_pipeline(checkpoint=None, options: PipelineOptions | None = None, log=print) -> PipelineResult:
    """Run every stage on ``checkpoint`` (default: the bundled zoo model), a checkpoint path
    or any model source (:mod:`aft_export.models.sources`); see the module doc."""
    opts = options or PipelineOptions()
    source = open_source(checkpoint if checkpoint else default_checkpoint())
    ckpt = Path(source.path)  # the file that stands for the model: names, sizes, the reference's key
    if not ckpt.is_file() and not isinstance(source, CheckpointSource):  # a model_def MODULE:FACTORY, no weights
        raise AFTExportError(said("the pipeline names its run and reference after a file: {source} has none; give "
                                  "{weights} (or a model spec file)", "pipeline", source=source))  # fmt: skip
    if not ckpt.is_file():
        raise AFTExportError(f"checkpoint {ckpt} does not exist" + ("; check the path" if checkpoint else
                             "; pass one: aft-export pipeline CKPT"))  # fmt: skip
    for p in opts.precisions:
        if p not in PRECISIONS:
            raise AFTExportError(f"unknown precision {p!r}; choose {' and/or '.join(sorted(PRECISIONS))}")
    if not opts.targets or any(t not in TARGETS for t in opts.targets):
        raise AFTExportError(f"export targets {list(opts.targets)}: choose from {list(TARGETS)}")
    tolerances_with(list(opts.tolerances))  # bad overrides fail before any work
    calib_source, _ = apply_recipe(opts.calib or str(default_calibration()), QuantizeOptions())  # a bad recipe too
    if not is_named(calib_source) and not Path(calib_source).exists():
        raise AFTExportError(said("calibration source {calib_source} does not exist; give {calib}: the images, or "
                                  "a recipe such as calibration/cifar10.json", "pipeline",
                                  calib_source=calib_source))  # fmt: skip
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    final = Path(opts.output) if opts.output else Path("runs") / f"{ckpt.stem}-{stamp}"
    # claimed before any work: never an input, and one run at a time (the second fails here)
    with claim_output(final, inputs=[*source.inputs, opts.calib, opts.data], directory=True):
        refuse_over_protobuf_limit(source=source)  # before a minute of loading, where the source can tell
        loaded = source.load(log)  # once, for every stage; fails early on a bad model
        refuse_over_protobuf_limit(loaded[0])  # before any data is decoded
        cache_writes: list = []  # calibration ranges enter the cache once the run is complete
        with atomic_directory(final) as work:
            result = _run(ckpt, loaded, opts, work, final, log, cache_writes)
        write_cache_entries(cache_writes)
        return result


def _run(ckpt, loaded, opts: PipelineOptions, work: Path, final: Path, log, cache_writes: list) -> PipelineResult:
    info = TorchRunner(str(ckpt), loaded=loaded).info
    opts = replace(opts, data=verification_data(opts.data, loaded[1])[0])  # every stage reads this one source
    decoded = load_labelled(opts.data, info.input_size[1], limit=opts.eval_images)  # the one decode
    parity_set = decoded.subset(opts.parity_images)
    x = normalize_array(parity_set.images, info.mean, info.std)
    library, why_not = engine_library(tensorrt_libraries(), has_gpu())
    column = _build_column(library)
    ctx = Context(ckpt, loaded, opts, work, final, opts.calib or str(default_calibration()), cache_writes, library,
                   why_not, (column,) if column else ())  # fmt: skip
    given = {"decoded": decoded, "parity set": parity_set, "parity inputs": x}
    return run_steps(pipeline_steps(opts, library), ctx, given, log)["result"]


def pipeline_steps(opts: PipelineOptions, library: str | None) -> list[PipelineStep]:
    """The run as a list: an export per target and a quantisation per precision of it, the
    TensorRT check, NVIDIA's commands, the engines (where a library can build them), the
    Triton repository (with the option), then parity, eval, bench and the report."""
    steps: list[PipelineStep] = []
    made: list[str] = []
    previous = None  # the last quantisation: its calibration set, and its fp32 logits for the same file
    for target in opts.targets:
        for form in (None, *opts.pixel_forms):  # the normal file, then each pixel form's (model.FORM*.onnx)
            label = ("" if target == DEFAULT_TARGET else f" {target}") + (f" {form}" if form else "")
            exported = f"export{label}"
            steps.append(PipelineStep(exported, ("parity inputs", "decoded", "parity set"),
                                      partial(_export, target=target, form=form), exported))  # fmt: skip
            made.append(exported)
            for precision in opts.precisions:
                name = f"quantize {precision}{label}"
                steps.append(PipelineStep(name, (exported, *([previous] if previous else [])),
                                          partial(_quantize, precision=precision), name))  # fmt: skip
                made.append(name)
                previous = name
        if target == CPU_INT8_FROM and cpu_int8_too(opts):
            name = f"quantize int8 {CPU_INT8}"  # the name a portable target's int8 step has: the same file
            steps.append(PipelineStep(name, ("export", previous), partial(_quantize, precision="int8",
                                                                          target=CPU_INT8), name))  # fmt: skip
            made.append(name)
            previous = name
    steps += [
        PipelineStep("onnx files", tuple(made), _onnx_files, "onnx", recorded=False),
        PipelineStep("tensorrt check", ("onnx",), _trt_check, "trt_check"),
        PipelineStep("verification commands", ("onnx", "parity inputs", "parity set"), _verification_commands,
                     "verification"),
        PipelineStep("tensorrt engines", ("onnx",), _engines if library else _no_engines, "engines"),
        *([PipelineStep("triton repository", ("onnx", "engines"), _triton, "triton")] if opts.triton_repo else []),
        *([PipelineStep("deepstream configs", ("onnx",), _deepstream, "deepstream")]
          if FORM_TAG in opts.pixel_forms else []),
        PipelineStep("runners", ("onnx", "engines"), _runners, "runners", recorded=False),
        PipelineStep("parity", ("onnx", "engines", "runners", "parity set"), _parity, "parity"),
        PipelineStep("eval", ("onnx", "engines", "runners", "decoded"), _eval, "eval"),
        PipelineStep("deploy table", ("onnx", "engines", "runners", "decoded", "parity set", "parity", "eval"),
                     _deploy, "deploy"),
        PipelineStep("report", ("steps", "onnx", "trt_check", "engines", "parity", "eval", "deploy"), _report,
                     "result"),
    ]  # fmt: skip
    return steps


_QUIET = dict(log=lambda *a: None)
# the CPU's int8 (the portable target's: rest fp32, 7-bit weights), made beside the TensorRT int8
# (rest fp16, slow on CPUs) from the default export; never a portable fp16 (no fast fp16 on a CPU)
CPU_INT8, CPU_INT8_FROM = "portable", DEFAULT_TARGET


def cpu_int8_too(opts: PipelineOptions) -> bool:
    """Whether the run also writes the CPU's int8, ``model.portable.int8.onnx``, quantised from
    ``model.onnx`` with ``target=portable``: where int8 is made for the tensorrt target, whose int8
    keeps its rest in fp16 for TensorRT, and the portable target (whose int8 it is) is not run."""
    return "int8" in opts.precisions and CPU_INT8_FROM in opts.targets and CPU_INT8 not in opts.targets


def _build_batch(opts: PipelineOptions) -> str:
    return f"1,{max(opts.bench_batch_sizes)},{max(max(opts.bench_batch_sizes), 64)}"


def _export(ctx: Context, x, decoded, parity_set, *, target: str, form: str | None = None) -> Outcome:
    """The export for ``target``; ``form``: a pixel form's (:data:`PIXEL_FORMS`), ``model.FORM.onnx``,
    verified on the parity images' raw pixels."""
    fp32 = ctx.work / f"{EXPORT_TARGETS[target].stem}{'.' + form if form else ''}.onnx"
    input_format, output_format = PIXEL_FORMS[form] if form else (ExportOptions.input_format,
                                                                  ExportOptions.output_format)  # fmt: skip
    exp = export_checkpoint(None, fp32, ExportOptions(op_form=ctx.opts.op_form, target=target, images=len(x),
                                                      require_aft=ctx.opts.require_aft, input_format=input_format,
                                                      output_format=output_format),
                            loaded=ctx.loaded, verification=(x, decoded.source, parity_set.images), also_check=ctx.also,
                            **_QUIET)  # fmt: skip
    return Outcome(Made("export", target, fp32, exp.to_dict(), exp.check_report, exp, fp32, _purpose(fp32)),
                   f"{exp.nodes_final} nodes ({exp.aft_nodes} com.aft), onnxsim {exp.simplify['nodes_before']}->"
                   f"{exp.simplify['nodes_after']}, verify max abs {exp.parity.max_abs:.2e}")  # fmt: skip


def _quantize(ctx: Context, exported: Made, previous: Made | None = None, *, precision: str,
              target: str | None = None) -> Outcome:  # fmt: skip
    """A quantisation of ``exported``; ``target``: for another export target than the file's (the
    CPU int8 of the default export), named after that target's files."""
    stem = EXPORT_TARGETS[target].stem if target else exported.path.name.removesuffix(".onnx")
    path = exported.path.with_name(f"{stem}.{precision}.onnx")
    calibration = previous.result.calibration if previous else None
    fp32_logits = previous.result.fp32_logits if previous and previous.fp32 == exported.path else None
    q = quantize_model(exported.path, path, ctx.calib, QuantizeOptions(precision=precision,
                                                                       images=ctx.opts.calib_images, target=target),
                       progress=False, cache_writes=ctx.cache_writes, calibration=calibration,
                       fp32_logits=fp32_logits, also_check=ctx.also, **_QUIET)  # fmt: skip
    a = q.agreement or {}
    return Outcome(Made("quantize", path.name, path, q.to_dict(), q.check_report, q, exported.path, _purpose(path)),
                   f"top-1 agreement with fp32 on {a.get('images', 0)} calibration images "
                   f"{a.get('top1_agreement', float('nan')):.2f}%"
                   + (f"; {len(q.nonfinite)} fp16 values took NaN/Inf" if q.nonfinite else ""))  # fmt: skip


def _onnx_files(ctx: Context, *made: Made) -> Outcome:
    return Outcome(list(made))


def _trt_check(ctx: Context, onnx: list[Made]) -> Outcome:
    # the reports export and quantise made of what they wrote (the same graphs, in memory)
    reports = [m.report or check_model(m.path) for m in onnx]
    checks = {m.path.name: r.to_dict() for m, r in zip(onnx, reports)}
    verdict = Verdict.combine(*(r.verdict for r in reports))
    versions = sorted({v for r in checks.values() for v in r["checked"]}, key=parse_version)
    return Outcome(checks, "; ".join(verdict.reasons) if not verdict.ok else
                   f"every artifact passes the offline rules of the TensorRT versions it is for ({', '.join(versions)}; "
                   f"no TensorRT ran)")  # fmt: skip


def _verification_commands(ctx: Context, onnx: list[Made], x, parity_set) -> Outcome:
    """Each file's trtexec and polygraphy script, its real data the parity images as the file takes
    them: ``verify_inputs.npy`` normalised, ``verify_inputs.FORMAT.npy`` a pixel file's pixels."""
    inputs = ctx.work / "verify_inputs.npy"
    np.save(inputs, x)  # the parity images, for polygraphy's real-data comparison
    meta = ctx.loaded[1]  # the checkpoint's normalisation, which a normal file's inputs were made with
    for m in onnx:
        form = _input_format(m.path)
        given = inputs
        if takes_pixels(form):
            given = ctx.work / f"verify_inputs.{form}.npy"
            if not given.exists():
                np.save(given, model_input(parity_set.images, meta.mean, meta.std, form))
        write_verification_commands(m.path, batch=_build_batch(ctx.opts), inputs=given)
    return Outcome(inputs, f"{len(onnx)} scripts (<artifact>.verify.sh: trtexec and polygraphy per TensorRT generation)")


def _input_format(path: Path) -> str:
    """What an ONNX file the run wrote takes (its graph's input format)."""
    return graph_ends(load_onnx(path, external_data=False)).takes.name


def _no_engines(ctx: Context, onnx: list[Made]) -> Outcome:
    return Outcome(Engines(), ctx.why_not, "skipped")


def _engines(ctx: Context, onnx: list[Made]) -> Outcome:
    out = Engines(records={})
    for m in onnx:
        built = build_engine(m.path, engine_name(m.path, ctx.library),
                             BuildOptions(batch_profile=_build_batch(ctx.opts), library=ctx.library), checked=m.report,
                             **_QUIET)  # fmt: skip
        engine = Path(built.engine)
        out.records[engine.name] = {k: built.manifest[k] for k in ("library", "library_version", "precision",
                                                                    "compute_capabilities", "build_seconds", "network")}
        out.files.append(engine)
    for engine in out.files:  # made once here; one that cannot run here stays out of the side-by-side runs
        try:
            out.runners[str(engine)] = TrtRunner(str(engine), threads=ctx.opts.threads)
        except RuntimeMissing as exc:
            why = str(exc)
            out.not_run[str(engine)] = f"skipped, {why}" if why.startswith("no GPU") else f"skipped: {why}"
        except AFTExportError as exc:  # e.g. a TensorRT-RTX engine on a GPU it does not target (Hopper)
            out.not_run[str(engine)] = f"skipped, not for this GPU: {exc}"
    detail = f"{len(out.files)} {title_of(ctx.library)} engines built"
    if out.not_run:
        detail += ", not run: " + ("no GPU here" if all("no GPU" in r for r in out.not_run.values())
                                   else "; ".join(sorted(set(out.not_run.values()))))  # fmt: skip
    return Outcome(out, detail)


def _artifacts(onnx: list[Made], engines: Engines) -> list[Path]:
    return [m.path for m in onnx] + engines.files


def _runnable(onnx: list[Made], engines: Engines) -> list[Path]:
    return [a for a in _artifacts(onnx, engines) if str(a) not in engines.not_run]


def _skipped_note(engines: Engines) -> str:
    return f"; {len(engines.not_run)} engines skipped, no GPU" if engines.not_run else ""


def _deepstream(ctx: Context, onnx: list[Made]) -> Outcome:
    """RUN/deepstream: an nvinfer config per DeepStream file, and the labels file."""
    files = [str(m.path) for m in onnx if f".{FORM_TAG}." in m.path.name]
    result = write_deepstream(files, str(ctx.work / "deepstream"))  # each for the oldest release that reads it
    return Outcome(result.to_dict(), f"{ctx.final / 'deepstream'}: {len(result.configs)} nvinfer configs and labels.txt "
                                     f"(DeepStream cannot run here)")  # fmt: skip


def _triton(ctx: Context, onnx: list[Made], engines: Engines) -> Outcome:
    repo = _triton_repository(_artifacts(onnx, engines), ctx.work)
    return Outcome(repo, f"{ctx.final / 'triton'}: " + ", ".join(repo.models))


def _runners(ctx: Context, onnx: list[Made], engines: Engines) -> Outcome:
    """Every runner once, shared by parity, eval and bench."""
    runners = {str(m.path): OrtRunner(str(m.path), threads=ctx.opts.threads) for m in onnx}
    runners[str(ctx.ckpt)] = TorchRunner(str(ctx.ckpt), threads=ctx.opts.threads, loaded=ctx.loaded)
    runners.update(engines.runners)
    return Outcome(runners)


def _parity(ctx: Context, onnx: list[Made], engines: Engines, runners: dict, parity_set) -> Outcome:
    runnable = _runnable(onnx, engines)
    reference_logits = _reference_logits(onnx)
    result = run_parity(str(ctx.ckpt), [str(a) for a in runnable], parity_set, images=len(parity_set),
                        overrides=list(ctx.opts.tolerances), reference=runners[str(ctx.ckpt)], keep_differences=True,
                        runners=runners, reference_logits=reference_logits)  # fmt: skip
    run = ParityRun(result.with_skipped(engines.not_run), {Path(a).name: d for a, d in result.differences.items()})
    failed = run.failed
    return Outcome(run,
                   ("FAILED: " + ", ".join(failed)) if failed else f"all {len(runnable)} artifacts run within tolerance"
                   + _skipped_note(engines), "failed" if failed else "ok")  # fmt: skip


def _eval(ctx: Context, onnx: list[Made], engines: Engines, runners: dict, decoded) -> Outcome:
    ev = _evaluate(ctx.ckpt, _runnable(onnx, engines), decoded, runners, ctx.opts)
    ev += [{"artifact": a, "status": "skipped", "reason": why} for a, why in engines.not_run.items()]
    return Outcome(ev, f"{ev[0]['images']} images from {ctx.opts.data}" + _skipped_note(engines))


def _reference_logits(onnx: list[Made]):
    """PyTorch's logits on the parity images, from the export's verification (the same for every target)."""
    return next((m.result.reference_logits for m in onnx
                 if m.kind == "export" and m.result.reference_logits is not None), None)  # fmt: skip


def _deploy(ctx: Context, onnx: list[Made], engines: Engines, runners: dict, decoded, parity_set,
            parity: ParityRun, ev: list[dict]) -> Outcome:  # fmt: skip
    """Every file on every runtime here (aft_export.verify.deploy): ONNX Runtime's and PyTorch's parity and
    top-1 are the parity and eval steps' own, the other runtimes' are measured here, and every row is
    timed in interleaved rounds (the report's latency columns are ONNX Runtime's and PyTorch's rows)."""
    opts = ctx.opts
    ckpt = str(ctx.ckpt)
    by_path = {r["artifact"]: r for r in ev}
    measured = {"torch": Measured(eval={ckpt: by_path[ckpt]}),
                "onnxruntime": Measured(parity={r.artifact: r for r in parity.rows if is_onnx(r.artifact)},
                                        eval={p: r for p, r in by_path.items() if is_onnx(p)})}  # fmt: skip
    libraries = {str(e): library_of((engines.records or {}).get(e.name, {}).get("library")).name for e in engines.files}
    for lib in set(libraries.values()):  # the engines' parity and top-1, where they ran
        measured[lib] = Measured(parity={r.artifact: r for r in parity.rows if r.artifact in libraries},
                                 eval={p: r for p, r in by_path.items() if p in libraries})  # fmt: skip

    def make(artifact: str, runtime: str):
        if artifact in runners and runtime in (DEFAULT_BACKEND, REFERENCE, *libraries.values()):  # made already
            return runners[artifact]
        if artifact in engines.not_run:
            raise RuntimeMissing(engines.not_run[artifact])
        return make_runner(artifact, runtime, threads=opts.threads)

    purposes = {str(ctx.work / name): p["for"] for name, p in _purposes(onnx, engines).items()}
    purposes[ckpt] = "PyTorch"
    table = deploy_table(runners[ckpt], [str(a) for a in _artifacts(onnx, engines)], decoded,
                         runtimes=runtimes_here(has_gpu()), make_runner=make,
                         batches=tuple(opts.bench_batch_sizes), warmup=BenchOptions.warmup, iters=opts.bench_iters,
                         threads=opts.threads, parity_set=parity_set, overrides=list(opts.tolerances),
                         reference_logits=_reference_logits(onnx),
                         parity_failures="unverified",
                         data_label=opts.data, engine_libraries=libraries, purposes=purposes, log=_QUIET["log"])  # fmt: skip
    bn = table.bench_report(("torch", "onnxruntime", *sorted(set(libraries.values()))))
    bn["skipped"] += [{"artifact": a, "batch": None, "reason": why} for a, why in engines.not_run.items()]
    said = []
    for device in ("cpu", "gpu"):
        for by in ("latency", "throughput"):
            best = table.best(device, by)
            if best:
                said.append(f"{device} {by}: {best.artifact} on {best.runtime}")
    ran = sum(r.status == "ok" for r in table.rows)
    return Outcome(DeployRun(table, bn), f"{ran} of {len(table.rows)} file/runtime rows ran, batches "
                   f"{list(opts.bench_batch_sizes)}, {opts.bench_iters} runs each; fastest that passes: "
                   + ("; ".join(said) or "none") + _skipped_note(engines),
                   "ok" if table.verdict.passed else "failed")  # fmt: skip


def _report(ctx: Context, steps: list[Step], onnx: list[Made], trt_check: dict, engines: Engines,
            parity: ParityRun, ev: list[dict], deploy: DeployRun) -> Outcome:  # fmt: skip
    """manifest.json, report.md and the plots; the run's result."""
    ckpt, opts, work, (_, meta) = ctx.ckpt, ctx.opts, ctx.work, ctx.loaded
    artifacts = _artifacts(onnx, engines)
    results = {"export": {m.key: m.record for m in onnx if m.kind == "export"},
               "quantize": {m.key: m.record for m in onnx if m.kind == "quantize"}, "trt_check": trt_check,
               **({"engines": engines.records} if engines.records is not None else {}),
               "parity": parity.result.to_dict(), "eval": ev, "bench": deploy.bench, "files": _purposes(onnx, engines),
               "deploy": deploy.table.to_dict()}  # fmt: skip
    summary = summary_rows(ckpt, artifacts, results)
    (work / "plots").mkdir()
    for name, svg in {**pipeline_plots(summary, parity.differences, opts.data, opts.bench_batch_sizes),
                      **deploy_plots(results["deploy"])}.items():
        atomic_write_text(work / "plots" / name, svg)
    not_run = {Path(a).name: why for a, why in engines.not_run.items()}
    unverified = run_unverified(not_run, parity.rows, onnx)
    verdict = Verdict.combine(Verdict.of([f"{name} fails parity" for name in parity.failed],
                                         [f"{name}: {why}" for name, why in unverified.items()]),
                              deploy.table.verdict)  # fmt: skip
    result = PipelineResult(str(ctx.final), steps, summary, unverified, verdict, results["deploy"],
                            tuple(dict.fromkeys(opts.bench_batch_sizes)))
    manifest = {
        "tool": f"aft-export {__version__}", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": _versions(), "options": {**asdict(opts), "calib": ctx.calib},
        "inputs": {"checkpoint": str(ckpt), "checkpoint_sha256": meta.sha256, "model": meta.model_name,
                   "data": opts.data, "calibration": next((q["recipe"]["calibration"] for q in
                                                          results["quantize"].values()), None)},
        "artifacts": {a.name: {"sha256": sha256_file(a), "bytes": a.stat().st_size} for a in artifacts},
        "environment": _environment(),
        "steps": [asdict(x) for x in steps], "summary": summary, "passed": result.passed,
        "unverified": unverified, "verdict": verdict.to_dict(), "results": results,
    }  # fmt: skip
    # a file aft-export ships (the default checkpoint and recipe) is recorded by its name, not by where it is installed
    names = {str(path): name for path in (ckpt, ctx.calib) if (name := bundled_name(path))}
    manifest = _named(manifest, names)
    atomic_write_text(work / "manifest.json", json.dumps(manifest, indent=2, default=_json_default))
    atomic_write_text(work / "report.md", report_markdown(names.get(str(ckpt), ckpt), meta, opts, steps, summary,
                                                          verdict, ctx.final,
                                                          ctx.calib, not_run, unverified, results.get("engines"),
                                                          results["deploy"]))  # fmt: skip
    return Outcome(result, f"{ctx.final}/report.md")


def _named(value, names: dict[str, str]):
    """``value`` (the manifest) with every text that is a key of ``names`` replaced by its name."""
    if isinstance(value, dict):
        return {k: _named(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_named(v, names) for v in value]
    return names.get(str(value), value) if isinstance(value, (str, Path)) else value


def _purpose(path: Path) -> dict:
    """What the ONNX file just written is for, and its compute nodes per precision (from its graph)."""
    return file_purpose(load_onnx(path, external_data=False))


def _purposes(onnx: list[Made], engines: Engines) -> dict[str, dict]:
    """What each file is for and what its compute runs in, by name: an ONNX file's as its step
    found them, an engine's compute layers from its parsed network."""
    out = {m.path.name: m.purpose for m in onnx if m.purpose is not None}
    for name, record in (engines.records or {}).items():
        out[name] = {"for": engine_made_for(record), "compute": (record.get("network") or {}).get("compute") or {}}
    return out


def run_unverified(not_run: dict[str, str], parity: Iterable[ParityRow], onnx: list[Made]) -> dict[str, str]:
    """What the run did not (fully) verify, by artifact, and why: an engine not run here, an
    artifact parity skipped, and each stage's own verdict (the offline rules of a targeted
    TensorRT that refuse or warn, fp16 values that took NaN/Inf)."""
    unverified = dict(not_run)
    for r in parity:
        if r.status == "skipped":
            unverified.setdefault(Path(r.artifact).name, "skipped by parity")
    for m in onnx:
        if not m.result.verdict.ok:
            unverified.setdefault(m.path.name, "; ".join(m.result.verdict.reasons))
    return unverified


def _triton_repository(artifacts: list[Path], work: Path):
    """RUN/triton: the run's ONNX files (onnxruntime_onnx) and standard TensorRT engines
    (tensorrt_plan, named NAME_trt beside the ONNX file they were built from); TensorRT-RTX
    engines are left out (Triton's tensorrt_plan backend does not load them), and so are the
    DeepStream files (probabilities out: Triton's models give logits and top-k)."""
    served, names = [], {}
    for a in artifacts:
        if f".{FORM_TAG}." in a.name:
            continue
        if is_onnx(a):
            served.append(a)
            continue
        manifest = Path(str(a) + ".json")
        if is_rtx_engine(a, json.loads(manifest.read_text()) if manifest.is_file() else {}):
            continue
        served.append(a)
        names[str(a)] = model_name(a) + "_trt"
    return write_repository([str(a) for a in served], work / "triton", TritonRepoOptions(), names=names)


def _evaluate(ckpt, artifacts, decoded, runners: dict, opts: PipelineOptions) -> list[dict]:
    """Top-1/top-5 of the checkpoint and every artifact: side by side on one thread each where
    :func:`~aft_export.verify.evaluate.side_by_side` says so (the checkpoint's model as loaded);
    an explicit ``threads`` keeps them one after the other on the runners made for it."""
    paths = [str(ckpt)] + [str(a) for a in artifacts]
    reference = runners[str(ckpt)]
    plan = None if opts.threads else side_by_side(paths, "onnxruntime", loaded=(reference.model, reference.meta))
    chosen, workers = plan or (runners, 1)
    return evaluate_artifacts(paths, decoded, runners=chosen, workers=workers)


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")
