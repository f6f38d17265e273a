"""aft-export serve's life cycle: SIGINT drains the request in flight and leaves no process
behind (a real server of its own); bad input is one line and exit 2 before anything starts;
the Python backend's libpython environment."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import sysconfig
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.export.exporter import ExportOptions, export_checkpoint
from aft_export.serve import python_backend_env
from tests.conftest import REPO
from tests.export.test_exporter import make_ckpt
from tests.servekit import Server, alive, cmdline, need

QUIET = dict(log=lambda *a: None)


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-stop")
    path = root / "simple.onnx"
    export_checkpoint(make_ckpt(root / "simple.pt", "aft_simple_test"), path, ExportOptions(verify_images=0), **QUIET)
    return path


def _large_jpeg() -> bytes:
    """A 6000x5000 JPEG: decoding and resizing eight of them keeps a request busy for seconds."""
    from PIL import Image

    pixels = np.linspace(0, 255, 6000 * 5000 * 3).reshape(5000, 6000, 3).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def test_sigint_drains_the_request_in_flight_and_leaves_no_process(onnx_file, tmp_path):
    need("pytriton")
    httpclient = need("tritonclient.http")
    server = Server([onnx_file], tmp_path / "serve.log", "--max-batch", "8", "--drain-seconds", "15")
    try:
        server.start(["simple", "simple_image"])
        family = server.pids | {server.proc.pid}
        assert [p for p in server.pids if os.path.basename(cmdline(p)[0]) == "tritonserver"], "no tritonserver child"
        big = np.array([[_large_jpeg()]] * 8, dtype=object)
        outcome = {}

        def slow_request():
            with httpclient.InferenceServerClient(server.url, network_timeout=120) as client:
                inp = httpclient.InferInput("image_bytes", list(big.shape), "BYTES")
                inp.set_data_from_numpy(big)
                started = time.monotonic()
                try:
                    outcome["logits"] = client.infer("simple_image", [inp]).as_numpy("logits")
                except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                    outcome["error"] = repr(exc)
                outcome["seconds"] = time.monotonic() - started

        request = threading.Thread(target=slow_request)
        request.start()
        time.sleep(1.0)  # the request is in (eight 30-megapixel decodes take seconds)
        assert request.is_alive(), "the request finished before SIGINT: nothing was in flight"
        code = server.interrupt()
        request.join(timeout=60)
        assert outcome.get("error") is None and outcome["logits"].shape == (8, 10), outcome
        assert code == 0, server.tail()
        assert "stopping: finishing the requests in flight" in server.log.read_text()
        left = sorted(p for p in family if alive(p))
        assert left == [], f"processes left after SIGINT: {left}"
        for port in (server.http_port, server.grpc_port, server.metrics_port):  # and the ports are free again
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
    finally:
        server.stop()


def test_a_port_in_use_is_one_line_and_exit_2(onnx_file):
    need("pytriton")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", str(onnx_file), "--http-port", str(port)])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: port {port} on 127.0.0.1 (http) is in use; choose another with "
                                     f"--http-port")


def test_a_missing_artifact_is_one_line_and_exit_2(tmp_path):
    need("pytriton")
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "nope.onnx")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: artifact {tmp_path / 'nope.onnx'} does not exist"


def test_a_missing_serve_extra_is_one_line_and_exit_2(onnx_file):
    """PyTriton made unimportable in a fresh interpreter: one line naming the extra."""
    code = ("import sys; sys.modules['pytriton'] = None; from aft_export.cli import main; "
            f"sys.argv = ['aft-export', 'serve', {str(onnx_file)!r}]; main()")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: serving needs the serve extra")
    assert "pip install 'aft-export[serve]'" in lines[0]


def test_python_backend_env_puts_this_interpreters_libpython_first(monkeypatch, tmp_path):
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if not os.path.isfile(os.path.join(libdir, soname)):
        pytest.skip(f"this interpreter has no shared {soname} in {libdir}")
    env = python_backend_env({"LD_LIBRARY_PATH": f"/opt/x:{libdir}:/opt/y", "PATH": "/bin"})
    assert env["LD_LIBRARY_PATH"] == f"{libdir}:/opt/x:/opt/y" and env["PATH"] == "/bin"
    assert python_backend_env({})["LD_LIBRARY_PATH"] == libdir
    # an interpreter without a shared libpython: nothing to point at, the environment is kept
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var", lambda k: str(tmp_path) if k == "LIBDIR" else real(k))
    assert python_backend_env({"LD_LIBRARY_PATH": "/opt/x"}) == {"LD_LIBRARY_PATH": "/opt/x"}

