"""Files that take raw pixels, served: ``aft-export serve`` (a real Triton) feeds a uint8 file its
pixels on both endpoints, and ``triton-repo`` describes each pixel form to Triton (its input type and
dims, a preprocessing model that gives the pixels); a file that gives probabilities (DeepStream's) is
refused by both, in one line."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.data.images import FLOAT_NCHW, UINT8_NHWC, iter_tar, load_image, model_input
from aft_export.runners import OrtRunner
from aft_export.verify.compare import TOLERANCES, judge, metrics
from tests.servekit import Server, need_server


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_onnx):
    """A tiny AFT-conv: its normal export, and each pixel form (and the DeepStream form)."""
    root = tmp_path_factory.mktemp("serve_pixels")
    ckpt = tiny_onnx.ckpt(root / "conv.pt", "aft_conv_test")
    made = {"normal": tiny_onnx.export(ckpt, root / "conv.onnx")}
    made[UINT8_NHWC] = tiny_onnx.export(ckpt, root / "px.onnx", input_format=UINT8_NHWC)
    made[FLOAT_NCHW] = tiny_onnx.export(ckpt, root / "pxf.onnx", input_format=FLOAT_NCHW)
    made["deepstream"] = tiny_onnx.export(ckpt, root / "ds.onnx", input_format=FLOAT_NCHW,
                                          output_format="probabilities")  # fmt: skip
    return made


@pytest.fixture(scope="module")
def jpegs(cifar10):
    items = []
    for _, _, raw in iter_tar(cifar10 / "test.tar"):
        items.append(raw)
        if len(items) == 4:
            break
    return items


def _fp32_parity(want, got):
    m = metrics(want, got)
    assert judge(m, TOLERANCES["fp32"]) == [], m


def test_serve_feeds_a_uint8_file_its_pixels_on_both_endpoints(files, jpegs, tmp_path):
    need_server()
    import tritonclient.http as httpclient

    normal = OrtRunner(str(files["normal"]), threads=1)
    pixels = np.stack([load_image(raw, 32) for raw in jpegs])
    want = normal.logits(model_input(pixels, normal.info.mean, normal.info.std))
    srv = Server([files[UINT8_NHWC]], tmp_path / "serve.log", "--max-batch", "4")
    try:
        srv.start(["px", "px_image"])
        with httpclient.InferenceServerClient(srv.url) as client:
            inp = httpclient.InferInput("image", list(pixels.shape), "UINT8")  # raw pixels, a quarter of the bytes
            inp.set_data_from_numpy(pixels)
            _fp32_parity(want, client.infer("px", [inp]).as_numpy("logits"))
            arr = np.array([[b] for b in jpegs], dtype=object)
            enc = httpclient.InferInput("image_bytes", list(arr.shape), "BYTES")
            enc.set_data_from_numpy(arr)
            _fp32_parity(want, client.infer("px_image", [enc]).as_numpy("logits"))
            meta = client.get_model_metadata("px")
            assert meta["inputs"][0]["datatype"] == "UINT8" and meta["inputs"][0]["shape"] == [-1, 32, 32, 3]
    finally:
        srv.stop()


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("form, dtype, dims", [(UINT8_NHWC, "TYPE_UINT8", "[ 32, 32, 3 ]"),
                                               (FLOAT_NCHW, "TYPE_FP32", "[ 3, 32, 32 ]")])  # fmt: skip
def test_triton_repo_describes_each_pixel_form(files, jpegs, tmp_path, form, dtype, dims):
    name = files[form].name.removesuffix(".onnx")
    r = CliRunner().invoke(main, ["triton-repo", str(files[form]), "-o", str(tmp_path / "repo")])
    assert r.exit_code == 0, r.output
    repo = tmp_path / "repo"
    net = (repo / f"{name}_net" / "config.pbtxt").read_text()
    assert f"data_type: {dtype}" in net and f"dims: {dims}" in net
    pre_config = (repo / f"{name}_pre" / "config.pbtxt").read_text()
    assert f"data_type: {dtype}" in pre_config
    pre = _load(repo / f"{name}_pre" / "1" / "model.py", f"pre_{name}")
    ours = np.stack([pre.preprocess(raw) for raw in jpegs])
    want = model_input(np.stack([load_image(raw, 32) for raw in jpegs]), (0.5,) * 3, (0.5,) * 3, form)
    assert ours.dtype == want.dtype and np.array_equal(ours, want)  # the pixels, as eval decodes them


def test_a_probability_file_is_refused_by_triton_in_one_line(files, tmp_path):
    for args in (["triton-repo", str(files["deepstream"]), "-o", str(tmp_path / "repo")],
                 ["serve", str(files["deepstream"]), "--http-port", "1"]):  # fmt: skip
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and r.output.count("\n") == 1 and "gives probabilities" in r.output, r.output
    assert not (tmp_path / "repo").exists()
