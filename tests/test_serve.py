"""aft-export serve, for real: one Triton server (the serve extra's tritonserver 2.51, the
models in its Python backend) for this module, started as ``aft-export serve`` on free
127.0.0.1 ports and queried from outside over HTTP and gRPC with tritonclient and raw
sockets: parity with the artifact's own ONNX Runtime logits, encoded CIFAR-10 JPEGs
preprocessed as eval does, a bounded load of 8 clients, bad requests (400s with one line,
the server stays ready), loopback-only sockets, one hop without torch, the endpoints that
change the server closed without any secret, and the client module; and one more server, with
the models in OpenVINO (``--backend openvino``)."""

from __future__ import annotations

import io
import ipaddress
import os
import socket
import struct
import subprocess
import sys
import sysconfig
import threading
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pytest

from aft_export.verify.compare import TOLERANCES, judge, metrics
from aft_export.data.images import iter_tar, load_image, normalize
from aft_export.runners import OrtRunner
from tests.conftest import REPO
from tests.servekit import STOP_TIMEOUT, Server, alive, cmdline, largest_first, listening, need_server

MAX_BATCH = 8
MODELS = ["conv", "conv_image", "conv_b2", "conv_b2_image"]


@pytest.fixture(scope="module")
def artifacts(served_onnx):
    return served_onnx


@pytest.fixture(scope="module")
def server(artifacts, tmp_path_factory):
    need_server()
    srv = Server(artifacts, tmp_path_factory.mktemp("serve-log") / "serve.log", "--max-batch", str(MAX_BATCH),
                 "--drain-seconds", "10")  # fmt: skip
    try:
        yield srv.start(MODELS)
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def reference(artifacts):
    return OrtRunner(str(artifacts[0]), threads=1)


@pytest.fixture(scope="module")
def jpegs(cifar10):
    """Real CIFAR-10 test JPEGs, as bytes, and their labels."""
    items = []
    for label, _, raw in iter_tar(cifar10 / "test.tar"):
        items.append((label, raw))
        if len(items) == 24:
            break
    return items


def _http(server):
    import tritonclient.http as httpclient

    return httpclient, httpclient.InferenceServerClient(server.url)


def _infer_tensor(module, client, model, x, dtype="FP32", name="image"):
    inp = module.InferInput(name, list(x.shape), dtype)
    inp.set_data_from_numpy(x)
    return client.infer(model, [inp])


def _infer_images(module, client, model, encoded: list[bytes]):
    arr = np.array([[b] for b in encoded], dtype=object)
    inp = module.InferInput("image_bytes", list(arr.shape), "BYTES")
    inp.set_data_from_numpy(arr)
    return client.infer(model, [inp])


def _assert_fp32_parity(reference_logits, served):
    m = metrics(reference_logits, served)
    assert judge(m, TOLERANCES["fp32"]) == [], m


def _assert_topk(result, logits, classes):
    idx = result.as_numpy("topk_index")
    assert idx.dtype == np.int64 and idx.shape == (len(logits), 5)
    assert (idx == largest_first(logits, 5)).all()
    labels = [[s.decode() for s in row] for row in result.as_numpy("topk_label")]
    assert labels == [[classes[i] for i in r] for r in idx]


def test_served_logits_equal_the_artifacts_own_onnx_runtime_logits(server, reference):
    """HTTP and gRPC, batches of 1, 3 and the maximum, and the fixed-batch artifact: the
    logits of the artifact run in ONNX Runtime directly, within the fp32 parity tolerance;
    top-k from those logits."""
    import tritonclient.grpc as grpcclient

    httpclient, client = _http(server)
    rng = np.random.default_rng(0)
    with client, grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as grpc:
        for n in (1, 3, MAX_BATCH):
            x = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
            expected = reference.logits(x)
            for module, c in ((httpclient, client), (grpcclient, grpc)):
                result = _infer_tensor(module, c, "conv", x)
                _assert_fp32_parity(expected, result.as_numpy("logits"))
                _assert_topk(result, result.as_numpy("logits"), reference.info.classes)
        x = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
        _assert_fp32_parity(reference.logits(x), _infer_tensor(httpclient, client, "conv_b2", x).as_numpy("logits"))


