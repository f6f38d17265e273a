"""Atomic writes, tested by killing the writer midway: the destination is the old file
or none, never half a new one; a half-written calibration cache is not a cache hit;
files and directories get the mode the umask gives."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from aft_export.errors import AFTExportError
from aft_export.fileio import (atomic_directory, atomic_write_bytes, atomic_write_text, check_output_path,
                               claim_output, copy_file, private_directory)  # fmt: skip
from aft_export.artifacts.onnxio import load_onnx, save_onnx
from tests.conftest import REPO

HANG = """
import os, signal, sys, time
from pathlib import Path
READY = Path(sys.argv[1])
def hang():
    READY.write_text("midway")
    time.sleep(600)
"""


def _kill_midway(code: str, tmp_path: Path, *args: str) -> None:
    """Run ``code`` (which calls ``hang()`` half way through a write) in a subprocess and
    SIGKILL it once it is there. A SIGKILLed process cleans nothing up, so it gets a $TMPDIR
    of its own under ``tmp_path`` (not the machine's /tmp)."""
    ready = tmp_path / "ready"
    tmpdir = tmp_path / "writer-tmp"
    tmpdir.mkdir(exist_ok=True)
    script = tmp_path / "writer.py"
    script.write_text(HANG + textwrap.dedent(code))
    proc = subprocess.Popen([sys.executable, str(script), str(ready), *args], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)})  # fmt: skip
    deadline = time.time() + 120
    while not ready.exists():
        if proc.poll() is not None:
            pytest.fail(f"the writer exited ({proc.returncode}) before reaching the midway point")
        if time.time() > deadline:
            proc.kill()
            pytest.fail("the writer never reached the midway point")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ready.unlink()


def test_a_killed_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "model.engine"
    target.write_bytes(b"old engine")
    _kill_midway("""
        from aft_export.fileio import atomic_write
        def write(tmp):
            Path(tmp).write_bytes(b"half of a new eng")
            hang()
        atomic_write(sys.argv[2], write)
    """, tmp_path, str(target))
    assert target.read_bytes() == b"old engine"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("model.engine", "writer.py", "writer-tmp")]
    assert all(name.startswith(".model.engine.") and name.endswith(".tmp") for name in leftovers), leftovers


def _graph(weight_value: float) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((64, 64), weight_value, np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [w])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_onnx_with_external_data_is_replaced_as_a_pair(tmp_path):
    """Killed after the new data file is in place but before the new .onnx is: the old
    .onnx still loads with its own weights."""
    path = tmp_path / "m.onnx"
    save_onnx(_graph(1.0), path, threshold=0)
    _kill_midway("""
        import numpy as np
        import aft_export.artifacts.onnxio as io
        from tests.test_fileio import _graph
        real = io.atomic_write_bytes
        def slow(path, data):
            if str(path).endswith(".onnx"):
                hang()
            return real(path, data)
        io.atomic_write_bytes = slow
        io.save_onnx(_graph(2.0), sys.argv[2], threshold=0)
    """, tmp_path, str(path))
    loaded = onnx.numpy_helper.to_array(load_onnx(path).graph.initializer[0])
    assert np.all(loaded == 1.0)
    save_onnx(_graph(3.0), path, threshold=0)  # the next save cleans up the stray data file
    assert np.all(onnx.numpy_helper.to_array(load_onnx(path).graph.initializer[0]) == 3.0)
    assert len(list(tmp_path.glob("m.onnx.*.data"))) == 1


def test_a_killed_pipeline_leaves_no_run_directory(tmp_path):
    final = tmp_path / "run"
    _kill_midway("""
        from aft_export.fileio import atomic_directory
        with atomic_directory(sys.argv[2]) as work:
            (work / "model.onnx").write_bytes(b"x")
            hang()
    """, tmp_path, str(final))
    assert not final.exists()
    with atomic_directory(final) as work:  # the same --out works afterwards
        (work / "report.md").write_text("done")
    assert (final / "report.md").read_text() == "done"


def test_a_killed_calibration_leaves_no_cache_and_a_corrupt_cache_is_rebuilt(tmp_path, cifar10):
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model
    from tests.export.test_exporter import make_ckpt

    src = tmp_path / "m.onnx"
    export_checkpoint(make_ckpt(tmp_path / "m.pt", "aft_full_test"), src, ExportOptions(images=0),
                      log=lambda *a: None)  # fmt: skip
    cache = tmp_path / "cache"
    calib = str(cifar10 / "train.tar")
    _kill_midway("""
        import onnxruntime.quantization.calibrate as cal
        from aft_export.options import QuantizeOptions
        from aft_export.quantization.stage import quantize_model
        real = cal.save_tensors_data
        def slow(data, path):
            Path(path).write_text('{"half": ')
            hang()
        cal.save_tensors_data = slow
        quantize_model(sys.argv[2], sys.argv[3], sys.argv[4],
                       QuantizeOptions(images=8, cache_dir=sys.argv[5]), progress=False, log=lambda *a: None)
    """, tmp_path, str(src), str(tmp_path / "q.onnx"), calib, str(cache))
    # the cache gets an entry only once the output is written: killed midway, it is as it was (not even made)
    assert not cache.exists() or [p for p in cache.iterdir() if not p.name.startswith(".")] == [], "no half cache"
    said = []
    opts = QuantizeOptions(images=8, cache_dir=str(cache))
    first = quantize_model(src, tmp_path / "q.onnx", calib, opts, progress=False, log=said.append)
    assert first.recipe["calibration_cache"] == "written"
    (entry,) = [p for p in cache.iterdir() if p.suffix == ".json"]
    entry.write_text(entry.read_text()[:40])  # a truncated cache file
    again = quantize_model(src, tmp_path / "q2.onnx", calib, opts, progress=False, log=said.append)
    assert any("unreadable or incomplete; recomputing" in s for s in said)
    assert again.recipe["calibration_cache"] == "written" and again.sha256 == first.sha256


