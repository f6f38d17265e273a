"""aft-export serve, for real: one Triton server (PyTriton's tritonserver 2.51 and its Python
backend) for this module, started as ``aft-export serve`` on free 127.0.0.1 ports and
queried over HTTP and gRPC with tritonclient: parity with the artifact's own ONNX Runtime
logits, encoded CIFAR-10 JPEGs preprocessed as eval does, a bounded load of 8 clients,
bad requests, loopback-only sockets and the Python backend's libpython."""

from __future__ import annotations

import ipaddress
import sysconfig
import threading
from pathlib import Path

import numpy as np
import pytest

from aft_export.compare import TOLERANCES, judge, metrics
from aft_export.data import iter_tar, load_image, normalize
from aft_export.export.exporter import ExportOptions, export_checkpoint
from aft_export.runners import OrtRunner
from aft_export.tritonspec import topk
from tests.export.test_exporter import make_ckpt
from tests.servekit import STOP_TIMEOUT, Server, alive, cmdline, listening, need

MAX_BATCH = 8
QUIET = dict(log=lambda *a: None)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    ckpt = make_ckpt(root / "conv.pt", "aft_conv_test")
    dynamic, fixed = root / "conv.onnx", root / "conv.b2.onnx"
    export_checkpoint(ckpt, dynamic, ExportOptions(verify_images=0), **QUIET)
    export_checkpoint(ckpt, fixed, ExportOptions(verify_images=0, batch="2"), **QUIET)
    return dynamic, fixed


@pytest.fixture(scope="module")
def server(artifacts, tmp_path_factory):
    need("pytriton")
    need("tritonclient.http")
    srv = Server(artifacts, tmp_path_factory.mktemp("serve-log") / "serve.log", "--max-batch", str(MAX_BATCH),
                 "--queue-delay-us", "5000", "--drain-seconds", "10")  # fmt: skip
    try:
        yield srv.start(["conv", "conv_image", "conv_b2", "conv_b2_image"])
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
    assert (idx == topk(logits, 5)).all()
    labels = [[s.decode() for s in row] for row in result.as_numpy("topk_label")]
    assert labels == [[classes[i] for i in r] for r in idx]


def test_served_logits_equal_the_artifacts_own_onnx_runtime_logits(server, reference):
    """HTTP and gRPC, batches of 1, 3 and the maximum: the logits of the artifact run in
    ONNX Runtime directly, within the fp32 parity tolerance; top-k from those logits."""
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
        direct = _infer_tensor(httpclient, client, "conv", x).as_numpy("logits")  # the tensor model agrees
        _assert_fp32_parity(expected, direct)


def test_fixed_batch_export_is_served_without_batching(server, artifacts):
    httpclient, client = _http(server)
    fixed = OrtRunner(str(artifacts[1]), threads=1)
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with client:
        config = client.get_model_config("conv_b2")
        assert config["max_batch_size"] == 0 and "dynamic_batching" not in config
        assert config["input"][0]["dims"] == ["2", "3", "32", "32"] or config["input"][0]["dims"] == [2, 3, 32, 32]
        _assert_fp32_parity(fixed.logits(x), _infer_tensor(httpclient, client, "conv_b2", x).as_numpy("logits"))
        with pytest.raises(Exception, match="shape|dims"):  # one image is not the artifact's batch of 2
            _infer_tensor(httpclient, client, "conv_b2", x[:1])


def _stats(client, model):
    s = client.get_inference_statistics(model)["model_stats"][0]
    return int(s["inference_count"]), int(s["execution_count"])


def test_eight_clients_under_load_zero_errors_and_batched(server, reference):
    """8 clients, 320 requests of 1-3 images each: every response correct (dynamic batching
    changes batch composition, not results), no error, and Triton ran fewer batches than
    it answered images (its own statistics)."""
    import tritonclient.http as httpclient

    clients, per_client = 8, 40
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
    images = sum(len(x) for w in work for x in w)
    inferences, executions = after[0] - before[0], after[1] - before[1]
    print(f"load: {clients} clients, {done[0]} requests, {images} images, {len(errors)} errors, Triton ran them in "
          f"{executions} executions; largest logit difference {worst[0]:.2e}")  # shown with pytest -s
    assert inferences == images
    assert executions < inferences, (executions, inferences)


