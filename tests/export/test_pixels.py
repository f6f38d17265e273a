"""Files that take raw pixels (aft_export/exporting/pixels.py): the graph, what stays fp32, every
runner feeding them, and parity from raw pixels on ONNX Runtime and OpenVINO at every precision,
with mutants (a wrong mean, swapped channels) that parity must fail."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aft_export.data.images import FLOAT_NCHW, NORMALIZED, UINT8_NHWC, load_image, model_input
from aft_export.errors import AFTExportError
from aft_export.exporting.pixels import PIXEL_MODULE, with_pixel_input
from aft_export.artifacts.graph import node_module
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.runners import OrtRunner
from aft_export.verify.parity import run_parity
from tests.conftest import REPO, need_openvino

QUIET = {"log": lambda *a: None, "progress": False}
FORMS = (UINT8_NHWC, FLOAT_NCHW)


def test_model_input_is_the_normalisation_in_float64():
    """A normalised input is AFT.md's (x / 255 - mean) / std; a pixel input is the pixels, in the
    file's layout and type."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (2, 4, 5, 3), dtype=np.uint8)
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    want = (pixels.astype(np.float64).transpose(0, 3, 1, 2) / 255 - np.reshape(mean, (1, 3, 1, 1))) / np.reshape(
        std, (1, 3, 1, 1))  # fmt: skip
    got = model_input(pixels, mean, std, NORMALIZED)
    assert got.dtype == np.float32 and np.abs(got - want).max() < 1e-6
    u8 = model_input(pixels, mean, std, UINT8_NHWC)
    assert u8.dtype == np.uint8 and np.array_equal(u8, pixels)
    f = model_input(pixels, mean, std, FLOAT_NCHW)
    assert f.dtype == np.float32 and f.shape == (2, 3, 4, 5) and np.array_equal(f, pixels.transpose(0, 3, 1, 2))
    with pytest.raises(AFTExportError, match="unknown input format"):
        model_input(pixels, mean, std, "bgr")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_onnx, cifar10):
    """A tiny checkpoint, and its normal export (verified: the pixel forms are checked against it)."""
    root = tmp_path_factory.mktemp("pixels_tiny")
    ckpt = tiny_onnx.ckpt(root / "m.pt", "aft_conv_test")
    normal = tiny_onnx.export(ckpt, root / "m.onnx")
    return ckpt, normal, root


@pytest.mark.parametrize("form", FORMS)
def test_the_pixel_input_is_the_graph_s_first_nodes_in_fp32(tiny, form, cifar10):
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint

    ckpt, normal, root = tiny
    out = root / f"{form}.onnx"
    result = export_checkpoint(ckpt, out, ExportOptions(images=8, data=str(cifar10 / "test.tar"), input_format=form),
                               log=lambda *a: None)  # verified from the decoded images' pixels  # fmt: skip
    assert result.parity.max_abs < 1e-4 and result.verdict.status == "ok"
    m = onnx.load(out)
    (image,) = m.graph.input
    t = image.type.tensor_type
    dims = [d.dim_value or d.dim_param for d in t.shape.dim]
    if form == UINT8_NHWC:  # the Cast first: TensorRT takes UINT8 only at the graph's inputs
        assert t.elem_type == TensorProto.UINT8 and dims[1:] == [32, 32, 3]
        assert [n.op_type for n in m.graph.node[:2]] == ["Cast", "Transpose"]
        assert m.graph.node[0].input == ["image"]
    else:
        assert t.elem_type == TensorProto.FLOAT and dims[1:] == [3, 32, 32]
    prologue = [n for n in m.graph.node if node_module(n) == PIXEL_MODULE]
    assert [n.op_type for n in prologue][-3:] == ["Div", "Sub", "Div"]  # x / 255, - mean, / std: explicit nodes
    meta = {p.key: p.value for p in m.metadata_props}
    mean = numpy_helper.to_array(next(i for i in m.graph.initializer if i.name == "pixels_mean")).ravel()
    assert meta["input_format"] == form and np.allclose(mean, json.loads(meta["mean"]))
    normal_meta = {p.key: p.value for p in onnx.load(normal).metadata_props}
    assert "input_format" not in normal_meta  # a normal file is written as before: byte for byte
    with pytest.raises(AFTExportError, match="takes .* pixels already"):
        with_pixel_input(m, form, (0.5,) * 3, (0.5,) * 3)


