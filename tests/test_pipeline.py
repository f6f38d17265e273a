"""The one-command pipeline on a tiny model: run directory, manifest, report, exit codes."""

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from aft_export import load_checkpoint
from aft_export.models.checkpoint import save_checkpoint
from aft_export.cli import main
from aft_export.errors import AFTExportError
from aft_export.artifacts.onnxio import load_onnx, read_metadata
from aft_export.workflow.pipeline import PipelineOptions, engine_library, run_pipeline
from aft_export.environment import has_gpu, tensorrt_libraries
from aft_export.tensorrt.library import RTX
from tests.export.test_exporter import make_ckpt
from tests.conftest import need_openvino
from tests.test_machine_paths import scan_files

# what the engine step does here: TensorRT with a GPU, else TensorRT-RTX (built on the CPU), else nothing
ENGINES, _ = engine_library(tensorrt_libraries(), has_gpu())
NO_GPU = not has_gpu()

FAST = ["--calib-images", "128", "--eval-images", "64", "--parity-images", "16", "--bench-batch-size", "1",
        "--bench-batch-size", "4", "--bench-iters", "2"]  # fmt: skip
# an untrained model's logits are near ties, so int8 flips top-1 more than a trained one
# (the zoo meets the default limits: tests/test_zoo.py); the other limits stay default
UNTRAINED_INT8_LIMITS = ("int8.min_top1_agreement=0.5", "int8.max_abs=5")
UNTRAINED_INT8 = [arg for limit in UNTRAINED_INT8_LIMITS for arg in ("--tolerance", limit)]


CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def tiny_cifar10_ckpt(path):
    """A tiny AFT-conv model with CIFAR-10's class names (untrained: eval needs the names)."""
    make_ckpt(path, "aft_conv_test")
    model, _ = load_checkpoint(path)
    save_checkpoint(path, model, CIFAR10, model_name="aft_conv_test")
    return path


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return tiny_cifar10_ckpt(tmp_path_factory.mktemp("p") / "tiny.pt")


def _args(ckpt, out, cifar10, *extra):
    return ["pipeline", str(ckpt), "--output", str(out), "--data", str(cifar10 / "test.tar"),
            "--calib", str(cifar10 / "train.tar"), *FAST, *extra]  # fmt: skip


def test_engine_library_choice():
    assert engine_library({"tensorrt", RTX}, gpu=True) == ("tensorrt", "")
    assert engine_library({"tensorrt", RTX}, gpu=False) == (RTX, "")  # built ahead of time on the CPU
    assert engine_library({RTX}, gpu=True) == (RTX, "")
    library, why = engine_library({"tensorrt"}, gpu=False)
    assert library is None and why.startswith("TensorRT is installed but no CUDA GPU is visible")
    library, why = engine_library(set(), gpu=False)
    assert library is None and why.startswith("neither TensorRT nor TensorRT-RTX is installed here")


