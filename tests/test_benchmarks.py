"""The benchmarks/ scripts run end to end (tiny sizes; their figures are for docs, not asserts)."""

import importlib.util
import json

from tests.conftest import REPO
from tests.servekit import need_server


def _script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_aft_vs_mha_measures_every_layer(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert _script("bench_aft_vs_mha").main(["--tokens", "16", "64", "--iters", "1", "--dim", "32",
                                             "--json", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert {r["layer"] for r in rows} == {"mha", "aft_full", "aft_local", "aft_simple", "aft_conv"}
    assert all("error" not in r and r["ms"] > 0 for r in rows)
    assert "AFT-full peak memory T=16 -> 64" in capsys.readouterr().out


def test_bench_serve_runs_every_level_without_errors(tmp_path, capsys, cifar10):
    need_server()
    module = _script("bench_serve")
    from tests.export.test_exporter import make_ckpt

    ckpt = make_ckpt(tmp_path / "tiny.pt", "aft_conv_test")  # the zoo model exports in seconds more
    out = tmp_path / "b.json"
    assert module.main(["--model", str(ckpt), "--requests", "16", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    rows = {(r["input"], r["batch"], r["clients"]): r for r in report["results"]}
    assert sorted(rows) == sorted((k, b, c) for k in ("tensor", "image") for b in (1, 8) for c in (1, 4, 16))
    for (_, batch, _), r in rows.items():
        for way in ("served", "direct"):
            x = r[way]
            assert x["requests"] == 16 and x["images"] == 16 * batch and x["errors"] == 0
            assert x["images_per_s"] > 0 and "cpu_ms_per_image" in x  # /proc counts 10 ms ticks: 0 is a reading
    assert set(report["where"]) == {"tensor", "image"}
    assert report["where"]["tensor"]["compute_infer"] > 0
    text = capsys.readouterr().out
    assert "| tensor | 8 | 16 |" in text and "where the time of a one-image tensor request goes" in text
    assert "tensor batch 1: 16 clients throughput" in text


def test_bench_openvino_quick_times_both_runtimes_and_both_hints(tmp_path, capsys, cifar10):
    from tests.conftest import need_openvino

    need_openvino()
    spec = importlib.util.spec_from_file_location("bench_openvino", REPO / "benchmarks" / "bench_openvino.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "b.json"
    assert module.main(["--quick", "--hints", "--json", str(out), "--data", str(cifar10 / "test.tar")]) == 0
    report = json.loads(out.read_text())
    for rows in (report["rows"], report["hints"]):
        assert [(r["precision"], r["batch"]) for r in rows] == [("fp32", 1), ("fp32", 8), ("int8", 1), ("int8", 8)]
    assert all(r["onnxruntime_ms"] > 0 and r["openvino_ms"] > 0 and r["ort_over_openvino"] > 0 for r in report["rows"])
    assert all(r["latency_ms"] > 0 and r["throughput_ms"] > 0 and r["requests"] >= 1 for r in report["hints"])
    text = capsys.readouterr().out
    assert "| aft_simple_cifar | int8 | 8 |" in text and "LATENCY / THROUGHPUT" in text


def test_suite_cost_counts_each_tests_own_and_childrens_cpu(tmp_path):
    """tools/suite_cost.py, the plugin that says where the suite's time goes (issue 34): a test
    that spends its CPU in a child process is charged it as children's CPU, one that spends it
    in pytest's own process as its own; the report sums them by file."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_spend.py").write_text(
        "import subprocess, sys\n"
        "SPIN = 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass'\n"
        "def test_child():\n    subprocess.run([sys.executable, '-c', SPIN], check=True)\n"
        "def test_own():\n    exec(SPIN)\n")  # fmt: skip
    record = tmp_path / "cost.json"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tools.suite_cost",
                          "--rootdir", str(tmp_path), str(tmp_path / "test_spend.py")], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "AFT_SUITE_COST": str(record)}, check=False)  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = {r["test"].split("::")[1]: r for r in json.loads(record.read_text())["tests"]}
    assert rows["test_child"]["children_cpu"] >= 0.3 > rows["test_child"]["cpu"]
    assert rows["test_own"]["cpu"] >= 0.3 > rows["test_own"]["children_cpu"]
    report = subprocess.run([sys.executable, str(REPO / "tools" / "suite_cost.py"), str(record), "--tests", "1"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert report.startswith("2 tests: wall ") and "test_spend.py" in report and "the 1 tests that cost" in report


def test_deepstream_scaling_measures_the_three_ways(tmp_path, capsys, cifar10):
    out = tmp_path / "s.json"
    assert _script("deepstream_scaling").main(["--models", "aft_conv_cifar", "--images", "16", "--sizes", "0", "48",
                                               "--json", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.read_text())
    assert [r["object_size"] for r in rows] == [32, 48] and all(r["images"] == 16 for r in rows)
    native = rows[0]  # nothing to scale at the input's own size: the three ways are one image
    assert native["aft_export_top1"] == native["nvinfer_top1"] == native["nvinfer_default_top1"]
    assert "| aft_conv_cifar | 48x48 |" in capsys.readouterr().out


def test_bf16_zoo_proves_the_bf16_limits_or_says_why_it_cannot(tmp_path, capsys, cifar10):
    """benchmarks/bf16_zoo.py on one zoo model and 1,000 test images: on a CPU with bf16 units the bf16
    row of TOLERANCES holds what was measured and top-1 stays within its floor; elsewhere exit 3, said."""
    from aft_export.runtimes import RUNTIMES
    from tests.conftest import need_openvino

    need_openvino()
    out = tmp_path / "bf16.json"
    rc = _script("bf16_zoo").main(["--models", "aft_simple_cifar", "--images", "1000", "--data",
                                   str(cifar10 / "test.tar"), "--out", str(tmp_path), "--json", str(out)])  # fmt: skip
    text = capsys.readouterr()
    if RUNTIMES["openvino-bf16"].missing(gpu=False):
        assert rc == 3 and "openvino-bf16 cannot run here: this CPU has no bf16 units" in text.err
        return
    assert rc == 0, text.out
    report = json.loads(out.read_text())
    assert report["images"] == 1000 and report["broken"] == []
    cell = report["rows"][0]["fp32/openvino-bf16"]
    assert cell["judged_as"] == "bf16" and cell["failures"] == [] and 0 < cell["max_abs"] <= report["code"]["max_abs"]
    assert "| aft_simple_cifar |" in text.out and "| max_abs |" in text.out


def test_runtime_quiet_times_every_pair(tmp_path, capsys):
    """benchmarks/runtime_quiet.py on the zoo's smallest case (its figures are for docs, not asserts)."""
    from tests.conftest import need_openvino

    need_openvino()
    out = tmp_path / "q.json"
    assert _script("runtime_quiet").main(["--model", "aft_simple_cifar", "--batch", "1", "--rounds", "1", "--iters",
                                          "2", "--json", str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    assert len(report["ms"]) == 5 and all(v > 0 for v in report["ms"].values()) and len(report["ratios"]) == 3
    assert "openvino: after default / after force_spinning_stop" in capsys.readouterr().out


def test_portable_rewrites_times_before_and_after_with_the_same_outputs(tmp_path, capsys):
    """benchmarks/portable_rewrites.py on one zoo model: every CPU runtime, fp32 and int8, before and after;
    ONNX Runtime computes the same outputs either way (the rewrites reorder no sum)."""
    from tests.conftest import need_openvino

    need_openvino()
    out = tmp_path / "r.json"
    assert _script("portable_rewrites").main(["--models", "aft_full_cifar", "--batches", "2", "--iters", "2",
                                              "--repeats", "1", "--slack", "100", "--out", str(tmp_path),
                                              "--json", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.read_text())
    assert {(r["file"], r["runtime"]) for r in rows} >= {("fp32", "onnxruntime"), ("int8", "onnxruntime"),
                                                         ("fp32", "openvino"), ("int8", "openvino")}  # fmt: skip
    assert all(r["max_diff"] == 0 for r in rows if r["runtime"] == "onnxruntime")
    assert all(r["before_ms"] > 0 and r["after_ms"] > 0 for r in rows) and "| aft_full_cifar | int8 |" in \
        capsys.readouterr().out  # fmt: skip
