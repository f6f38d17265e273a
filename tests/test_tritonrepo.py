"""aft-export triton-repo: every config.pbtxt parsed with Triton's own schema (tritonclient's
model_config_pb2), consistent with its artifact; the generated preprocessing decodes as eval
does, bit for bit; refusals; atomic writes. And the repository itself, run in a real Triton
(PyTriton's tritonserver 2.51: Python backend and ensembles as written; the ONNX Runtime
backend it lacks is stood in for by a Python model running the same file through
aft-export's runner)."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from aft_export.serving import spec as tritonspec
from aft_export.cli import main
from aft_export.verify.compare import TOLERANCES, judge, metrics
from aft_export.data.images import iter_tar, load_image, normalize
from aft_export.errors import AFTExportError
from aft_export.options import TritonRepoOptions
from aft_export.runners import OrtRunner
from aft_export.serving.repository import write_repository
from tests.conftest import REPO
from tests.servekit import ENGINE_PROFILE_MAX, TritonBinary, engine_with_manifest, need, need_server


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, tiny_onnx):
    root = tmp_path_factory.mktemp("repo-artifacts")
    ckpt = tiny_onnx.ckpt(root / "full.pt", "aft_full_test")
    dynamic, fixed = root / "full.onnx", root / "full.b2.onnx"
    tiny_onnx.export(ckpt, dynamic)
    tiny_onnx.export(ckpt, fixed, batch_dim="2")
    return {"dynamic": dynamic, "fixed": fixed, "engine": engine_with_manifest(root, dynamic, "full.int8.engine")}


@pytest.fixture(scope="module")
def repo(artifacts, tmp_path_factory):
    out = tmp_path_factory.mktemp("repos") / "repo"
    result = write_repository([str(p) for p in artifacts.values()], out, TritonRepoOptions(instances=2, threads=3))
    assert result.path == str(out)
    return out


def _config(path: Path):
    pb = need("tritonclient.grpc.model_config_pb2")
    from google.protobuf import text_format

    return text_format.Parse(path.read_text(), pb.ModelConfig())


def _configs(repo: Path) -> dict:
    return {p.parent.name: _config(p) for p in sorted(repo.glob("*/config.pbtxt"))}


def test_every_config_parses_with_tritons_schema_and_matches_its_artifact(repo, artifacts):
    pb = need("tritonclient.grpc.model_config_pb2")
    configs = _configs(repo)
    names = {"full", "full_b2", "full_int8"}
    assert set(configs) == {n + s for n in names for s in ("", "_image", "_net", "_pre", "_topk")}
    for name, config in configs.items():
        assert config.name == name and (repo / name / "1").is_dir()
    fp32, string, i64 = (pb.DataType.Value(t) for t in ("TYPE_FP32", "TYPE_STRING", "TYPE_INT64"))
    kind = pb.ModelInstanceGroup.Kind.Value
    expect = {"full": (32, [], "onnxruntime_onnx", "model.onnx", artifacts["dynamic"], kind("KIND_AUTO")),
              "full_b2": (0, [2], "onnxruntime_onnx", "model.onnx", artifacts["fixed"], kind("KIND_AUTO")),
              "full_int8": (ENGINE_PROFILE_MAX, [], "tensorrt_plan", "model.plan", artifacts["engine"],
                            kind("KIND_GPU"))}  # fmt: skip
    for name, (max_batch, lead, platform, filename, source, net_kind) in expect.items():
        net, pre, topk = configs[name + "_net"], configs[name + "_pre"], configs[name + "_topk"]
        assert net.platform == platform and net.max_batch_size == max_batch
        assert (repo / f"{name}_net" / "1" / filename).read_bytes() == source.read_bytes()
        assert [(i.name, i.data_type, list(i.dims)) for i in net.input] == [("image", fp32, lead + [3, 32, 32])]
        assert [(o.name, o.data_type, list(o.dims)) for o in net.output] == [("logits", fp32, lead + [10])]
        # the classifier's instances follow the device (default: Triton's KIND_AUTO; engines the GPU)
        assert [(g.count, g.kind) for g in net.instance_group] == [(2, net_kind)]
        params = {k: v.string_value for k, v in net.parameters.items()}
        assert params == ({"intra_op_thread_count": "3", "inter_op_thread_count": "1", "execution_mode": "0"}
                          if platform == "onnxruntime_onnx" else {})  # fmt: skip
        for model in (pre, topk):
            assert model.backend == "python" and model.max_batch_size == max_batch
            assert [(g.count, g.kind) for g in model.instance_group] == [(2, kind("KIND_CPU"))]
            assert (repo / model.name / "1" / "model.py").is_file()
        assert [(i.name, i.data_type, list(i.dims)) for i in pre.input] == [("image_bytes", string, lead + [1])]
        assert [(o.name, list(o.dims)) for o in topk.output] == [("topk_index", lead + [5]), ("topk_label", lead + [5])]
        assert [o.data_type for o in topk.output] == [i64, string]
        # batched once: the classifier alone has a dynamic batcher (none for a fixed batch)
        assert net.HasField("dynamic_batching") == (max_batch > 0)
        assert net.dynamic_batching.max_queue_delay_microseconds == 0
        assert not pre.HasField("dynamic_batching") and not topk.HasField("dynamic_batching")
        # every model but the ensembles warms up with one request before it is ready
        for model in (net, pre, topk):
            assert len(model.model_warmup) == 1 and model.model_warmup[0].batch_size == 1
        warm = pre.model_warmup[0].inputs["image_bytes"]
        assert warm.input_data_file == "image.bin" and list(warm.dims) == lead + [1]
        data = (repo / f"{name}_pre" / "warmup" / "image.bin").read_bytes()
        size = int.from_bytes(data[:4], "little")
        assert load_image(data[4 : 4 + size], 32).shape == (32, 32, 3) and len(data) == (size + 4) * (lead or [1])[0]
        assert net.model_warmup[0].inputs["image"].zero_data
        for ensemble in (configs[name], configs[name + "_image"]):
            assert ensemble.platform == "ensemble" and ensemble.max_batch_size == max_batch
            assert [o.name for o in ensemble.output] == ["logits", "topk_index", "topk_label"]
            assert len(ensemble.model_warmup) == 0
            _check_wiring(ensemble, configs)
    # an engine is served up to its profile's maximum batch, never beyond
    manifest = json.loads(Path(str(artifacts["engine"]) + ".json").read_text())
    assert manifest["input"]["max"][0] >= configs["full_int8_net"].max_batch_size


def test_the_dockerfile_bakes_pillow_in_and_starts_triton_closed(repo, artifacts, tmp_path):
    """FROM the container release, Pillow pinned to the version that decoded for eval, the
    models copied in; tritonserver with model control off and the endpoints that change it
    closed (as aft-export serve). Nothing is installed when a container starts."""
    from importlib.metadata import version

    from aft_export.serving.spec import closed_flags

    text = (repo / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[:3] == ["ARG RELEASE", "FROM nvcr.io/nvidia/tritonserver:${RELEASE}-py3",
                         f"RUN pip install --no-cache-dir pillow=={version('pillow')}"]  # fmt: skip
    cmd = json.loads(lines[-1].removeprefix("CMD "))
    assert cmd[:4] == ["tritonserver", "--model-repository=/models", "--model-control-mode=none",
                       "--strict-readiness=true"] and cmd[4:] == closed_flags()  # fmt: skip
    readme = (repo / "README.md").read_text()
    # the engine's release is not in the table: the user names it
    assert "docker build -t aft-export-triton --build-arg RELEASE=<release> ." in readme
    assert "pip install -q pillow" not in readme  # nothing installed at start: it is in the image
    onnx_only = Path(write_repository([str(artifacts["dynamic"])], tmp_path / "r").path)
    assert "ARG RELEASE=26.08" in (onnx_only / "Dockerfile").read_text()
    assert "docker build -t aft-export-triton ." in (onnx_only / "README.md").read_text()


def _check_wiring(ensemble, configs) -> None:
    """Every step reads tensors the ensemble has (its inputs or an earlier step's outputs)
    under the step model's input names, and the ensemble's outputs are produced."""
    available = {i.name: (i.data_type, list(i.dims)) for i in ensemble.input}
    for step in ensemble.ensemble_scheduling.step:
        model = configs[step.model_name]
        inputs = {i.name: (i.data_type, list(i.dims)) for i in model.input}
        outputs = {o.name: (o.data_type, list(o.dims)) for o in model.output}
        assert set(step.input_map) == set(inputs)
        for key, tensor in step.input_map.items():
            assert available[tensor][0] == inputs[key][0], (step.model_name, key)
        assert set(step.output_map) <= set(outputs)
        for key, tensor in step.output_map.items():
            available[tensor] = outputs[key]
    for out in ensemble.output:
        assert available[out.name] == (out.data_type, list(out.dims))


def test_readme_names_the_engines_tensorrt_and_where_to_find_its_container(repo, artifacts, tmp_path, monkeypatch):
    text = (repo / "README.md").read_text()
    assert "TensorRT 10.8.0.43" in text and tritonspec.TRITON_CONTAINERS_SOURCE in text and "--gpus all" in text
    # with the release in the table, the README names it (and uses it in the docker command)
    monkeypatch.setattr(tritonspec, "TRITON_CONTAINERS", (("25.01", "2.54.0", "10.8.0.43"),))
    out = write_repository([str(artifacts["engine"])], tmp_path / "r")
    text = (out and Path(out.path) / "README.md").read_text()
    assert "`nvcr.io/nvidia/tritonserver:25.01-py3` (Triton 2.54.0, TensorRT 10.8.0.43)" in text
    assert "ARG RELEASE=25.01" in (Path(out.path) / "Dockerfile").read_text()


@pytest.mark.parametrize("name,library", [("m.rtx.engine", None), ("m.engine", "tensorrt-rtx")])
def test_tensorrt_rtx_engines_are_refused(artifacts, tmp_path, name, library):
    engine = engine_with_manifest(tmp_path, artifacts["dynamic"], name, library)
    with pytest.raises(AFTExportError, match="TensorRT-RTX engine"):
        write_repository([str(engine)], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bad_input_writes_nothing(artifacts, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(AFTExportError, match="above .* largest batch 16"):
        write_repository([str(artifacts["engine"])], out, TritonRepoOptions(max_batch=32))
    with pytest.raises(AFTExportError, match="GPU only"):
        write_repository([str(artifacts["engine"])], out, TritonRepoOptions(device="cpu"))
    with pytest.raises(AFTExportError, match="both be served as full"):
        write_repository([str(artifacts["dynamic"]), str(artifacts["dynamic"])], out)
    with pytest.raises(AFTExportError, match="does not exist"):
        write_repository([str(artifacts["dynamic"]), str(tmp_path / "nope.onnx")], out)
    assert list(tmp_path.iterdir()) == []  # nothing, not even a partial directory
    # an existing, non-empty directory (the artifacts' own) is refused, its files untouched
    before = {p: p.read_bytes() for p in artifacts["dynamic"].parent.iterdir() if p.is_file()}
    with pytest.raises(AFTExportError, match="already exists and is not empty"):
        write_repository([str(artifacts["dynamic"])], artifacts["dynamic"].parent)
    assert {p: p.read_bytes() for p in artifacts["dynamic"].parent.iterdir() if p.is_file()} == before


def test_external_data_is_copied_under_the_names_checked_and_runs_from_the_repository(artifacts, tmp_path):
    """A file whose weights lie in a subfolder, named with a ``..``: the copy holds them where the file says,
    the folders the name walks through made, and ONNX Runtime runs the repository's file as the original
    (the copy reads nothing the check has not passed: tests/hostile/cases.py refuses what escapes)."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    src = tmp_path / "src"
    (src / "weights").mkdir(parents=True)
    model = onnx.load(str(artifacts["dynamic"]))
    onnx.save(model, str(src / "full.onnx"), save_as_external_data=True, location="weights/w.bin")
    model = onnx.load(str(src / "full.onnx"), load_external_data=False)
    for t in model.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "weights/../weights/w.bin"
    onnx.save(model, str(src / "full.onnx"))
    write_repository([str(src / "full.onnx")], tmp_path / "r")
    net = tmp_path / "r" / "full_net" / "1"
    assert sorted(str(p.relative_to(net)) for p in net.rglob("*")) == ["model.onnx", "weights", "weights/w.bin"]
    x = {"image": np.random.default_rng(0).standard_normal((2, 3, 32, 32), dtype=np.float32)}
    want = ort.InferenceSession(str(artifacts["dynamic"])).run(None, x)[0]
    np.testing.assert_array_equal(ort.InferenceSession(str(net / "model.onnx")).run(None, x)[0], want)


def test_cli_writes_the_repository_and_refuses_bad_input_with_exit_2(artifacts, tmp_path):
    result = CliRunner().invoke(main, ["triton-repo", str(artifacts["dynamic"]), "-o", str(tmp_path / "r"),
                                       "--device", "cpu", "--max-batch", "4", "--top-k", "3", "--threads", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "full, full_image, full_net, full_pre, full_topk" in result.output
    pb = need("tritonclient.grpc.model_config_pb2")
    net = _config(tmp_path / "r" / "full_net" / "config.pbtxt")
    assert net.max_batch_size == 4 and net.instance_group[0].kind == pb.ModelInstanceGroup.Kind.Value("KIND_CPU")
    assert net.parameters["intra_op_thread_count"].string_value == "2"
    assert list(_config(tmp_path / "r" / "full_topk" / "config.pbtxt").output[0].dims) == [3]
    result = CliRunner().invoke(main, ["triton-repo", str(artifacts["dynamic"]), "-o", str(tmp_path / "r")])
    assert result.exit_code == 2 and result.output.startswith("error: directory")
    assert len(result.output.splitlines()) == 1


def test_backend_openvino_writes_a_complete_config_and_a_file_of_standard_ops(artifacts, tmp_path):
    """--backend openvino: NAME_net is Triton's openvino backend (backend, default_model_filename, a
    complete config parsed with Triton's schema, CPU instances, its parameters), its model.onnx the
    default export with the com.aft functions inlined, which OpenVINO reads as it is (as that backend
    does: no inlining of ours) and computes as ONNX Runtime computes the original; an engine stays
    tensorrt_plan. Not run in Triton here: the serve extra's tritonserver has no openvino backend."""
    from tests.conftest import need_openvino

    import onnx

    pb = need("tritonclient.grpc.model_config_pb2")
    result = CliRunner().invoke(main, ["triton-repo", str(artifacts["dynamic"]), str(artifacts["fixed"]),
                                       str(artifacts["engine"]), "-o", str(tmp_path / "r"), "--backend", "openvino",
                                       "--instances", "2", "--threads", "3"])  # fmt: skip
    assert result.exit_code == 0, result.output
    configs = _configs(tmp_path / "r")
    cpu = pb.ModelInstanceGroup.Kind.Value("KIND_CPU")
    for name in ("full_net", "full_b2_net"):
        net = configs[name]
        assert (net.backend, net.platform, net.default_model_filename) == ("openvino", "", "model.onnx")
        assert [(g.count, g.kind) for g in net.instance_group] == [(2, cpu)]
        assert {k: v.string_value for k, v in net.parameters.items()} == {"NUM_STREAMS": "2",
                                                                          "INFERENCE_NUM_THREADS": "6"}
        assert [i.name for i in net.input] == ["image"] and [o.name for o in net.output] == ["logits"]
        assert len(net.model_warmup) == 1
        _check_wiring(configs[name.removesuffix("_net")], configs)
    assert configs["full_int8_net"].platform == "tensorrt_plan"
    one = write_repository([str(artifacts["dynamic"])], tmp_path / "one", TritonRepoOptions(backend="openvino"))
    params = _config(Path(one.path) / "full_net" / "config.pbtxt").parameters
    assert {k: v.string_value for k, v in params.items()} == {"PERFORMANCE_HINT": "LATENCY"}
    written = tmp_path / "r" / "full_net" / "1" / "model.onnx"
    model = onnx.load(written)
    onnx.checker.check_model(model, full_check=True)
    assert not model.functions and {n.domain for n in model.graph.node} == {""}
    assert {o.domain for o in model.opset_import} == {""}
    readme = (tmp_path / "r" / "README.md").read_text()
    assert "`full_net` (OpenVINO, fp32" in readme and "cannot ask for fp32 inference" in readme
    ov = need_openvino()
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(written)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    want = OrtRunner(str(artifacts["dynamic"])).logits(x)
    assert np.abs(compiled({"image": x})[compiled.outputs[0]] - want).max() <= 1e-4
    bad = CliRunner().invoke(main, ["triton-repo", str(artifacts["dynamic"]), "-o", str(tmp_path / "g"), "--backend",
                                    "openvino", "--device", "gpu"])  # fmt: skip
    assert bad.exit_code == 2 and "openvino backend runs on the CPU; leave --device out" in bad.output
    assert not (tmp_path / "g").exists()


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _odd_images() -> list[bytes]:
    """Not CIFAR-shaped: a 50x37 RGBA PNG, a 64x48 grayscale JPEG."""
    from PIL import Image

    rng = np.random.default_rng(3)
    out = []
    for mode, shape, fmt in (("RGBA", (37, 50, 4), "PNG"), ("L", (48, 64), "JPEG")):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(buf, fmt)
        out.append(buf.getvalue())
    return out


def test_generated_preprocessing_is_evals_bit_for_bit(repo, cifar10):
    """model_pre's model.py (imported outside Triton) against eval's load_image + normalize."""
    pre = _load_module(repo / "full_pre" / "1" / "model.py", "generated_pre")
    encoded = [raw for _, (_, _, raw) in zip(range(24), iter_tar(cifar10 / "test.tar"))] + _odd_images()
    ours = np.stack([pre.preprocess(raw) for raw in encoded])
    info = OrtRunner(str(repo / "full_net" / "1" / "model.onnx"), threads=1).info
    evals = normalize(np.stack([load_image(raw, 32) for raw in encoded]), info.mean, info.std).numpy()
    assert ours.dtype == np.float32 and np.array_equal(ours, evals)
    with pytest.raises(pre.AFTExportError, match="cannot read image"):
        pre.preprocess(b"not an image")
    topk = _load_module(repo / "full_topk" / "1" / "model.py", "generated_topk")
    logits = np.random.default_rng(4).standard_normal((16, 10)).astype(np.float32)
    logits[0, 3] = logits[0, 7] = 9.0  # a tie: the lower index first, as the server does
    assert np.array_equal(topk.topk(logits, topk.K), tritonspec.topk(logits, 5))
    assert topk.labels(np.array([[0, 9]])).tolist() == [[info.classes[0].encode(), info.classes[9].encode()]]


# ---------------------------------------------------------------- the repository in a real Triton

STAND_IN = f'''"""Test stand-in for the ONNX Runtime backend (the serve extra's tritonserver has none): the
same ONNX file, run by aft-export's runner in the Python backend."""

import sys

sys.path.insert(0, {str(REPO)!r})  # this tree's aft_export (the stub ignores PYTHONPATH)

import numpy as np
import triton_python_backend_utils as pb_utils

from aft_export.runners import load_runner


class TritonPythonModel:
    def initialize(self, args):
        self.runner = load_runner(__file__.rsplit("/", 1)[0] + "/model.onnx", threads=1)

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
            logits = self.runner.logits(np.ascontiguousarray(x), batch_size=len(x))
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("logits", logits)]))
        return out
'''


@pytest.fixture(scope="module")
def live(artifacts, tmp_path_factory):
    """The repository of the dynamic-batch ONNX file, as written (default options: KIND_AUTO,
    warm-up requests, the Dockerfile and README at its root), in the serve extra's
    tritonserver; only full_net's platform line changes (python, with the stand-in beside
    model.onnx; its ONNX Runtime parameters are ignored by the Python backend)."""
    need_server()
    root = tmp_path_factory.mktemp("live")
    repo = Path(write_repository([str(artifacts["dynamic"])], root / "repo").path)
    config = repo / "full_net" / "config.pbtxt"
    config.write_text(config.read_text().replace('platform: "onnxruntime_onnx"', 'backend: "python"'))
    (repo / "full_net" / "1" / "model.py").write_text(STAND_IN)
    server = TritonBinary(repo, root)
    try:
        yield server.start(["full", "full_image", "full_net", "full_pre", "full_topk"]), repo
    finally:
        server.stop()


def test_the_repository_answers_in_a_real_triton(live, artifacts, cifar10, tmp_path):
    """Through the ensembles as written: full_image on CIFAR-10 JPEGs and odd images gives the
    logits of eval's preprocessing run in ONNX Runtime, full_pre's tensor is eval's bit for
    bit, and the repository's own client.py prints the top-k classes."""
    import tritonclient.http as httpclient

    server, repo = live
    reference = OrtRunner(str(artifacts["dynamic"]), threads=1)
    info = reference.info
    encoded = [raw for _, (_, _, raw) in zip(range(6), iter_tar(cifar10 / "test.tar"))] + _odd_images()
    x = normalize(np.stack([load_image(raw, 32) for raw in encoded]), info.mean, info.std).numpy()
    expected = reference.logits(x)
    arr = np.array([[raw] for raw in encoded], dtype=object)
    with httpclient.InferenceServerClient(server.url) as client:
        inp = httpclient.InferInput("image_bytes", list(arr.shape), "BYTES")
        inp.set_data_from_numpy(arr)
        result = client.infer("full_image", [inp])
        assert judge(metrics(expected, result.as_numpy("logits")), TOLERANCES["fp32"]) == []
        assert np.array_equal(result.as_numpy("topk_index"), tritonspec.topk(result.as_numpy("logits"), 5))
        pre = client.infer("full_pre", [inp]).as_numpy("preprocessed")
        assert np.array_equal(pre, x)
        tensor = httpclient.InferInput("image", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        assert judge(metrics(expected, client.infer("full", [tensor]).as_numpy("logits")), TOLERANCES["fp32"]) == []
    files = []
    for i, raw in enumerate(encoded[:2]):
        files.append(tmp_path / f"img{i}.jpg")
        files[-1].write_bytes(raw)
    proc = subprocess.run([sys.executable, str(repo / "client.py"), "--model", "full_image", "--url", server.url,
                           *map(str, files)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (repo / "client.py").read_text() == (Path(__file__).parents[1] / "aft_export" / "serving" / "client.py").read_text()
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{files[0]}: {info.classes[int(np.argmax(expected[0]))]} ")


def test_in_the_real_triton_bad_requests_are_400s_and_fail_only_their_own(live, cifar10):
    """A bad image among good ones fails its request only, with a 400 and one line; a NaN
    tensor through the ensemble gets a 400 from NAME_topk instead of a top-k of NaN."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    server, _ = live
    good = [raw for _, (_, _, raw) in zip(range(8), iter_tar(cifar10 / "test.tar"))]
    payloads = [[raw] for raw in good] + [[good[0], b"\x89PNG broken"]]
    results = {}

    def send(i):
        arr = np.array([[b] for b in payloads[i]], dtype=object)
        with httpclient.InferenceServerClient(server.url) as conn:
            inp = httpclient.InferInput("image_bytes", list(arr.shape), "BYTES")
            inp.set_data_from_numpy(arr)
            try:
                results[i] = conn.infer("full_image", [inp]).as_numpy("logits")
            except InferenceServerException as exc:
                results[i] = exc

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(payloads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    failed = {i: str(r) for i, r in results.items() if isinstance(r, Exception)}
    assert len(results) == len(payloads) and list(failed) == [len(good)]
    message = failed[len(good)]
    assert message.startswith("[400] in ensemble 'full_image', cannot read image 1 of this request"), message
    assert "\n" not in message and "Traceback" not in message
    x = np.zeros((2, 3, 32, 32), np.float32)
    x[1, 0, 0, 0] = np.nan
    with httpclient.InferenceServerClient(server.url) as conn:
        tensor = httpclient.InferInput("image", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        expected = r"^\[400\] in ensemble 'full', the model gives NaN or infinite logits for 1 of 2"
        with pytest.raises(InferenceServerException, match=expected):
            conn.infer("full", [tensor])


def test_the_pipelines_repository_names_engines_beside_their_onnx_and_leaves_rtx_out(artifacts, tmp_path):
    """The pipeline's model.onnx and model.engine would both be `model`: the engine is
    model_trt; a TensorRT-RTX engine is not written (tensorrt_plan cannot load it)."""
    import shutil

    from aft_export.workflow.pipeline import _triton_repository

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(artifacts["dynamic"], run / "model.onnx")
    engine = engine_with_manifest(run, run / "model.onnx", "model.engine")
    rtx = engine_with_manifest(run, run / "model.onnx", "model.rtx.engine")
    result = _triton_repository([run / "model.onnx", engine, rtx], run)
    assert result.models == ["model", "model_image", "model_net", "model_pre", "model_topk", "model_trt",
                             "model_trt_image", "model_trt_net", "model_trt_pre", "model_trt_topk"]  # fmt: skip
    assert _config(run / "triton" / "model_trt_net" / "config.pbtxt").platform == "tensorrt_plan"