def test_pipeline_writes_a_complete_run_directory(ckpt, tmp_path, cifar10):
    out = tmp_path / "run"
    res = CliRunner().invoke(main, _args(ckpt, out, cifar10, *UNTRAINED_INT8))
    rtx_not_run = ENGINES == RTX and NO_GPU  # CI: TensorRT-RTX engines built here, run nowhere here
    assert res.exit_code == (3 if rtx_not_run else 0), res.output
    assert "PASS" in res.output and "model.int8.onnx" in res.output
    names = {p.name for p in out.iterdir()}
    assert {"model.onnx", "model.fp16.onnx", "model.int8.onnx", "model.portable.int8.onnx", "manifest.json",
            "report.md", "plots"} <= names and "model.portable.fp16.onnx" not in names  # the CPU's int8; no fp16
    assert {p.name for p in (out / "plots").iterdir()} == {"accuracy.svg", "errors.svg", "latency_b1.svg",
                                                           "latency_b4.svg", "deploy_latency.svg",
                                                           "deploy_throughput.svg"}  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["passed"] is True and manifest["verdict"]["status"] == ("unverified" if rtx_not_run else "ok")
    assert manifest["options"]["output"] == str(out) and "out" not in manifest["options"]  # the current names
    assert manifest["versions"]["onnxruntime"] and manifest["versions"]["torch"]
    assert len(manifest["inputs"]["checkpoint_sha256"]) == 64
    assert manifest["inputs"]["calibration"]["count"] == 128  # --calib-images
    steps = {s["name"]: s for s in manifest["steps"]}
    assert [s["name"] for s in manifest["steps"]] == ["export", "quantize fp16", "quantize int8",
                                                      "quantize int8 portable", "tensorrt check",
                                                      "verification commands", "tensorrt engines", "parity", "eval",
                                                      "deploy table", "report"]  # fmt: skip
    trt = steps["tensorrt engines"]  # said plainly, never reported as done
    onnx_files = {n: True for n in ("model.onnx", "model.fp16.onnx", "model.int8.onnx", "model.portable.int8.onnx")}
    if rtx_not_run:
        engines = [f"{n}.rtx.engine" for n in ("model", "model.fp16", "model.int8", "model.portable.int8")]
        assert trt["status"] == "ok" and trt["detail"] == "4 TensorRT-RTX engines built, not run: no GPU here"
        assert {a: v["bytes"] > 0 for a, v in manifest["artifacts"].items()} == {**onnx_files, **{e: True for e in engines}}
        assert all((out / f"{e}.json").is_file() for e in engines)
        rows = {r["artifact"]: r for r in manifest["summary"]}
        assert [rows[e]["parity"] for e in engines] == ["skipped, no GPU"] * 4  # never "pass"
        assert all(rows[e]["top1"] is None and rows[e]["latency_ms"] == {} for e in engines)
        assert sorted(manifest["unverified"]) == sorted(engines)
        assert [rows[e]["precision"] for e in engines] == ["fp32", "fp16", "int8", "int8"]
        assert rows["model.int8.rtx.engine"]["for"].startswith("TensorRT-RTX ") and rows["model.int8.rtx.engine"][
            "compute"] == manifest["results"]["engines"]["model.int8.rtx.engine"]["network"]["compute"]  # fmt: skip
        assert manifest["results"]["engines"]["model.int8.rtx.engine"]["network"]["quantized"]
        assert "PASS, NOT ALL VERIFIED" in res.output and "not verified: model.int8.rtx.engine: skipped, no GPU" \
            in res.output  # fmt: skip
        assert "Built, not run (4)" in (out / "report.md").read_text()
        # each engine's parsed network, compute layers per precision, in the report as in the manifests
        nets = {e: manifest["results"]["engines"][e]["network"]["compute"] for e in engines}
        assert "int8" in nets["model.int8.rtx.engine"] and "fp16" in nets["model.int8.rtx.engine"]
        assert nets["model.int8.rtx.engine"]["fp32"] <= nets["model.fp16.rtx.engine"]["fp32"]
        text = (out / "report.md").read_text()
        c = nets["model.int8.rtx.engine"]
        assert "| model.int8.rtx.engine | tensorrt-rtx" in text and f"| int8 | {c['int8']} | {c['fp16']} | " \
            f"{c['fp32']} |" in text  # fmt: skip
        assert all(s["status"] == "ok" for s in steps.values())
    else:
        assert trt["status"] == ("ok" if ENGINES else "skipped") and "TensorRT" in trt["detail"]
        assert all(s["status"] == "ok" for n, s in steps.items() if n != "tensorrt engines")
    precisions = [r["precision"] for r in manifest["summary"]]
    assert precisions[:5] == ["fp32", "fp32", "fp16", "int8", "int8"]
    assert {a: v["bytes"] > 0 for a, v in manifest["artifacts"].items() if a.endswith(".onnx")} == onnx_files
    # every artifact checked against the TensorRT versions it is for, with NVIDIA's commands beside it
    checks = manifest["results"]["trt_check"]
    assert set(checks) == set(onnx_files) and all(c["exit_code"] == 0 for c in checks.values())
    assert all(c["checked"] == ["10.3", "10.13", "11.4"] for c in checks.values())
    assert [r["trt_check"] for r in manifest["summary"][1:5]] == ["pass 10.3+"] * 4
    for name in onnx_files:
        script = (out / name.replace(".onnx", ".verify.sh")).read_text()
        assert "--saveEngine=" in script and "--trt-min-shapes" in script and "--data-loader-script" in script
    report = (out / "report.md").read_text()
    assert "Result: **PASS" in report and "| model.int8.onnx |" in report and "plots/errors.svg" in report
    assert (out / "plots" / "errors.svg").read_text().startswith("<svg")
    assert not list(tmp_path.glob(".run.partial-*"))
    # what travels names no path of this machine (the data came as absolute paths, the run is in /tmp);
    # manifest.json, the run's own record, may keep the paths its user typed
    travels = sorted(out.glob("*.onnx")) + sorted(out.glob("*.engine.json"))
    assert len(travels) == 4 + 4 * rtx_not_run and scan_files(travels) == {}
    recipe = json.loads(read_metadata(load_onnx(out / "model.int8.onnx"))["quantization"])
    assert recipe["calibration"]["source"] == "cifar10:train"  # the tar it was given is where that set lies
    # the CPU's int8: the portable target's, quantised from model.onnx on the same calibration set
    cpu = read_metadata(load_onnx(out / "model.portable.int8.onnx"))
    cpu_recipe = json.loads(cpu["quantization"])
    assert (cpu["export_target"], cpu_recipe["converted_from"], cpu_recipe["weight_bits"],
            cpu_recipe["rest_precision"]) == ("portable", "tensorrt", 7, "fp32")  # fmt: skip
    assert cpu_recipe["calibration"] == recipe["calibration"]
    # what each file is for and what its compute runs in, in the summary, the manifest, the report and the output
    rows = {r["artifact"]: r for r in manifest["summary"]}
    files = manifest["results"]["files"]
    assert rows["model.int8.onnx"]["for"] == "TensorRT 10.3+/11, TensorRT-RTX (slow in ONNX Runtime on CPUs: use the portable int8)"
    assert rows["model.portable.int8.onnx"]["for"] == "CPUs: ONNX Runtime, OpenVINO"
    assert rows[ckpt.name]["for"] == "PyTorch"
    assert files["model.portable.int8.onnx"]["compute"] == rows["model.portable.int8.onnx"]["compute"]
    assert set(rows["model.portable.int8.onnx"]["compute"]) == {"int8", "fp32"} and rows["model.onnx"]["compute"] == {
        "fp32": rows["model.onnx"]["compute"]["fp32"]} and rows["model.int8.onnx"]["compute"]["fp16"] > 0  # fmt: skip
    # the same layers in int8 but the stem, which the CPU's 7-bit int8 keeps in fp32 (ExportTarget.int8_stem_fp32)
    assert rows["model.int8.onnx"]["compute"]["int8"] == rows["model.portable.int8.onnx"]["compute"]["int8"] + 1
    assert len(cpu_recipe["stem_fp32"]) == 1 and "stem_fp32" not in recipe
    assert "## What each file is for" in report and "| model.portable.int8.onnx | CPUs: ONNX Runtime, OpenVINO |" \
        in report  # fmt: skip
    assert "for: model.portable.int8.onnx: CPUs: ONNX Runtime, OpenVINO" in res.output
    # what to deploy where: every file on every runtime here, proven and timed, the fastest that passes marked
    need_openvino()
    deploy = manifest["results"]["deploy"]
    table = {(r["artifact"], r["runtime"]): r for r in deploy["rows"]}
    assert {f for f, rt in table if rt == "openvino"} == set(onnx_files)  # OpenVINO reads every file we write
    assert table[(ckpt.name, "torch")]["parity"] == "reference"
    for (f, rt), row in table.items():
        if rt in ("onnxruntime", "openvino") and row["status"] == "ok":
            assert row["parity"] == "pass" and row["top1"] is not None and row["p50_ms"] > 0, row
            assert set(row["timing"]) == {"1", "4"} and row["images_per_s"] == row["timing"]["4"]["images_per_s"]
        if rt == "onnxruntime":  # the summary's latency is the deploy table's ONNX Runtime row
            assert manifest["summary"][[r["artifact"] for r in manifest["summary"]].index(f)]["latency_ms"]["1"] == \
                round(row["p50_ms"], 3)  # fmt: skip
    marked = [r for r in deploy["rows"] if r["fastest"]]
    assert {m for r in marked for m in r["fastest"]} == {"latency", "throughput"}
    assert all(r["device"] == "cpu" and r["status"] == "ok" and r["parity"] in ("pass", "reference") for r in marked)
    for by in ("latency", "throughput"):
        best = next(r for r in marked if by in r["fastest"])
        assert deploy["recommended"]["cpu"][by] == {"artifact": best["artifact"], "runtime": best["runtime"]}
    assert deploy["machine"]["instruction_sets"]["arch"] and deploy["machine"]["threads"] == "each runtime's default"
    assert all(r["threads"] >= 1 for r in deploy["rows"] if r["status"] == "ok")  # each runner's own count
    assert str(tmp_path) not in json.dumps(deploy["rows"])  # the run's (temporary) paths stay out of the rows
    assert deploy["data"] == str(cifar10 / "test.tar") and "rerun" in deploy["advice"]
    if NO_GPU:
        assert deploy["runtimes"]["torch-cuda"] == "no GPU here"
        if rtx_not_run:
            assert all(table[(e, "tensorrt-rtx")]["status"] == "skipped" for e in engines)
    assert "## What to deploy where" in report and "Deploy on the CPU: fastest at batch 1:" in report
    assert "Deploy on the CPU: fastest at batch 1:" in res.output


