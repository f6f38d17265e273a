"""A verdict is data (issue 27, item 5): each stage hands back ok, failed or not verified with
the reasons (:class:`aft_export.errors.Verdict`); the command line maps it to the exit-code
table, the pipeline combines the stages', and the reports only render it."""

import ast
import json
from types import SimpleNamespace

import pytest

from aft_export.errors import EXIT_FOR, Verdict
from aft_export.trtcheck import CheckReport
from tests.conftest import REPO


def test_a_verdict_is_the_worst_of_its_parts_with_every_reason():
    assert Verdict().ok and Verdict.combine().ok and Verdict.of().status == "ok"
    unsure, failed = Verdict.of(unverified=["a skipped"]), Verdict.of(["b failed"])
    assert Verdict.combine(Verdict(), unsure).status == "unverified"
    both = Verdict.combine(unsure, failed)
    assert both == Verdict("failed", ("b failed", "a skipped")) and both.to_dict()["reasons"] == ["b failed", "a skipped"]
    assert Verdict.from_dict(json.loads(json.dumps(both.to_dict()))) == both
    assert failed.at_most_unverified() == Verdict("unverified", ("b failed",)) and unsure.at_most_unverified() == unsure
    assert [EXIT_FOR[v.status] for v in (Verdict(), failed, unsure)] == [0, 1, 3]
    with pytest.raises(ValueError):
        Verdict("passed")


def test_passed_is_one_rule_every_result_reads():
    """``passed`` is nothing failed (ok, or not verified: a skip is no failure), decided by Verdict.passed
    alone; every result of a command reads it, from the stage that made it to the Python API's."""
    import aft_export
    from aft_export import results
    from aft_export.errors import Judged
    from aft_export.exporting.exporter import ExportResult
    from aft_export.serving.repository import RepoResult
    from aft_export.tensorrt.build import BuildResult
    from aft_export.verify.deploy import DeployTable
    from aft_export.workflow.doctor import DoctorResult
    from aft_export.workflow.steps import PipelineResult

    assert [Verdict(s).passed for s in ("ok", "unverified", "failed")] == [True, True, False]
    typed = [ExportResult, RepoResult, BuildResult, DeployTable, DoctorResult, PipelineResult, results.Server,
             *(c for c in vars(results).values() if isinstance(c, type) and c.__name__.endswith("Result"))]
    for cls in typed:
        assert issubclass(cls, Judged) and cls.passed is Judged.passed, cls
    for status in ("ok", "unverified", "failed"):
        unsure = results.ParityResult("m.pt", "cifar10:test", 8, [], 0, Verdict(status, ("why",)))
        assert unsure.passed == unsure.to_dict()["passed"] == (status != "failed")
    assert aft_export.errors.Judged is Judged


def _report(**status) -> CheckReport:
    return CheckReport("dir/m.onnx", 18, 10, "fp32", "tensorrt", {k.replace("_", "."): v for k, v in status.items()})


def test_the_offline_rules_verdict_names_what_was_checked():
    ok = _report(v8_5="not targeted", v10_3="accepts", v11_4="accepts")
    assert ok.verdict.ok and ok.exit_code == 0 and ok.to_dict()["verdict"] == {"status": "ok", "reasons": []}
    refused = _report(v8_5="refuses", v10_3="accepts", v12_1="no rules")
    assert refused.verdict == Verdict("failed", ("the offline rules of TensorRT v8.5 refuse m.onnx",
                                                 "no rules for TensorRT v12.1: m.onnx not checked for it"))
    assert refused.exit_code == 1 and refused.verdict.at_most_unverified().status == "unverified"
    warned = _report(v10_3="warnings")
    assert warned.verdict.reasons == ("the offline rules of TensorRT v10.3 warn about m.onnx",) and warned.exit_code == 3


def test_each_stage_s_verdict_from_its_rows():
    from aft_export.verify.bench import bench_verdict
    from aft_export.tensorrt.build import check_verdict
    from aft_export.workflow.doctor import Check, DoctorResult
    from aft_export.verify.evaluate import eval_verdict
    from aft_export.verify.parity import InputParity, ParityRow, parity_verdict

    rows = [ParityRow("a.onnx", inputs={"real": InputParity({})}),
            ParityRow("b.onnx", inputs={"real": InputParity({}, ["max_abs 0.2 > 0.1"])}),
            ParityRow.skipped("c.engine", "no GPU here")]  # fmt: skip
    assert [(r.status, r.passed) for r in rows] == [("pass", True), ("fail", False), ("skipped", None)]
    assert parity_verdict(rows) == Verdict("failed", ("b.onnx fails parity: real: max_abs 0.2 > 0.1",
                                                      "c.engine skipped by parity: no GPU here"))
    assert parity_verdict(rows[::2]).status == "unverified" and parity_verdict(rows[:1]).ok
    assert eval_verdict([{"artifact": "a", "status": "ok"}, {"artifact": "e", "status": "skipped", "reason": "no GPU"}]) \
        == Verdict("unverified", ("e not evaluated: no GPU",))  # fmt: skip
    assert bench_verdict([{"artifact": "m.onnx", "batch": 4, "reason": "fixed batch 2"}]).reasons == (
        "m.onnx at batch 4 not timed: fixed batch 2",)
    real = {"library": "tensorrt-rtx", "version": "1.7.1", "column": "rtx-1.7", "verdict": "accepts", "parses": True,
            "agrees": False, "disagreement": "false refusal"}  # fmt: skip
    offline = _report(v10_3="refuses")
    assert check_verdict(offline, real).status == "failed"  # the rules refuse it
    assert check_verdict(_report(v10_3="accepts"), real).ok
    assert check_verdict(_report(v10_3="accepts"), real, strict=True).reasons == (
        "the offline rules (column rtx-1.7) and TensorRT-RTX 1.7.1's parser disagree on m.onnx: false refusal",)
    assert check_verdict(_report(v10_3="accepts"), {**real, "verdict": "refuses", "parses": False}).reasons == (
        "TensorRT-RTX 1.7.1's parser refuses m.onnx",)
    doctor = DoctorResult("run", {}, [Check("export", status="ok"), Check("build", detail="no GPU")])
    assert doctor.verdict == Verdict("unverified", ("build skipped: no GPU",)) and doctor.exit_code == 3


