"""What aft-export serve puts in Triton, checked without a server: the model class that runs
in the Python backend (tritonmodel: each request answered on its own, 400 lines for bad ones,
good ones run together), its description handed over as JSON, the repository serve writes
(every config.pbtxt parsed with Triton's own schema), the thread plan and tritonserver's
command line."""

from __future__ import annotations

import ast
import sys

import numpy as np
import pytest

from aft_export.data.images import iter_tar, load_image, normalize
from aft_export.options import ServeOptions
from aft_export.runners import OrtRunner
from aft_export.serving.server import model_source, server_args, thread_plan, write_models
from aft_export.serving.tritonmodel import ENDPOINT_FILE, Endpoint, RequestError, answer
from aft_export.serving.spec import CLOSED, CLOSED_APIS, IMAGE, TENSOR, ServedModel, describe
from tests.servekit import largest_first, need


@pytest.fixture(scope="module")
def onnx_files(served_onnx):
    return served_onnx


@pytest.fixture(scope="module")
def runner(onnx_files):
    return OrtRunner(str(onnx_files[0]), threads=1, spinning=False)


def _endpoint(path, endpoint, k=5) -> Endpoint:
    return Endpoint(describe(path, 8), endpoint, k, "onnxruntime", 1, "/nonexistent/status")


class _Counting:
    """A runner that records the images of each run it is asked for."""

    def __init__(self, runner):
        self.runner, self.runs = runner, []

    def logits(self, x, batch_size=64):
        self.runs.append(len(x))
        return self.runner.logits(x, batch_size)


def test_each_request_is_answered_on_its_own_and_the_good_ones_run_together(onnx_files, runner):
    """A NaN, an infinity and a request whose logits overflow get their one line; the others
    get exactly what one run of the runner gives for them alone, with the top-k and labels; the requests
    that pass the input check run together, in one run of the runner."""
    ep = _endpoint(onnx_files[0], TENSOR)
    labels = np.array([c.encode() for c in ep.spec.classes], dtype=object)
    rng = np.random.default_rng(0)
    good = [rng.standard_normal((n, 3, 32, 32)).astype(np.float32) for n in (1, 3, 2)]
    nan, inf = good[0].copy(), good[1].copy()
    nan[0, 0, 0, 0], inf[2, 1, 1, 1] = np.nan, np.inf
    huge = np.full((1, 3, 32, 32), 3e38, np.float32)
    counting = _Counting(runner)
    out = answer(ep, counting, [good[0], nan, good[1], inf, huge, good[2]], labels)
    assert counting.runs == [1 + 3 + 1 + 2]  # the three good ones and the one that overflows, together
    assert [type(r).__name__ for r in out] == ["dict", "RequestError", "dict", "RequestError", "RequestError", "dict"]
    assert str(out[1]) == "input image holds 1 NaN or infinite values of 3072; send finite, normalised images"
    assert str(out[3]).startswith("input image holds 1 NaN or infinite values of 9216")
    assert str(out[4]).startswith("the model gives NaN or infinite logits for 1 of 1 images of this request")
    for x, r in zip(good, (out[0], out[2], out[5])):
        alone = runner.logits(x)
        assert np.allclose(r["logits"], alone, rtol=0, atol=1e-5)
        assert np.array_equal(r["topk_index"], largest_first(r["logits"], 5))
        assert r["topk_label"].tolist() == [[c.encode() for c in np.array(ep.spec.classes)[row]]
                                            for row in r["topk_index"]]  # fmt: skip


def test_images_decode_as_eval_does_and_a_bad_one_fails_its_request_only(onnx_files, runner, cifar10):
    ep = _endpoint(onnx_files[0], IMAGE, k=3)
    labels = np.array([c.encode() for c in ep.spec.classes], dtype=object)
    raw = [r for _, (_, _, r) in zip(range(3), iter_tar(cifar10 / "test.tar"))]
    requests = [np.array([[raw[0]], [raw[1]]], dtype=object), np.array([[raw[2]], [b"junk"]], dtype=object),
                np.array([[raw[2]]], dtype=object)]  # fmt: skip
    out = answer(ep, runner, requests, labels)
    assert isinstance(out[1], RequestError) and str(out[1]).startswith("cannot read image 1 of this request")
    info = runner.info
    x = normalize(np.stack([load_image(r, 32) for r in raw]), info.mean, info.std).numpy()
    expected = runner.logits(x)
    assert np.allclose(out[0]["logits"], expected[:2], rtol=0, atol=1e-5)
    assert np.allclose(out[2]["logits"], expected[2:], rtol=0, atol=1e-5)
    assert out[2]["topk_index"].shape == (1, 3) and out[2]["topk_label"].shape == (1, 3)


def test_a_fixed_batch_artifact_runs_each_request_alone(onnx_files):
    ep = _endpoint(onnx_files[1], TENSOR)
    fixed = OrtRunner(str(onnx_files[1]), threads=1)
    labels = np.array([c.encode() for c in ep.spec.classes], dtype=object)
    xs = [np.random.default_rng(i).standard_normal((2, 3, 32, 32)).astype(np.float32) for i in range(3)]
    out = answer(ep, fixed, xs, labels)
    for x, r in zip(xs, out):
        assert r["logits"].shape == (2, 10) and np.allclose(r["logits"], fixed.logits(x), rtol=0, atol=1e-6)


def test_descriptions_cross_to_the_stub_as_json(onnx_files):
    spec = describe(onnx_files[1], 4)
    assert ServedModel.from_json(spec.to_json()) == spec
    ep = Endpoint(spec, IMAGE, 3, "openvino", 2, "/x/status/conv_b2_image")
    assert Endpoint.from_json(ep.to_json()) == ep and ep.name == "conv_b2_image" and ep.input_name == "image_bytes"