def test_parity_failure_still_reports_and_exits_1(ckpt, tmp_path, cifar10):
    out = tmp_path / "run"
    res = CliRunner().invoke(main, _args(ckpt, out, cifar10, "--precision", "fp16", "--tolerance", "fp16.max_abs=0"))
    assert res.exit_code == 1, res.output
    assert "FAIL" in res.output and (out / "report.md").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["passed"] is False and "model.int8.onnx" not in manifest["artifacts"]
    assert manifest["verdict"]["status"] == "failed" and manifest["verdict"]["reasons"][0] == "model.fp16.onnx fails parity"
    assert next(s for s in manifest["steps"] if s["name"] == "parity")["status"] == "failed"


def test_bad_input_leaves_nothing(ckpt, tmp_path, cifar10):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    res = CliRunner().invoke(main, _args(ckpt, busy, cifar10))
    assert res.exit_code == 2 and "already exists and is not empty" in res.output
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    res = CliRunner().invoke(main, _args(tmp_path / "nope.pt", tmp_path / "r", cifar10))
    assert res.exit_code == 2 and "does not exist" in res.output
    res = CliRunner().invoke(main, _args(ckpt, tmp_path / "r2", cifar10, "--tolerance", "fp99.x=1"))
    assert res.exit_code == 2 and "bad tolerance" in res.output
    # a failure mid-run (calibration source missing) removes the partial directory
    with pytest.raises(AFTExportError, match="does not exist"):
        run_pipeline(str(ckpt), PipelineOptions(output=str(tmp_path / "r3"), calib=str(tmp_path / "none"),
                                                data=str(cifar10 / "test.tar"), eval_images=16),
                     log=lambda *a: None)  # fmt: skip
    assert not (tmp_path / "r3").exists() and not list(tmp_path.glob(".r3.partial-*"))
    assert not (tmp_path / "r").exists() and not (tmp_path / "r2").exists()


