"""The typed results of the Python API (:mod:`aft_export.api`) for the stages that hand back
their report as plain data: each holds the paths, the figures and ``verdict`` (the one
:class:`~aft_export.errors.Verdict`), says ``passed``, and ``to_dict()`` is exactly what the
command prints as JSON (tests/test_api.py compares them).

The stages with a typed result of their own return it through the API as it is
(:class:`~aft_export.exporting.exporter.ExportResult`, :class:`~aft_export.tensorrt.build.BuildResult`,
:class:`~aft_export.workflow.pipeline.PipelineResult`, :class:`~aft_export.quantization.stage.QuantizeResult`,
...). Every result's ``passed`` is :class:`~aft_export.errors.Judged`'s: its verdict's.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from aft_export.errors import AFTExportError, Judged, Verdict
from aft_export.quantization.stage import QuantizeResult


# ``quantize``'s result, built by its stage (the name the Python API's docs give it)
Quantized = QuantizeResult


@dataclass
class ParityResult(Judged):
    """``parity``: each artifact against the PyTorch reference (``artifacts``: one row each, its
    metrics per input set, its limits, its failures; a row's own ``passed``: within its limits)."""

    reference: str
    data: str
    images: int
    artifacts: list[dict]
    skipped: int
    verdict: Verdict

    @classmethod
    def of(cls, report: dict) -> ParityResult:
        return cls(report["reference"], report["data"], report["images"], report["artifacts"], report["skipped"],
                   Verdict.from_dict(report["verdict"]))  # fmt: skip

    def to_dict(self) -> dict:
        return {"reference": self.reference, "data": self.data, "images": self.images,
                "artifacts": copy.deepcopy(self.artifacts), "passed": self.passed, "skipped": self.skipped,
                "verdict": self.verdict.to_dict()}  # fmt: skip


@dataclass
class BenchResult(Judged):
    """``bench``: latency and throughput, a row per artifact and batch size. With ``reference``, ``deploy``
    is the deploy table (:class:`~aft_export.verify.deploy.DeployTable`: every file on every runtime here,
    proven, then timed), whose verdict this is, and ``to_dict()`` is the table's, as the command prints
    it; the rows are its timings in the form of those without it."""

    machine: str
    processor: str
    rows: list[dict]
    skipped: list[dict]
    verdict: Verdict
    profiles: list[dict] | None = None  # with ``profile``: ONNX Runtime's time per op type
    deploy: Any = None  # with ``reference``: the DeployTable

    @classmethod
    def of(cls, report: dict) -> BenchResult:
        return cls(report["machine"], report["processor"], report["rows"], report["skipped"],
                   Verdict.from_dict(report["verdict"]), report.get("profiles"))  # fmt: skip

    @classmethod
    def of_table(cls, table) -> BenchResult:
        """The deploy table ``table`` as bench's result."""
        timed = table.bench_report(tuple(table.runtimes))
        return cls(timed["machine"], timed["processor"], timed["rows"], timed["skipped"], table.verdict, deploy=table)

    @property
    def notes(self) -> list[str]:
        """What the deploy table says of its inputs (a file given twice); [] without ``reference``."""
        return list(self.deploy.notes) if self.deploy is not None else []

    def to_dict(self) -> dict:
        if self.deploy is not None:
            return self.deploy.to_dict()
        out = {"machine": self.machine, "processor": self.processor, "rows": copy.deepcopy(self.rows),
               "skipped": copy.deepcopy(self.skipped), "verdict": self.verdict.to_dict()}  # fmt: skip
        if self.profiles is not None:
            out["profiles"] = copy.deepcopy(self.profiles)
        return out


@dataclass
class EvalResult(Judged):
    """``evaluate``: top-1/top-5 of each artifact and its top-1 agreement with the first, one row
    each, and the verdict; ``to_dict()`` is what ``eval`` prints as JSON."""

    rows: list[dict]
    verdict: Verdict

    def to_dict(self) -> dict:
        return {"rows": copy.deepcopy(self.rows), "verdict": self.verdict.to_dict()}


@dataclass
class InferResult(Judged):
    """``infer``: the top classes of each image (``results``)."""

    artifact: str
    backend: str
    precision: str
    results: list[dict]
    verdict: Verdict = field(default_factory=Verdict)  # classifying checks nothing that can fail

    def to_dict(self) -> dict:
        return {"artifact": self.artifact, "backend": self.backend, "precision": self.precision,
                "results": copy.deepcopy(self.results)}  # fmt: skip


@dataclass
class InfoResult(Judged):
    """``info``: what an artifact is (``kind``: checkpoint, onnx or engine) and what that kind says
    (``details``, the fields of its JSON)."""

    kind: str
    details: dict
    verdict: Verdict = field(default_factory=Verdict)  # describing checks nothing

    def to_dict(self) -> dict:
        return {"kind": self.kind, **copy.deepcopy(self.details)}


@dataclass
class TrainResult(Judged):
    """``train``: the checkpoint written (``output``) and its metrics (``to_dict()``: what the
    command prints)."""

    output: str
    metrics: dict
    verdict: Verdict = field(default_factory=Verdict)

    def to_dict(self) -> dict:
        return copy.deepcopy(self.metrics)


@dataclass
class CheckResult(Judged):
    """``check``: the offline TensorRT rules' report of each file (``reports``), the installed
    parser's result where there is one (``real``, None per file where not), and their verdict.
    With ``rules``: the rules themselves (``rules``), nothing checked. ``to_dict()`` is what
    ``check`` prints as JSON: each file's report under ``files`` and the verdict, or the rules under ``rules``."""

    reports: list[Any]
    real: list[dict | None]
    verdicts: list[Verdict]
    rules: list[dict] | None = None

    @property
    def verdict(self) -> Verdict:
        return Verdict.combine(*self.verdicts)

    def lines(self) -> list[str]:
        """What ``check`` prints as text: the rules, or each file's table with the installed parser's result."""
        from aft_export.trtcheck import format_report, format_rules
        from aft_export.workflow.report import format_real_check

        if self.rules is not None:
            return format_rules(self.rules)
        out: list[str] = []
        for i, (report, real) in enumerate(zip(self.reports, self.real)):
            out += ([""] if i else []) + format_report(report) + format_real_check(real)
        return out

    def to_dict(self) -> dict:
        from aft_export.errors import EXIT_FOR

        if self.rules is not None:
            return {"rules": copy.deepcopy(self.rules)}
        files = [{**r.to_dict(), **({"real": x, "verdict": v.to_dict(), "exit_code": EXIT_FOR[v.status]} if x else {})}
                 for r, x, v in zip(self.reports, self.real, self.verdicts)]  # fmt: skip
        return {"files": files, "verdict": self.verdict.to_dict()}


class Server(Judged):
    """``serve`` from Python: NVIDIA Triton serving the artifacts in a thread of this process,
    ready when :func:`aft_export.serve` returns it; ``stop()`` (or leaving its ``with`` block)
    stops it as SIGINT stops the command: the requests in flight are answered, every process it
    started ends. ``http``, ``grpc`` and ``metrics`` say where it listens (127.0.0.1 unless
    ``host`` said otherwise), ``models`` what it serves."""

    def __init__(self, thread: threading.Thread, stop, outcome: dict) -> None:
        self._thread, self._stop, self._outcome = thread, stop, outcome

    @property
    def served(self):
        return self._stop.served

    @property
    def http(self) -> str:
        return self.served.http

    @property
    def grpc(self) -> str:
        return self.served.grpc

    @property
    def metrics(self) -> str:
        return self.served.metrics

    @property
    def models(self) -> list[str]:
        return [m for s in self.served.models for m in (s.name, s.image_model)]

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def verdict(self) -> Verdict:
        return Verdict()  # it serves: a server that could not start raised instead

    def to_dict(self) -> dict:
        return {"http": self.http, "grpc": self.grpc, "metrics": self.metrics, "models": self.models}

    def stop(self) -> None:
        """Stop the server and wait until every process it started has ended."""
        self._stop.event.set()
        self._thread.join()
        error = self._outcome.get("error")
        if error is not None and not isinstance(error, AFTExportError):
            raise error

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
