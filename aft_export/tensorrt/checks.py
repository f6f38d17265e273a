"""``aft-export check``: ONNX files against the offline rules of TensorRT's parsers and builders
(:mod:`aft_export.trtcheck`), and, where TensorRT or TensorRT-RTX is installed, its own parser (and
builder), as one typed result (:class:`CheckResult`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from aft_export.artifacts.onnxio import compute_nodes
from aft_export.errors import EXIT_FOR, AFTExportError, Judged, RuntimeMissing, Verdict, said
from aft_export.runtimes import title_of


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

        if self.rules is not None:
            return format_rules(self.rules)
        out: list[str] = []
        for i, (report, real) in enumerate(zip(self.reports, self.real)):
            out += ([""] if i else []) + format_report(report) + real_check_lines(real)
        return out

    def to_dict(self) -> dict:
        if self.rules is not None:
            return {"rules": copy.deepcopy(self.rules)}
        files = [{**r.to_dict(), **({"real": x, "verdict": v.to_dict(), "exit_code": EXIT_FOR[v.status]} if x else {})}
                 for r, x, v in zip(self.reports, self.real, self.verdicts)]  # fmt: skip
        return {"files": files, "verdict": self.verdict.to_dict()}


def real_check_lines(x: dict | None) -> list[str]:
    """``check``'s lines for the installed library (:func:`aft_export.tensorrt.build.real_check`): what its
    ONNX parser (and, asked for, its builder) made of the file, beside the offline rules."""
    if not x:
        return []
    title = f"{title_of(x['library'])} {x['version']}"
    warned = "warnings not captured" if x["warnings"] is None else f"{len(x['warnings'])} warnings"
    lines = [f"parser, {title}: {'parses it' if x['parses'] else 'REFUSES it'} ({len(x['errors'])} errors, {warned})"]
    if x.get("network"):
        lines.append(f"parsed network, {title}: {x['network']['num_layers']} layers; compute layers "
                     f"{compute_nodes(x['network'].get('compute') or {})}")  # fmt: skip
    if x["builds"] is not None:
        lines.append(f"builder, {title}: " + (f"builds it ({x['engine_bytes'] / 1e6:.2f} MB engine, in memory)"
                                              if x["builds"] else "FAILS"))  # fmt: skip
    lines += [f"  - {e}" for e in x["errors"][:10]]
    lines.append(f"offline rules (column {x['column']}) vs the parser: "
                 + ("agree" if x["agrees"] else "DISAGREE (" + x["disagreement"] + ")"))
    return lines


def rules_result(versions: list[str] | None = None) -> CheckResult:
    """The rules themselves, of ``versions`` (None: every version), nothing checked."""
    from aft_export.trtcheck import rules_table

    return CheckResult([], [], [], rules=rules_table(versions))


def check_files(models: list[str], versions: list[str] | None = None, library: str = "auto", build: bool = False,
                offline_only: bool = False, strict: bool = False) -> CheckResult:  # fmt: skip
    """Each of ``models`` against the offline rules of ``versions`` (None: every version), and
    through the installed library's parser (``library``; with ``build`` its builder too) unless
    ``offline_only``; ``strict``: a warning of the rules fails the file."""
    from aft_export.tensorrt.build import check_verdict
    from aft_export.trtcheck import check_model

    if not models:
        raise AFTExportError(said("no ONNX file to check; give one or more (or {rules} to list the rules)",
                                  "check"))
    reports = [_load_in_its_runtime(m, check_model(m, versions)) for m in models]
    real = _real_checks(models, reports, library, build, offline_only)
    return CheckResult(reports, real, [check_verdict(r, x, strict) for r, x in zip(reports, real)])


def _load_in_its_runtime(model, report):
    """A file made for ONNX Runtime on purpose (the offline rules leave it "not loaded"): ONNX Runtime
    must load it."""
    from aft_export.runners import OrtRunner
    from aft_export.trtcheck import Finding

    if report.status.get(report.target) != "not loaded":
        return report
    report.notes.append("checked by loading it in ONNX Runtime")
    try:
        OrtRunner(model)
        report.status[report.target] = "accepts"
    except AFTExportError as exc:
        report.status[report.target] = "refuses"
        report.findings.append(Finding("ort.load", "error", [report.target], None, None, "", None,
                                       f"ONNX Runtime cannot load the graph: {str(exc).splitlines()[0][:300]}",
                                       "re-export the model", "onnxruntime.InferenceSession"))  # fmt: skip
    return report


def _real_checks(models, reports, library: str, also_build: bool, offline_only: bool) -> list:
    """Each file through the installed library's parser (None per file where none is installed,
    or with ``offline_only``; ``library`` naming a missing one is an error)."""
    from aft_export.tensorrt.library import import_library

    if offline_only:
        return [None] * len(models)
    try:
        _, name, version = import_library(library)
    except RuntimeMissing:
        if library != "auto":
            raise
        return [None] * len(models)
    from aft_export.tensorrt.build import offline_column, real_check
    from aft_export.trtcheck import TARGETS, check_model

    column = offline_column(name, version)
    out = []
    for model, report in zip(models, reports):
        if TARGETS.get(report.target, ()) is None:  # made for ONNX Runtime: its runtime judged it, not TensorRT's
            out.append(None)
            continue
        status = report.status.get(column)
        if status in (None, "not targeted"):
            status = check_model(model, [column]).status[column]
        out.append(real_check(model, status, column, name, also_build))
    return out