def test_the_pipeline_combines_the_stages_verdicts_not_its_report(tmp_path, monkeypatch):
    """The run's verdict comes from the stages' data: a report cell that reads like a refusal
    changes nothing, and a stage that was not verified makes the run not verified whatever
    the cell says (the step writes the manifest and report from made-up results here)."""
    from aft_export.workflow import pipeline

    work = tmp_path / "work"
    work.mkdir()
    for name in ("m.pt", "model.onnx", "model.fp16.onnx"):
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setattr(pipeline, "pipeline_plots", lambda *a: {})
    monkeypatch.setattr(pipeline, "deploy_plots", lambda *a: {})
    import aft_export.workflow.report as report

    monkeypatch.setattr(report, "trt_verdict", lambda r: "refused 10.3 (warn)")
    opts = pipeline.PipelineOptions(bench_batch_sizes=(1,))
    meta = SimpleNamespace(sha256="0" * 64, model_name="m")
    ctx = pipeline.Context(tmp_path / "m.pt", (None, meta), opts, work, tmp_path / "run", "calib.json", [], None, "",
                            ())  # fmt: skip

    def made(name, verdict):
        path = tmp_path / name
        return pipeline.Made("quantize", name, path, {"recipe": {"calibration": None}}, None,
                              SimpleNamespace(verdict=verdict), path)  # fmt: skip

    ev = [{"artifact": str(tmp_path / n), "backend": "x", "precision": "fp32", "top1": 50.0, "top5": 90.0,
           "agreement": 100.0, "status": "ok"} for n in ("m.pt", "model.onnx", "model.fp16.onnx")]  # fmt: skip
    from aft_export.verify.parity import ParityResult

    parity = pipeline.ParityRun(ParityResult("m.pt", "d", 0, [], 0, Verdict()), {})
    from aft_export.verify.deploy import DeployTable

    deploy = pipeline.DeployRun(DeployTable([], {}, {}, 1, "m.pt", "d"), {"rows": [], "skipped": []})
    outcome = pipeline._report(ctx, [], [made("model.onnx", Verdict()), made("model.fp16.onnx", Verdict())], {},
                               pipeline.Engines(), parity, ev, deploy)  # fmt: skip
    assert outcome.value.verdict.ok and outcome.value.summary[1]["trt_check"] == "refused 10.3 (warn)"
    (work / "plots").rmdir()
    unsure = Verdict.of(unverified=["the offline rules of TensorRT 11.4 warn about model.fp16.onnx"])
    outcome = pipeline._report(ctx, [], [made("model.onnx", Verdict()), made("model.fp16.onnx", unsure)], {},
                               pipeline.Engines(), parity, ev, deploy)  # fmt: skip
    result = outcome.value
    assert result.verdict == Verdict("unverified", ("model.fp16.onnx: " + unsure.reasons[0],)) and result.passed
    manifest = json.loads((work / "manifest.json").read_text())
    assert manifest["verdict"]["status"] == "unverified" and manifest["unverified"] == {"model.fp16.onnx": unsure.reasons[0]}
    assert "Result: **PASS, with artifacts not verified here**" in (work / "report.md").read_text()
    # the deploy table's verdict is combined too (the pipeline asks it to call another runtime's parity
    # failure not verified: its own parity step judges the files where they are checked)
    (work / "plots").rmdir()
    failing = DeployTable([], {}, {}, 1, "m.pt", "d", Verdict.of(unverified=["model.fp16.onnx on openvino fails "
                                                                            "parity: real: max_abs"]))  # fmt: skip
    outcome = pipeline._report(ctx, [], [made("model.onnx", Verdict()), made("model.fp16.onnx", Verdict())], {},
                               pipeline.Engines(), parity, ev, pipeline.DeployRun(failing, deploy.bench))  # fmt: skip
    assert outcome.value.verdict.status == "unverified" and outcome.value.passed
    assert outcome.value.verdict.reasons == ("model.fp16.onnx on openvino fails parity: real: max_abs",)


def test_the_command_line_maps_verdicts_and_never_writes_1_or_3_itself():
    """Every exit status 1 or 3 comes from a verdict through one function (cli.base.exit_status);
    no command returns those statuses of its own."""
    files = sorted((REPO / "aft_export" / "cli").glob("*.py"))
    assert len(files) > 5
    for tree in (ast.parse(f.read_text()) for f in files):
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert not {"EXIT_CHECK_FAILED", "EXIT_UNVERIFIED"} & named
        returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant)]
        # by type: 1 == True, so `in (None, 0, True, False)` would let `return 1` through
        assert all(isinstance(r.value, (bool, str)) or r.value in (None, 0) for r in returns)
