import importlib.util
import json

import numpy as np
import onnx
import pytest
import torch
from click.testing import CliRunner

from aft_export.models.checkpoint import save_checkpoint
from aft_export.cli import main
from aft_export.errors import AFTExportError
from aft_export.verify.evaluate import evaluate_artifacts
from aft_export.exporting.exporter import ExportOptions, export_checkpoint
from aft_export.models import create_model
from aft_export.verify.compare import LOSS, TOLERANCES, judge, judged_precision, metrics, tolerances_with
from aft_export.verify.parity import run_parity, stress_inputs
from aft_export.artifacts.onnxio import graph_precision
from aft_export.runners import OrtRunner, TorchRunner, load_runner

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory, cifar10):
    """A tiny checkpoint with CIFAR-10 class names and its ONNX export."""
    root = tmp_path_factory.mktemp("pair")
    torch.manual_seed(3)
    ckpt = root / "m.pt"
    save_checkpoint(ckpt, create_model("aft_conv_test"), CLASSES, model_name="aft_conv_test")
    onnx_path = root / "m.onnx"
    export_checkpoint(ckpt, onnx_path, ExportOptions(images=8, data=str(cifar10 / "test.tar")))
    return ckpt, onnx_path


def test_metrics_by_hand():
    ref = np.array([[1.0, 2.0, 3.0], [3.0, 0.0, 0.0]])
    got = np.array([[1.0, 2.0, 3.5], [0.0, 3.0, 0.0]])
    m = metrics(ref, got)
    assert m["max_abs"] == 3.0 and m["mean_abs"] == pytest.approx(6.5 / 6)
    assert m["max_rel"] == pytest.approx(1.0)
    assert m["top1_agreement"] == 0.5 and m["nonfinite"] == 0
    assert m["cosine_min"] == pytest.approx(0.0)
    assert m["sqnr_db"] == pytest.approx(10 * np.log10(23 / 18.25))
    assert metrics(ref, ref)["sqnr_db"] == float("inf")
    bad = got.copy()
    bad[0, 0] = np.nan
    assert metrics(ref, bad)["nonfinite"] == 1


def test_tolerances_live_in_one_place_and_override():
    assert TOLERANCES["fp32"].max_abs < TOLERANCES["fp16"].max_abs < TOLERANCES["int8"].max_abs
    tols = tolerances_with(["fp16.max_abs=0.5", "int8.min_cosine=0.9"])
    assert tols["fp16"].max_abs == 0.5 and tols["int8"].min_cosine == 0.9
    assert TOLERANCES["fp16"].max_abs == 5e-2  # defaults untouched
    for bad in ["fp16", "fp64.max_abs=1", "fp16.nope=1", "fp16.max_abs=abc"]:
        with pytest.raises(AFTExportError, match="bad tolerance"):
            tolerances_with([bad])


def test_a_lossier_runtime_brings_its_limits_never_looser_ones():
    """A file is judged by the lossier of its own precision and what its runtime computes its fp32
    parts in (openvino-bf16: bf16), in the order of LOSS; bf16 lies between fp16 and int8."""
    assert LOSS == ("fp32", "fp16", "bf16", "int8")
    assert TOLERANCES["fp16"].max_abs < TOLERANCES["bf16"].max_abs < TOLERANCES["int8"].max_abs
    assert TOLERANCES["fp16"].min_cosine > TOLERANCES["bf16"].min_cosine > TOLERANCES["int8"].min_cosine
    assert [judged_precision(p, "bf16") for p in ("fp32", "fp16", "int8")] == ["bf16", "bf16", "int8"]
    assert [judged_precision(p) for p in ("fp32", "fp16", "int8")] == ["fp32", "fp16", "int8"]
    assert judged_precision("fp32", "fp32") == "fp32" and tolerances_with(["bf16.max_abs=1"])["bf16"].max_abs == 1


def test_judge_per_precision():
    m = {"max_abs": 0.01, "cosine_min": 0.9999, "top1_agreement": 1.0, "nonfinite": 0}
    assert judge(m, TOLERANCES["fp16"]) == []
    assert judge(m, TOLERANCES["fp32"])  # the same numbers fail fp32
    assert judge({**m, "nonfinite": 2}, TOLERANCES["int8"], stress=True) == ["2 NaN/Inf outputs"]
    # saturation on scaled-up inputs is int8's design, not fp16's
    saturated = {**m, "cosine_min": 0.5}
    assert judge(saturated, TOLERANCES["int8"], stress=True) == []
    assert judge(saturated, TOLERANCES["fp16"], stress=True) == ["cosine 0.500000 < 0.999"]
    assert judge(saturated, tolerances_with(["int8.stress_min_cosine=0.9"])["int8"], stress=True)