@pytest.mark.parametrize("target", ["tensorrt8", "portable"])
def test_every_target_keeps_the_pixel_input(tiny, cifar10, target):
    """The TensorRT 8 and portable forms are made from the default form after the first nodes are in
    place: they keep them (inlining, LayerNorm decomposed, opset 17 or 19) and verify from raw pixels."""
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint

    ckpt, _, root = tiny
    out = root / f"{target}.u8.onnx"
    result = export_checkpoint(ckpt, out, ExportOptions(images=8, data=str(cifar10 / "test.tar"), target=target,
                                                        input_format=UINT8_NHWC), log=lambda *a: None)  # fmt: skip
    assert result.parity.passed and result.parity.max_abs < 1e-4
    m = onnx.load(out)
    assert m.graph.node[0].op_type == "Cast" and m.graph.input[0].type.tensor_type.elem_type == TensorProto.UINT8
    meta = {p.key: p.value for p in m.metadata_props}
    assert meta["export_target"] == target and meta["input_format"] == UINT8_NHWC


def _prologue_types(path) -> set[str]:
    """The element types the pixel prologue computes in (inferred), by value name."""
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    types = {v.name: v.type.tensor_type.elem_type for v in [*m.graph.value_info, *m.graph.input, *m.graph.output]}
    return {TensorProto.DataType.Name(types[o]) for n in m.graph.node if node_module(n) == PIXEL_MODULE
            for o in n.output if o in types}  # fmt: skip


@pytest.fixture(scope="module")
def zoo_pixels(tmp_path_factory, zoo_onnx, cifar10):
    """aft_conv_cifar (trained) in each pixel form at fp32, fp16 and int8 (the portable int8: 7-bit
    weights, for any CPU), and the DeepStream form (float pixels in, probabilities out)."""
    root = tmp_path_factory.mktemp("pixels_zoo")
    made = {}
    calib = str(cifar10 / "train.tar")
    for form in FORMS:
        fp32 = zoo_onnx.export("aft_conv_cifar", root / f"{form}.onnx", input_format=form)
        made[form, "fp32"] = fp32
        for precision, target in (("fp16", None), ("int8", "portable")):
            out = root / f"{form}.{precision}.onnx"
            quantize_model(fp32, out, calib, QuantizeOptions(precision=precision, images=64, target=target), **QUIET)
            made[form, precision] = out
    made["deepstream", "fp32"] = zoo_onnx.export("aft_conv_cifar", root / "ds.onnx", input_format=FLOAT_NCHW,
                                                 output_format="probabilities")  # fmt: skip
    return made


@pytest.fixture(scope="module")
def test_set(cifar10):
    from aft_export.data.datasets import load_labelled

    return load_labelled(str(cifar10 / "test.tar"), 32, limit=48)


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_every_pixel_file_passes_parity_from_raw_pixels(zoo_pixels, test_set, backend):
    if backend == "openvino":
        need_openvino()
    files = [str(p) for p in zoo_pixels.values()]
    result = run_parity(str(REPO / "models" / "aft_conv_cifar.pt"), files, data=test_set, images=48, backend=backend)
    rows = {r.artifact: r for r in result.artifacts}
    for (form, precision), path in zoo_pixels.items():
        row = rows[str(path)]
        assert row.status == "pass", (form, precision, row.failures, row.reason)
        assert row.precision == precision and set(row.inputs) == {"real", "saturated", "constant"}
        assert row.input_format == (FLOAT_NCHW if form == "deepstream" else form)
    assert rows[str(zoo_pixels["deepstream", "fp32"])].output_format == "probabilities"
    assert result.verdict.status == "ok"


@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_reduced_precision_keeps_the_pixel_prologue_in_fp32(zoo_pixels, precision):
    from aft_export.artifacts.ends import graph_ends

    for form in FORMS:
        kept = _prologue_types(zoo_pixels[form, precision])
        assert "FLOAT16" not in kept and "FLOAT" in kept, (form, precision, kept)
        m = onnx.load(zoo_pixels[form, precision])  # read for what it is, by its mark and, unmarked, by its nodes
        assert (graph_ends(m).takes.name, graph_ends(m).prologue) == (form, "mark")
        for node in m.graph.node:
            del node.metadata_props[:]
        assert (graph_ends(m).takes.name, graph_ends(m).prologue) == (form, "nodes"), (form, precision)


