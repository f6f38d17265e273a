"""The whole job in one call: export, simplify, quantise, engines, parity, eval, bench.

Writes a run directory::

    RUN/model.onnx, model.fp16.onnx, model.int8.onnx   the artifacts
    RUN/manifest.json     tool versions, options, input hashes, every step and result
    RUN/report.md         the summary table and the plots, for people
    RUN/plots/*.svg       error histograms, accuracy and latency per artifact

The directory is built under a temporary name and renamed when complete; a run that
stops on bad input leaves nothing behind. A parity failure is a result, not an
error: the run completes, the report says which artifact failed, and the exit code
is 1.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from aft_export import __version__
from aft_export.errors import AFTExportError

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CHECKPOINT = REPO / "models" / "aft_conv_cifar.pt"
DEFAULT_CALIB = REPO / "calibration" / "cifar10.json"


@dataclass(frozen=True)
class PipelineOptions:
    out: str | None = None  # default: runs/<checkpoint stem>-<UTC time>
    calib: str = str(DEFAULT_CALIB)
    data: str = "cifar10:test"
    precisions: tuple[str, ...] = ("fp16", "int8")
    op_form: str = "custom"
    # export targets: tensorrt (TensorRT 10.3+/11) -> model*.onnx; tensorrt8 (8.5+) -> model.trt8*.onnx
    targets: tuple[str, ...] = ("tensorrt",)
    eval_limit: int | None = None  # None: the whole labelled set
    parity_images: int = 64
    bench_batches: tuple[int, ...] = (1, 32)
    bench_iters: int = 30
    threads: int = 0
    tolerances: tuple[str, ...] = ()


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


def _versions() -> dict:
    out = {"aft-export": __version__, "python": platform.python_version(), "platform": platform.platform()}
    for name in ("torch", "onnx", "onnxruntime", "onnxsim", "onnxscript", "numpy", "tensorrt"):
        try:
            from importlib.metadata import version

            out[name] = version(name if name != "onnxruntime" else _ort_dist())
        except Exception:  # noqa: BLE001 - not installed
            out[name] = None
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
    from aft_export.trt import environment

    return {**environment(), "cpu_count": os.cpu_count(), "machine": platform.machine()}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tensorrt_status() -> str | None:
    """None when TensorRT can build here; otherwise why not, in one line."""
    from aft_export.trt import INSTALL_HINT, environment

    if importlib.util.find_spec("tensorrt") is None:
        return f"TensorRT is not installed here ({INSTALL_HINT}); no engines built"
    if environment().get("gpu") is None:
        return "TensorRT is installed but no CUDA GPU is visible; no engines built"
    return None


def run_pipeline(checkpoint: str | None = None, options: PipelineOptions | None = None, log=print) -> PipelineResult:
    """Run every stage on ``checkpoint`` (default: the bundled zoo model); see the module doc."""
    from aft_export.checkpoint import load_checkpoint
    from aft_export.parity import tolerances_with

    opts = options or PipelineOptions()
    ckpt = Path(checkpoint) if checkpoint else DEFAULT_CHECKPOINT
    if not ckpt.is_file():
        raise AFTExportError(f"checkpoint {ckpt} does not exist" + ("" if checkpoint else
                             "; pass one: aft-export pipeline CKPT"))  # fmt: skip
    for p in opts.precisions:
        if p not in ("fp16", "int8"):
            raise AFTExportError(f"unknown precision {p!r}; choose fp16 and/or int8")
    from aft_export.export.exporter import TARGETS

    if not opts.targets or any(t not in TARGETS for t in opts.targets):
        raise AFTExportError(f"export targets {list(opts.targets)}: choose from {list(TARGETS)}")
    tolerances_with(list(opts.tolerances))  # bad overrides fail before any work
    _, meta = load_checkpoint(ckpt)  # fails early on a bad checkpoint
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    final = Path(opts.out) if opts.out else Path("runs") / f"{ckpt.stem}-{stamp}"
    if final.exists() and (not final.is_dir() or any(final.iterdir())):
        raise AFTExportError(f"run directory {final} already exists and is not empty; choose another --out")
    final.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(final.parent, os.W_OK):
        raise AFTExportError(f"cannot write into {final.parent}")
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        result = _run(ckpt, meta, opts, work, final, log)
        if final.exists():
            final.rmdir()
        os.replace(work, final)
        return result
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _run(ckpt, meta, opts: PipelineOptions, work: Path, final: Path, log) -> PipelineResult:
    from aft_export.bench import bench
    from aft_export.evaluate import evaluate_artifacts
    from aft_export.export.exporter import ExportOptions, export_checkpoint
    from aft_export.nvtools import write_verification_commands
    from aft_export.parity import run_parity
    from aft_export.quantize import QuantizeOptions, quantize_model
    from aft_export.trtcheck import check_model
    from aft_export.trtcheck.versions import parse_version

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

    artifacts = []
    results["export"], results["quantize"] = {}, {}
    for target in opts.targets:
        stem, label = ("model", "") if target == "tensorrt" else ("model.trt8", f" {target}")
        s = step(f"export{label}")
        fp32 = work / f"{stem}.onnx"
        exp = export_checkpoint(ckpt, fp32, ExportOptions(op_form=opts.op_form, target=target, verify_data=opts.data),
                                **quiet)  # fmt: skip
        results["export"][target] = exp.to_dict()
        done(s, f"{exp.nodes_final} nodes ({exp.aft_nodes} com.aft), onnxsim "
                f"{exp.simplify['nodes_before']}->{exp.simplify['nodes_after']}, verify max abs "
                f"{exp.parity['max_abs']:.2e}")  # fmt: skip
        artifacts.append(fp32)
        for precision in opts.precisions:
            s = step(f"quantize {precision}{label}")
            path = work / f"{stem}.{precision}.onnx"
            q = quantize_model(fp32, path, opts.calib, QuantizeOptions(precision=precision), progress=False,
                               **quiet)  # fmt: skip
            results["quantize"][path.name] = q.to_dict()
            artifacts.append(path)
            a = q.agreement or {}
            done(s, f"top-1 agreement with fp32 on {a.get('images', 0)} calibration images "
                    f"{a.get('top1_agreement', float('nan')):.2f}%"
                    + (f"; {len(q.nonfinite)} fp16 values took NaN/Inf" if q.nonfinite else ""))  # fmt: skip

    s = step("tensorrt check")
    results["trt_check"] = {a.name: check_model(a).to_dict() for a in artifacts}
    refused = {n: [v for v, st in r["status"].items() if st == "refuses"] for n, r in results["trt_check"].items()}
    refused = {n: vs for n, vs in refused.items() if vs}
    versions = sorted({v for r in results["trt_check"].values() for v in r["checked"]}, key=parse_version)
    done(s, ("refused: " + "; ".join(f"{n} by TensorRT {', '.join(vs)}" for n, vs in refused.items())) if refused
         else f"every artifact accepted by the TensorRT versions it is for ({', '.join(versions)})")  # fmt: skip

    s = step("verification commands")
    build_batch = f"1,{max(opts.bench_batches)},{max(max(opts.bench_batches), 64)}"
    inputs = _parity_inputs(ckpt, opts, work / "verify_inputs.npy")
    for a in artifacts:
        write_verification_commands(a, batch=build_batch, inputs=inputs)
    done(s, f"{len(artifacts)} scripts (<artifact>.verify.sh: trtexec and polygraphy per TensorRT generation)")

    s = step("tensorrt engines")
    why_not = tensorrt_status()
    if why_not:
        s.status = "skipped"
        done(s, why_not)
    else:
        from aft_export.trt import BuildOptions, build_engine

        engines = []
        for onnx_file in list(artifacts):
            engine = onnx_file.with_suffix(".engine")
            build_engine(onnx_file, engine, BuildOptions(batch=f"1,{max(opts.bench_batches)},"
                                                        f"{max(max(opts.bench_batches), 64)}"), **quiet)  # fmt: skip
            engines.append(engine)
        artifacts += engines
        done(s, f"{len(engines)} engines built")

    s = step("parity")
    par = run_parity(str(ckpt), [str(a) for a in artifacts], opts.data, images=opts.parity_images,
                     overrides=list(opts.tolerances))  # fmt: skip
    results["parity"] = par
    failed = [Path(r["artifact"]).name for r in par["artifacts"] if r["status"] == "fail"]
    s.status = "failed" if failed else "ok"
    done(s, ("FAILED: " + ", ".join(failed)) if failed else f"all {len(artifacts)} artifacts within tolerance")

    s = step("eval")
    ev = evaluate_artifacts([str(ckpt)] + [str(a) for a in artifacts], opts.data, limit=opts.eval_limit)
    results["eval"] = ev
    done(s, f"{ev[0]['images']} images from {opts.data}")

    s = step("bench")
    bn = bench([str(ckpt)] + [str(a) for a in artifacts], list(opts.bench_batches), warmup=5,
               iters=opts.bench_iters, threads=opts.threads)  # fmt: skip
    results["bench"] = bn
    done(s, f"batches {list(opts.bench_batches)}, {opts.bench_iters} runs each")

    s = step("report")
    diffs = _logit_differences(ckpt, artifacts, opts.data, opts.parity_images)
    summary = _summary(ckpt, artifacts, results, work)
    _write_plots(work, summary, diffs, opts)
    passed = not failed
    manifest = {
        "tool": f"aft-export {__version__}", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": _versions(), "options": asdict(opts),
        "inputs": {"checkpoint": str(ckpt), "checkpoint_sha256": meta.sha256, "model": meta.model_name,
                   "data": opts.data, "calibration": next((q["recipe"]["calibration"] for q in
                                                          results["quantize"].values()), None)},
        "artifacts": {a.name: {"sha256": _sha256(a), "bytes": a.stat().st_size} for a in artifacts},
        "environment": _environment(),
        "steps": [asdict(x) for x in steps], "summary": summary, "passed": passed, "results": results,
    }  # fmt: skip
    (work / "manifest.json").write_text(json.dumps(manifest, indent=2, default=_json_default))
    (work / "report.md").write_text(_report_md(ckpt, meta, opts, steps, summary, passed, final))
    done(s, f"{final}/report.md")
    return PipelineResult(str(final), passed, steps, summary)


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


def _parity_inputs(ckpt, opts: PipelineOptions, path: Path) -> Path:
    """The parity images, preprocessed (NCHW float32), for polygraphy's real-data comparison."""
    from aft_export.data import load_labelled, normalize
    from aft_export.runners import TorchRunner

    info = TorchRunner(str(ckpt)).info
    x = normalize(load_labelled(opts.data, info.input_size[1], limit=opts.parity_images).images, info.mean,
                  info.std).numpy()  # fmt: skip
    np.save(path, x)
    return path


