"""Offline TensorRT compatibility check: which TensorRT versions would refuse a graph, where, and why.

TensorRT cannot run where most of aft-export is developed and tested, and the first to
find a TensorRT defect must not be a user with a Jetson. So the graph is read the way
TensorRT's ONNX parser reads it (:mod:`~aft_export.trtcheck.view`: model-local
functions inlined where the version imports them, shapes inferred, weights told from
tensors) and every rule of every supported version (:mod:`~aft_export.trtcheck.rules`,
each with its source) is applied. This is a check of the parser's and the strongly typed
builder's documented and coded rules, not a TensorRT run: a graph that passes can still
fail to build for reasons no rule here knows (memory, tactics, a parser bug).

Export targets: a file whose metadata records ``export_target`` is checked, by default,
against the versions that target is for (``tensorrt`` and ``portable``: 10.3 and newer; ``tensorrt8``:
every supported version); a file made for another runtime on purpose (``ort-cpu``) is
not checked by TensorRT's rules: the check stage loads it in that runtime (this checker runs none).

Exit codes (CLI): 0 every checked version accepts the graph; 1 one refuses it; 3 no
refusal but warnings remain (including a requested version the check has no rules for).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from aft_export.errors import EXIT_FOR, AFTExportError, CheckFailed, Verdict, said
from aft_export.artifacts.ends import ends_of
from aft_export.artifacts.onnxio import ArtifactMeta, graph_precision, load_onnx
from aft_export.options import DEFAULT_TARGET, EXPORT_TARGETS
from aft_export.trtcheck.rules import RULES, checks_for
from aft_export.trtcheck.versions import COLUMNS, EDITIONS, JETPACK, SUPPORTED, Version, parse_version
from aft_export.trtcheck.view import GraphView
from aft_export.options.commands import command_line

TARGETS = {  # export target -> the TensorRT versions it is made for (None: not TensorRT)
    **{t.name: tuple(v for v in SUPPORTED if parse_version(v) >= t.oldest_tensorrt)
       for t in EXPORT_TARGETS.values()},
    "ort-cpu": None,
}

__all__ = ["SUPPORTED", "COLUMNS", "EDITIONS", "TARGETS", "CheckReport", "Finding", "check_model", "enforce", "format_report", "RULES"]


@dataclass
class Finding:
    rule: str
    severity: str  # error | warning
    versions: list[str]
    node: str | None
    op_type: str | None
    module: str
    function: dict | None  # the function body a node was inlined from, and the calling node
    message: str
    fix: str
    source: str
    summary: str = ""

    def where(self) -> str:
        if self.node is None:
            return "model"
        text = f"node {self.node} ({self.op_type})"
        if self.function:
            f = self.function
            ov = f" overload {f['overload']}" if f["overload"] else ""
            text += f" in the body of {f['domain']}::{f['name']}{ov} called by {f['call']}"
        if self.module:
            text += f", module {self.module}"
        return text


@dataclass
class CheckReport:
    path: str
    opset: int
    ir_version: int
    precision: str
    target: str
    # version -> accepts | refuses | warnings | not targeted | no rules; a file made for ONNX Runtime:
    # its target -> not loaded (the offline rules), accepts | refuses (the check stage loaded it)
    status: dict[str, str]
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # check_model's ``also``: each column's report as a check of that column alone makes it
    # (the build's parser, :func:`aft_export.tensorrt.build.check_for_version`); not in to_dict
    columns: dict[str, CheckReport] = field(default_factory=dict, repr=False, compare=False)

    @property
    def checked(self) -> list[str]:
        return [v for v, s in self.status.items() if s != "not targeted"]

    @property
    def verdict(self) -> Verdict:
        """failed where a checked version's rules refuse the graph; unverified where they only
        warn, or where the check has no rules for a version; else ok. The rules are checked
        offline: no TensorRT ran."""
        def who(versions, plural: str, singular: str) -> str:
            if TARGETS.get(self.target, ()) is None:  # made for another runtime: it loaded the graph
                return f"ONNX Runtime {singular}"
            return f"the offline rules of TensorRT {', '.join(versions)} {plural}"

        said = {s: [v for v in self.checked if self.status[v] == s]
                for s in ("refuses", "warnings", "no rules", "not loaded")}  # fmt: skip
        name = Path(self.path).name
        return Verdict.of(
            [f"{who(said['refuses'], 'refuse', 'refuses')} {name}"] if said["refuses"] else [],
            ([f"{who(said['warnings'], 'warn about', 'warns about')} {name}"] if said["warnings"] else [])
            + ([f"no rules for TensorRT {', '.join(said['no rules'])}: {name} not checked for it"]
               if said["no rules"] else [])
            + ([f"{name} is made for ONNX Runtime and was not loaded in it ({command_line('check')} loads it)"]
               if said["not loaded"] else []))  # fmt: skip

    @property
    def exit_code(self) -> int:
        return EXIT_FOR[self.verdict.status]

    def errors_for(self, version: str) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error" and version in f.versions]

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "columns"}
        return {**out, "checked": self.checked, "exit_code": self.exit_code, "verdict": self.verdict.to_dict()}


def _load(model_or_path):
    import onnx

    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path, "<model>"
    return load_onnx(model_or_path), str(model_or_path)


def check_model(model_or_path, versions: list[str] | None = None, also: tuple[str, ...] = ()) -> CheckReport:
    """Check an ONNX model (path or ModelProto) against TensorRT's rules.

    ``versions``: TensorRT versions to check ("10.3", or an edition's column such as "rtx-1.7");
    default every supported version the file's export target is for (the others are reported as
    not targeted). An edition is checked only when asked for. ``also``: columns whose reports
    are wanted as well, each as ``check_model(model, [column])`` makes it, under
    ``report.columns[column]``, from the same reading of the graph (the pipeline asks for the
    column of the engine library it builds with, so that the build need not check again).
    """
    model, name = _load(model_or_path)
    views: dict[bool, GraphView] = {}
    report = _check(model, name, versions, views)
    report.columns = {c: _check(model, name, [c], views) for c in dict.fromkeys(also)}
    return report


def _check(model, name: str, versions: list[str] | None, views: dict) -> CheckReport:
    """check_model's work, the graph's readings (:class:`GraphView`, per inlining) shared through ``views``."""
    meta = ArtifactMeta.of(model)
    ends_of(model, name)  # metadata its graph contradicts is refused here too, before any rule is read
    target = meta.export_target
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    report = CheckReport(name, opset, model.ir_version, graph_precision(model),
                         target if meta.ours else f"none named (another tool's file: checked as {target})", {})  # fmt: skip
    if target not in TARGETS:
        report.notes.append(f"unknown export target {target!r} in the metadata; checked as {DEFAULT_TARGET}")
        target = DEFAULT_TARGET
    targeted = TARGETS[target]
    if targeted is None:
        return _check_other_runtime(model, report, versions)

    wanted = list(dict.fromkeys(_normalise(v) for v in versions)) if versions else list(SUPPORTED)
    found: dict[tuple, Finding] = {}
    for name_v in wanted:
        v = Version(name_v)
        if v.table_version is None or v.v[0] == 9:
            report.status[name_v] = "no rules"
            report.notes.append(f"TensorRT {name_v}: the check has no rules for this version (it knows "
                                f"{', '.join(SUPPORTED)}); not checked")  # fmt: skip
            continue
        if not versions and name_v not in targeted:
            report.status[name_v] = "not targeted"
            continue
        view = views.get(v.imports_local_functions)
        if view is None:
            view = views[v.imports_local_functions] = GraphView.read(model, inline=v.imports_local_functions)
        state = "accepts"
        for r in checks_for(v):
            for node, message in r.check(view, v):
                where = view.where(node) if node is not None else {"node": None, "op_type": None, "module": "",
                                                                    "function": None}  # fmt: skip
                key = (r.id, where["node"], message if node is None else "")
                f = found.get(key)
                if f is None:
                    f = found[key] = Finding(r.id, r.severity, [], where["node"], where["op_type"], where["module"],
                                             where["function"], message.replace(f"TensorRT {name_v}", "TensorRT"),
                                             r.fix, r.source)  # fmt: skip
                    f.summary = r.summary
                f.versions.append(name_v)
                state = "refuses" if r.severity == "error" else (state if state == "refuses" else "warnings")
        if v.edition is None and v.table_version != name_v:
            report.notes.append(f"TensorRT {name_v}: no operator table of its own here; checked with the version-"
                                f"dependent rules at {name_v} and the {v.table_version} operator table")  # fmt: skip
            state = state if state == "refuses" else "warnings"
        report.status[name_v] = state
    report.findings = list(found.values())
    untargeted = [v for v, s in report.status.items() if s == "not targeted"]
    if untargeted:
        hint = f"export with {command_line('export', target='tensorrt8')}" if target == DEFAULT_TARGET and meta.ours else ""
        made = (f"made for TensorRT {targeted[0]}+ (export target {target})" if meta.ours else
                f"no export target named (another tool's file): checked as made for TensorRT {targeted[0]}+")  # fmt: skip
        report.notes.append(f"{made}; not checked for "
                            f"{', '.join(untargeted)}" + (f": {hint}" if hint else "")
                            + f" (ask for one with {command_line('check', trt_versions='VERSION')} to see what its rules "
                            f"would refuse)")  # fmt: skip
    return report


def _normalise(text: str) -> str:
    if str(text).strip().lower() in EDITIONS:
        return str(text).strip().lower()
    try:
        major, minor = parse_version(text)
    except ValueError:
        raise AFTExportError(said("{trt_versions} {text!r}: give a TensorRT version such as 10.3 (known: {known})",
                                  "check", text=text, known=", ".join(COLUMNS))) from None  # fmt: skip
    return f"{major}.{minor}"


def _check_other_runtime(model, report: CheckReport, versions) -> CheckReport:
    """A graph exported for ONNX Runtime on purpose: TensorRT's rules do not apply, and this offline
    checker runs no runtime; the check stage loads it (:func:`aft_export.tensorrt.checks.check_files`)."""
    report.notes.append(f"export target {report.target}: made for ONNX Runtime, not TensorRT (TensorRT rules not "
                        f"applied" + (f", TensorRT versions {', '.join(versions)} ignored" if versions else "") + ")")
    report.status[report.target] = "not loaded"
    return report


def format_report(report: CheckReport) -> list[str]:
    """The human-readable table: one column per version, one row per finding. Every verdict
    here is the offline rules' (TensorRT's parser and builder did not run: ``check`` reports
    them apart, as the parser's and the builder's)."""
    cols = list(report.status)
    lines = [f"{report.path}: opset {report.opset}, IR {report.ir_version}, {report.precision}, export target "
             f"{report.target}"]  # fmt: skip
    short = {"accepts": "pass", "refuses": "REFUSE", "warnings": "warn", "not targeted": "n/a", "no rules": "no rules"}
    head = f"{'':40s}" + "".join(f"{'TRT ' + c if c[0].isdigit() else c:>11s}" for c in cols)
    lines.append(head)
    lines.append(f"{'offline rules':40s}" + "".join(f"{short.get(report.status[c], report.status[c]):>11s}"
                                                     for c in cols))  # fmt: skip
    counts: dict[tuple, int] = {}
    for f in report.findings:
        counts[(f.rule, f.severity, tuple(f.versions))] = counts.get((f.rule, f.severity, tuple(f.versions)), 0) + 1
    for (rule_id, severity, vs), n in counts.items():
        mark = "FAIL" if severity == "error" else "warn"
        label = f"{rule_id} ({n} node{'s' if n > 1 else ''})" if n else rule_id
        lines.append(f"{label[:39]:40s}" + "".join(f"{(mark if c in vs else '-'):>11s}" for c in cols))
    groups: dict[tuple, list[Finding]] = {}
    for f in report.findings:
        groups.setdefault((f.rule, f.severity, tuple(f.versions)), []).append(f)
    for (rule_id, severity, vs), items in groups.items():
        first = items[0]
        lines += ["", f"{severity.upper()} {rule_id}: {first.summary}",
                  f"  TensorRT {', '.join(v + _jp(v) for v in vs)}",
                  f"  fix: {first.fix}", f"  source: {first.source}"]  # fmt: skip
        lines += [f"  - {f.where()}: {f.message}" for f in items]
    lines += [f"note: {n}" for n in report.notes]
    verdict = report.verdict
    if verdict.ok:
        lines.append("result: " + ("ONNX Runtime loads it" if TARGETS.get(report.target, ()) is None else
                                   "the offline rules of every checked version pass it"))  # fmt: skip
    else:
        lines.append(f"result: {'REFUSED' if verdict.status == 'failed' else 'not verified'}: "
                     + "; ".join(verdict.reasons))  # fmt: skip
    return lines


def rules_table(versions: list[str] | None = None) -> list[dict]:
    """Every rule the check applies: id, severity, the versions it exists in, what it
    refuses, the fix and the source it was taken from."""
    unknown = [v for v in versions or () if v not in COLUMNS]
    if unknown:
        raise AFTExportError(f"no rules for TensorRT {', '.join(unknown)}: the check knows {', '.join(COLUMNS)}")
    vs = [Version(v) for v in (versions or COLUMNS)]
    return [{"id": r.id, "severity": r.severity, "versions": [v.name for v in vs if r.applies(v)],
             "summary": r.summary, "fix": r.fix, "source": r.source} for r in RULES.values()]  # fmt: skip


def format_rules(rows: list[dict]) -> list[str]:
    lines = [f"{len(rows)} rules (id, severity, TensorRT versions it applies to):"]
    for r in rows:
        lines += ["", f"{r['id']} ({r['severity']}; {', '.join(r['versions']) or 'none'}): {r['summary']}",
                  f"  fix: {r['fix']}", f"  source: {r['source']}"]  # fmt: skip
    for column in [c for c in EDITIONS if any(c in r["versions"] for r in rows)]:
        lines += ["", f"column {column}:"] + [f"  - {n}" for n in edition_notes(column)]
    return lines


def enforce(report: CheckReport, log=print, what: str = "this step") -> None:
    """Stop (AFTExportError) when every checked version refuses the graph; warn through
    ``log`` when only some do (a version-specific rule: the graph is still good for the
    others). The error names the first refusal, its fix and the command for the rest."""
    refusing = [v for v in report.checked if report.status[v] == "refuses"]
    if not refusing:
        return
    first = next(f for f in report.findings if f.severity == "error" and set(f.versions) & set(refusing))
    more = len({(f.rule, f.node) for f in report.findings if f.severity == "error"}) - 1
    detail = (f"{first.rule} at {first.where()}: {first.message}; fix: {first.fix}"
              + (f" (and {more} more: aft-export check {report.path})" if more else ""))  # fmt: skip
    if len(refusing) == len(report.checked):
        raise CheckFailed(f"{what} stops: TensorRT {', '.join(refusing)} would refuse {report.path}: {detail}")
    log(f"warning: TensorRT {', '.join(refusing)} would refuse {report.path} (the other checked versions accept "
        f"it): {detail}")  # fmt: skip


def edition_notes(column: str) -> list[str]:
    """The documented differences of an edition's column (empty for a standard version)."""
    e = EDITIONS.get(column)
    return [f"{e.title} = TensorRT {e.base}'s rules plus: {n}" for n in e.notes] if e else []


def _jp(v: str) -> str:
    return f" / {JETPACK[v]}" if v in JETPACK else ""
