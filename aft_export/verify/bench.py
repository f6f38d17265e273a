"""Latency and throughput per backend, precision and batch size.

Timings are percentiles over many runs after a warm-up; the thread count is recorded
with them. These are measurements for a report, never assertions in a test.
"""

from __future__ import annotations

import copy
import platform
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from aft_export.errors import Judged, RuntimeMissing, Verdict
from aft_export.options import BenchOptions
from aft_export.options.commands import BENCH
from aft_export.runtimes import BACKENDS, RUNTIMES
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.runners import OpenVinoRunner, OrtRunner, load_runner


@dataclass
class BenchResult(Judged):
    """``bench``: latency and throughput, a row per artifact and batch size. With a reference, ``deploy``
    is the deploy table (:class:`~aft_export.verify.deploy.DeployTable`: every file on every runtime here,
    proven, then timed), whose verdict this is, and ``to_dict()`` is the table's, as the command prints
    it; the rows are its timings in the form of those without it."""

    machine: str
    processor: str
    rows: list[dict]
    skipped: list[dict]
    verdict: Verdict
    profiles: list[dict] | None = None  # with ``profile``: ONNX Runtime's time per op type
    deploy: Any = None  # with a reference: the DeployTable

    @classmethod
    def of_table(cls, table) -> BenchResult:
        """The deploy table ``table`` as bench's result."""
        timed = table.bench_report(tuple(table.runtimes))
        return cls(timed["machine"], timed["processor"], timed["rows"], timed["skipped"], table.verdict, deploy=table)

    @property
    def notes(self) -> list[str]:
        """What the deploy table says of its inputs (a file given twice); [] without a reference."""
        return list(self.deploy.notes) if self.deploy is not None else []

    def lines(self) -> list[str]:
        """The table ``bench`` prints without a reference: a line per artifact and batch, what was skipped, and
        each profile (with a reference, the deploy table's: :func:`aft_export.workflow.report.deploy_lines`)."""
        lines = [f"{'artifact':32s} {'backend':13s} {'prec':5s} {'batch':>5s} {'thr':>3s} {'p50 ms':>8s} "
                 f"{'p90 ms':>8s} {'p99 ms':>8s} {'img/s':>9s}"]  # fmt: skip
        for r in self.rows:
            lines.append(f"{r['artifact'][-32:]:32s} {r['backend']:13s} {r['precision']:5s} {r['batch']:5d} "
                         f"{r['threads']:3d} {r['p50_ms']:8.2f} {r['p90_ms']:8.2f} {r['p99_ms']:8.2f} "
                         f"{r['images_per_s']:9.1f}")  # fmt: skip
        for s in self.skipped:
            lines.append(f"{s['artifact'][-32:]:32s} {'batch ' + str(s['batch']) if s['batch'] else 'all batches'}: "
                         f"skipped ({s['reason']})")  # fmt: skip
        runtimes = {r["artifact"]: r["backend"] for r in self.rows}
        for p in self.profiles or []:
            backend = runtimes.get(p["artifact"], "")
            title = RUNTIMES[backend].title if backend in RUNTIMES else "the runtime's"
            lines += ["", f"{p['artifact']}, batch {p['batch']}: {title} profile over {p['runs']} runs on {backend}"]
            if not p["ops"]:
                lines.append(f"  no profile: {p.get('reason', 'no node events recorded')}")
                continue
            width = max(28, *(len(op["op_type"]) for op in p["ops"]))  # OpenVINO's: the op type and its kernel
            lines.append(f"  {'op type':{width}s} {'share':>6s} {'ms/run':>8s} {'nodes':>5s}")
            for op in p["ops"]:
                lines.append(f"  {op['op_type']:{width}s} {100 * op['share']:5.1f}% {op['ms'] / p['runs']:8.2f} "
                             f"{op['nodes']:5d}")  # fmt: skip
            reference = [op for op in p["ops"] if op.get("reference")]
            if reference:  # said wherever one ran, even too briefly for the counters (0.0%): which kernels ran is fixed
                slow = sum(op["share"] for op in reference)
                lines.append(f"  {100 * slow:.1f}% of the node time in OpenVINO's reference kernels (ref*)")
        return lines

    def to_dict(self) -> dict:
        if self.deploy is not None:
            return self.deploy.to_dict()
        out = {"machine": self.machine, "processor": self.processor, "rows": copy.deepcopy(self.rows),
               "skipped": copy.deepcopy(self.skipped), "verdict": self.verdict.to_dict()}  # fmt: skip
        if self.profiles is not None:
            out["profiles"] = copy.deepcopy(self.profiles)
        return out