def _logit_differences(ckpt, artifacts, data, images) -> dict[str, np.ndarray]:
    """|logits - PyTorch fp32 logits| per artifact on the parity images, for the histograms."""
    from aft_export.data import load_labelled, normalize
    from aft_export.runners import TorchRunner, load_runner

    ref = TorchRunner(str(ckpt))
    info = ref.info
    x = normalize(load_labelled(data, info.input_size[1], limit=images).images, info.mean, info.std).numpy()
    want = ref.logits(x)
    return {a.name: np.abs(load_runner(str(a)).logits(x) - want).ravel() for a in artifacts}


def _summary(ckpt, artifacts, results, work) -> list[dict]:
    by_eval = {Path(r["artifact"]).name: r for r in results["eval"]}
    by_parity = {Path(r["artifact"]).name: r for r in results["parity"]["artifacts"]}
    bench_rows = results["bench"]["rows"]
    rows = []
    torch_top1 = by_eval[ckpt.name]["top1"]
    for path in [ckpt] + list(artifacts):
        name = path.name
        ev = by_eval[name]
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
    from aft_export.report import bars, log_histograms

    plots = work / "plots"
    plots.mkdir()
    labels = [f"{r['artifact']} ({r['precision']})" for r in summary]
    (plots / "accuracy.svg").write_text(bars(f"Top-1 on {opts.data}", labels, [r["top1"] for r in summary], "%"))
    for b in opts.bench_batches:
        (plots / f"latency_b{b}.svg").write_text(
            bars(f"Latency p50, batch {b}", labels, [r["latency_ms"].get(b, float("nan")) for r in summary],
                 " ms", "{:.3f}"))  # fmt: skip
    (plots / "errors.svg").write_text(log_histograms("Logit error vs PyTorch fp32", diffs))


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def summary_table(summary: list[dict], batches) -> list[str]:
    head = ("| artifact | backend | prec | MB | top-1 | drop | agree | max abs | cos min | parity | TRT check | "
            + " | ".join(f"p50 ms b{b}" for b in batches) + " | " + " | ".join(f"img/s b{b}" for b in batches) + " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in summary:
        lines.append(
            f"| {r['artifact']} | {r['backend']} | {r['precision']} | {r['mb']:.2f} | {r['top1']:.2f} | "
            f"{r['top1_drop']:+.2f} | {r['agreement']:.2f} | {_fmt(r['max_abs'], '.2e')} | "
            f"{_fmt(r['cosine_min'], '.6f')} | {r['parity']} | {r.get('trt_check', '-')} | "
            + " | ".join(_fmt(r["latency_ms"].get(b), ".3f") for b in batches) + " | "
            + " | ".join(_fmt(r["images_per_s"].get(b), ".0f") for b in batches) + " |")  # fmt: skip
    return lines


def _report_md(ckpt, meta, opts, steps, summary, passed, final) -> str:
    lines = [
        f"# aft-export pipeline: {meta.model_name}", "",
        f"Checkpoint `{ckpt}` (sha256 `{meta.sha256[:16]}...`), data `{opts.data}`, calibration "
        f"`{Path(opts.calib).name}`. Result: **{'PASS' if passed else 'FAIL'}**.", "",
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