def test_pipeline_makes_the_tensorrt8_form_too(ckpt, tmp_path, cifar10):
    """--target tensorrt8 adds model.trt8*.onnx: accepted by every supported TensorRT,
    within parity of PyTorch like the others. With --triton-repo, RUN/triton serves them all
    (tests/test_tritonrepo.py checks such repositories, and runs one)."""
    out = tmp_path / "run8"
    res = CliRunner().invoke(main, _args(ckpt, out, cifar10, "--target", "tensorrt", "--target", "tensorrt8",
                                         "--triton-repo", *UNTRAINED_INT8))  # fmt: skip
    assert res.exit_code == (3 if ENGINES == RTX and NO_GPU else 0), res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert {a for a in manifest["artifacts"] if a.endswith(".onnx")} == {
        "model.onnx", "model.fp16.onnx", "model.int8.onnx", "model.portable.int8.onnx", "model.trt8.onnx",
        "model.trt8.fp16.onnx", "model.trt8.int8.onnx"}  # fmt: skip
    checks = manifest["results"]["trt_check"]
    assert checks["model.trt8.int8.onnx"]["checked"] == ["8.5", "8.6", "10.3", "10.13", "11.4"]
    assert all(c["exit_code"] == 0 for c in checks.values())
    assert all(r["parity"] in ("pass", "reference") for r in manifest["summary"] if ".engine" not in r["artifact"])
    names = ["model", "model_fp16", "model_int8", "model_portable_int8", "model_trt8", "model_trt8_fp16",
             "model_trt8_int8"]
    assert {p.name for p in (out / "triton").iterdir()} == {"Dockerfile", "README.md", "client.py"} | {
        n + s for n in names for s in ("", "_image", "_net", "_pre", "_topk")}
    assert (out / "triton" / "model_int8_net" / "1" / "model.onnx").read_bytes() == (out / "model.int8.onnx").read_bytes()
    step = next(s for s in manifest["steps"] if s["name"] == "triton repository")
    assert step["status"] == "ok" and str(out / "triton") in step["detail"]