def bench_runner(runner, batch: int, warmup: int = BenchOptions.warmup, iters: int = BenchOptions.iters,
                 seed: int = 0) -> dict:  # fmt: skip
    runner.check_batch(batch, "batch_sizes")  # refused with an estimate, before the kernel kills the run
    feeds = {runner.input_name: runner.random_input(batch, seed)}
    for _ in range(warmup):
        runner.run(feeds)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        runner.run(feeds)
        times.append(time.perf_counter() - t)
    ms = np.array(times) * 1e3
    return {
        "artifact": runner.path,
        "backend": runner.backend,
        "precision": runner.info.precision,
        "batch": batch,
        "threads": runner.threads,
        "warmup": warmup,
        "iters": iters,
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)),
        "images_per_s": float(batch * iters / (ms.sum() / 1e3)),
    }


def bench(artifacts: list[str], batches=BenchOptions.batch_sizes, warmup: int = BenchOptions.warmup,
          iters: int = BenchOptions.iters, threads: int = 0, backend: str = BenchOptions.backend,
          runners: dict | None = None, profile: bool = False,
          preprocessing: ForeignPreprocessing | None = None) -> BenchResult:  # fmt: skip
    """Latency and throughput of each artifact at each batch size (a :class:`BenchResult`). ``runners``: runners
    already made, by artifact path; ``preprocessing``: the input size of an ONNX file another
    tool wrote (or the JSON beside it). ``profile``: also the runtime's time per op type for
    each ONNX file at each batch size (``iters`` runs after one warm-up, in a profiling
    session of its own, so the timings above are not slowed by the profiler): ONNX Runtime's
    profiler, or OpenVINO's node counters with the kernel each op type ran. ``backend``: where
    ONNX files run (:data:`~aft_export.runtimes.BACKENDS`)."""
    for name, value in (("batch_sizes", batches), ("warmup", warmup), ("iters", iters), ("threads", threads)):
        BENCH[name].check(value, "bench")  # held to bench's declarations, as its door holds them
    rows, skipped, profiles = [], [], []
    for artifact in artifacts:
        try:
            runner = (runners or {}).get(str(artifact)) or load_runner(artifact, backend, threads=threads,
                                                                       preprocessing=preprocessing)  # fmt: skip
        except RuntimeMissing as exc:  # skipped with the reason, never timed as something else
            skipped.append({"artifact": artifact, "batch": None, "reason": str(exc)})
            continue
        for batch in batches:
            if runner.fixed_batch is not None and batch != runner.fixed_batch:
                skipped.append({"artifact": artifact, "batch": batch,
                                "reason": f"graph has a fixed batch of {runner.fixed_batch}"})  # fmt: skip
                continue
            rows.append(bench_runner(runner, batch, warmup, iters))
            if profile:
                profiles.append(_profile(artifact, runner, batch, iters, backend, threads, preprocessing))
    return BenchResult(platform.machine(), platform.processor(), rows, skipped, bench_verdict(skipped),
                       profiles if profile else None)  # fmt: skip


def bench_verdict(skipped: list[dict]) -> Verdict:
    """ok when every artifact was timed at every batch size; else not verified, saying what was
    skipped and why (a runtime or GPU missing here, a fixed-batch graph at another batch size)."""
    return Verdict.of(unverified=[f"{s['artifact']}" + (f" at batch {s['batch']}" if s["batch"] else "")
                                  + f" not timed: {s['reason']}" for s in skipped])  # fmt: skip


def _profile(artifact, runner, batch: int, iters: int, backend: str, threads: int, preprocessing=None) -> dict:
    """The runtime's time per op type for one artifact at one batch size: ONNX Runtime's profiler, or
    OpenVINO's node counters (each op type with the kernel it ran), after one warm-up run."""
    entry = {"artifact": str(artifact), "batch": batch, "runs": iters}
    if isinstance(runner, OrtRunner):
        prof = OrtRunner(str(artifact), BACKENDS[backend].ort_kind, threads=threads, profile=True,
                         preprocessing=preprocessing)  # fmt: skip
        bench_runner(prof, batch, warmup=1, iters=iters)
        return {**entry, "ops": prof.op_profile(skip_runs=1)}
    if isinstance(runner, OpenVinoRunner):
        prof = OpenVinoRunner(str(artifact), threads=threads, preprocessing=preprocessing, compute=runner.compute,
                              profile=True)  # fmt: skip
        bench_runner(prof, batch, warmup=1, iters=iters)
        return {**entry, "ops": prof.op_profile(skip_runs=1)}
    return {**entry, "ops": [], "reason": f"profiles come from ONNX Runtime and OpenVINO; {runner.backend} has none"}