def _mutant(path, out, how: str):
    """The file with a wrong mean (ImageNet's), or reading its channels as BGR."""
    m = onnx.load(path)
    if how == "mean":
        init = next(i for i in m.graph.initializer if i.name == "pixels_mean")
        init.CopyFrom(numpy_helper.from_array(np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1),
                                              "pixels_mean"))  # fmt: skip
    else:
        image = m.graph.input[0]
        axis = 3 if image.type.tensor_type.elem_type == TensorProto.UINT8 else 1
        for node in m.graph.node:
            node.input[:] = ["image_bgr" if i == image.name else i for i in node.input]
        m.graph.initializer.append(numpy_helper.from_array(np.array([2, 1, 0], np.int64), "bgr"))
        m.graph.node.insert(0, helper.make_node("Gather", [image.name, "bgr"], ["image_bgr"], axis=axis))
    onnx.save(m, out)
    return out


@pytest.mark.parametrize("how", ["mean", "channels"])
@pytest.mark.parametrize("form", FORMS)
def test_a_wrong_mean_or_swapped_channels_fail_parity(zoo_pixels, test_set, tmp_path, form, how):
    """The test above can fail: a file whose prologue differs from our preprocessing is caught."""
    bad = _mutant(zoo_pixels[form, "fp32"], tmp_path / f"bad.{how}.onnx", how)
    result = run_parity(str(REPO / "models" / "aft_conv_cifar.pt"), [str(bad)], data=test_set, images=48)
    (row,) = result.artifacts
    assert row.status == "fail" and any(f.startswith("real: ") for f in row.failures), row.failures
    assert result.verdict.status == "failed"


def test_every_runner_path_feeds_a_pixel_file_its_pixels(zoo_pixels, zoo_onnx, test_set, tmp_path):
    """eval and infer give the pixel file the normal file's answers (each fed as its metadata says),
    and bench times it on pixels of its own type."""
    from aft_export.data.images import LabelledImages
    from aft_export.serving.predict import classify
    from aft_export.verify.bench import bench_runner
    from aft_export.verify.evaluate import evaluate
    from PIL import Image

    u8 = str(zoo_pixels[UINT8_NHWC, "fp32"])
    normal = str(zoo_onnx.export("aft_conv_cifar", tmp_path / "normal.onnx"))
    data = LabelledImages(test_set.images[:16], test_set.labels[:16], test_set.classes, test_set.source)
    rows = evaluate([normal, u8], data=data).rows
    assert rows[0]["top1"] == rows[1]["top1"] and rows[1]["agreement"] == 100.0, rows

    (tmp_path / "imgs").mkdir()
    for i in range(3):
        Image.fromarray(test_set.images[i]).save(tmp_path / "imgs" / f"{i}.png")
    a, b = classify(normal, [str(tmp_path / "imgs")]), classify(u8, [str(tmp_path / "imgs")])
    assert [r["top"][0]["class"] for r in a.results] == [r["top"][0]["class"] for r in b.results]
    runner = OrtRunner(u8)
    assert runner.random_input(2).dtype == np.uint8 and bench_runner(runner, 2, warmup=1, iters=2)["p50_ms"] > 0
    assert np.array_equal(load_image(str(tmp_path / "imgs" / "0.png"), 32), test_set.images[0])


