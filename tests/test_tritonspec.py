"""What an artifact is to Triton: names, batching limits from the ONNX graph or the engine's
manifest, the top-k rule, the TensorRT-to-container lookup."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aft_export.serving import spec as tritonspec
from aft_export.errors import AFTExportError
from aft_export.options import DEFAULT_MAX_BATCH, ServeOptions, TritonRepoOptions
from aft_export.serving.spec import check_names, containers_for_tensorrt, describe, model_name, topk
from tests.servekit import engine_with_manifest


@pytest.fixture(scope="module")
def onnx_files(tmp_path_factory, tiny_onnx):
    root = tmp_path_factory.mktemp("spec")
    ckpt = tiny_onnx.ckpt(root / "conv.pt", "aft_conv_test")
    out = {"dynamic": root / "conv.onnx", "fixed": root / "conv.b4.onnx", "hw": root / "conv.hw.onnx"}
    tiny_onnx.export(ckpt, out["dynamic"])
    tiny_onnx.export(ckpt, out["fixed"], batch_dim="4")
    tiny_onnx.export(ckpt, out["hw"], dynamic_hw=True)
    return out


@pytest.mark.parametrize("path,name", [("model.int8.onnx", "model_int8"), ("runs/x/model.trt8.fp16.onnx", "model_trt8_fp16"),
                                       ("net v2+.engine", "net_v2"), ("a-b_c.plan", "a-b_c"), ("M.ONNX", "M")])  # fmt: skip
def test_model_names_come_from_the_file_name(path, name):
    assert model_name(path) == name


def test_onnx_batching_comes_from_the_graph(onnx_files):
    d = describe(onnx_files["dynamic"])
    assert (d.name, d.kind.name, d.input_name, d.output_name) == ("conv", "onnx", "image", "logits")
    assert d.fixed_batch is None and d.max_batch == DEFAULT_MAX_BATCH and d.dims == [3, 32, 32]
    assert d.image_model == "conv_image" and len(d.classes) == 10 and d.input_size == (3, 32, 32)
    assert describe(onnx_files["dynamic"], max_batch=5).max_batch == 5
    f = describe(onnx_files["fixed"], max_batch=5)  # a fixed batch is served as it is
    assert f.fixed_batch == 4 and f.max_batch == 0 and f.dims == [4, 3, 32, 32] and f.batched(5) == [4, 5]
    assert describe(onnx_files["hw"]).dims == [3, -1, -1]


def test_engine_batching_comes_from_its_manifest(onnx_files, tmp_path):
    engine = engine_with_manifest(tmp_path, onnx_files["dynamic"], "conv.engine")
    e = describe(engine)
    assert (e.kind.name, e.name, e.max_batch, e.fixed_batch, e.dims) == ("engine", "conv", 16, None, [3, 32, 32])
    assert describe(engine, max_batch=8).max_batch == 8
    with pytest.raises(AFTExportError, match="`max_batch=17` is above .* largest batch 16"):
        describe(engine, max_batch=17)
    manifest_path = tmp_path / "conv.engine.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["input"]["min"][0] = 2
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(AFTExportError, match="smallest batch is 2 .* rebuild it with aft-export build "
                                             "--batch-profile 1,OPT,MAX"):
        describe(engine)
    manifest["input"]["min"][0] = manifest["input"]["max"][0] = 8
    manifest_path.write_text(json.dumps(manifest))
    assert describe(engine).fixed_batch == 8
    engine.write_bytes(b"changed")  # the manifest's sha256 no longer matches
    with pytest.raises(AFTExportError, match="corrupt or was replaced"):
        describe(engine)


def test_unservable_inputs_are_refused(tmp_path, onnx_files):
    with pytest.raises(AFTExportError, match="does not exist"):
        describe(tmp_path / "x.onnx")
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(b"x")
    with pytest.raises(AFTExportError, match="export a checkpoint first"):
        describe(ckpt)
    with pytest.raises(AFTExportError, match="both be served as conv"):
        check_names([describe(onnx_files["dynamic"]), describe(engine_with_manifest(tmp_path, onnx_files["dynamic"], "conv.engine"))])


def test_topk_is_largest_first_and_ties_keep_the_lower_index():
    logits = np.array([[0.0, 3.0, 3.0, -1.0, 2.0], [5.0, 4.0, 3.0, 2.0, 1.0]], np.float32)
    assert topk(logits, 3).tolist() == [[1, 2, 4], [0, 1, 2]] and topk(logits, 3).dtype == np.int64


def test_container_lookup_matches_the_tensorrt_patch_version(monkeypatch):
    monkeypatch.setattr(tritonspec, "TRITON_CONTAINERS", (("25.01", "2.54.0", "10.8.0.43"), ("25.02", "2.55.0", "10.8.0.43"),
                                                          ("25.03", "2.56.0", "10.9.0.34")))  # fmt: skip
    assert [c for c, _, _ in containers_for_tensorrt("10.8.0.43")] == ["25.01", "25.02"]
    assert [c for c, _, _ in containers_for_tensorrt("10.8.0")] == ["25.01", "25.02"]
    assert containers_for_tensorrt("10.8.1") == [] and containers_for_tensorrt("10.9.0.34")[0][0] == "25.03"


@pytest.mark.parametrize("kw,message", [
    (dict(http_port=0), "`http_port` takes a whole number from 1 to 65535, got 0"), (dict(grpc_port=8000), "must differ"),
    (dict(max_batch=0), "`max_batch` takes a whole number from 1 to 65536, got 0"), (dict(instances=0), "`instances` takes a whole number >= 1, got 0"),
    (dict(top_k=0), "`top_k` takes a whole number >= 1, got 0"), (dict(queue_delay_us=-1), ">= 0"),
])  # fmt: skip
def test_serve_options_are_checked_once(kw, message):
    with pytest.raises(AFTExportError, match=message):
        ServeOptions(**kw)


def test_repository_options_are_checked_once():
    with pytest.raises(AFTExportError, match="`device` takes one of auto, gpu, cpu, got 'tpu'"):
        TritonRepoOptions(device="tpu")
    with pytest.raises(AFTExportError, match="`max_batch` takes a whole number from 1 to 65536"):
        TritonRepoOptions(max_batch=0)