def test_the_run_is_a_list_of_declared_steps():
    """Which steps a run has is declared up front from its options: an export per target and a
    quantisation per precision of each, the engine step building or skipping, Triton only when asked."""
    from aft_export.workflow import pipeline

    names = lambda steps: [s.name for s in steps if s.recorded]  # noqa: E731
    plain = pipeline.pipeline_steps(PipelineOptions(), "tensorrt")
    assert names(plain) == ["export", "quantize fp16", "quantize int8", "quantize int8 portable", "tensorrt check",
                            "verification commands", "tensorrt engines", "parity", "eval", "deploy table", "report"]  # fmt: skip
    assert next(s for s in plain if s.name == "tensorrt engines").run is pipeline._engines
    assert next(s for s in pipeline.pipeline_steps(PipelineOptions(), None)
                if s.name == "tensorrt engines").run is pipeline._no_engines  # fmt: skip
    both = pipeline.pipeline_steps(PipelineOptions(targets=("tensorrt", "tensorrt8"), precisions=("int8",),
                                                   triton_repo=True), "tensorrt")  # fmt: skip
    assert names(both)[:6] == ["export", "quantize int8", "quantize int8 portable", "export tensorrt8",
                               "quantize int8 tensorrt8", "tensorrt check"]  # fmt: skip
    assert "triton repository" in names(both) and "triton repository" not in names(plain)
    # each quantisation takes its fp32 file and the one before it (its calibration set): the CPU's int8
    # (the portable target's) is made from the default export, beside the TensorRT int8
    assert next(s for s in both if s.name == "quantize int8 portable").inputs == ("export", "quantize int8")
    assert next(s for s in both if s.name == "quantize int8 tensorrt8").inputs == ("export tensorrt8",
                                                                                  "quantize int8 portable")
    # not where portable is a target itself (its own int8 is that file), without int8, nor without the tensorrt target
    for opts in (PipelineOptions(targets=("tensorrt", "portable")), PipelineOptions(precisions=("fp16",)),
                 PipelineOptions(targets=("tensorrt8",))):
        assert [n for n in names(pipeline.pipeline_steps(opts, None)) if "portable" in n] == (
            ["export portable", "quantize fp16 portable", "quantize int8 portable"] if "portable" in opts.targets
            else [])  # fmt: skip
    # a pixel form: its export and quantisations after the normal file's, the CPU's int8 still from the normal export
    px = pipeline.pipeline_steps(PipelineOptions(precisions=("int8",), pixel_forms=("uint8-nhwc", "deepstream")), None)
    assert names(px)[:6] == ["export", "quantize int8", "export uint8-nhwc", "quantize int8 uint8-nhwc",
                             "export deepstream", "quantize int8 deepstream"]  # fmt: skip
    assert next(s for s in px if s.name == "quantize int8 portable").inputs[0] == "export"
    assert "deepstream configs" in names(px) and "deepstream configs" not in names(both)
    # every input is given or produced by an earlier step
    for steps in (both, px):
        known = {"decoded", "parity set", "parity inputs", "steps"}
        for step in steps:
            assert set(step.inputs) <= known, (step.name, set(step.inputs) - known)
            known.add(step.produces)


def test_the_step_loop_times_records_and_stops_on_an_error():
    from aft_export.workflow.pipeline import Outcome, PipelineStep, run_steps

    seen, lines = [], []

    def record(ctx, *args):
        seen.append(args)
        return Outcome(len(seen), f"step {len(seen)}")

    steps = [PipelineStep("a", ("given",), record, "a"),
             PipelineStep("gather", ("a", "given"), lambda ctx, a, g: Outcome((a, g)), "both", recorded=False),
             PipelineStep("b", ("both", "steps"), lambda ctx, both, st: Outcome([(s.name, s.seconds, s.detail) for s in st],
                                                                             status="failed"), "b")]  # fmt: skip
    results = run_steps(steps, None, {"given": "g"}, lines.append)
    assert seen == [("g",)] and results["both"] == (1, "g")
    # a step sees its own record from its start, at 0.0s; the unrecorded one is not listed
    assert [s.name for s in results["steps"]] == ["a", "b"] and results["b"][1] == ("b", 0.0, "")
    assert [(s.status, s.detail) for s in results["steps"]] == [("ok", "step 1"), ("failed", "")]
    assert lines[0] == "[1] a ..." and lines[1].startswith("    ok in ") and lines[1].endswith(": step 1")
    assert lines[2] == "[2] b ..." and len(lines) == 4

    def bad(ctx):
        raise AFTExportError("bad input; fix it")

    after = []
    with pytest.raises(AFTExportError, match="bad input"):
        run_steps([PipelineStep("x", (), bad, "x"), PipelineStep("y", (), lambda ctx: after.append(1), "y")],
                  None, {}, lambda *a: None)  # fmt: skip
    assert after == []  # the run stopped at the error; the caller maps it to its exit status


