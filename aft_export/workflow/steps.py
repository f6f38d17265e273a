"""What a pipeline run is made of, and the loop that runs it: a step (:class:`PipelineStep`)
is given the run's fixed :class:`Context` and the earlier results it names, and gives back an
:class:`Outcome`; :func:`run_steps` runs them in order, logging and timing each into its
:class:`Step` record. What steps hand on: :class:`Made` (an ONNX file written),
:class:`Engines`, :class:`ParityRun`, :class:`DeployRun`; the run's :class:`PipelineResult`.
Which steps a run has, and what each does: :mod:`aft_export.workflow.pipeline`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from aft_export.errors import Judged, Verdict
from aft_export.options import PipelineOptions
from aft_export.verify.deploy import DeployTable
from aft_export.verify.parity import ParityResult, ParityRow


@dataclass
class Step:
    name: str
    status: str = "ok"  # ok | skipped | failed
    seconds: float = 0.0
    detail: str = ""


@dataclass
class PipelineResult(Judged):
    run_dir: str
    steps: list[Step] = field(default_factory=list)
    summary: list[dict] = field(default_factory=list)
    unverified: dict[str, str] = field(default_factory=dict)  # artifact -> why it was not (fully) verified
    verdict: Verdict = field(default_factory=Verdict)  # the stages' verdicts, combined
    deploy: dict = field(default_factory=dict)  # what to deploy where (aft_export.verify.deploy.DeployTable.to_dict)
    batches: tuple[int, ...] = ()  # the batch sizes the summary times (its columns)

    def lines(self) -> list[str]:
        """What ``aft-export pipeline`` prints at the end (``workflow.report.format_pipeline_result``)."""
        from aft_export.workflow.report import format_pipeline_result

        return format_pipeline_result(self, self.batches)

    def to_dict(self) -> dict:
        """What `aft-export pipeline` prints as JSON (the whole report is RUN/report.json)."""
        return {"run_dir": self.run_dir, "passed": self.passed, "unverified": self.unverified,
                "verdict": self.verdict.to_dict(), "summary": self.summary}


class Outcome(NamedTuple):
    """What a step gives back: the value kept under its ``produces`` name, and its line in
    the manifest and report (``detail``; ``status`` ok, skipped or failed)."""

    value: Any
    detail: str = ""
    status: str = "ok"


@dataclass(frozen=True)
class PipelineStep:
    """One step: ``run(ctx, *inputs)`` is given the run's fixed context (:class:`Context`)
    and the earlier results named by ``inputs``, in that order; its outcome's value is kept
    as ``produces``. A step that is not ``recorded`` (gathering what earlier steps made,
    making the runners) is neither logged nor listed in the manifest's steps."""

    name: str
    inputs: tuple[str, ...]
    run: Callable[..., Outcome]
    produces: str
    recorded: bool = True


@dataclass(frozen=True)
class Context:
    """What every step may use, fixed for the run."""

    ckpt: Path
    loaded: tuple
    opts: PipelineOptions
    work: Path
    final: Path
    calib: str
    cache_writes: list
    library: str | None  # the engine step's library; None: no engines, for the reason why_not
    why_not: str
    also: tuple  # the offline check's column for that library's parser, checked with each artifact


class Made(NamedTuple):
    """An ONNX file an export or quantise step wrote: its record in the manifest, the
    TensorRT check report made of it, the stage's result (to hand on), the fp32 file it is of."""

    kind: str  # export | quantize
    key: str  # its key in the manifest's results: the target (export) or the file's name
    path: Path
    record: dict
    report: object
    result: Any
    fp32: Path
    purpose: dict | None = None  # what it is for and its compute per precision (aft_export.artifacts.purpose.file_purpose)


@dataclass
class Engines:
    files: list[Path] = field(default_factory=list)
    records: dict | None = None  # the manifest's results["engines"]; None: no engine step ran
    runners: dict = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)  # engine -> why it was not run here


class ParityRun(NamedTuple):
    result: ParityResult  # with the engines that could not run here as skipped rows
    differences: dict  # by file name (the plots')

    @property
    def rows(self) -> list[ParityRow]:
        return self.result.artifacts

    @property
    def failed(self) -> list[str]:
        """The names of the files that fail parity."""
        return [Path(r.artifact).name for r in self.rows if r.status == "fail"]


class DeployRun(NamedTuple):
    table: DeployTable
    bench: dict  # the ONNX Runtime, PyTorch and engine rows in aft_export.verify.bench's form (the summary's latency)


def run_steps(steps: list[PipelineStep], ctx, given: dict, log) -> dict:
    """Run ``steps`` in order, each on the results named by its inputs (``given`` and what
    earlier steps produced; ``steps``: the records of the recorded ones, as the manifest
    lists them). Each recorded step is logged and timed; its record is in the list from
    its start (so the report step lists itself, at 0.0s). A step that raises stops the
    run: the error goes to the caller as it is (an AFTExportError exits with its
    ``exit_code``, a signal with 128 + its number; aft_export.errors). A check that fails
    is a step's result (status ``failed``), not an error: the run goes on to the report."""
    records: list[Step] = []
    results = {**given, "steps": records}
    for step in steps:
        record = Step(step.name) if step.recorded else None
        if record:
            records.append(record)
            log(f"[{len(records)}] {step.name} ...")
        started = time.perf_counter()
        outcome = step.run(ctx, *(results[name] for name in step.inputs))
        results[step.produces] = outcome.value
        if record:
            record.seconds = round(time.perf_counter() - started, 2)
            record.status, record.detail = outcome.status, outcome.detail
            log(f"    {record.status} in {record.seconds:.1f}s" + (f": {record.detail}" if record.detail else ""))
    return results