def test_image_model_decodes_real_jpegs_as_eval_does(server, reference, jpegs):
    """conv_image on CIFAR-10 JPEGs gives the logits of eval's preprocessing (load_image,
    then normalize with the artifact's mean and std) run in ONNX Runtime."""
    httpclient, client = _http(server)
    encoded = [raw for _, raw in jpegs[:MAX_BATCH]]
    info = reference.info
    x = normalize(np.stack([load_image(raw, info.input_size[1]) for raw in encoded]), info.mean, info.std).numpy()
    expected = reference.logits(x)
    with client:
        result = _infer_images(httpclient, client, "conv_image", encoded)
        served = result.as_numpy("logits")
        _assert_fp32_parity(expected, served)
        _assert_topk(result, served, info.classes)


def _stats(client, model):
    s = client.get_inference_statistics(model)["model_stats"][0]
    return int(s["inference_count"]), int(s["execution_count"])


def test_eight_clients_under_load_zero_errors_and_batched(server, reference):
    """8 clients, 240 requests of 1-3 images each: every response correct (dynamic batching
    changes batch composition, not results), no error, and the model ran fewer executions than it
    got requests: its dynamic batcher merged requests (Triton's own statistics, which count an
    inference per image; with batching off each request is an execution of its own)."""
    import tritonclient.http as httpclient

    clients, per_client = 8, 30
    rng = np.random.default_rng(2)
    work = [[rng.standard_normal((1 + (i + c) % 3, 3, 32, 32)).astype(np.float32) for i in range(per_client)]
            for c in range(clients)]  # fmt: skip
    expected = [[reference.logits(x) for x in w] for w in work]
    errors, worst, done = [], [0.0], [0]
    lock = threading.Lock()
    with httpclient.InferenceServerClient(server.url) as client:
        before = _stats(client, "conv")

    def run(c):
        with httpclient.InferenceServerClient(server.url) as conn:
            for x, want in zip(work[c], expected[c]):
                try:
                    got = _infer_tensor(httpclient, conn, "conv", x).as_numpy("logits")
                    diff = float(np.abs(got - want).max())
                    with lock:
                        worst[0], done[0] = max(worst[0], diff), done[0] + 1
                except Exception as exc:  # noqa: BLE001 - counted: the test wants none
                    with lock:
                        errors.append(repr(exc)[:200])

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a client did not finish in 120 s"
    assert errors == [] and done[0] == clients * per_client
    assert worst[0] <= TOLERANCES["fp32"].max_abs
    with httpclient.InferenceServerClient(server.url) as client:
        after = _stats(client, "conv")
    images, requests = sum(len(x) for w in work for x in w), clients * per_client
    inferences, executions = after[0] - before[0], after[1] - before[1]
    print(f"load: {clients} clients, {done[0]} requests, {images} images, {len(errors)} errors, Triton ran them in "
          f"{executions} executions; largest logit difference {worst[0]:.2e}")  # shown with pytest -s
    assert inferences == images  # Triton counts an inference per image
    assert executions < requests, (executions, requests)  # merged: fewer runs than requests