def test_near_ties_are_not_disagreements_in_fp16():
    """One flip in 64 images fails fp16's 99% agreement unless the two classes were
    closer in the reference than fp16's error can separate."""
    ref = np.zeros((64, 10))
    ref[:, 0] = 5.0
    ref[0, 1] = 4.97  # image 0: a near tie between classes 0 and 1
    ref[1, 1] = 3.0  # image 1: a clear decision
    tie = ref.copy()
    tie[0, 1] = 5.01
    m = metrics(ref, tie)
    assert m["top1_agreement"] < 0.99 and m["flip_margins"] == [0.03]
    assert judge(m, TOLERANCES["fp16"]) == []
    assert judge(m, TOLERANCES["fp32"])  # fp32 counts every flip
    clear = ref.copy()
    clear[1, 1] = 5.5
    failures = judge(metrics(ref, clear), tolerances_with(["fp16.max_abs=10", "fp16.min_cosine=0.5"])["fp16"])
    assert failures == ["top-1 agreement 0.9844 < 0.99 (1 decisive flips, ties within 0.1 not counted)"]


def test_stress_inputs_are_normalised_constants_and_scaled_images():
    x = np.ones((10, 3, 4, 4), np.float32)
    s = stress_inputs(x, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    assert s["scaled_x4"].shape == (8, 3, 4, 4) and float(s["scaled_x4"].max()) == 4.0
    assert s["constant"].shape == (3, 3, 4, 4)
    assert np.allclose(s["constant"][0], -2.0) and np.allclose(s["constant"][1], 2.0)


def test_runners_share_one_contract(pair):
    ckpt, onnx_path = pair
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    for runner in (load_runner(str(ckpt)), load_runner(str(onnx_path))):
        out = runner.run({"image": x})
        assert list(out) == ["logits"] and out["logits"].shape == (3, 10)
        assert runner.info.classes == CLASSES and runner.info.input_size == (3, 32, 32)
    assert isinstance(load_runner(str(ckpt)), TorchRunner) and isinstance(load_runner(str(onnx_path)), OrtRunner)
    assert load_runner(str(onnx_path)).info.precision == "fp32"


def test_graph_precision_reads_the_graph():
    def model(nodes, inits):
        g = onnx.helper.make_graph(nodes, "g", [], [], initializer=inits)
        return onnx.helper.make_model(g)

    fp16 = onnx.numpy_helper.from_array(np.zeros(2, np.float16), "w")
    assert graph_precision(model([], [fp16])) == "fp16"
    q = onnx.helper.make_node("QuantizeLinear", ["x", "s"], ["y"])
    assert graph_precision(model([q], [])) == "int8"


def test_parity_passes_for_a_faithful_export(pair, cifar10):
    ckpt, onnx_path = pair
    report = run_parity(str(ckpt), [str(onnx_path)], str(cifar10 / "test.tar"), images=16).to_dict()
    row = report["artifacts"][0]
    assert report["passed"] and row["status"] == "pass" and row["precision"] == "fp32"
    assert set(row["inputs"]) == {"real", "scaled_x4", "constant"}
    assert row["inputs"]["real"]["top1_agreement"] == 1.0 and row["inputs"]["real"]["images"] == 16


def test_parity_fails_a_perturbed_graph_and_skips_missing_runtimes(pair, tmp_path, cifar10):
    """A perturbed graph fails, on every machine; an engine is skipped, never passed, where its TensorRT is
    not installed (where it is, the made-up engine is refused by its manifest's check instead: no skip)."""
    ckpt, onnx_path = pair
    model = onnx.load(onnx_path)
    biggest = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    arr = onnx.numpy_helper.to_array(biggest) * 1.5
    biggest.CopyFrom(onnx.numpy_helper.from_array(arr, biggest.name))
    bad = tmp_path / "bad.onnx"
    onnx.save(model, bad)
    engine = _engine_with_manifest(tmp_path, onnx_path)
    no_tensorrt = importlib.util.find_spec("tensorrt") is None
    report = run_parity(str(ckpt), [str(bad), *([str(engine)] if no_tensorrt else [])], str(cifar10 / "test.tar"),
                        images=8).to_dict()  # fmt: skip
    fail = report["artifacts"][0]
    assert fail["status"] == "fail" and any("max abs" in f for f in fail["failures"])
    if no_tensorrt:
        skip = report["artifacts"][1]
        assert skip["status"] == "skipped" and skip["passed"] is None and "TensorRT" in skip["reason"]
    assert not report["passed"] and report["skipped"] == 1

    runner = CliRunner()
    result = runner.invoke(main, ["parity", str(ckpt), str(bad), "--data", str(cifar10 / "test.tar"),
                                  "--images", "8"])  # fmt: skip
    assert result.exit_code == 1 and "FAIL" in result.output
    result = runner.invoke(main, ["parity", str(ckpt), str(onnx_path), str(engine),
                                  "--data", str(cifar10 / "test.tar"), "--images", "8", "--json"])  # fmt: skip
    assert result.exit_code == 3 and json.loads(result.output)["skipped"] == 1
    result = runner.invoke(main, ["parity", str(ckpt), str(onnx_path), "--data", str(cifar10 / "test.tar"),
                                  "--images", "8"])  # fmt: skip
    assert result.exit_code == 0 and "pass" in result.output


def _engine_with_manifest(tmp_path, onnx_path):
    """Bytes that are not an engine, with a manifest whose hash matches them: enough for
    aft-export's own checks to pass, so the missing TensorRT is what stops the run."""
    import hashlib

    meta = {p.key: p.value for p in onnx.load(onnx_path).metadata_props}
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"\0" * 16)
    manifest = {"engine_sha256": hashlib.sha256(engine.read_bytes()).hexdigest(), "tensorrt": "10.8.0",
                "compute_capability": "8.6", "precision": "fp32", "build_options": {},
                "input": {"name": "image", "min": [1, 3, 32, 32], "opt": [8, 3, 32, 32], "max": [32, 3, 32, 32]},
                "model": {k: meta[k] for k in ("classes", "input_size", "mean", "std", "source_sha256")}}
    (tmp_path / "m.engine.json").write_text(json.dumps(manifest))
    return engine