def test_files_and_directories_honour_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        f = atomic_write_bytes(tmp_path / "a.bin", b"x")
        s = atomic_write_text(tmp_path / "run.sh", "#!/bin/sh\n", executable=True)
        with atomic_directory(tmp_path / "run") as work:
            (work / "x").write_text("x")
    finally:
        os.umask(old)
    assert (f.stat().st_mode & 0o777, s.stat().st_mode & 0o777) == (0o640, 0o750)
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o750


def test_copy_file_is_atomic_and_never_onto_its_source(tmp_path):
    from aft_export.errors import AFTExportError
    from aft_export.fileio import copy_file

    src = tmp_path / "a.bin"
    src.write_bytes(b"\x00payload" * 1000)
    out = copy_file(src, tmp_path / "b.bin")
    assert out.read_bytes() == src.read_bytes() and not list(tmp_path.glob(".b.bin.*.tmp"))
    with pytest.raises(AFTExportError, match="onto itself"):
        copy_file(src, tmp_path / "." / "a.bin")
    assert src.read_bytes() == b"\x00payload" * 1000


def test_an_output_is_never_an_input_nor_anything_but_a_regular_file(tmp_path):
    src = tmp_path / "m.pt"
    src.write_bytes(b"weights")
    os.link(src, tmp_path / "hard.pt")
    os.symlink(src, tmp_path / "soft.pt")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    with pytest.raises(AFTExportError, match=r"output .*m.pt is the input .*m.pt; writing it would overwrite its input"):
        check_output_path(src, inputs=[src])
    for alias in ("hard.pt", "soft.pt"):
        with pytest.raises(AFTExportError, match=r"is the input .*m.pt \(through a link\)"):
            check_output_path(tmp_path / alias, inputs=[tmp_path / "other", src])
    with pytest.raises(AFTExportError, match="is a fifo, not a regular file"):
        atomic_write_bytes(tmp_path / "fifo", b"replaced")
    with pytest.raises(AFTExportError, match="is a directory, not a regular file"):
        check_output_path(tmp_path / "dir")
    with pytest.raises(AFTExportError, match="is a regular file, not a directory"):
        check_output_path(src, directory=True)
    with pytest.raises(AFTExportError, match="output directory .*nope does not exist; create it"):
        check_output_path(tmp_path / "nope" / "x.onnx")
    assert check_output_path(tmp_path / "new.onnx", inputs=[src, "cifar10:test", None]) == tmp_path / "new.onnx"
    assert src.read_bytes() == b"weights" and (tmp_path / "fifo").is_fifo()


def test_an_output_is_claimed_once_per_run_and_its_lock_removed_after(tmp_path):
    out = tmp_path / "x.onnx"
    lock = tmp_path / ".x.onnx.lock"
    other = [sys.executable, "-c", "import sys; from aft_export.fileio import claim_output\n"
             "with claim_output(sys.argv[1]): pass", str(out)]  # fmt: skip
    with claim_output(out) as claimed:
        assert claimed == out and lock.read_text().strip() == str(os.getpid())
        with claim_output(out):  # the command line and the library both claim it: one process, one claim
            pass
        assert lock.exists()
        proc = subprocess.run(other, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode != 0
        assert f"another aft-export run (pid {os.getpid()}) is writing {out}" in proc.stderr
    assert not lock.exists() and not out.exists()
    assert subprocess.run(other, env={**os.environ, "PYTHONPATH": str(REPO)}).returncode == 0  # released


def test_a_private_directory_is_for_this_user_only_and_gone_however_the_block_ends(tmp_path):
    with private_directory("aft-test-") as work:
        assert (work.stat().st_mode & 0o777) == 0o700
        copy_file(atomic_write_text(tmp_path / "script", "#!/bin/sh\n"), work / "x", executable=True)
        assert os.access(work / "x", os.X_OK)
    assert not work.exists()
    with pytest.raises(KeyboardInterrupt):
        with private_directory("aft-test-") as work:
            atomic_write_text(work / "f", "x")
            raise KeyboardInterrupt
    assert not work.exists()