def test_a_stage_s_message_names_the_pipeline_s_own_parameter_on_each_face(ckpt, tmp_path, cifar10):
    """Quantisation's `images` is the pipeline's calib_images: the command line says --calib-images,
    Python says `calib_images`, each from the declarations (nothing rewritten); nothing is left behind."""
    from PIL import Image
    import numpy as np

    import aft_export

    few = tmp_path / "three"
    few.mkdir()
    for i in range(3):
        Image.fromarray(np.full((32, 32, 3), 40 * i, np.uint8)).save(few / f"{i}.png")
    args = ["pipeline", str(ckpt), "--data", str(cifar10 / "test.tar"), "--calib", str(few), "--calib-images", "5",
            "--precision", "int8", "--target", "tensorrt"]  # fmt: skip
    result = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "cli")])
    assert result.exit_code == 2 and "give --calib-images 3 or aft-export quantize --allow-fewer" in result.output
    with pytest.raises(AFTExportError, match="give `calib_images=3` or `allow_fewer` to use what there is"):
        aft_export.pipeline(ckpt, output=str(tmp_path / "py"), data=str(cifar10 / "test.tar"), calib=str(few),
                            calib_images=5, precisions="int8", targets="tensorrt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["three"]


def test_pixel_forms_are_made_proven_and_tabled_beside_the_normal_files(ckpt, tmp_path, cifar10):
    """--pixel-form adds each form's files at every precision (model.FORM*.onnx), each proven from the
    parity images' raw pixels, evaluated and timed in the deploy table beside the normal files; the
    DeepStream form gets RUN/deepstream (an nvinfer config per file, labels.txt) and stays out of
    RUN/triton, whose models give logits."""
    out = tmp_path / "runpx"
    res = CliRunner().invoke(main, _args(ckpt, out, cifar10, "--precision", "int8", "--pixel-form", "uint8-nhwc",
                                         "--pixel-form", "deepstream", "--triton-repo", *UNTRAINED_INT8))  # fmt: skip
    assert res.exit_code == (3 if ENGINES == RTX and NO_GPU else 0), res.output
    manifest = json.loads((out / "manifest.json").read_text())
    onnx_files = {a for a in manifest["artifacts"] if a.endswith(".onnx")}
    assert onnx_files == {"model.onnx", "model.int8.onnx", "model.portable.int8.onnx", "model.uint8-nhwc.onnx",
                          "model.uint8-nhwc.int8.onnx", "model.deepstream.onnx", "model.deepstream.int8.onnx"}
    rows = {r["artifact"]: r for r in manifest["summary"]}
    for name in onnx_files:
        assert rows[name]["parity"] == "pass", (name, rows[name])
    timed = {(Path(r["artifact"]).name, r["runtime"]) for r in manifest["results"]["deploy"]["rows"]
             if r["status"] == "ok" and r["p50_ms"] and r["parity"] == "pass"}  # fmt: skip
    for name in ("model.uint8-nhwc.onnx", "model.uint8-nhwc.int8.onnx", "model.deepstream.onnx"):
        assert (name, "onnxruntime") in timed, timed
    assert np.load(out / "verify_inputs.uint8-nhwc.npy").dtype == np.uint8
    assert np.load(out / "verify_inputs.float-nchw.npy").shape[1] == 3
    configs = sorted(p.name for p in (out / "deepstream").iterdir())
    assert configs == ["config_infer_model_deepstream.txt", "config_infer_model_deepstream_int8.txt", "labels.txt"]
    assert "onnx-file=../model.deepstream.int8.onnx" in (out / "deepstream" / configs[1]).read_text()
    served = {p.name for p in (out / "triton").iterdir()}
    assert "model_uint8-nhwc" in served and not any("deepstream" in n for n in served)
