"""The whole job in one call: export, simplify, quantise, check, engines, parity, eval, bench.

Writes a run directory::

    RUN/model.onnx, model.fp16.onnx, model.int8.onnx   the artifacts (model.trt8.* for --target tensorrt8, model.portable.* for portable)
    RUN/model*.engine + .json   TensorRT engines where TensorRT and a GPU exist, else TensorRT-RTX
                          engines (model*.rtx.engine) where it is installed: built ahead of time on
                          the CPU, and reported *built, not run* when no GPU is here
    RUN/<artifact>.verify.sh  trtexec/polygraphy command lines to check each with NVIDIA's tools
    RUN/manifest.json     tool versions, options, input hashes, every step and result
    RUN/report.md         the summary table and the plots, for people
    RUN/triton/           with --triton-repo: a Triton model repository of the artifacts
    RUN/plots/*.svg       error histograms, accuracy and latency per artifact

Data moves once: the checkpoint is loaded once, the labelled set decoded once, each
artifact's runner made once and shared by parity, eval and bench, and the plots use
the differences parity measured. Stages hand on what they already hold: the calibration
set is decoded once for every quantisation (and the fp32 logits on it computed once per
fp32 file), each artifact is checked by the offline TensorRT check once, when it is made
(the report also covers the engine library's column, so the check step and the build
reuse it), and parity compares with PyTorch's logits from the export's verification. The directory is built under a temporary name and
renamed when complete; a run that stops on bad input leaves nothing behind. A parity
failure is a result, not an error: the run completes, the report says which artifact
failed, and the exit code is 1. An engine that cannot run here (no GPU) stays out of the
side-by-side parity, eval and bench runs and is reported *skipped, no GPU*, never passed; the
run then exits 3 (nothing failed, something was not verified).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from aft_export.bench import bench
from aft_export.build import build_engine, offline_column
from aft_export.compare import tolerances_with
from aft_export.data import normalize
from aft_export.datasets import is_named, load_labelled
from aft_export.errors import AFTExportError
from aft_export.evaluate import evaluate_artifacts
from aft_export.export.exporter import TARGETS, ExportOptions, export_checkpoint
from aft_export.fileio import atomic_directory, atomic_write_text, claim_output, sha256_file
from aft_export.nvtools import write_verification_commands
from aft_export.parity import run_parity
from aft_export.quantize import QuantizeOptions, apply_recipe, quantize_model, write_cache_entries
from aft_export.report import bars, log_histograms, summary_table
from aft_export.options import BenchOptions, PipelineOptions, TritonRepoOptions
from aft_export.resources import default_calibration, default_checkpoint
from aft_export.errors import RuntimeMissing
from aft_export.runners import OrtRunner, TorchRunner, TrtRunner
from aft_export.sources import CheckpointSource, open_source
from aft_export.trt import (INSTALL_HINT, RTX, RTX_INSTALL_HINT, BuildOptions, engine_name, environment, import_library,
                             installed_libraries)  # fmt: skip
from aft_export.trtcheck import check_model
from aft_export.trtcheck.versions import parse_version
from aft_export.tritonrepo import write_repository
from aft_export.tritonspec import is_rtx_engine, model_name
from aft_export.version import __version__


@dataclass
class Step:
    name: str
    status: str = "ok"  # ok | skipped | failed
    seconds: float = 0.0
    detail: str = ""


@dataclass
class PipelineResult:
    run_dir: str
    passed: bool
    steps: list[Step] = field(default_factory=list)
    summary: list[dict] = field(default_factory=list)
    unverified: dict[str, str] = field(default_factory=dict)  # artifact -> why it was not (fully) verified


def _versions() -> dict:
    out = {"aft-export": __version__, "python": platform.python_version(), "platform": platform.platform()}
    for name in ("torch", "onnx", "onnxruntime", "onnxsim", "onnxscript", "numpy", "tensorrt"):
        try:
            from importlib.metadata import version

            out[name] = version(name if name != "onnxruntime" else _ort_dist())
        except Exception:  # noqa: BLE001 - not installed
            out[name] = None
    out["tensorrt_rtx"] = environment()["tensorrt_rtx"]
    return out


def _ort_dist() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("onnxruntime", "onnxruntime-gpu"):
        try:
            version(dist)
            return dist
        except PackageNotFoundError:
            continue
    return "onnxruntime"


def _environment() -> dict:
    return {**environment(), "cpu_count": os.cpu_count(), "machine": platform.machine()}


def engine_library(installed, gpu: bool) -> tuple[str | None, str]:
    """The library the engine step builds with, or None and why not (one line). Standard TensorRT
    where it is installed and a GPU is visible (it builds on the GPU the engine is for); else
    TensorRT-RTX where it is installed (it builds ahead of time on the CPU, for RTX GPUs)."""
    if "tensorrt" in installed and gpu:
        return "tensorrt", ""
    if RTX in installed:
        return RTX, ""
    if "tensorrt" in installed:
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


def tensorrt_status() -> str | None:
    """None when an engine can be built here; otherwise why not, in one line."""
    return engine_library(installed_libraries(), environment().get("gpu") is not None)[1] or None


def run_pipeline(checkpoint=None, options: PipelineOptions | None = None, log=print) -> PipelineResult:
    """Run every stage on ``checkpoint`` (default: the bundled zoo model), a checkpoint path
    or any model source (:mod:`aft_export.sources`); see the module doc."""
    opts = options or PipelineOptions()
    source = open_source(checkpoint if checkpoint else default_checkpoint())
    ckpt = Path(source.path)  # the file that stands for the model: names, sizes, the reference's key
    if not ckpt.is_file() and not isinstance(source, CheckpointSource):  # --model-def MODULE:FACTORY, no weights
        raise AFTExportError(f"the pipeline names its run and reference after a file: {source} has none; give "
                             f"--weights (or a model spec file)")  # fmt: skip
    if not ckpt.is_file():
        raise AFTExportError(f"checkpoint {ckpt} does not exist" + ("; check the path" if checkpoint else
                             "; pass one: aft-export pipeline CKPT"))  # fmt: skip
    for p in opts.precisions:
        if p not in ("fp16", "int8"):
            raise AFTExportError(f"unknown precision {p!r}; choose fp16 and/or int8")
    if not opts.targets or any(t not in TARGETS for t in opts.targets):
        raise AFTExportError(f"export targets {list(opts.targets)}: choose from {list(TARGETS)}")
    tolerances_with(list(opts.tolerances))  # bad overrides fail before any work
    calib_source, _ = apply_recipe(opts.calib or str(default_calibration()), QuantizeOptions())  # a bad recipe too
    if not is_named(calib_source) and not Path(calib_source).exists():
        raise AFTExportError(f"calibration source {calib_source} does not exist; give --calib IMAGES or a recipe "
                             f"(calibration/cifar10.json)")  # fmt: skip
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    final = Path(opts.out) if opts.out else Path("runs") / f"{ckpt.stem}-{stamp}"
    # claimed before any work: never an input, and one run at a time (the second fails here)
    with claim_output(final, inputs=[*source.inputs, opts.calib, opts.data], directory=True):
        loaded = source.load(log)  # once, for every stage; fails early on a bad model
        cache_writes: list = []  # calibration ranges enter the cache once the run is complete
        with atomic_directory(final) as work:
            result = _run(ckpt, loaded, opts, work, final, log, cache_writes)
        write_cache_entries(cache_writes)
        return result


def _run(ckpt, loaded, opts: PipelineOptions, work: Path, final: Path, log, cache_writes: list) -> PipelineResult:
    _, meta = loaded
    calib = opts.calib or str(default_calibration())
    steps: list[Step] = []
    started: dict[int, float] = {}
    results: dict = {}
    quiet = dict(log=lambda *a: None)

    def step(name):
        s = Step(name)
        steps.append(s)
        started[id(s)] = time.perf_counter()
        log(f"[{len(steps)}] {name} ...")
        return s

    def done(s, detail=""):
        s.seconds = round(time.perf_counter() - started[id(s)], 2)
        s.detail = detail
        log(f"    {s.status} in {s.seconds:.1f}s" + (f": {detail}" if detail else ""))

    info = TorchRunner(str(ckpt), loaded=loaded).info
    decoded = load_labelled(opts.data, info.input_size[1], limit=opts.eval_limit)  # the one decode
    parity_set = decoded.subset(opts.parity_images)
    x = normalize(parity_set.images, info.mean, info.std).numpy()
    artifacts = []
    results["export"], results["quantize"] = {}, {}
    # handed on between the stages, so that each thing is done once per run: the check report
    # per artifact (which also covers the build's parser), the decoded calibration set, and the
    # fp32 logits on it per fp32 file
    column = _build_column(engine_library(installed_libraries(), environment().get("gpu") is not None)[0])
    also = (column,) if column else ()
    reports: dict[str, object] = {}
    calibration = reference_logits = None
    for target in opts.targets:
        stem = {"tensorrt": "model", "tensorrt8": "model.trt8", "portable": "model.portable"}[target]
        label = "" if target == "tensorrt" else f" {target}"
        s = step(f"export{label}")
        fp32 = work / f"{stem}.onnx"
        exp = export_checkpoint(None, fp32, ExportOptions(op_form=opts.op_form, target=target,
                                                          verify_images=len(x), require_aft=opts.require_aft),
                                loaded=loaded, verification=(x, decoded.source), also_check=also, **quiet)  # fmt: skip
        results["export"][target] = exp.to_dict()
        if reference_logits is None:  # PyTorch on the parity images, for parity (the same for every target)
            reference_logits = exp.reference_logits
        reports[fp32.name] = exp.check_report
        fp32_logits = None
        done(s, f"{exp.nodes_final} nodes ({exp.aft_nodes} com.aft), onnxsim "
                f"{exp.simplify['nodes_before']}->{exp.simplify['nodes_after']}, verify max abs "
                f"{exp.parity['max_abs']:.2e}")  # fmt: skip
        artifacts.append(fp32)
        for precision in opts.precisions:
            s = step(f"quantize {precision}{label}")
            path = work / f"{stem}.{precision}.onnx"
            q = quantize_model(fp32, path, calib, QuantizeOptions(precision=precision, count=opts.calib_images),
                               progress=False, cache_writes=cache_writes, calibration=calibration,
                               fp32_logits=fp32_logits, also_check=also, **quiet)  # fmt: skip
            calibration, fp32_logits = q.calibration, q.fp32_logits
            reports[path.name] = q.check_report
            results["quantize"][path.name] = q.to_dict()
            artifacts.append(path)
            a = q.agreement or {}
            done(s, f"top-1 agreement with fp32 on {a.get('images', 0)} calibration images "
                    f"{a.get('top1_agreement', float('nan')):.2f}%"
                    + (f"; {len(q.nonfinite)} fp16 values took NaN/Inf" if q.nonfinite else ""))  # fmt: skip

    s = step("tensorrt check")
    # the reports export and quantise made of what they wrote (the same graphs, in memory)
    results["trt_check"] = {a.name: (reports.get(a.name) or check_model(a)).to_dict() for a in artifacts}
    refused = {n: [v for v, st in r["status"].items() if st == "refuses"] for n, r in results["trt_check"].items()}
    refused = {n: vs for n, vs in refused.items() if vs}
    versions = sorted({v for r in results["trt_check"].values() for v in r["checked"]}, key=parse_version)
    done(s, ("refused: " + "; ".join(f"{n} by TensorRT {', '.join(vs)}" for n, vs in refused.items())) if refused
         else f"every artifact accepted by the TensorRT versions it is for ({', '.join(versions)})")  # fmt: skip

    s = step("verification commands")
    build_batch = f"1,{max(opts.bench_batches)},{max(max(opts.bench_batches), 64)}"
    inputs = work / "verify_inputs.npy"
    np.save(inputs, x)  # the parity images, for polygraphy's real-data comparison
    for a in artifacts:
        write_verification_commands(a, batch=build_batch, inputs=inputs)
    done(s, f"{len(artifacts)} scripts (<artifact>.verify.sh: trtexec and polygraphy per TensorRT generation)")

    s = step("tensorrt engines")
    library, why_not = engine_library(installed_libraries(), environment().get("gpu") is not None)
    engines, not_run, engine_runners = [], {}, {}
    if library is None:
        s.status = "skipped"
        done(s, why_not)
    else:
        results["engines"] = {}
        for onnx_file in list(artifacts):
            built = build_engine(onnx_file, engine_name(onnx_file, library),
                                 BuildOptions(batch=build_batch, library=library), checked=reports.get(onnx_file.name),
                                 **quiet)  # fmt: skip
            engine = Path(built.engine)
            m = built.manifest
            results["engines"][engine.name] = {k: m[k] for k in ("library", "library_version", "precision",
                                                                 "compute_capabilities", "build_seconds", "network")}
            engines.append(engine)
        artifacts += engines
        for engine in engines:  # made once here; one that cannot run here stays out of the side-by-side runs
            try:
                engine_runners[str(engine)] = TrtRunner(str(engine), threads=opts.threads)
            except RuntimeMissing as exc:
                why = str(exc)
                not_run[str(engine)] = f"skipped, {why}" if why.startswith("no GPU") else f"skipped: {why}"
            except AFTExportError as exc:  # e.g. a TensorRT-RTX engine on a GPU it does not target (Hopper)
                not_run[str(engine)] = f"skipped, not for this GPU: {exc}"
        title = "TensorRT-RTX" if library == RTX else "TensorRT"
        detail = f"{len(engines)} {title} engines built"
        if not_run:
            detail += ", not run: " + ("no GPU here" if all("no GPU" in r for r in not_run.values())
                                       else "; ".join(sorted(set(not_run.values()))))  # fmt: skip
        done(s, detail)
    runnable = [a for a in artifacts if str(a) not in not_run]

    if opts.triton_repo:
        s = step("triton repository")
        repo = _triton_repository(artifacts, work)
        done(s, f"{final / 'triton'}: " + ", ".join(repo.models))

    # every runner once, shared by parity, eval and bench
    reference = TorchRunner(str(ckpt), threads=opts.threads, loaded=loaded)
    runners = {str(a): OrtRunner(str(a), threads=opts.threads) for a in artifacts if a.suffix == ".onnx"}
    runners[str(ckpt)] = reference
    runners.update(engine_runners)

    skipped_note = f"; {len(not_run)} engines skipped, no GPU" if not_run else ""
    s = step("parity")
    par = run_parity(str(ckpt), [str(a) for a in runnable], parity_set, images=len(parity_set),
                     overrides=list(opts.tolerances), reference=reference, keep_differences=True,
                     runners=runners, reference_logits=reference_logits)  # fmt: skip
    par["artifacts"] += [{"artifact": a, "status": "skipped", "reason": why, "passed": None} for a, why in not_run.items()]
    par["skipped"] += len(not_run)
    par["passed"] = par["passed"] and not not_run
    diffs = {Path(a).name: d for a, d in par.pop("differences").items()}
    results["parity"] = par
    failed = [Path(r["artifact"]).name for r in par["artifacts"] if r["status"] == "fail"]
    s.status = "failed" if failed else "ok"
    done(s, ("FAILED: " + ", ".join(failed)) if failed else f"all {len(runnable)} artifacts run within tolerance"
         + skipped_note)  # fmt: skip

    s = step("eval")
    ev = _evaluate(ckpt, runnable, decoded, runners, opts)
    ev += [{"artifact": a, "status": "skipped", "reason": why} for a, why in not_run.items()]
    results["eval"] = ev
    done(s, f"{ev[0]['images']} images from {opts.data}" + skipped_note)

    s = step("bench")
    bn = bench([str(ckpt)] + [str(a) for a in runnable], list(opts.bench_batches), warmup=BenchOptions.warmup,
               iters=opts.bench_iters, threads=opts.threads, runners=runners)  # fmt: skip
    bn["skipped"] += [{"artifact": a, "batch": None, "reason": why} for a, why in not_run.items()]
    results["bench"] = bn
    done(s, f"batches {list(opts.bench_batches)}, {opts.bench_iters} runs each" + skipped_note)

    s = step("report")
    summary = _summary(ckpt, artifacts, results, work)
    _write_plots(work, summary, diffs, opts)
    passed = not failed
    unverified = {Path(a).name: why for a, why in not_run.items()}  # what was not (fully) verified, and why
    for r in results["parity"]["artifacts"]:
        if r["status"] == "skipped":
            unverified.setdefault(Path(r["artifact"]).name, "skipped by parity")
    for r in summary:
        if "(warn)" in r["trt_check"] or "refused" in r["trt_check"]:
            unverified.setdefault(r["artifact"], f"TensorRT check: {r['trt_check']}")
    manifest = {
        "tool": f"aft-export {__version__}", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": _versions(), "options": {**asdict(opts), "calib": calib},
        "inputs": {"checkpoint": str(ckpt), "checkpoint_sha256": meta.sha256, "model": meta.model_name,
                   "data": opts.data, "calibration": next((q["recipe"]["calibration"] for q in
                                                          results["quantize"].values()), None)},
        "artifacts": {a.name: {"sha256": sha256_file(a), "bytes": a.stat().st_size} for a in artifacts},
        "environment": _environment(),
        "steps": [asdict(x) for x in steps], "summary": summary, "passed": passed,
        "unverified": unverified, "results": results,
    }  # fmt: skip
    atomic_write_text(work / "manifest.json", json.dumps(manifest, indent=2, default=_json_default))
    atomic_write_text(work / "report.md", _report_md(ckpt, meta, opts, steps, summary, passed, final, calib,
                                                     {Path(a).name: why for a, why in not_run.items()},
                                                     unverified))  # fmt: skip
    done(s, f"{final}/report.md")
    return PipelineResult(str(final), passed, steps, summary, unverified)


def _triton_repository(artifacts: list[Path], work: Path):
    """RUN/triton: the run's ONNX files (onnxruntime_onnx) and standard TensorRT engines
    (tensorrt_plan, named NAME_trt beside the ONNX file they were built from); TensorRT-RTX
    engines are left out (Triton's tensorrt_plan backend does not load them)."""
    served, names = [], {}
    for a in artifacts:
        if a.suffix == ".onnx":
            served.append(a)
            continue
        manifest = Path(str(a) + ".json")
        if is_rtx_engine(a, json.loads(manifest.read_text()) if manifest.is_file() else {}):
            continue
        served.append(a)
        names[str(a)] = model_name(a) + "_trt"
    return write_repository([str(a) for a in served], work / "triton", TritonRepoOptions(), names=names)


def _evaluate(ckpt, artifacts, decoded, runners: dict, opts: PipelineOptions) -> list[dict]:
    """Top-1/top-5 of the checkpoint and every artifact. With the default thread count on
    a CPU of several cores, the artifacts run side by side on one thread each: these
    small models run about 1.4x more images per CPU second on one thread than on two
    (aft_conv_cifar, 2 cores); an explicit --threads keeps them one after the other."""
    paths = [str(ckpt)] + [str(a) for a in artifacts]
    cores = os.cpu_count() or 1
    onnx_only = all(Path(p).suffix == ".onnx" for p in paths[1:])
    if opts.threads or cores < 2 or not onnx_only:
        return evaluate_artifacts(paths, decoded, runners=runners)
    per = max(1, cores // min(cores, len(paths)))
    single = {p: OrtRunner(p, threads=per) for p in paths[1:]}
    reference = runners[str(ckpt)]  # the same model in memory, at the same thread count as the others
    single[str(ckpt)] = TorchRunner(str(ckpt), threads=per, loaded=(reference.model, reference.meta))
    return evaluate_artifacts(paths, decoded, runners=single, workers=min(cores, len(paths)))


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


def _summary(ckpt, artifacts, results, work) -> list[dict]:
    by_eval = {Path(r["artifact"]).name: r for r in results["eval"]}
    by_parity = {Path(r["artifact"]).name: r for r in results["parity"]["artifacts"]}
    bench_rows = results["bench"]["rows"]
    rows = []
    torch_top1 = by_eval[ckpt.name]["top1"]
    for path in [ckpt] + list(artifacts):
        name = path.name
        ev = by_eval[name]
        if ev.get("status") == "skipped":  # built, not run: no metric is made up for it
            m = results.get("engines", {}).get(name, {})
            rows.append({"artifact": name, "backend": m.get("library", "tensorrt"), "precision": m.get("precision", "?"),
                         "mb": round(path.stat().st_size / 1e6, 2), "top1": None, "top5": None, "top1_drop": None,
                         "agreement": None, "max_abs": None, "cosine_min": None,
                         "parity": "skipped, no GPU" if "no GPU" in ev["reason"] else "skipped", "trt_check": "-",
                         "latency_ms": {}, "images_per_s": {}})  # fmt: skip
            continue
        lat = {r["batch"]: r for r in bench_rows if Path(r["artifact"]).name == name}
        par = by_parity.get(name)
        real = par["inputs"]["real"] if par and par.get("inputs") else {}
        rows.append({
            "artifact": name, "backend": ev["backend"], "precision": ev["precision"],
            "mb": round(path.stat().st_size / 1e6, 2), "top1": ev["top1"], "top5": ev["top5"],
            "top1_drop": round(torch_top1 - ev["top1"], 2), "agreement": ev["agreement"],
            "max_abs": real.get("max_abs"), "cosine_min": real.get("cosine_min"),
            "parity": "reference" if par is None else par["status"],
            "trt_check": _trt_verdict(results.get("trt_check", {}).get(name)),
            "latency_ms": {b: round(r["p50_ms"], 3) for b, r in lat.items()},
            "images_per_s": {b: round(r["images_per_s"], 1) for b, r in lat.items()},
        })  # fmt: skip
    return rows


def _trt_verdict(report: dict | None) -> str:
    """One cell: the TensorRT versions the artifact is checked for, or those refusing it."""
    if report is None:
        return "-"
    refused = [v for v, st in report["status"].items() if st == "refuses"]
    if refused:
        return "refused " + ",".join(refused)
    first = report["checked"][0] if report["checked"] else "?"
    return f"ok {first}+" + (" (warn)" if report["exit_code"] == 3 else "")


def _write_plots(work: Path, summary: list[dict], diffs: dict, opts: PipelineOptions) -> None:
    plots = work / "plots"
    plots.mkdir()
    labels = [f"{r['artifact']} ({r['precision']})" for r in summary]
    atomic_write_text(plots / "accuracy.svg", bars(f"Top-1 on {opts.data}", labels,
                                                    [float("nan") if r["top1"] is None else r["top1"] for r in summary], "%"))
    for b in opts.bench_batches:
        latency = [r["latency_ms"].get(b, float("nan")) for r in summary]
        atomic_write_text(plots / f"latency_b{b}.svg", bars(f"Latency p50, batch {b}", labels, latency, " ms", "{:.3f}"))
    atomic_write_text(plots / "errors.svg", log_histograms("Logit error vs PyTorch fp32", diffs))


def _report_md(ckpt, meta, opts, steps, summary, passed, final, calib, not_run=None, unverified=None) -> str:
    verdict = "FAIL" if not passed else ("PASS, with artifacts not verified here" if unverified else "PASS")
    lines = [
        f"# aft-export pipeline: {meta.model_name}", "",
        f"Checkpoint `{ckpt}` (sha256 `{meta.sha256[:16]}...`), data `{opts.data}`, calibration "
        f"`{Path(calib).name}`. Result: **{verdict}**.", "",
        *([f"Built, not run ({len(not_run)}): " + ", ".join(f"`{n}`" for n in not_run) + ". "
           + next(iter(not_run.values())).split(": ", 1)[-1], ""] if not_run else []),
        "Top-1 and agreement (with the PyTorch checkpoint's predictions) on the evaluation set; max abs and "
        "cosine from the parity check on real images; latency p50 and throughput on this machine.", "",
        *summary_table(summary, opts.bench_batches), "",
        "## Steps", "",
        *[f"- **{s.name}**: {s.status} ({s.seconds:.1f}s){': ' + s.detail if s.detail else ''}" for s in steps],
        "", "## Plots", "",
        "![accuracy](plots/accuracy.svg)", "", "![errors](plots/errors.svg)", "",
        *[f"![latency batch {b}](plots/latency_b{b}.svg)" for b in opts.bench_batches], "",
        "Everything above is in `manifest.json` with the tool versions, options and input hashes.", "",
    ]  # fmt: skip
    return "\n".join(lines)
