"""aft-export doctor on this machine, for real: every check runs (or is skipped with its
reason), a broken one does not stop the others, one line per check, doctor.json written."""

import json
import subprocess
import sys

import pytest

from aft_export.workflow.doctor import NAME_WIDTH, Check, DoctorResult, format_check, generation
from aft_export.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, EXIT_UNVERIFIED
from aft_export.environment import tensorrt_environment

CHECKS = ["export", "quantize fp16", "quantize int8", "build fp32", "build fp16", "build int8",
          "verification script fp32", "verification script fp16", "verification script int8",
          "trtexec+polygraphy fp32", "trtexec+polygraphy fp16", "trtexec+polygraphy int8",
          "parity", "eval", "bench", "parity CUDA", "eval CUDA", "bench CUDA"]  # fmt: skip


def _doctor(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "aft_export.cli", "doctor", *map(str, args)], check=False,
                          capture_output=True, text=True, timeout=900, cwd=cwd)  # fmt: skip


@pytest.fixture
def tiny(tmp_path):
    import torch

    from aft_export.models.checkpoint import save_checkpoint
    from aft_export.data.datasets import CIFAR10_CLASSES
    from aft_export.models import create_model

    torch.manual_seed(0)
    path = tmp_path / "tiny.pt"
    save_checkpoint(path, create_model("aft_conv_test"), list(CIFAR10_CLASSES), model_name="aft_conv_test")
    return path


def test_doctor_runs_every_check_and_reports_them_all(tmp_path, tiny, cifar10):
    """A broken check (calibration images that do not exist) does not stop the run: the
    checks after it run, or are skipped with the reason; one line per check; doctor.json
    names every check. Without TensorRT or a GPU those checks are skipped, never passed."""
    out = tmp_path / "out"
    r = _doctor(tiny, "-o", out, "--data", cifar10 / "test.tar", "--calib", tmp_path / "missing.json",
                "--calib-images", 16, "--parity-images", 8, "--eval-images", 32, "--bench-iters", 1, "--timeout", 600,
                "--json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == EXIT_CHECK_FAILED, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((out / "doctor.json").read_text())
    assert json.loads(r.stdout) == report | {"created_utc": json.loads(r.stdout)["created_utc"]}
    checks = {c["name"]: c for c in report["checks"]}
    # quantize failed, so there is no fp16/int8 file to script or to run trtexec on
    assert list(checks) == [c for c in CHECKS if c not in ("trtexec+polygraphy fp16", "trtexec+polygraphy int8")]
    assert report["format"] == "aft-export.doctor.v1" and report["exit_code"] == EXIT_CHECK_FAILED
    lines = r.stderr.splitlines()  # with --json the check lines go to stderr
    for name, c in checks.items():  # one line each, the status first
        (line,) = [x for x in lines if x[9:].startswith(name.ljust(NAME_WIDTH))]
        assert line.split()[0] == {"ok": "ok", "failed": "FAILED", "skipped": "skipped"}[c["status"]], line
    assert report["failed"] == ["quantize fp16", "quantize int8"]
    q = checks["quantize int8"]
    assert q["exit_code"] == EXIT_BAD_INPUT and q["detail"].startswith("error:") and "missing.json" in q["detail"]
    assert "missing.json" in q["tail"] and "--images 16" in q["command"] and q["seconds"] > 0
    assert "missing.json" in (out / q["log"]).read_text()
    assert "did not produce" in checks["verification script int8"]["detail"]
    for name in ("export", "verification script fp32", "parity", "eval", "bench"):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["bench"]["command"].count(".onnx") == 1  # the one artifact made
    assert (out / "tiny.verify.sh").is_file() and report["verification_scripts"] == ["tiny.verify.sh"]
    env = report["environment"]
    assert env["python"] and env["packages"]["onnx"] and "driver" in env and "compute_capability" in env
    here = tensorrt_environment()
    if here["gpu"] is None:
        assert all(checks[n]["status"] == "skipped" and "no CUDA GPU" in checks[n]["detail"]
                   for n in ("parity CUDA", "eval CUDA", "bench CUDA"))  # fmt: skip
    if here["gpu"] is None or here["tensorrt"] is None:  # this machine: skipped with the reason
        for name in ("build fp32", "build int8", "trtexec+polygraphy fp32"):
            assert checks[name]["status"] == "skipped" and checks[name]["detail"], name
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []  # the temporary name is gone


def test_exit_status_and_bad_input(tmp_path):
    """The exit-code table: 1 when a check failed, else 3 when one was skipped (nothing
    failed, not everything verified), else 0. A model that is neither a file nor a zoo
    name: 2 and one line, before anything is written."""
    ok, failed, skipped = Check("a", status="ok"), Check("b", status="failed"), Check("c", status="skipped")
    assert DoctorResult("r", {}, [ok]).exit_code == EXIT_OK
    assert DoctorResult("r", {}, [ok, skipped]).exit_code == EXIT_UNVERIFIED
    assert DoctorResult("r", {}, [ok, skipped, failed]).exit_code == EXIT_CHECK_FAILED
    assert format_check(skipped).split() == ["skipped", "c", "0.0", "s"]

    bad = _doctor("no_such_model", "-o", tmp_path / "never", cwd=tmp_path)
    assert bad.returncode == EXIT_BAD_INPUT and bad.stdout == ""
    (line,) = bad.stderr.splitlines()
    assert line.startswith("error: no_such_model is neither a checkpoint file nor a zoo model (aft_conv_cifar")
    assert not (tmp_path / "never").exists()


def test_generation_names_the_verification_block():
    assert [generation(v) for v in ("8.6.1", "10.3.0", "11.4.0", "9.1", None)] == ["trt8", "trt10", "trt11", None, None]



def test_the_data_goes_to_the_checks_only_where_given(tmp_path):
    """No ``data``: no check is given --data, so export, parity and eval each take the test data
    the checkpoint names, else cifar10:test (datasets.verification_data, every command's rule),
    as the pipeline does; where given, every check that verifies is given it."""
    from aft_export.options import DoctorOptions
    from aft_export.workflow.doctor import _checks

    class Recorder:  # the checks' commands, recorded instead of run (no file is made, so the rest skip)
        work, result = tmp_path, DoctorResult("r", {})

        def __init__(self):
            self.commands = {}

        def run(self, name, command, needs=(), ok_codes=()):
            self.commands[name] = command

        def skip(self, name, why, command=None):
            pass

    for data, expected in ((None, []), ("/some/images.tar", ["--data", "/some/images.tar"])):
        c = Recorder()
        _checks(c, tmp_path / "m.pt", data, "recipe.json", DoctorOptions(), {"gpu": None}, "no TensorRT here")
        assert set(c.commands) == {"export", "quantize fp16", "quantize int8", "eval"}
        for name in ("export", "eval"):
            cmd = c.commands[name]
            given = cmd[cmd.index("--data"):cmd.index("--data") + 2] if "--data" in cmd else []
            assert given == expected, (name, cmd)
    assert DoctorOptions().data is None