def _png_header(width: int, height: int) -> bytes:
    """A PNG that says it is ``width`` x ``height`` (a decompression bomb by its header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = chunk(b"IDAT", zlib.compress(b"\0" * 4096))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + idat + chunk(b"IEND", b"")


def _jpeg_claiming(raw: bytes, width: int, height: int) -> bytes:
    """A real JPEG whose frame header (SOF0) is rewritten to ``width`` x ``height``."""
    at = raw.index(b"\xff\xc0") + 5  # marker, length (2), precision (1), then height and width
    return raw[:at] + struct.pack(">HH", height, width) + raw[at + 4 :]


def _one_line_without_internals(message: str) -> None:
    assert "\n" not in message.strip(), message
    for leak in ("Traceback", 'File "', ".py", str(REPO), "/tmp", "aft_export", "site-packages", "Error:"):
        assert leak not in message, (leak, message)


def test_bad_requests_are_400s_with_one_line_and_the_server_stays_ready(server, jpegs):
    """Every bad request: an HTTP 400 whose body is one line naming what was wrong, with no
    traceback, path or source; the server is ready after each and answers the next good one."""
    from PIL import Image

    good = jpegs[0][1]
    buf = io.BytesIO()
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(buf, "PNG")
    tensor = np.zeros((1, 3, 32, 32), np.float32)
    nan, inf = tensor.copy(), tensor.copy()
    nan[0, 1, 2, 3], inf[0, 0, 0, 0] = np.nan, -np.inf
    ours = {
        "NaN input": ("conv", nan, "holds 1 NaN or infinite values"),
        "infinite input": ("conv", inf, "holds 1 NaN or infinite values"),
        "finite input, non-finite logits": ("conv", np.full((1, 3, 32, 32), 3e38, np.float32),
                                            "gives NaN or infinite logits for 1 of 1 images"),
        "NaN in a fixed batch": ("conv_b2", np.concatenate([nan, tensor]), "holds 1 NaN or infinite values"),
        "bytes that are no image": ("conv_image", [b"not an image"], "cannot read image 0 of this request"),
        "truncated JPEG": ("conv_image", [good, good[: len(good) // 2]], "cannot read image 1 of this request"),
        "truncated PNG": ("conv_image", [buf.getvalue()[:40]], "cannot read image 0 of this request"),
        "30000x30000 PNG": ("conv_image", [_png_header(30000, 30000)], "more pixels than aft-export decodes"),
        "30000x30000 JPEG": ("conv_image", [_jpeg_claiming(good, 30000, 30000)], "more pixels than aft-export decodes"),
    }  # fmt: skip
    tritons = {  # Triton's own checks, before our model: their message is Triton's
        "wrong shape": ("conv", np.zeros((1, 3, 16, 16), np.float32)),
        "batch beyond the maximum": ("conv", np.zeros((MAX_BATCH + 1, 3, 32, 32), np.float32)),
        "unknown model": ("no_such_model", tensor),
    }
    statuses = {}
    for what, (model, payload, expected) in {**ours, **{k: (*v, "") for k, v in tritons.items()}}.items():
        images = isinstance(payload, list)
        code, body = _post_infer(server, model, payload)
        statuses[what] = code
        assert code == 400 or (what == "unknown model" and code in (400, 404)), (what, code, body)
        _one_line_without_internals(body)
        assert expected in body, (what, body)
        assert _get(server, "/v2/health/ready")[0] == 200, what
        code, _ = _post_infer(server, "conv_image" if images else "conv", [good] if images else tensor)
        assert code == 200, what
    print(statuses)


def _post_infer(server, model: str, payload) -> tuple[int, str]:
    """A raw KServe v2 request (binary tensor extension): the HTTP status and the body."""
    import json

    if isinstance(payload, list):  # encoded images: BYTES, each 4-byte length then the bytes
        raw = b"".join(struct.pack("<I", len(b)) + b for b in payload)
        shape, dtype = [len(payload), 1], "BYTES"
    else:
        raw, shape, dtype = payload.tobytes(), list(payload.shape), "FP32"
    header = json.dumps({"inputs": [{"name": "image_bytes" if dtype == "BYTES" else "image", "shape": shape,
                                     "datatype": dtype, "parameters": {"binary_data_size": len(raw)}}]}).encode()  # fmt: skip
    req = urllib.request.Request(f"http://{server.url}/v2/models/{model}/infer", header + raw,
                                 {"Inference-Header-Content-Length": str(len(header))})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode(errors="replace")[:200]
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()).get("error", "")


def _get(server, path: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
    req = urllib.request.Request(f"http://{server.url}{path}", data, headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def test_a_bad_request_among_good_ones_fails_only_its_own(server, jpegs, reference):
    """Sent at the same moment, so that Triton batches them into one run: the bad image and
    the NaN tensor fail, every other request gets its own correct answer."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    good = [raw for _, raw in jpegs[:12]]
    rng = np.random.default_rng(5)
    tensors = [rng.standard_normal((1 + i % 2, 3, 32, 32)).astype(np.float32) for i in range(12)]
    bad_tensor = tensors[0].copy()
    bad_tensor[0, 0, 0, 0] = np.nan
    jobs = [("conv_image", [g]) for g in good] + [("conv_image", [good[0], b"\xff\xd8 truncated jpeg"])]
    jobs += [("conv", t) for t in tensors] + [("conv", bad_tensor)]
    results: dict[int, object] = {}
    barrier = threading.Barrier(len(jobs))

    def send(i, model, payload):
        with httpclient.InferenceServerClient(server.url) as conn:
            barrier.wait(timeout=30)
            try:
                if model == "conv":
                    results[i] = _infer_tensor(httpclient, conn, model, payload).as_numpy("logits")
                else:
                    results[i] = _infer_images(httpclient, conn, model, payload).as_numpy("logits")
            except InferenceServerException as exc:
                results[i] = exc

    threads = [threading.Thread(target=send, args=(i, *job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    failed = sorted(i for i, r in results.items() if isinstance(r, Exception))
    assert len(results) == len(jobs) and failed == [len(good), len(jobs) - 1], failed
    assert "cannot read image 1 of this request" in str(results[len(good)])
    assert "NaN or infinite values" in str(results[len(jobs) - 1])
    for i, t in enumerate(tensors):
        _assert_fp32_parity(reference.logits(t), results[len(good) + 1 + i])


def test_listens_on_loopback_only(server):
    """HTTP, gRPC and metrics: every listening socket of the server's processes is on
    127.0.0.1, and tritonserver was told so (Triton's own default is 0.0.0.0)."""
    pids = server.pids | {server.proc.pid}
    sockets = listening(pids)
    assert {server.http_port, server.grpc_port, server.metrics_port} <= {p for _, p in sockets}
    # gRPC listens on an IPv6 socket, at 127.0.0.1's IPv4-mapped address (::ffff:127.0.0.1)
    addresses = {ipaddress.ip_address(a) for a, _ in sockets}
    assert {getattr(a, "ipv4_mapped", None) or a for a in addresses} == {ipaddress.ip_address("127.0.0.1")}, sockets
    triton = [p for p in server.pids if Path(cmdline(p)[0]).name == "tritonserver"]
    assert len(triton) == 1
    args = cmdline(triton[0])
    for flag in ("--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1"):
        assert flag in args, args
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    assert 'nv_inference_count{model="conv"' in text


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(v.split("=", 1) for v in raw.split("\0") if "=" in v)


def test_one_hop_without_torch_on_this_interpreters_libpython(server):
    """aft-export serve -> tritonserver -> one Python backend stub per model, nothing else
    (no proxy process); every stub maps this interpreter's libpython and no libtorch (the
    model code imports no torch); the threads printed at start."""
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    wanted = str(Path(libdir, soname).resolve())
    names = sorted(Path(cmdline(p)[0]).name for p in server.pids)
    assert names == ["triton_python_backend_stub"] * 4 + ["tritonserver"], names
    for pid in server.pids:
        if cmdline(pid)[0].endswith("triton_python_backend_stub"):
            maps = Path(f"/proc/{pid}/maps").read_text()
            loaded = {line.split()[-1] for line in maps.splitlines() if "libpython" in line}
            assert {str(Path(p).resolve()) for p in loaded} == {wanted}, loaded
            assert "libtorch" not in maps and "onnxruntime" in maps
    triton = next(p for p in server.pids if Path(cmdline(p)[0]).name == "tritonserver")
    assert _environ(triton)["LD_LIBRARY_PATH"].split(":")[0] == libdir
    cpus = len(os.sched_getaffinity(0))
    first = server.log.read_text().splitlines()[0]
    share = max(1, cpus // 4)
    assert first.startswith(f"threads: {cpus} CPUs (") and f"for 4 models x 1 instance x {share} ONNX Runtime" in first


def test_endpoints_that_change_the_server_are_closed_and_no_secret_exists(server):
    """Model repository (index, load, unload), shared memory, trace and logging answer 403 to
    every request, the one carrying the header named on tritonserver's command line too (a
    name with a colon: HTTP ends a name at its first colon, gRPC refuses such a key); the
    models stay loaded. No process of the server has a key, token or password on its command
    line or in its environment beyond what the environment it was started with holds."""
    import tritonclient.grpc as grpcclient

    closed = [("GET", "/v2/systemsharedmemory/status"), ("POST", "/v2/systemsharedmemory/region/r/register"),
              ("POST", "/v2/cudasharedmemory/region/r/register"), ("POST", "/v2/repository/index"),
              ("POST", "/v2/repository/models/conv/unload"), ("POST", "/v2/repository/models/conv/load"),
              ("GET", "/v2/trace/setting"), ("POST", "/v2/trace/setting"), ("GET", "/v2/logging"),
              ("POST", "/v2/logging")]  # fmt: skip
    triton = next(p for p in server.pids if Path(cmdline(p)[0]).name == "tritonserver")
    restricted = [a for a in cmdline(triton) if a.startswith(("--http-restricted-api", "--grpc-restricted-protocol"))]
    assert len(restricted) == 2
    key, value = restricted[0].split(":", 1)[1].split("=", 1)
    assert ":" in key  # unsendable by construction
    body = b'{"key": "/triton_python_backend_shm_region_1", "offset": 0, "byte_size": 64}'
    for method, path in closed:
        assert _get(server, path, body if method == "POST" else None)[0] == 403, path
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:  # the header, as written
            s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{key}: {value}\r\nContent-Length: {len(body)}\r\n"
                      f"Connection: close\r\n\r\n".encode() + body)  # fmt: skip
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 403"), (path, reply[:200])
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as grpc:
        for call in (grpc.get_model_repository_index, grpc.get_system_shared_memory_status, grpc.get_log_settings,
                     lambda: grpc.unload_model("conv"), lambda: grpc.get_trace_settings()):  # fmt: skip
            with pytest.raises(Exception, match="restricted"):
                call()
        with pytest.raises(Exception, match="[Ii]nvalid|[Ii]llegal"):  # the key itself cannot be sent
            grpc.get_system_shared_memory_status(headers={key: value})
    assert all(_get(server, f"/v2/models/{m}/ready")[0] == 200 for m in MODELS)
    ours = server.launch_env
    words = ("token", "secret", "password", "passwd", "auth", "key")
    for pid in server.pids | {server.proc.pid}:
        line = " ".join(cmdline(pid)).lower()
        assert not any(w in line.replace("aft-export:closed", "") for w in words), line
        for name, val in _environ(pid).items():
            # serve puts its paths first (the stub needs them); the Python backend starts each stub
            # through bash, which keeps its own bookkeeping variables
            if name in ("LD_LIBRARY_PATH", "PATH", "SHLVL", "_", "PWD", "OLDPWD", "LINES", "COLUMNS"):
                continue
            assert ours.get(name) == val, (pid, name)


def test_the_client_module_prints_the_top_k_and_its_errors_are_one_line(server, jpegs, tmp_path):
    """python -m aft_export.client (the README's query line; a copy sits in every Triton
    repository): one line per image, its top-5 labels as the server ranks them; an unknown
    model, an image the server refuses and a missing file are one line each and exit 2."""
    httpclient, client = _http(server)
    files = []
    for i, (_, raw) in enumerate(jpegs[:2]):
        files.append(tmp_path / f"{i}.jpg")
        files[-1].write_bytes(raw)
    with client:
        labels = _infer_images(httpclient, client, "conv_image", [f.read_bytes() for f in files]).as_numpy("topk_label")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "aft_export.serving.client", "--url", server.url, *map(str, args)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    proc = run("--model", "conv_image", *files)
    assert proc.returncode == 0, proc.stderr
    for line, f, row in zip(proc.stdout.splitlines(), files, labels):
        assert line.startswith(f"{f}: ") and [part.split()[0] for part in line.split(": ", 1)[1].split(", ")] == [
            b.decode() for b in row]
    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8 not really")
    for args, expected in ((["--model", "nope_image", files[0]], f"error: the server at {server.url} has no model"),
                           (["--model", "conv_image", tmp_path / "bad.jpg"],
                            "error: the server refused the request: [400] cannot read image 0 of this request"),
                           (["--model", "conv_image", tmp_path / "missing.jpg"], "error: cannot read ")):  # fmt: skip
        proc = run(*args)
        assert proc.returncode == 2 and proc.stdout == "", (args, proc)
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(expected), proc.stderr


def test_backend_openvino_answers_in_the_stub_with_openvinos_logits(artifacts, jpegs, tmp_path):
    """``serve conv.onnx --backend openvino`` (the default export, its com.aft functions inlined in
    memory by the runner): a server of its own (the one extra start of this module), whose stubs
    load OpenVINO with the thread plan's threads; tensors (a batch of 1, in OpenVINO's LATENCY
    model, and of 5, split over its THROUGHPUT requests) and JPEGs are answered with OpenVINO's own
    logits, within fp32's limit of ONNX Runtime's."""
    from aft_export.runners import OpenVinoRunner
    from tests.conftest import need_openvino

    need_openvino()
    srv = Server([artifacts[0]], tmp_path / "serve.log", "--backend", "openvino", "--max-batch", str(MAX_BATCH))
    try:
        srv.start(["conv", "conv_image"])
        first = srv.log.read_text().splitlines()[0]
        assert first.startswith("threads: ") and " OpenVINO thread" in first, first
        stubs = [p for p in srv.pids if cmdline(p)[0].endswith("triton_python_backend_stub")]
        assert len(stubs) == 2 and all("libopenvino" in Path(f"/proc/{p}/maps").read_text() for p in stubs)
        own = OpenVinoRunner(str(artifacts[0]), threads=1)
        reference = OrtRunner(str(artifacts[0]), threads=1)
        httpclient, client = _http(srv)
        rng = np.random.default_rng(7)
        with client:
            for n in (1, 5):
                x = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
                served = _infer_tensor(httpclient, client, "conv", x).as_numpy("logits")
                assert np.abs(served - own.logits(x)).max() <= 1e-5
                _assert_fp32_parity(reference.logits(x), served)
            encoded = [raw for _, raw in jpegs[:3]]
            info = own.info
            x = normalize(np.stack([load_image(raw, info.input_size[1]) for raw in encoded]), info.mean, info.std)
            result = _infer_images(httpclient, client, "conv_image", encoded)
            _assert_fp32_parity(reference.logits(x.numpy()), result.as_numpy("logits"))
    finally:
        srv.stop()
    assert srv.proc.returncode == 130, srv.tail()


def test_sigterm_stops_the_server_and_every_process_it_started(server):
    """Last in this module (it ends the module's server): SIGTERM, as a process manager
    sends it: exit status 143, the stop said in one line, nothing left running, no shared
    memory or working directory left behind."""
    import signal

    family = server.pids | {server.proc.pid}
    triton = next(p for p in server.pids if Path(cmdline(p)[0]).name == "tritonserver")
    work = Path(next(a for a in cmdline(triton) if a.startswith("--model-repository=")).split("=", 1)[1]).parent
    assert server.interrupt(STOP_TIMEOUT, signal.SIGTERM) == 143, server.tail()
    log = server.log.read_text()
    assert "stopping (SIGTERM): Triton finishes the requests in flight" in log
    assert log.rstrip().endswith("stopped: every process it started has ended") and "Traceback" not in log
    assert sorted(p for p in family if alive(p)) == []
    assert not work.exists() and not list(Path("/dev/shm").glob(f"aft-export-serve-{server.proc.pid}-*"))
