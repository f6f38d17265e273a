"""A real Triton server for the serving tests: ``aft-export serve`` as a subprocess on free
loopback ports, waits with bounds, and what /proc says about its processes and sockets.

The serve extra (nvidia-pytriton, which ships tritonserver, and tritonclient) is installed by
CI (.ci/run), so there a missing one fails; elsewhere the tests that need it are skipped with
the install line.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


from tests.conftest import REPO, need_module

INSTALL = "pip install -e '.[serve]'"
START_TIMEOUT = 90  # seconds for Triton and its models to be ready (2 shared cores)
STOP_TIMEOUT = 45  # SIGINT to exit: Triton drains, then its models unload


def need_server():
    """tritonserver (the serve extra's nvidia-pytriton) and tritonclient (its HTTP module is
    returned), or a skip (CI: a failure)."""
    need("pytriton")
    return need("tritonclient.http")


ENGINE_PROFILE_MAX = 16


def need(name: str):
    """The module; where it is missing a skip with the install line, under CI a failure."""
    return need_module(name, INSTALL)


def largest_first(logits, k: int):
    """The top ``k`` of each row, largest first, the lower index first among equals: written out here, apart
    from :func:`aft_export.serving.spec.topk` (which the served models run), to check what they answer."""
    import numpy as np

    return np.array([sorted(range(row.size), key=lambda j: (-float(row[j]), j))[:k] for row in np.asarray(logits)],
                    dtype=np.int64).reshape(len(logits), min(k, np.asarray(logits).shape[-1]))  # fmt: skip


def free_ports(n: int = 3) -> list[int]:
    """Ports free on 127.0.0.1 now (the kernel's choice, so a rerun does not collide)."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def children(pid: int) -> set[int]:
    """Every descendant of ``pid`` alive now, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cmdline(pid: int) -> list[str]:
    """The process's command line; [] once it has ended (or for a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def listening(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state that one of ``pids`` holds."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] != "0A" or parts[9] not in inodes:  # 0A: LISTEN
                continue
            hexaddr, hexport = parts[1].split(":")
            if width == 8:
                addr = socket.inet_ntop(socket.AF_INET, bytes.fromhex(hexaddr)[::-1])
            else:
                words = [bytes.fromhex(hexaddr[i : i + 8])[::-1] for i in range(0, 32, 8)]
                addr = socket.inet_ntop(socket.AF_INET6, b"".join(words))
            found.append((addr, int(hexport, 16)))
    return found


class Server:
    """``aft-export serve ARTIFACT...`` on free loopback ports; its output goes to a log file."""

    def __init__(self, artifacts, log: Path, *extra: str) -> None:
        self.http_port, self.grpc_port, self.metrics_port = free_ports()
        self.log = log
        self.args = [sys.executable, "-m", "aft_export.cli", "serve", *map(str, artifacts), "--http-port",
                     str(self.http_port), "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
                     *extra]  # fmt: skip
        self.proc: subprocess.Popen | None = None
        self.pids: set[int] = set()
        self.env: dict | None = None  # None: this process's environment

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    def launch(self) -> Server:
        """Start it, without waiting."""
        self.launch_env = dict(self.env if self.env is not None else os.environ)  # what it was given
        self.proc = subprocess.Popen(self.args, stdout=self.log.open("w"), stderr=subprocess.STDOUT, cwd=REPO,
                                     env=self.env, start_new_session=True)  # fmt: skip
        return self

    def start(self, models: list[str]) -> Server:
        """Start it and wait (at most START_TIMEOUT) until every one of ``models`` is ready."""
        import tritonclient.http as httpclient

        self.launch()
        deadline = time.monotonic() + START_TIMEOUT
        with httpclient.InferenceServerClient(self.url) as client:
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(f"aft-export serve exited with {self.proc.returncode}:\n{self.tail()}")
                try:
                    if all(client.is_model_ready(m) for m in models):
                        break
                except Exception:  # noqa: BLE001 - not listening yet
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"not ready after {START_TIMEOUT}s:\n{self.tail()}")
                time.sleep(0.25)
        self.pids = children(self.proc.pid)
        return self

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def family(self) -> set[int]:
        """The server's processes alive now: aft-export serve and every descendant."""
        return children(self.proc.pid) | {self.proc.pid}

    def interrupt(self, timeout: float = STOP_TIMEOUT, sig: int = signal.SIGINT) -> int:
        """SIGINT, as Ctrl+C sends it to the command (not to its children); the exit code."""
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """Whatever happened: SIGINT, then SIGKILL to the whole session if it hangs."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.interrupt()
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for pid in self.pids:  # anything left behind by a failed test
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


class TritonBinary(Server):
    """The ``tritonserver`` 2.51 binary of the serve extra on a model repository of our own
    (``aft-export triton-repo``'s), set up as ``aft-export serve`` sets it up (the Python
    backend with the stub for this interpreter, :func:`aft_export.serving.server.server_env`). It has
    the Python backend and ensembles, not the ONNX Runtime or TensorRT backends."""

    def __init__(self, repository: Path, workspace: Path) -> None:
        from aft_export.serving.server import find_bundle, install_backend, server_env

        super().__init__([], workspace / "tritonserver.log")
        bundle = find_bundle()
        backends = install_backend(bundle, workspace / "backends")
        self.env = server_env(bundle)
        self.args = [str(bundle.tritonserver), f"--model-repository={repository}",
                     f"--backend-directory={backends}", "--model-control-mode=none",
                     "--http-address=127.0.0.1", f"--http-port={self.http_port}", "--grpc-address=127.0.0.1",
                     f"--grpc-port={self.grpc_port}", "--metrics-address=127.0.0.1",
                     f"--metrics-port={self.metrics_port}", "--exit-timeout-secs=10", "--log-verbose=0",
                     "--log-info=false", "--pinned-memory-pool-byte-size=0", "--allow-gpu-metrics=false"]  # fmt: skip


def engine_with_manifest(root: Path, onnx_path: Path, name: str, library: str | None = None) -> Path:
    """An engine file's manifest as aft-export build writes it. The bytes are not an engine:
    nothing here runs it (no TensorRT here); the repository only copies it and reads the
    manifest."""
    import onnx

    meta = {p.key: p.value for p in onnx.load(onnx_path).metadata_props}
    engine = root / name
    engine.write_bytes(b"not an engine: only its manifest is read" + name.encode())
    manifest = {"engine_sha256": hashlib.sha256(engine.read_bytes()).hexdigest(), "tensorrt": "10.8.0.43",
                "cuda": "12.8", "gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "precision": "int8",
                "build_options": {}, "onnx": onnx_path.name,
                "input": {"name": "image", "min": [1, 3, 32, 32], "opt": [8, 3, 32, 32],
                          "max": [ENGINE_PROFILE_MAX, 3, 32, 32]},
                "model": {k: meta[k] for k in ("classes", "input_size", "mean", "std", "source_sha256")}}  # fmt: skip
    if library:
        manifest["library"] = library
    (root / (name + ".json")).write_text(json.dumps(manifest))
    return engine
