"""What to deploy where: every artifact on every runtime here, proven and timed, in one table.

Ultralytics' ``benchmark`` exports every format and times it; OpenVINO's ``benchmark_app`` and
Triton's model analyzer find the fastest configuration by measuring it. This does both for the
files of one model, and adds the two things they lack: each row is proven against the source
checkpoint (parity within its precision's limits, top-1 on labelled images), and for each device
class (the CPU; the GPU where there is one) the fastest row that passes is marked, by latency at
batch 1 and by images per second at the large batch.

A row is one artifact on one runtime: the checkpoint in PyTorch eager; each ONNX file in ONNX
Runtime and in OpenVINO (and ONNX Runtime's CUDA provider on a GPU); each engine in the library
that built it. A runtime that is not installed here, or a file a runtime must not run here
(OpenVINO's int8 with 8-bit weights on a CPU without VNNI; an engine without a GPU), is a row
that says so and is never marked. The rows are timed in interleaved rounds, every runner at the
same thread count, so that load on the machine falls on every row alike. The numbers are this
machine's: the table records its CPU (instruction sets, threads, load) and says to rerun it on
the machine the model is deployed to.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from aft_export.artifacts.ends import Contradicted
from aft_export.data.images import LabelledImages
from aft_export.errors import AFTExportError, Judged, Named, RuntimeMissing, Verdict, said
from aft_export.verify.evaluate import evaluate_artifacts
from aft_export.machine import cpu_features
from aft_export.options import BenchOptions, ParityOptions
from aft_export.runtimes import BACKENDS, REFERENCE, RUNTIMES as EVERY_RUNTIME, TABLE_RUNTIMES
from aft_export.tensorrt.library import library_of
from aft_export.verify.parity import ParityRow, run_parity
from aft_export.artifacts.kinds import CHECKPOINT, ENGINE, ONNX, SOURCE, FileKind, expected, kind_of
from aft_export.options.commands import command_line

if TYPE_CHECKING:  # bench's result type, for the annotation alone (bench_against imports it where it runs)
    from aft_export.verify.bench import BenchResult

# the runtimes the table lists, in its order (aft_export.runtimes: the CPU's, then the GPU's), and their device classes
RUNTIMES = TABLE_RUNTIMES
DEVICE = {r: EVERY_RUNTIME[r].device for r in RUNTIMES}
ADVICE = (f"these figures are this machine's: rerun {command_line('bench', 'FILES', reference='CHECKPOINT')} on the "
          "machine you deploy to (its CPU's instruction sets, core count and load decide the order)")  # fmt: skip
# the fastest row, per device class: rows within this fraction of the fastest are a tie (one run's noise:
# aft_conv_cifar's two int8 files in OpenVINO differ by 0-2% from run to run), and a tie goes to the file made
# for that device class (the CPU's int8 on a CPU)
FASTEST_TIE = 0.03


@dataclass
class DeployRow:
    """One artifact on one runtime."""

    artifact: str  # the file's name
    runtime: str
    device: str  # cpu | gpu
    precision: str = ""
    bytes: int = 0
    # ok | skipped (the runtime cannot run it here: not installed, no GPU, not for this CPU) | failed (it
    # cannot read the file): see reason
    status: str = "ok"
    reason: str = ""
    parity: str = ""  # pass | fail | reference (the checkpoint itself on the CPU) | "" (not run)
    top1: float | None = None
    images: int = 0  # the labelled images top-1 is measured on
    p50_ms: float | None = None  # at the table's latency batch (batch 1 unless not timed)
    images_per_s: float | None = None  # at the large batch
    fastest: list[str] = field(default_factory=list)  # "latency" and/or "throughput", within its device class
    path: str = ""  # the file as given
    purpose: str = ""  # the runtimes the file is made for (aft_export.artifacts.purpose)
    timing: dict[int, dict] = field(default_factory=dict)  # by batch size: p50/p90/p99 ms, images/s, runs
    made_for: str = ""  # the device class the file is made for (cpu, gpu; "": either), for ties
    threads: int = 0  # the runner's thread count
    measured_here: bool = False  # its parity was measured by the table (not handed over by a caller)

    @property
    def offered(self) -> bool:
        """A row that may be recommended: it ran, and it passed parity (or is the reference)."""
        return self.status == "ok" and self.parity in ("pass", "reference")


@dataclass
class DeployTable(Judged):
    rows: list[DeployRow]
    runtimes: dict[str, str]  # runtime -> "ok" or why it is not available here
    machine: dict
    batch: int  # the large batch of the images/s column
    reference: str
    data: str
    verdict: Verdict = field(default_factory=Verdict)
    latency_batch: int = 1  # the batch of the latency column
    notes: list[str] = field(default_factory=list)  # what the table did with what it was given (a file given twice)

    def best(self, device: str, by: str) -> DeployRow | None:
        """The row marked fastest on ``device`` by ``by`` (latency or throughput), if any."""
        return next((r for r in self.rows if r.device == device and by in r.fastest), None)

    def bench_report(self, runtimes: tuple[str, ...]) -> dict:
        """The rows on ``runtimes`` in :func:`aft_export.verify.bench.bench`'s form (a row per file and batch size),
        for a report that shows one runtime per file."""
        rows = [{"artifact": r.path, "backend": r.runtime, "precision": r.precision, "batch": b,
                 "threads": r.threads, **t} for r in self.rows if r.runtime in runtimes
                for b, t in sorted(r.timing.items())]  # fmt: skip
        skipped = [{"artifact": r.path, "batch": None, "reason": r.reason} for r in self.rows
                   if r.runtime in runtimes and r.status != "ok"]  # fmt: skip
        return {"machine": self.machine.get("machine"), "processor": self.machine.get("cpu"), "rows": rows,
                "skipped": skipped}  # fmt: skip

    def to_dict(self) -> dict:
        return {"reference": self.reference, "data": self.data, "batch": self.batch,
                "latency_batch": self.latency_batch, "machine": self.machine,
                "runtimes": self.runtimes,
                "rows": [{k: v for k, v in asdict(r).items() if k not in ("path", "measured_here")} for r in self.rows],
                "recommended": {d: {by: (lambda r: r and {"artifact": r.artifact, "runtime": r.runtime})(self.best(d, by))
                                    for by in ("latency", "throughput")}
                                for d in sorted({r.device for r in self.rows})},
                "advice": ADVICE, "tie": FASTEST_TIE, "notes": list(self.notes),
                "verdict": self.verdict.to_dict()}  # fmt: skip


def kind(artifact: str | Path) -> FileKind:
    """ONNX or ENGINE by the file's name; anything else is a CHECKPOINT or another model source (a spec
    file), which runs in PyTorch."""
    found = kind_of(artifact)
    return CHECKPOINT if found is None or found.model_source else found


def runs_on(artifact: str | Path, runtime: str, engine_library: str | None = None) -> bool:
    """Whether ``runtime`` is one that runs ``artifact`` at all (a checkpoint in PyTorch, an ONNX file
    in ONNX Runtime or OpenVINO, an engine in the library that built it)."""
    k = kind(artifact)
    if k is ENGINE:
        return runtime == library_of(engine_library).name  # a manifest that names none: standard TensorRT
    return runtime in RUNTIMES and EVERY_RUNTIME[runtime].runs == k.name


def load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def machine_record(threads: int | str) -> dict:
    """The machine the figures are of: its CPU and instruction sets (:func:`aft_export.machine.cpu_features`),
    cores, the threads each runner used and the load average when the timing began."""
    cpu = cpu_features()
    return {"cpu": cpu.model or platform.processor() or cpu.arch, "machine": cpu.arch, "cores": os.cpu_count(),
            "threads": threads, "instruction_sets": cpu.to_dict(), "described": cpu.describe(),
            "load_average": load_average()}  # fmt: skip


def time_rows(runners: dict[tuple[str, str], object], batch: int, warmup: int, iters: int,
              rounds: int = BenchOptions.rounds, seed: int = 0,
              errors: dict | None = None) -> dict[tuple[str, str], dict]:  # fmt: skip
    """p50 latency and images/s of every runner at ``batch``, timed in ``rounds`` interleaved
    rounds of ``iters // rounds`` runs each (at least one), after ``warmup`` runs each, so that a
    change of load during the timing falls on every runner alike. A runner whose run raises (the
    runtime fails on the file) is left out of the rest; its error is put in ``errors`` by key."""
    per_round = max(1, iters // rounds)
    errors = {} if errors is None else errors
    feeds = {}

    def run(key, runner) -> bool:
        try:
            runner.run(feeds[key])
            return True
        except (AFTExportError, RuntimeError, ValueError) as exc:  # noqa: PERF203 - the runtime's own errors
            errors[key] = f"it fails to run batch {batch}: {str(exc).strip().splitlines()[0][:200]}"
            return False

    for key, runner in runners.items():
        feeds[key] = {runner.input_name: runner.random_input(batch, seed)}
        for _ in range(warmup):
            if not run(key, runner):
                break
    times: dict = {key: [] for key in runners if key not in errors}
    for _ in range(rounds):
        for key, runner in runners.items():
            for _ in range(per_round):
                if key in errors:
                    break
                t = time.perf_counter()
                if run(key, runner):
                    times[key].append(time.perf_counter() - t)
    out = {}
    for key, ts in times.items():
        if key in errors or not ts:
            continue
        ms = np.array(ts) * 1e3
        out[key] = {"batch": batch, "runs": len(ts), "p50_ms": float(np.percentile(ms, 50)),
                    "p90_ms": float(np.percentile(ms, 90)), "p99_ms": float(np.percentile(ms, 99)),
                    "images_per_s": float(batch * len(ts) / (ms.sum() / 1e3))}
    return out


def mark_fastest(rows: list[DeployRow], tie: float = FASTEST_TIE) -> None:
    """Per device class, mark the offered row with the lowest p50 at the latency batch ("latency") and
    the one with the most images/s at the large batch ("throughput"). Rows within ``tie`` of the best
    are a tie, which goes to a file made for that device class (the CPU's int8 on a CPU), then to the
    faster."""
    for r in rows:
        r.fastest = []
    for device in sorted({r.device for r in rows}):
        offered = [r for r in rows if r.device == device and r.offered]
        for by, value, sign in (("latency", lambda r: r.p50_ms, 1), ("throughput", lambda r: r.images_per_s, -1)):
            timed = [r for r in offered if value(r) is not None]
            if not timed:
                continue
            best = min(timed, key=lambda r: sign * value(r))
            close = [r for r in timed if (value(r) <= value(best) * (1 + tie) if sign > 0
                                          else value(r) >= value(best) * (1 - tie))]  # fmt: skip
            min(close, key=lambda r: (r.made_for != device, sign * value(r))).fastest.append(by)


@dataclass
class Measured:
    """What a caller already measured on one runtime (the pipeline's parity and eval on ONNX Runtime),
    by artifact path: parity rows (:class:`~aft_export.verify.parity.ParityRow`) and eval rows as
    :func:`run_parity` and :func:`evaluate_artifacts` give them."""

    parity: dict[str, ParityRow] = field(default_factory=dict)
    eval: dict[str, dict] = field(default_factory=dict)


def deploy_table(reference, artifacts: list[str], decoded: LabelledImages, *,
                 runtimes: dict[str, str], make_runner: Callable[[str, str], object],
                 batches: tuple[int, ...] = BenchOptions.batch_sizes, warmup: int = BenchOptions.warmup,
                 iters: int = BenchOptions.iters, repeats: int = 1, threads: int = 0, data_label: str | None = None,
                 parity_set: LabelledImages | None = None, parity_images: int = ParityOptions.images,
                 overrides: list[str] | None = None, measured: dict[str, Measured] | None = None,
                 reference_logits: np.ndarray | None = None, engine_libraries: dict[str, str] | None = None,
                 purposes: dict[str, str] | None = None, parity_failures: str = "failed",
                 log=print) -> DeployTable:  # fmt: skip
    """The table for ``reference`` (the checkpoint's :class:`~aft_export.runners.TorchRunner`) and
    ``artifacts`` (paths), on the labelled images ``decoded`` (top-1 on all of them; parity on
    ``parity_set``, else the first ``parity_images`` of them; ``reference_logits``: PyTorch's on those).

    ``batches``: the batch sizes timed; the table's latency is at the smallest, its images/s at the
    largest. ``repeats``: the interleaved timing done that many times, the median of each row's taken
    (a benchmark's figures). ``data_label``: the data set's name as the user gave it (never this
    machine's path). ``runtimes``: every runtime the table lists -> "ok" (available here) or why not;
    only the available ones are run. ``make_runner(artifact, runtime)`` makes a runner (it may raise
    :class:`~aft_export.errors.RuntimeMissing`, e.g. "not for this CPU": the row is skipped with that
    reason, never offered). ``measured``: parity and eval rows a caller already has, by runtime
    (reused, not measured again, and left out of this table's verdict). ``engine_libraries``: the
    library that built each engine; ``purposes``: what each file is for, by path
    (:func:`aft_export.artifacts.purpose.made_for`). ``parity_failures``: the verdict of a row that fails parity
    here, ``failed`` (bench with a reference) or ``unverified`` (the pipeline, whose own parity step
    judges the files on the runtime they are checked on).

    A runtime that fails on a file (it cannot read it, or fails to run it in parity, top-1 or the
    timing) makes that row ``failed`` with the reason, never the whole table."""
    measured = measured or {}
    batch, latency_batch = max(batches), min(batches)
    ref_path = str(reference.path)
    files, notes = distinct([ref_path, *[str(a) for a in artifacts]])
    labels = _labels(files)
    libraries = engine_libraries or {}
    rows: list[DeployRow] = []
    runners: dict[tuple[str, str], object] = {}

    def add(f: str, runtime: str, **kw) -> DeployRow:
        row = DeployRow(labels[f], runtime, DEVICE.get(runtime, "gpu"), bytes=_size(f), path=f,
                        purpose=(purposes or {}).get(f, ""), made_for=made_for_device(f), **kw)  # fmt: skip
        rows.append(row)
        return row

    def fail(row: DeployRow, status: str, why: str) -> None:
        row.status, row.reason = status, _scrub(why, row.path, row.artifact)

    for runtime, available in runtimes.items():
        if available != "ok":
            continue
        for f in [f for f in files if runs_on(f, runtime, libraries.get(f))]:
            row = add(f, runtime)
            if f == ref_path and runtime == REFERENCE:
                runners[(f, runtime)] = reference
                row.precision, row.parity, row.threads = "fp32", "reference", reference.threads
                continue
            try:
                runner = make_runner(f, runtime)
            except RuntimeMissing as exc:  # not installed, no GPU, not for this CPU: said, never offered
                fail(row, "skipped", str(exc))
                continue
            except AFTExportError as exc:  # the runtime cannot read the file: a finding, never offered
                fail(row, "failed", str(exc))
                continue
            runners[(f, runtime)] = runner
            row.precision, row.threads = runner.info.precision, getattr(runner, "threads", 0)
    for (f, runtime), runner in runners.items():  # every batch fits in memory, said before anything runs
        for b in batches:
            runner.check_batch(b, "batch_sizes")
    for f in files:  # a file no runtime here can run (an engine without a GPU) is a row that says why
        if not any(r.path == f for r in rows):
            runtime = next((r for r in runtimes if runs_on(f, r, libraries.get(f))), None)
            why = runtimes[runtime] if runtime else "its runtime is not among the runtimes asked for"
            add(f, runtime or library_of(libraries.get(f)).name, status="skipped", reason=why)
    by_key = {(r.path, r.runtime): r for r in rows}
    compared = parity_set if parity_set is not None else decoded
    n_parity = len(compared) if parity_set is not None else min(parity_images, len(decoded))

    # parity and top-1, file by file (the stages take runners by artifact path)
    for runtime in [r for r, ok in runtimes.items() if ok == "ok"]:
        given = measured.get(runtime, Measured())
        for (f, rt), runner in runners.items():
            row = by_key[(f, rt)]
            if rt != runtime or row.status != "ok":
                continue
            try:
                if f != ref_path or runtime != REFERENCE:  # the checkpoint on the GPU is compared with the CPU's
                    p = given.parity.get(f)
                    if p is None:
                        log(f"deploy: parity of {row.artifact} on {runtime}")
                        # (a failure is localised on the runtime it failed on: ONNX files' backends)
                        on = {"backend": runtime} if runtime in BACKENDS else {}
                        par = run_parity(ref_path, [f], compared, images=n_parity, overrides=overrides,
                                         reference=reference, runners={f: runner}, reference_logits=reference_logits,
                                         **on)  # fmt: skip
                        p, row.measured_here = par.artifacts[0], True
                    row.parity = p.status
                    if p.status == "skipped":
                        fail(row, "skipped", p.reason or "")
                        continue
                    if p.status == "fail":
                        row.reason = _scrub(p.failures[0], f, row.artifact)  # the first limit it missed
                e = given.eval.get(f)
                if e is None:
                    e = evaluate_artifacts([f], decoded, runners={f: runner})[0]
                if e.get("status") == "ok":
                    row.top1, row.images = e["top1"], e["images"]
            except (AFTExportError, RuntimeError, ValueError) as exc:  # the runtime fails on the file here
                fail(row, "failed", f"it fails on {runtime}: {str(exc).strip().splitlines()[0][:200]}")

    timed = {k: r for k, r in runners.items() if by_key[k].status == "ok"}
    started_load = load_average()
    log(f"deploy: timing {len(timed)} rows at batches {list(batches)}, interleaved")
    for b in batches:
        fits = {k: r for k, r in timed.items() if r.fixed_batch in (None, b)}
        errors: dict = {}
        runs = [time_rows(fits, b, warmup if i == 0 else 0, iters, errors=errors) for i in range(repeats)]
        for k in fits:
            row = by_key[k]
            if k in errors:
                fail(row, "failed", errors[k])
                continue
            row.timing[b] = {m: round(float(np.median([r[k][m] for r in runs])), 4)
                             for m in ("p50_ms", "p90_ms", "p99_ms", "images_per_s")}
            row.timing[b]["runs"] = sum(r[k]["runs"] for r in runs)
        for k, r in timed.items():
            if k not in fits and by_key[k].status == "ok" and not by_key[k].reason:
                by_key[k].reason = f"a graph of fixed batch {r.fixed_batch}: not timed at batch {b}"
    for row in rows:
        row.p50_ms = row.timing.get(latency_batch, {}).get("p50_ms") if row.status == "ok" else None
        row.images_per_s = row.timing.get(batch, {}).get("images_per_s") if row.status == "ok" else None
    mark_fastest(rows)
    machine = machine_record(threads or "each runtime's default")
    machine["load_average"] = started_load
    machine["load_average_after"] = load_average()
    judged = [f"{r.artifact} on {r.runtime} fails parity: {r.reason}" for r in rows
              if r.parity == "fail" and r.measured_here]  # fmt: skip
    broken = [f"{r.artifact} on {r.runtime}: {r.reason}" for r in rows if r.status == "failed"]
    verdict = (Verdict.of(judged, broken) if parity_failures == "failed" else Verdict.of(unverified=judged + broken))
    return DeployTable(rows, dict(runtimes), machine, batch, labels[ref_path], data_label or decoded.source, verdict,
                       latency_batch, notes)  # fmt: skip


def distinct(files: list[str]) -> tuple[list[str], list[str]]:
    """``files`` with each file once (the first path given for it: the same file by two paths, or
    twice, as a shell glob easily gives, is measured once), and a note for each left out."""
    kept: dict[str, str] = {}
    notes = []
    for f in files:
        try:
            key = str(Path(f).resolve())
        except (OSError, RuntimeError):  # a loop of links: the path as given (its runner says what is wrong)
            key = f
        if key not in kept:
            kept[key] = f
        elif f == kept[key]:
            notes.append(f"{f} was given more than once: measured once")
        else:
            notes.append(f"{f} is {kept[key]}: measured once, as {kept[key]}")
    return list(kept.values()), list(dict.fromkeys(notes))


def _labels(files: list[str]) -> dict[str, str]:
    """Each file's name in the table: its file name, or the path as given where two names are the same."""
    names = [Path(f).name for f in files]
    return {f: (n if names.count(n) == 1 else f) for f, n in zip(files, names)}


def _scrub(text: str, path: str, label: str) -> str:
    """``text`` with the file's path (as given, and resolved) said as its label: a run directory's
    temporary path, or any path of this machine, stays out of the table."""
    for form in {str(Path(path).resolve()), path}:
        text = text.replace(form, label)
    return text


def made_for_device(artifact: str) -> str:
    """The device class a file is made for (:func:`aft_export.artifacts.purpose.target_device`: ``cpu`` for the
    portable target, ``gpu`` for the TensorRT targets and engines), "" for a checkpoint or a file that
    does not say."""
    k = kind(artifact)
    if k is ENGINE:
        return "gpu"
    if k is not ONNX:
        return ""
    from aft_export.artifacts.onnxio import ArtifactMeta, load_onnx
    from aft_export.artifacts.purpose import target_device

    try:
        return target_device(ArtifactMeta.of(load_onnx(artifact, external_data=False)).get("export_target"))
    except AFTExportError:
        return ""


def _size(path: str) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def check_reference(reference) -> None:
    found = kind_of(reference)
    if found is not None and not found.model_source:
        raise AFTExportError(f"the reference {reference} must be the checkpoint the files were made from "
                             f"({expected(CHECKPOINT, SOURCE)}), not an exported file")  # fmt: skip


def runtimes_here(gpu: bool | None = None) -> dict[str, str]:
    """Every runtime the table lists -> "ok" where it can run here, else why not, in one line
    (:meth:`aft_export.runtimes.Runtime.missing`). ``gpu``: whether a GPU is visible (None: ask torch)."""
    if gpu is None:
        import torch

        gpu = torch.cuda.is_available()
    providers = []
    if gpu and importlib.util.find_spec("onnxruntime") is not None:  # which GPU providers ONNX Runtime has
        import onnxruntime

        providers = onnxruntime.get_available_providers()
    return {r: EVERY_RUNTIME[r].missing(gpu, providers) or "ok" for r in RUNTIMES}


def make_runner(artifact: str, runtime: str, threads: int = 0, preprocessing=None):
    """The runner of ``artifact`` on ``runtime`` (RuntimeMissing where it cannot run here, e.g.
    :class:`~aft_export.errors.NotForThisCPU`)."""
    from aft_export.runners import runtime_runner

    return runtime_runner(artifact, runtime, threads, preprocessing=preprocessing)


def bench_against(reference: str, artifacts: list[str], data: str | None = None, images: int = BenchOptions.images,
                  batches: tuple[int, ...] = BenchOptions.batch_sizes, warmup: int = BenchOptions.warmup,
                  iters: int = BenchOptions.iters, threads: int = 0, backend: str | None = None,
                  parity_images: int = ParityOptions.images, log=print) -> BenchResult:  # fmt: skip
    """``aft-export bench FILES reference=CHECKPOINT``: bench's result, whose ``deploy`` is the deploy
    table of ``artifacts``, made from the checkpoint ``reference``, on every runtime here (``backend``:
    that one only, beside PyTorch; one that cannot run here makes the table not verified), proven on
    ``images`` labelled images of ``data`` (default: the test data the checkpoint names, else
    ``cifar10:test``) and timed at ``batches``."""
    from aft_export.data.datasets import load_labelled, verification_data
    from aft_export.runners import TorchRunner
    from aft_export.verify.bench import BenchResult

    check_reference(reference)
    if backend is not None and backend not in RUNTIMES:
        takes = [b for b in BACKENDS if b in RUNTIMES]  # the values `backend` takes that the table runs
        raise AFTExportError(said("{backend_got} is not a runtime the deploy table runs; with {reference} choose "
                                  "{value}, or leave {backend} out for every runtime here (or bench the files on "
                                  "{runtime} without {reference})", "bench", runtime=backend,
                                  backend_got=Named("backend", backend), value=", ".join(takes)))  # fmt: skip
    if not isinstance(images, int) or images < 1:
        raise AFTExportError(said("{images} must be a whole number >= 1, got {got!r}", "bench", got=images))
    ref = TorchRunner(str(reference), threads=threads)
    for f in artifacts:  # each file made from this checkpoint, said before anything runs
        check_made_from(ref, f)
    for b in batches:
        ref.check_batch(b, "batch_sizes")
    source, _ = verification_data(data, ref.meta)
    decoded = load_labelled(source, ref.info.input_size[1], limit=images)
    runtimes = runtimes_here()
    if backend is not None:
        runtimes = {r: why for r, why in runtimes.items() if r in (REFERENCE, backend)}
    purposes = {str(a): _purpose_of(a) for a in artifacts}
    purposes[str(reference)] = "PyTorch"
    table = deploy_table(ref, [str(a) for a in artifacts], decoded, runtimes=runtimes,
                         make_runner=lambda a, r: make_runner(a, r, threads=threads), batches=tuple(batches),
                         warmup=warmup, iters=iters, threads=threads, parity_images=parity_images,
                         data_label=str(data or source), purposes=purposes,
                         engine_libraries={str(a): _engine_library(a) for a in artifacts if kind(a) is ENGINE},
                         log=log)  # fmt: skip
    if backend is not None and runtimes.get(backend) != "ok":
        table.verdict = Verdict.combine(table.verdict, Verdict.of(unverified=[
            said("{backend_got} was asked for and cannot run here: {value}", "bench",
                 backend_got=Named('backend', backend), value=runtimes.get(backend, 'unknown'))]))
    return BenchResult.of_table(table)


def check_made_from(reference, artifact) -> None:
    """Refuse a file that says it was made from another checkpoint than ``reference`` (its runner), or
    for other classes or another input size (:func:`~aft_export.verify.parity.compatibility_problem`),
    naming both: its rows would fail parity, and blame the runtimes. A file that does not say (another
    tool's, a checkpoint, an engine whose manifest cannot be read) is compared as it is."""
    from aft_export.verify.parity import compatibility_problem

    info = _described(artifact)
    problem = compatibility_problem(reference.info, info) if info is not None else None
    if problem:
        raise AFTExportError(said("{artifact_got} {problem}: it was not made from the reference {path}; give the "
                                  "checkpoint it was made from as {reference}, or bench it without {reference}",
                                  "bench", artifact_got=artifact, problem=problem, path=reference.path))  # fmt: skip


def _described(artifact):
    """What an ONNX file's metadata or an engine's manifest says of the model it was made from (a
    :class:`~aft_export.runners.ModelInfo`), without running it; None where it says nothing. An ONNX
    file that cannot be read at all is refused here (exit 2), before anything runs."""
    from aft_export.artifacts.onnxio import ArtifactMeta, load_onnx
    from aft_export.runners import info_from_metadata
    from aft_export.runners.engine import manifest_info

    if kind(artifact) is ONNX:  # a file that is not ONNX, or whose data lies elsewhere: said now, exit 2
        model = load_onnx(artifact, external_data=False)
        try:
            return info_from_metadata(model, str(artifact)) if ArtifactMeta.of(model).ours else None
        except Contradicted:  # metadata its graph contradicts: refused, as by every command
            raise
        except AFTExportError:  # malformed metadata: its rows say so
            return None
    if kind(artifact) is ENGINE:
        try:
            return manifest_info(_manifest(artifact), str(artifact))
        except Contradicted:
            raise
        except AFTExportError:  # no manifest, or a malformed one: its row says so
            return None
    return None


def _purpose_of(artifact) -> str:
    """What a file is for (aft_export.artifacts.purpose), or "" where it cannot be read without running it."""
    from aft_export.artifacts.onnxio import load_onnx
    from aft_export.artifacts.purpose import engine_made_for, file_purpose

    try:
        if kind(artifact) is ONNX:
            return file_purpose(load_onnx(artifact, external_data=False))["for"]
        if kind(artifact) is ENGINE:
            return engine_made_for(_manifest(artifact))
    except AFTExportError:
        return ""
    return ""


def _manifest(engine) -> dict:
    """The engine's manifest as the one reader reads it ({} where it is missing or malformed: the
    engine's row then says why it cannot run), without the entries of the wrong type (as `info`
    leaves them out)."""
    from aft_export.readers import read_mapping
    from aft_export.tensorrt.manifest import manifest_path, manifest_problems

    try:
        manifest = read_mapping(manifest_path(engine), "engine manifest", yaml_ok=False)
    except AFTExportError:
        return {}
    bad = manifest_problems(manifest)
    return {k: v for k, v in manifest.items() if k not in bad}


def _engine_library(engine) -> str:
    return library_of(_manifest(engine).get("library")).name