def test_parity_refuses_artifacts_of_another_model(pair, tmp_path, cifar10):
    ckpt, onnx_path = pair
    other = tmp_path / "other.pt"
    torch.manual_seed(99)
    save_checkpoint(other, create_model("aft_conv_test"), CLASSES)
    with pytest.raises(AFTExportError, match="exported from another checkpoint"):
        run_parity(str(other), [str(onnx_path)], str(cifar10 / "test.tar"), images=4)


def test_eval_onnx_matches_checkpoint(pair, cifar10):
    ckpt, onnx_path = pair
    a, b = evaluate_artifacts([ckpt, onnx_path], str(cifar10 / "test.tar"), limit=200)
    assert a["images"] == b["images"] == 200 and a["top1"] == b["top1"] and a["top5"] == b["top5"]
    assert (a["backend"], b["backend"]) == ("torch", "onnxruntime")


def test_eval_side_by_side_reports_agreement_with_the_first(pair, tmp_path, cifar10):
    import onnx
    from onnx import numpy_helper

    ckpt, onnx_path = pair
    model = onnx.load(onnx_path)  # a different model with the same metadata: heads scrambled
    gemm = [n for n in model.graph.node if n.op_type == "Gemm"][-1]
    for t in model.graph.initializer:
        if t.name == gemm.input[1]:
            w = numpy_helper.to_array(t)
            t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w[::-1] if w.shape[0] == 10 else w[:, ::-1]), t.name))
    other = tmp_path / "other.onnx"
    onnx.save(model, other)
    rows = evaluate_artifacts([ckpt, onnx_path, str(other)], str(cifar10 / "test.tar"), limit=100)
    assert [r["agreement"] for r in rows[:2]] == [100.0, 100.0]
    assert rows[2]["agreement"] < 50.0 and rows[0]["top1"] == rows[1]["top1"]


def test_onnx_without_metadata_is_refused(tmp_path):
    g = onnx.helper.make_graph([], "g", [], [])
    path = tmp_path / "bare.onnx"
    onnx.save(onnx.helper.make_model(g), path)
    with pytest.raises(AFTExportError, match="no aft-export metadata"):
        load_runner(str(path))
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf at all \xff\xff")
    with pytest.raises(AFTExportError):
        load_runner(str(tmp_path / "junk.onnx"))
    text = tmp_path / "model.txt"
    text.write_text("x")
    with pytest.raises(AFTExportError, match="unknown artifact type"):
        load_runner(str(text))


