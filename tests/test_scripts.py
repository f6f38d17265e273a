"""The benchmark scripts run end to end (tiny sizes; their figures are for reports, not asserts)."""

import json

from tests.conftest import REPO


def test_gpu_check_runs_every_step_and_reports_them_all(tmp_path, cifar10):
    """A broken step (here: calibration images that do not exist) does not stop the run:
    the steps after it run or are skipped with the reason, the whole table is printed and
    the JSON names every step. Without TensorRT/GPU those steps are skipped, never passed."""
    import os
    import subprocess
    import sys

    import torch

    from aft_export.checkpoint import save_checkpoint
    from aft_export.datasets import CIFAR10_CLASSES
    from aft_export.models import create_model
    from aft_export.trt import environment

    torch.manual_seed(0)
    ckpt = tmp_path / "tiny.pt"
    save_checkpoint(ckpt, create_model("aft_conv_test"), list(CIFAR10_CLASSES), model_name="aft_conv_test")
    out = tmp_path / "out"
    r = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), str(ckpt), str(out), "--calib",
                        str(tmp_path / "missing.json"), "--parity-images", "8", "--eval-limit", "32",
                        "--bench-iters", "1", "--timeout", "600"],
                       check=False, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHON": sys.executable})  # fmt: skip
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert list(steps) == ["export", "quantize fp16", "quantize int8", "build fp32", "build fp16", "build int8",
                           "verification script fp32", "verification script fp16", "verification script int8",
                           "trtexec+polygraphy fp32", "TensorRT/GPU tests", "parity", "eval", "bench",
                           "parity CUDA", "eval CUDA", "bench CUDA"]  # fmt: skip
    assert all(steps[s]["status"] == "skipped" and "no CUDA GPU" in steps[s]["detail"]
               for s in ("parity CUDA", "eval CUDA", "bench CUDA"))  # fmt: skip
    for name in steps:  # the whole table, whatever failed
        assert any(line.startswith(name + " ") for line in r.stdout.splitlines()), name
    assert report["failed"] == ["quantize fp16", "quantize int8"]
    q = steps["quantize int8"]
    assert q["exit_code"] == 2 and q["detail"].startswith("error:") and "missing.json" in q["detail"]
    assert "missing.json" in q["tail"] and "--calib" in q["command"] and q["seconds"] > 0
    assert "did not produce" in steps["verification script int8"]["detail"]
    assert steps["export"]["status"] == steps["parity"]["status"] == steps["eval"]["status"] == "ok"
    assert steps["bench"]["status"] == "ok" and "tiny.fp16.onnx" not in steps["bench"]["command"]
    assert (out / "tiny.verify.sh").is_file() and "bash " + str(out / "tiny.verify.sh") in r.stdout
    env = report["environment"]
    assert env["python"] and env["packages"]["onnx"] and "driver" in env and "compute_capability" in env
    if environment()["gpu"] is None or env["tensorrt"] is None:  # this machine: skipped with the reason
        for name in ("build fp32", "TensorRT/GPU tests", "trtexec+polygraphy fp32"):
            assert steps[name]["status"] == "skipped" and steps[name]["detail"], name
