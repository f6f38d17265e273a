"""aft-export serve's life cycle, from outside (the command and HTTP): ready means every model
is ready; the client waits for a server started after it; SIGINT drains the request in flight;
SIGINT or SIGTERM at start-up exits 130/143 with nothing left (serve gives Triton
aft_export.serving.server.START_BOUND seconds there, then kills it: no wall clock is judged here,
the interrupt's timeout only bounds a hang); an artifact the
runner cannot load, a port in use, a missing artifact or extra are one line and exit 2."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.data.images import iter_tar
from aft_export.serving.server import python_backend_env
from tests.conftest import REPO
from tests.servekit import Server, alive, cmdline, need_server



@pytest.fixture(scope="module")
def onnx_file(served_onnx):
    return served_onnx[0]


def _large_jpeg() -> bytes:
    """A 6000x5000 JPEG: decoding and resizing eight of them keeps a request busy for seconds."""
    from PIL import Image

    pixels = np.linspace(0, 255, 6000 * 5000 * 3).reshape(5000, 6000, 3).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return 0


def _left_behind(server: Server, family: set[int], work: Path | None) -> list[str]:
    found = [f"process {p}" for p in sorted(family) if alive(p)]
    found += [str(p) for p in Path("/dev/shm").glob(f"aft-export-serve-{server.proc.pid}-*")]
    if work is not None and work.exists():
        found.append(str(work))
    return found


def _cpu_ticks(pid: int) -> int:
    """The CPU time a process has used (user and system, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _stub(pids, model: str) -> int:
    """The Triton Python backend stub that runs ``model``."""
    for p in pids:
        try:
            args = cmdline(p)
        except OSError:
            continue
        if args and args[0].endswith("triton_python_backend_stub") and f"/{model}/" in args[1]:
            return p
    raise AssertionError(f"no stub runs {model}")


def _workdir(pids) -> Path | None:
    for p in pids:
        try:
            args = cmdline(p)
        except OSError:
            continue
        if args and Path(args[0]).name == "tritonserver":
            return Path(next(a for a in args if a.startswith("--model-repository=")).split("=", 1)[1]).parent
    return None


def test_ready_only_when_every_model_is_the_client_waits_and_sigint_drains(onnx_file, tmp_path, cifar10):
    """From launch on: whenever /v2/health/ready says 200, every model says ready too, and
    the "serving" line comes after; a client started before the server waits for it and
    prints the top-5; SIGINT while a request runs: it is answered, exit 130, nothing left."""
    httpclient = need_server()
    server = Server([onnx_file], tmp_path / "serve.log", "--max-batch", "8", "--drain-seconds", "15")
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(next(raw for _, _, raw in iter_tar(cifar10 / "test.tar")))
    client = subprocess.Popen([sys.executable, "-m", "aft_export.serving.client", "--model", "conv_image", "--url",
                               server.url, "--wait", "90", str(photo)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        server.launch()
        base = f"http://{server.url}/v2"
        seen_ready = None
        deadline = time.monotonic() + 90
        while seen_ready is None and time.monotonic() < deadline and server.proc.poll() is None:
            if _status(f"{base}/health/ready") == 200:
                seen_ready = {m: _status(f"{base}/models/{m}/ready") for m in ("conv", "conv_image")}
            time.sleep(0.02)
        assert seen_ready == {"conv": 200, "conv_image": 200}, (seen_ready, server.tail())
        out, err = client.communicate(timeout=90)
        assert client.returncode == 0 and err == "", err
        assert out.startswith(f"{photo}: ") and len(out.splitlines()) == 1
        server.pids = server.family() - {server.proc.pid}
        family, work = server.family(), _workdir(server.pids)
        # the line comes once serve has seen Triton ready, which a client may see first: bounded wait
        deadline = time.monotonic() + 20
        while "serving conv and conv_image" not in server.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "serving conv and conv_image" in server.log.read_text()

        big = np.array([[_large_jpeg()]] * 8, dtype=object)
        outcome = {}

        def slow_request():
            with httpclient.InferenceServerClient(server.url, network_timeout=120) as conn:
                inp = httpclient.InferInput("image_bytes", list(big.shape), "BYTES")
                inp.set_data_from_numpy(big)
                try:
                    outcome["logits"] = conn.infer("conv_image", [inp]).as_numpy("logits")
                    outcome["answered"] = time.monotonic()
                except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                    outcome["error"] = repr(exc)

        # the request is in flight once the model that decodes it is computing (its stub, idle till then,
        # uses the CPU): that event, not a time, says when to send SIGINT
        stub = _stub(family, "conv_image")
        idle = _cpu_ticks(stub)
        request = threading.Thread(target=slow_request)
        request.start()
        while _cpu_ticks(stub) == idle and request.is_alive():
            time.sleep(0.01)
        signalled = time.monotonic()
        code = server.interrupt()
        request.join(timeout=60)
        assert outcome.get("error") is None and outcome["logits"].shape == (8, 10), outcome
        # answered after the signal: it was in flight then (eight 30-megapixel decodes take seconds), and drained
        assert outcome["answered"] > signalled, "the request was answered before SIGINT: nothing was in flight"
        assert code == 130, server.tail()
        log = server.log.read_text()
        assert "stopping (SIGINT): Triton finishes the requests in flight" in log and "Traceback" not in log
        assert _left_behind(server, family, work) == []
        for port in (server.http_port, server.grpc_port, server.metrics_port):  # and the ports are free again
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
    finally:
        if client.poll() is None:
            client.kill()
        server.stop()


@pytest.mark.parametrize("moment,sig,code", [("while the models load", "SIGINT", 130),
                                             ("as soon as it has started", "SIGTERM", 143)])  # fmt: skip
def test_a_stop_at_start_up_exits_as_the_table_says_within_seconds(onnx_file, tmp_path, moment, sig, code):
    """SIGINT or SIGTERM before the server is ready: exit 130/143, no
    traceback, no process, shared memory or working directory left."""
    import signal

    need_server()
    server = Server([onnx_file], tmp_path / "serve.log")
    try:
        server.launch()
        deadline = time.monotonic() + 90
        work = None
        while time.monotonic() < deadline and server.proc.poll() is None:
            pids = server.family()
            work = work or _workdir(pids)
            stubs = [p for p in pids if cmdline(p) and cmdline(p)[0].endswith("triton_python_backend_stub")]
            if moment.startswith("as soon") and server.log.read_text().startswith("threads:"):
                break
            if moment.startswith("while") and stubs:
                break
            time.sleep(0.02)
        assert server.proc.poll() is None, server.tail()
        assert _status(f"http://{server.url}/v2/health/ready") != 200, "ready already: not start-up"
        family = server.family()
        work = work or _workdir(family)
        started = time.monotonic()
        assert server.interrupt(timeout=60, sig=getattr(signal, sig)) == code, server.tail()
        seconds = time.monotonic() - started  # shown, not judged: the interrupt's own timeout bounds a hang
        log = server.log.read_text()
        assert "Traceback" not in log, log
        left = _left_behind(server, family, work)
        for _ in range(20):  # a killed stub's exit may take a moment to be reaped by init
            if not left:
                break
            time.sleep(0.1)
            left = _left_behind(server, family, work)
        assert left == [], left
        print(f"{sig} {moment}: exit {code} after {seconds:.1f} s")
    finally:
        server.stop()


def _broken_onnx(src: Path, dst: Path) -> Path:
    """The artifact with one node made an operator no runtime has: its metadata still says
    what Triton should serve, but ONNX Runtime cannot load it."""
    import onnx

    model = onnx.load(src)
    model.graph.node[0].op_type = "NoSuchOperator"
    onnx.save(model, dst)
    return dst


def test_an_artifact_the_runner_cannot_load_is_one_line_and_exit_2(onnx_file, tmp_path):
    need_server()
    broken = _broken_onnx(onnx_file, tmp_path / "broken.onnx")
    server = Server([broken], tmp_path / "serve.log")
    try:
        server.launch()
        assert server.proc.wait(timeout=90) == 2, server.tail()
        lines = [line for line in server.log.read_text().splitlines() if not line.startswith("threads:")]
        assert len(lines) == 1 and lines[0].startswith(f"error: ONNX Runtime cannot load {broken}"), lines
        assert not list(Path("/dev/shm").glob(f"aft-export-serve-{server.proc.pid}-*"))
    finally:
        server.stop()


def test_a_port_in_use_is_one_line_and_exit_2(onnx_file):
    need_server()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", str(onnx_file), "--http-port", str(port)])
    assert result.exit_code == 2
    assert re.fullmatch(rf"error: port {port} on 127\.0\.0\.1 \(http\) is in use; choose another with \S+",
                        result.output.strip()), result.output  # fmt: skip


def test_a_missing_artifact_is_one_line_and_exit_2(tmp_path):
    need_server()
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "nope.onnx")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: artifact {tmp_path / 'nope.onnx'} does not exist; check the path"


def test_a_missing_serve_extra_is_one_line_and_exit_2(onnx_file, monkeypatch):
    """nvidia-pytriton (which ships tritonserver) not installed: one line naming the extra."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pytriton" else real(name, *a))
    result = CliRunner().invoke(main, ["serve", str(onnx_file)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: serving needs the serve extra")
    assert "pip install 'aft-export[serve]'" in lines[0]


def test_the_client_without_a_server_is_one_line_and_exit_2_after_its_wait():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    proc = subprocess.run([sys.executable, "-m", "aft_export.serving.client", "--model", "m_image", "--url",
                           f"127.0.0.1:{port}", "--wait", "1", str(REPO / "examples" / "photo.jpg")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: no server answered at 127.0.0.1:{port} within 1 s; start one "
                                        f"(aft-export serve MODEL.onnx) or give its address (--url)"]  # fmt: skip
    bad = subprocess.run([sys.executable, "-m", "aft_export.serving.client", "photo.jpg"], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("error: ")


def test_the_client_help_names_how_it_was_run_and_says_its_whole_description():
    """--help of ``python -m aft_export.client`` (the root shim) shows that command in its usage and
    the docstring's first sentence whole, not cut at its first line break; the copy a Triton
    repository holds, run as a script, keeps argparse's own name for it."""
    sentence = ("Top-k classes of images from an aft-export model served by Triton (aft-export serve, or a "
                "container running the repository aft-export triton-repo writes): encoded images to NAME_image.")
    for module in ("aft_export.client", "aft_export.serving.client"):
        proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: python -m {module} "), proc
        assert sentence in " ".join(proc.stdout.split()), proc.stdout
        assert "(aft-export serve prints them)" in " ".join(proc.stdout.split())


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