def test_bench_reports_percentiles_and_threads(pair, tmp_path, cifar10):
    from aft_export.verify.bench import bench

    ckpt, onnx_path = pair
    report = bench([str(ckpt), str(onnx_path)], [1, 4], warmup=1, iters=3, threads=1)
    rows = report.rows
    assert [(r["backend"], r["batch"]) for r in rows] == [("torch", 1), ("torch", 4), ("onnxruntime", 1),
                                                          ("onnxruntime", 4)]  # fmt: skip
    for r in rows:
        assert 0 < r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] and r["images_per_s"] > 0
        assert r["threads"] == 1 and r["iters"] == 3 and r["warmup"] == 1
    fixed = tmp_path / "b2.onnx"
    export_checkpoint(ckpt, fixed, ExportOptions(batch_dim="2", images=0))
    report = bench([str(fixed)], [1, 2], warmup=0, iters=1)
    assert [r["batch"] for r in report.rows] == [2] and report.skipped[0]["batch"] == 1
    with pytest.raises(AFTExportError, match="`iters`"):
        bench([str(ckpt)], [1], iters=0)
    result = CliRunner().invoke(main, ["bench", str(onnx_path), "--batch-size", "2", "--iters", "2", "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["rows"][0]["batch"] == 2


def test_a_batch_that_cannot_fit_is_refused_up_front(pair, monkeypatch):
    """One line with the estimate and exit 2, before any input is made or run; a batch
    that fits still runs. The estimate: per image, the input and output plus the
    largest intermediate value times LIVE_VALUES, read from the graph."""
    from aft_export.runners import base

    _, onnx_path = pair
    runner = OrtRunner(onnx_path)
    largest, io = runner.activation_bytes()
    assert largest > 0 and io == 4 * (3 * 32 * 32 + 10)
    need, per_image = runner.memory_estimate(1000)
    assert per_image == io + base.LIVE_VALUES * largest and need == 1000 * per_image
    # far beyond any machine: refused on the memory the kernel reports
    huge = CliRunner().invoke(main, ["bench", str(onnx_path), "--batch-size", "1000000000", "--iters", "1"])
    assert huge.exit_code == 2 and "Traceback" not in huge.output
    assert huge.output.startswith("error: batch 1000000000 of m.onnx needs about ") and huge.output.count("\n") == 1
    # a checkpoint: measured on one image in PyTorch (the MLP's hidden layer at least)
    ckpt = pair[0]
    torch_largest, torch_io = TorchRunner(str(ckpt)).activation_bytes()
    assert torch_io == io and torch_largest >= largest > 0
    huge = CliRunner().invoke(main, ["bench", str(ckpt), "--batch-size", "1000000000", "--iters", "1"])
    assert huge.exit_code == 2 and huge.output.startswith("error: batch 1000000000 of m.pt needs about ")
    # and on the memory said to be available: 1000 images do not fit in 100 per-image estimates
    monkeypatch.setattr(base, "available_memory", lambda: 100 * per_image)
    res = CliRunner().invoke(main, ["bench", str(onnx_path), "--batch-size", "1000", "--iters", "1", "--warmup", "0"])
    assert res.exit_code == 2 and "use --batch-size 100 or less" in res.output
    res = CliRunner().invoke(main, ["bench", str(onnx_path), "--batch-size", "100", "--iters", "1", "--warmup", "0"])
    assert res.exit_code == 0, res.output


def _break_a_layer(onnx_path, out, index=3):
    """Scale the weights of one MatMul/Gemm (one whose weights no other node shares)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(onnx_path)
    inits = {t.name: t for t in model.graph.initializer}
    uses = {}
    for n in model.graph.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    layers = [n for n in model.graph.node if n.op_type in ("MatMul", "Gemm")
              and any(i in inits and uses[i] == 1 for i in n.input)]  # fmt: skip
    node = layers[index]
    name = next(i for i in node.input if i in inits and uses[i] == 1)
    inits[name].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(inits[name]) * 1.5, name))
    onnx.save(model, out)
    return node


@pytest.mark.parametrize("with_fp32_onnx", [True, False])
def test_divergence_is_localised_to_the_node_and_module(pair, tmp_path, cifar10, with_fp32_onnx):
    from aft_export.artifacts.graph import node_module

    ckpt, onnx_path = str(pair[0]), str(pair[1])
    broken = tmp_path / "broken.onnx"
    ln = _break_a_layer(onnx_path, broken)
    artifacts = [onnx_path, str(broken)] if with_fp32_onnx else [str(broken)]
    report = run_parity(ckpt, artifacts, str(cifar10 / "test.tar"), images=16).to_dict()
    row = report["artifacts"][-1]
    assert row["status"] == "fail"
    div = row["divergence"]
    assert div["first"]["node"] == ln.name and div["first"]["module"] == node_module(ln)[0]
    assert div["first"]["module_type"] == "Linear" and div["first"]["rel"] > div["limit_rel"]
    assert div["reference"] == (onnx_path if with_fp32_onnx else "an fp32 export of the checkpoint, in memory")
    # nodes before the broken one agree with the reference
    before = [r for r in div["nodes"][: div["nodes"].index(div["first"])]]
    assert before and not any(r["diverged"] for r in before)
    res = CliRunner().invoke(main, ["parity", ckpt, *artifacts, "--data", str(cifar10 / "test.tar"), "--images", "16"])
    assert res.exit_code == 1 and f"diverges first at node {ln.name}" in res.output


def test_execution_providers_and_their_caches(pair, tmp_path, cifar10):
    import onnxruntime as ort

    from aft_export.runners import ort_providers

    assert ort_providers("cpu") == ["CPUExecutionProvider"]
    assert [p if isinstance(p, str) else p[0] for p in ort_providers("cuda")] == ["CUDAExecutionProvider",
                                                                              "CPUExecutionProvider"]  # fmt: skip
    # fp32 stays fp32: ORT's CUDA provider uses TF32 unless told not to (measured 1.3e-3 off on an H100)
    assert ort_providers("cuda")[0][1]["use_tf32"] == "0"
    trt_name, options = ort_providers("tensorrt", str(tmp_path / "cache"))[0]
    # precision comes from the graph: ORT builds strongly typed only without these flags
    assert trt_name == "TensorrtExecutionProvider" and "trt_int8_enable" not in options
    assert "trt_fp16_enable" not in options
    assert options["trt_engine_cache_enable"] and options["trt_engine_cache_path"] == str(tmp_path / "cache")
    assert (tmp_path / "cache").is_dir() and options["trt_timing_cache_enable"]
    with pytest.raises(AFTExportError, match="unknown provider"):
        ort_providers("rocm")
    ckpt, onnx_path = str(pair[0]), str(pair[1])
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this ONNX Runtime has CUDA: the missing-provider path cannot be shown here")
    res = CliRunner().invoke(main, ["eval", ckpt, onnx_path, "--data", str(cifar10 / "test.tar"), "--images", "16",
                                    "--provider", "cuda"])  # fmt: skip
    # --provider cuda runs the checkpoint in PyTorch on the GPU too; it is the reference
    assert res.exit_code == 2 and "reference and cannot be skipped: no CUDA GPU" in res.output, res.output
    res = CliRunner().invoke(main, ["eval", onnx_path, onnx_path, "--data", str(cifar10 / "test.tar"), "--images",
                                    "16", "--provider", "cuda"])  # fmt: skip
    assert res.exit_code == 2 and "CUDAExecutionProvider" in res.output
    res = CliRunner().invoke(main, ["parity", ckpt, onnx_path, "--data", str(cifar10 / "test.tar"), "--images", "8",
                                    "--provider", "tensorrt"])  # fmt: skip
    assert res.exit_code == 3 and "SKIPPED" in res.output  # skipped, never passed
    res = CliRunner().invoke(main, ["bench", onnx_path, "--provider", "cuda", "--iters", "1", "--warmup", "0"])
    assert res.exit_code == 3 and "skipped" in res.output  # nothing timed: not verified, never ok


def test_a_divergence_is_printed_with_the_digits_that_put_it_past_its_limit():
    """0.2500010 against a limit of 0.25 read "0.25 > 0.25": as many digits as show it above."""
    from aft_export.verify.parity import _beyond

    assert _beyond(0.2500010127603942, 0.25) == "0.250001"
    assert _beyond(0.3, 0.25) == "0.3" and _beyond(1234.5678, 1e-3) == "1.23e+03"
    assert _beyond(0.25012, 0.2501) == "0.25012"  # "0.25" would be below it


def test_onnx_runtime_pools_stop_spinning_when_a_run_returns(pair):
    """The intra-op pool spins between the nodes of a run, never after it (force_spinning_stop), so
    that a runtime run next in the process gets the cores (benchmarks/runtime_quiet.py measures it);
    ``spinning=False`` also stops it within runs."""
    onnx_path = pair[1]
    spins = OrtRunner(str(onnx_path), threads=1)
    still = OrtRunner(str(onnx_path), threads=1, spinning=False)
    entry = "session.force_spinning_stop"
    assert spins.session.get_session_options().get_session_config_entry(entry) == "1"
    assert still.session.get_session_options().get_session_config_entry(entry) == "1"
    assert still.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_result_with_skipped_artifacts_decides_its_own_verdict_again():
    """What the pipeline could not run (an engine with no GPU here) joins the result as a skipped row, and the
    result decides its verdict again where it lives: not verified, never a pass, and its `passed` is the rule's."""
    from aft_export.errors import Verdict
    from aft_export.verify.parity import ParityResult, ParityRow

    ok = ParityRow("m.onnx", "onnxruntime", "fp32")
    result = ParityResult("m.pt", "cifar10:test", 8, [ok], 0, Verdict())
    more = result.with_skipped({"m.engine": "no GPU here"})
    assert (result.verdict.status, more.verdict.status, more.skipped, more.passed) == ("ok", "unverified", 1, True)
    assert more.to_dict()["artifacts"][1] == {"artifact": "m.engine", "status": "skipped", "reason": "no GPU here",
                                              "passed": None}
    assert "m.engine skipped by parity: no GPU here" in more.verdict.reasons and result.artifacts == [ok]


def test_a_parity_row_decides_its_own_passed_and_renders_the_report_s_keys_in_their_order():
    """A row is typed: its `passed` (every input set within its limits; None where skipped) is decided by it
    alone, its status and the verdict read it, and it renders the keys the JSON report has always had, in
    their order, an optional one only where it is said; the rendering is a copy."""
    import dataclasses

    from aft_export.verify.compare import TOLERANCES
    from aft_export.verify.parity import InputParity, ParityRow, parity_verdict

    inputs = {"real": InputParity({"max_abs": 0.5}, ["max abs 0.5 > 0.4"]),
              "constant": InputParity({"max_abs": 0})}  # fmt: skip
    row = ParityRow("m.onnx", "openvino-bf16", "fp32", TOLERANCES["bf16"], inputs, judged_as="bf16",
                    divergence={"error": "not localised"})  # fmt: skip
    d = row.to_dict()
    assert list(d) == ["artifact", "backend", "precision", "tolerance", "inputs", "failures", "judged_as",
                       "passed", "status", "divergence"]  # fmt: skip
    assert d["inputs"] == {"real": {"max_abs": 0.5, "passed": False},
                           "constant": {"max_abs": 0, "passed": True}}  # fmt: skip
    assert (d["failures"], d["passed"], d["status"]) == (["real: max abs 0.5 > 0.4"], False, "fail")
    assert d["tolerance"] == dataclasses.asdict(TOLERANCES["bf16"])
    assert d["divergence"] == {"error": "not localised"}
    d["inputs"]["real"]["max_abs"], d["divergence"]["error"] = 1.0, "changed"
    assert row.inputs["real"].metrics["max_abs"] == 0.5 and row.divergence == {"error": "not localised"}
    assert parity_verdict([row]).reasons == ("m.onnx fails parity: real: max abs 0.5 > 0.4",)
    fine = ParityRow("m.onnx", "onnxruntime", "fp32", TOLERANCES["fp32"],
                     {"real": InputParity({"max_abs": 0})})
    assert (fine.passed, fine.status) == (True, "pass")
    assert list(fine.to_dict()) == ["artifact", "backend", "precision", "tolerance", "inputs", "failures",
                                    "passed", "status"]  # fmt: skip
    skipped = ParityRow.skipped("m.engine", "no GPU")
    assert skipped.to_dict() == {"artifact": "m.engine", "status": "skipped", "reason": "no GPU",
                                 "passed": None}  # fmt: skip


def test_a_typed_row_still_reads_as_the_dict_it_was_until_the_renamed_release():
    from aft_export.verify.parity import ParityRow

    row = ParityRow.skipped("a.onnx", "no GPU here")
    with pytest.warns(DeprecationWarning, match=r"ParityRow\['status'\] is now ParityRow.status .*0\.2\.0"):
        assert row["status"] == "skipped"
    with pytest.warns(DeprecationWarning):
        assert row.get("reason") == "no GPU here" and row.get("backend", "none") == "none"