def test_bad_requests_get_errors_and_the_server_goes_on(server, reference, jpegs):
    httpclient, client = _http(server)
    from tritonclient.utils import InferenceServerException

    x = np.zeros((1, 3, 32, 32), np.float32)
    with client:
        bad = {
            "wrong shape": lambda: _infer_tensor(httpclient, client, "conv", np.zeros((1, 3, 16, 16), np.float32)),
            "wrong dtype": lambda: _infer_tensor(httpclient, client, "conv", x.astype(np.float64), dtype="FP64"),
            "batch beyond the maximum": lambda: _infer_tensor(httpclient, client, "conv",
                                                              np.zeros((MAX_BATCH + 1, 3, 32, 32), np.float32)),
            "bytes that are no image": lambda: _infer_images(httpclient, client, "conv_image", [b"not an image"]),
            "unknown model": lambda: _infer_tensor(httpclient, client, "no_such_model", x),
        }  # fmt: skip
        messages = {}
        for what, call in bad.items():
            with pytest.raises(InferenceServerException) as err:
                call()
            messages[what] = str(err.value)
        assert "cannot read image" in messages["bytes that are no image"]
        assert "unknown model" in messages["unknown model"] or "not found" in messages["unknown model"]
        assert "batch" in messages["batch beyond the maximum"].lower()
        assert "FP64" in messages["wrong dtype"] or "data-type" in messages["wrong dtype"]

    # a bad image among good requests, sent at the same time, fails only its own request
    good = [raw for _, raw in jpegs[:12]]
    results: dict[int, object] = {}

    def send(i, payload):
        with httpclient.InferenceServerClient(server.url) as conn:
            try:
                results[i] = _infer_images(httpclient, conn, "conv_image", payload).as_numpy("logits")
            except InferenceServerException as exc:
                results[i] = exc

    payloads = {i: [good[i]] for i in range(len(good))}
    payloads[len(good)] = [good[0], b"\xff\xd8 truncated jpeg"]
    threads = [threading.Thread(target=send, args=item) for item in payloads.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    failed = [i for i, r in results.items() if isinstance(r, Exception)]
    assert len(results) == len(payloads) and failed == [len(good)]
    assert "cannot read image 1 of this request" in str(results[len(good)])
    with httpclient.InferenceServerClient(server.url) as conn:  # the next good request is answered
        assert _infer_images(httpclient, conn, "conv_image", good[:2]).as_numpy("logits").shape == (2, 10)


def test_listens_on_loopback_only(server):
    """HTTP, gRPC and metrics: every listening socket of the server's processes is on
    127.0.0.1, and tritonserver was told so (Triton's own default is 0.0.0.0)."""
    import urllib.request

    pids = server.pids | {server.proc.pid}
    sockets = listening(pids)
    assert {server.http_port, server.grpc_port, server.metrics_port} <= {p for _, p in sockets}
    # gRPC listens on an IPv6 socket, at 127.0.0.1's IPv4-mapped address (::ffff:127.0.0.1)
    addresses = {ipaddress.ip_address(a) for a, _ in sockets}
    assert {getattr(a, "ipv4_mapped", None) or a for a in addresses} == {ipaddress.ip_address("127.0.0.1")}, sockets
    triton = [p for p in server.pids if Path(cmdline(p)[0]).name == "tritonserver"]
    assert len(triton) == 1
    args = " ".join(cmdline(triton[0]))
    for flag in ("--http-address 127.0.0.1", "--grpc-address 127.0.0.1", "--metrics-address 127.0.0.1"):
        assert flag in args, args
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    assert 'nv_inference_count{model="conv"' in text


def test_python_backend_stub_runs_on_this_interpreters_libpython(server):
    """The trap PyTriton leaves (the stub loading the system's libpython3.X.so.1.0): every
    stub maps the library of the interpreter that runs aft-export, and the server's
    environment puts that library's directory first."""
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    wanted = str(Path(libdir, soname).resolve())
    stubs = [p for p in server.pids if cmdline(p) and cmdline(p)[0].endswith("triton_python_backend_stub")]
    assert len(stubs) == 4  # one instance of each of the four models
    for pid in stubs:
        maps = Path(f"/proc/{pid}/maps").read_text()
        loaded = {line.split()[-1] for line in maps.splitlines() if "libpython" in line}
        assert {str(Path(p).resolve()) for p in loaded} == {wanted}, loaded
    triton = next(p for p in server.pids if Path(cmdline(p)[0]).name == "tritonserver")
    env = dict(v.split("=", 1) for v in Path(f"/proc/{triton}/environ").read_bytes().decode().split("\0") if "=" in v)
    assert env["LD_LIBRARY_PATH"].split(":")[0] == libdir


def test_the_client_module_prints_the_top_k_of_real_jpegs(server, jpegs, tmp_path):
    """python -m aft_export.client (docs/serving.md's query line; a copy sits in every Triton
    repository): one line per image, its top-5 labels as the server ranks them."""
    import subprocess
    import sys

    httpclient, client = _http(server)
    files = []
    for i, (_, raw) in enumerate(jpegs[:2]):
        files.append(tmp_path / f"{i}.jpg")
        files[-1].write_bytes(raw)
    with client:
        labels = _infer_images(httpclient, client, "conv_image", [f.read_bytes() for f in files]).as_numpy("topk_label")
    proc = subprocess.run([sys.executable, "-m", "aft_export.client", "--model", "conv_image", "--url", server.url,
                           *map(str, files)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for line, f, row in zip(proc.stdout.splitlines(), files, labels):
        assert line.startswith(f"{f}: ") and [part.split()[0] for part in line.split(": ", 1)[1].split(", ")] == [
            b.decode() for b in row]

def test_sigterm_stops_the_server_and_every_process_it_started(server):
    """Last in this module (it ends the module's server): SIGTERM, as a process manager
    sends it, stops it as SIGINT does (tests/test_serve_stop.py drains a request there)."""
    import signal

    family = server.pids | {server.proc.pid}
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=STOP_TIMEOUT) == 0, server.tail()
    assert "stopping: finishing the requests in flight" in server.log.read_text()
    assert sorted(p for p in family if alive(p)) == []