def test_calibration_takes_pixels_for_a_pixel_file(zoo_pixels, tmp_path):
    """An array of floats is taken as normalised images: refused for a file that takes raw pixels;
    uint8 pixel arrays calibrate it."""
    fp32 = zoo_pixels[FLOAT_NCHW, "fp32"]
    np.save(tmp_path / "floats.npy", np.zeros((4, 3, 32, 32), np.float32))
    with pytest.raises(AFTExportError, match="taken as normalised images .* raw float-nchw pixels"):
        quantize_model(fp32, tmp_path / "q.onnx", str(tmp_path / "floats.npy"), QuantizeOptions(images=4), **QUIET)
    assert not (tmp_path / "q.onnx").exists()
    np.save(tmp_path / "pixels.npy", np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    quantize_model(fp32, tmp_path / "q.onnx", str(tmp_path / "pixels.npy"), QuantizeOptions(images=4), **QUIET)
    assert OrtRunner(str(tmp_path / "q.onnx")).info.input_format == FLOAT_NCHW


@pytest.mark.trt
def test_the_pixel_forms_pass_the_rules_where_the_parsers_accept_and_rtx_builds_them(zoo_pixels, zoo_onnx, cifar10,
                                                                                     tmp_path):  # fmt: skip
    """``aft-export check --trt 8.5 --trt 8.6 --trt 10.3 --trt 11.4 --trt rtx-1.7 --build`` on the pixel
    forms: the default form at fp32, fp16 and int8 (the int8 TensorRT builds: 8-bit weights, fp16 rest),
    and the TensorRT 8 form (JetPack 5.1/6.0) of the uint8 and DeepStream forms. TensorRT-RTX's real
    parser parses and its builder builds each, and agrees with the rules' rtx-1.7 column. TensorRT 8.5's
    parser lists no UINT8 for Cast (its operators.md), so its rules refuse the uint8 form; 8.6 takes it."""
    from aft_export.tensorrt.checks import check_files
    from tests.rtx import need_rtx

    need_rtx()
    int8 = tmp_path / "uint8.int8.trt.onnx"
    quantize_model(zoo_pixels[UINT8_NHWC, "fp32"], int8, str(cifar10 / "train.tar"), QuantizeOptions(images=32),
                   **QUIET)  # fmt: skip
    files = {(UINT8_NHWC, "fp32"): zoo_pixels[UINT8_NHWC, "fp32"], (UINT8_NHWC, "int8"): int8,
             (FLOAT_NCHW, "fp16"): zoo_pixels[FLOAT_NCHW, "fp16"],
             (UINT8_NHWC, "tensorrt8"): zoo_onnx.export("aft_conv_cifar", tmp_path / "u8.trt8.onnx",
                                                        input_format=UINT8_NHWC, target="tensorrt8"),
             ("deepstream", "tensorrt8"): zoo_onnx.export("aft_conv_cifar", tmp_path / "ds.trt8.onnx",
                                                          target="tensorrt8", input_format=FLOAT_NCHW,
                                                          output_format="probabilities")}  # fmt: skip
    result = check_files([str(p) for p in files.values()], ["8.5", "8.6", "10.3", "11.4", "rtx-1.7"], build=True)
    for (form, kind), d in zip(files, result.to_dict()["files"]):
        real = d["real"]
        assert real["parses"] and real["builds"] and real["agrees"] and real["engine_bytes"] > 0, (form, kind, real)
        if kind != "tensorrt8":  # opset 18 and functions: the TensorRT 8 form is the one for 8.x
            assert d["status"] == {"8.5": "refuses", "8.6": "refuses", "10.3": "accepts", "11.4": "accepts",
                                   "rtx-1.7": "accepts"}, (form, kind)  # fmt: skip
        else:
            taken_by_85 = form != UINT8_NHWC
            assert d["status"] == {"8.5": "accepts" if taken_by_85 else "refuses", "8.6": "accepts",
                                   "10.3": "accepts", "11.4": "accepts", "rtx-1.7": "accepts"}, (form, d["status"])
            if not taken_by_85:
                assert any("Cast input image is UINT8" in f["message"] for f in d["findings"])


def test_a_uint8_file_s_engine_profile_is_nhwc(tiny, tiny_onnx):
    """``build``'s optimisation profile (and NVIDIA's command lines, from the same function) follows the
    file's layout: (N, H, W, C) for uint8 pixels, with a dynamic height and width too."""
    from aft_export.options import BuildOptions
    from aft_export.tensorrt.library import input_profile

    ckpt, _, root = tiny
    f = tiny_onnx.export(ckpt, root / "dyn.u8.onnx", dynamic_hw=True, input_format=UINT8_NHWC)
    shapes = input_profile(onnx.load(f), BuildOptions(batch_profile="1,4,8", hw_profile="16,32,64"))
    assert (shapes.min, shapes.opt, shapes.max) == ((1, 16, 16, 3), (4, 32, 32, 3), (8, 64, 64, 3))
    assert OrtRunner(str(f)).run({"image": np.zeros((2, 48, 64, 3), np.uint8)})["logits"].shape == (2, 10)