def test_openvino_in_the_stub_answers_as_the_openvino_runner_does(onnx_files):
    """``backend`` openvino: the model the stub loads is OpenVINO (the default export, its functions
    inlined in memory) with the plan's threads; its answers are OpenVINO's logits, within fp32's
    limit of ONNX Runtime's."""
    from tests.conftest import need_openvino

    need_openvino()
    from aft_export.runners import OpenVinoRunner
    from aft_export.serving.tritonmodel import load

    ep = Endpoint(describe(onnx_files[0], 8), TENSOR, 5, "openvino", 1, "/nonexistent/status")
    runner = load(ep)
    assert isinstance(runner, OpenVinoRunner) and runner.threads == 1
    labels = np.array([c.encode() for c in ep.spec.classes], dtype=object)
    xs = [np.random.default_rng(i).standard_normal((n, 3, 32, 32)).astype(np.float32) for i, n in enumerate((1, 3))]
    reference = OrtRunner(str(onnx_files[0]), threads=1)
    for x, r in zip(xs, answer(ep, runner, xs, labels)):
        assert np.abs(r["logits"] - reference.logits(x)).max() <= 1e-4
    plan = thread_plan(ServeOptions(backend="openvino"), 2, cpus=[0, 1])
    assert plan.describe() == "2 CPUs (0-1) for 2 models x 1 instance x 1 OpenVINO thread"
    assert ServeOptions(provider="cuda").backend == "onnxruntime-cuda"  # the old word, for one release


def test_the_repository_serve_writes_parses_with_tritons_schema(onnx_files, tmp_path):
    pb = need("tritonclient.grpc.model_config_pb2")
    from google.protobuf import text_format

    specs = [describe(p, 8) for p in onnx_files]
    opts = ServeOptions(instances=2, queue_delay_us=300)
    plan = thread_plan(opts, 4, cpus=[0, 1, 2, 3, 4, 5, 6, 7])
    write_models(tmp_path, specs, opts, plan, tmp_path / "status")
    configs = {p.parent.name: text_format.Parse(p.read_text(), pb.ModelConfig())
               for p in tmp_path.glob("*/config.pbtxt")}  # fmt: skip
    assert sorted(configs) == ["conv", "conv_b2", "conv_b2_image", "conv_image"]
    cpu = pb.ModelInstanceGroup.Kind.Value("KIND_CPU")
    for name, c in configs.items():
        assert c.backend == "python" and [(g.count, g.kind) for g in c.instance_group] == [(2, cpu)]
        assert [o.name for o in c.output] == ["logits", "topk_index", "topk_label"]
        assert len(c.model_warmup) == 1 and c.model_warmup[0].batch_size == 1
        assert c.HasField("dynamic_batching") == (name in ("conv", "conv_image"))
        ep = Endpoint.from_json((tmp_path / name / "1" / ENDPOINT_FILE).read_text())
        assert (ep.name, ep.threads, ep.k) == (name, 1, 5)
        assert (tmp_path / name / "1" / "model.py").read_text() == model_source()
    assert configs["conv"].dynamic_batching.max_queue_delay_microseconds == 300
    warm = configs["conv_image"].model_warmup[0].inputs["image_bytes"]
    assert warm.input_data_file == "image.bin" and list(warm.dims) == [1]
    data = (tmp_path / "conv_image" / "warmup" / "image.bin").read_bytes()
    assert int.from_bytes(data[:4], "little") == len(data) - 4  # one element: its length, then a PNG
    assert load_image(data[4:], 32).shape == (32, 32, 3)
    assert len((tmp_path / "conv_b2_image" / "warmup" / "image.bin").read_bytes()) == 2 * len(data)


def test_model_source_runs_this_aft_export_and_imports_no_torch():
    tree = ast.parse(model_source())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert imported == ["aft_export.serving.tritonmodel"]
    import subprocess

    code = ("import sys; import aft_export.serving.tritonmodel, aft_export.serving.server; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize("cpus,models,instances,threads,expected", [
    (2, 2, 1, 0, 1), (16, 2, 1, 0, 8), (16, 4, 2, 0, 2), (3, 4, 1, 0, 1), (2, 2, 1, 4, 4)])  # fmt: skip
def test_the_cpus_are_shared_out_among_the_instances(cpus, models, instances, threads, expected):
    plan = thread_plan(ServeOptions(instances=instances, threads=threads), models, cpus=list(range(cpus)))
    assert plan.threads == expected
    assert plan.describe().startswith(f"{cpus} CPUs (0{'-' + str(cpus - 1) if cpus > 1 else ''}) for {models} models")


def test_tritonservers_command_line_has_nothing_that_opens_a_door(tmp_path):
    args = server_args(tmp_path / "b", tmp_path / "r", ServeOptions(), "p-", gpu=False)
    assert "--model-control-mode=none" in args and "--strict-readiness=true" in args
    restricted = [a for a in args if "restricted" in a]
    assert restricted == [f"--http-restricted-api={','.join(CLOSED_APIS)}:{CLOSED}=none",
                          f"--grpc-restricted-protocol={','.join(CLOSED_APIS)}:{CLOSED}=none"]  # fmt: skip
    assert ":" in CLOSED  # the header name no HTTP or gRPC request can carry
    assert set(CLOSED_APIS) == {"model-repository", "shared-memory", "trace", "logging"}
    assert not [a for a in args if a.startswith(("--load-model", "--repository-poll"))]
