"""int8 (explicit Q/DQ) and fp16 graphs: what TensorRT's explicit precision needs."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from aft_export.cli import main
from aft_export.errors import AFTExportError
from aft_export.exporting.functions import DOMAIN
from aft_export.artifacts.graph import aft_core_nodes, aft_projection_nodes, node_module
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.artifacts.onnxio import graph_precision
from tests.conftest import REPO

QUIET = dict(log=lambda *a: None)


@pytest.fixture(scope="module")
def onnx_models(tmp_path_factory, tiny_onnx):
    """fp32 exports of tiny models: AFT-full in the custom form, AFT-conv decomposed (the session's,
    tests/conftest.py ``tiny_onnx``; these very exports are verified against PyTorch on real images
    in tests/export/test_exporter.py, which is where the exporter is tested)."""
    d = tmp_path_factory.mktemp("q")
    out = {}
    for key, name, form in (("custom", "aft_full_test", "custom"), ("decomposed", "aft_conv_test", "decomposed"),
                            ("conv_custom", "aft_conv_test", "custom")):  # fmt: skip
        ckpt = tiny_onnx.ckpt(d / f"{name.split('_')[1]}.pt", name)
        out[key] = tiny_onnx.export(ckpt, d / f"{name}_{form}.onnx", op_form=form)
    return out


@pytest.fixture(scope="module")
def int8_of(onnx_models, tmp_path_factory, cifar10):
    """``int8_of(form)``: the default int8 of a form (the tensorrt target's: the rest in fp16; 64
    calibration images) and its result, quantised once for the tests that read it."""
    made = {}

    def get(form):
        if form not in made:
            d = tmp_path_factory.mktemp(f"int8-{form}")
            out = d / "int8.onnx"
            made[form] = out, quantize_model(onnx_models[form], out, str(cifar10 / "train.tar"), _opts(d), **QUIET)
        return made[form]

    return get


@pytest.mark.parametrize("key", ["custom", "decomposed", "conv_custom"])
def test_every_projection_mlp_embedding_and_head_is_int8(onnx_models, key, tmp_path, cifar10):
    """Every MatMul/Gemm/Conv that belongs to a Linear or Conv2d module computes in int8
    (the zoo-size graphs, where onnxsim rewrites more, are checked in tests/test_zoo.py)."""
    out = tmp_path / "int8.onnx"
    quantize_model(onnx_models[key], out, str(cifar10 / "train.tar"), _opts(tmp_path, images=16), **QUIET)
    model = onnx.load(out)
    reads_dq = _consumers_of_dq(model)
    layers = [n for n in model.graph.node if n.op_type in ("MatMul", "Gemm", "Conv")
              and node_module(n) and node_module(n)[1] in ("Linear", "Conv2d")]  # fmt: skip
    assert len(layers) >= 8
    assert [n.name for n in layers if n.name not in reads_dq] == []
    # a q/k/v projection owned by the AFT module itself (onnxsim fuses q/k/v into one MatMul
    # when their biases are zero, as in a fresh model: the hand-made block of
    # test_placement_... has one) is int8 too; with trained biases they stay three Linears
    src = onnx.load(onnx_models[key])
    fused = [n.name for n in src.graph.node if n.name in set(aft_projection_nodes(src)) and n.op_type == "MatMul"]
    assert [n for n in fused if n not in reads_dq] == []


def _opts(tmp_path, **kw):
    kw.setdefault("images", 64)
    kw.setdefault("cache_dir", str(tmp_path / "cache"))
    return QuantizeOptions(**kw)


def _run(path, batch):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((batch, 3, 32, 32)).astype(np.float32)
    return sess.run(None, {"image": x})[0]


def _logits(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"image": x})[0]


def _calibration_tensors(model, source, count, seed=0):
    """The calibration images a run with these settings uses, preprocessed as the metadata says."""
    from aft_export.data.calibration import Preprocessing, load_calibration

    meta = {p.key: p.value for p in model.metadata_props}
    return load_calibration(str(source), Preprocessing.from_metadata(meta), count, seed, progress=False).tensors


def _sha256(tensors):
    """The calibration set's identity, computed here: sha256 of the shape, then the float32 bytes."""
    import hashlib

    h = hashlib.sha256(str(tensors.shape).encode())
    h.update(np.ascontiguousarray(tensors, dtype=np.float32).tobytes())
    return h.hexdigest()


def _consumers_of_dq(model):
    dq = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return {n.name for n in model.graph.node if any(i in dq for i in n.input)}


@pytest.mark.parametrize("form", ["custom", "decomposed"])
def test_int8_is_explicit_symmetric_qdq_with_float_aft_core(onnx_models, int8_of, form, cifar10):
    src = onnx.load(onnx_models[form])
    out, result = int8_of(form)
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert graph_precision(model) == "int8"
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    dq_weight_axes = []
    for node in model.graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        zp = inits[node.input[2]]
        assert zp.dtype == np.int8 and not zp.any(), "symmetric int8: zero-point 0"
        scale = inits[node.input[1]]
        if node.op_type == "DequantizeLinear" and node.input[0] in inits:  # a weight
            w = inits[node.input[0]]
            assert w.dtype == np.int8
            if scale.size > 1:
                axis = next(a.i for a in node.attribute if a.name == "axis")
                assert scale.size == w.shape[axis]
                dq_weight_axes.append(axis)
        elif node.input[0] not in inits:  # an activation
            assert scale.size == 1, "activations per tensor"
    assert dq_weight_axes, "weights per channel"
    # the AFT core never reads a dequantised value, nor computes in int8
    core = set(aft_core_nodes(model))
    assert core and not core & _consumers_of_dq(model)
    if form == "custom":
        assert sum(n.domain == DOMAIN for n in model.graph.node) == sum(n.domain == DOMAIN for n in src.graph.node)
    else:  # the AFT-conv core's convolution stays float; the patch-embedding convs are int8
        core_convs = [n for n in model.graph.node if n.op_type == "Conv" and n.name in core]
        assert core_convs
        quantized = {model.graph.node[i].op_type for i, n in enumerate(model.graph.node) if n.name in _consumers_of_dq(model)}
        assert {"Conv", "Gemm"} <= quantized or {"Conv", "MatMul"} <= quantized
    # metadata of the source plus the recipe
    meta = {p.key: p.value for p in model.metadata_props}
    src_meta = {p.key: p.value for p in src.metadata_props}
    assert all(meta[k] == v for k, v in src_meta.items() if k not in ("precision", "opset"))
    assert meta["opset"] == "19"  # the tensorrt target's int8 keeps its rest in fp16, at opset 19
    recipe = json.loads(meta["quantization"])
    assert recipe["method"] == "percentile" and recipe["count"] == 64 and recipe["seed"] == 0
    assert recipe["calibration"]["sha256"] == result.recipe["calibration"]["sha256"]
    assert set(recipe["excluded_nodes"]) == core
    for batch in (1, 7):
        assert _run(out, batch).shape == (batch, 10)
    # the agreement with fp32, recounted here on the same 64 calibration images
    tensors = _calibration_tensors(src, cifar10 / "train.tar", 64)
    assert _sha256(tensors) == recipe["calibration"]["sha256"]
    ref, got = _logits(onnx_models[form], tensors), _logits(out, tensors)
    assert result.agreement["images"] == 64
    agree = 100 * np.mean(ref.argmax(1) == got.argmax(1))
    assert result.agreement["top1_agreement"] == pytest.approx(agree, abs=1e-3)
    assert result.agreement["max_abs"] == pytest.approx(np.abs(ref - got).max(), rel=1e-6)
    assert result.agreement["mse"] == pytest.approx(((ref - got) ** 2).mean(), rel=1e-5)


@pytest.fixture
def calibrations(monkeypatch):
    """Every calibration pass (minmax, and the histogram methods percentile and entropy),
    counted where the ranges are computed from the images, however the code under test
    reaches it."""
    from aft_export.quantization import calibrators

    passes = []

    def counted(*args, _calibrate=calibrators.calibrate, **kwargs):
        passes.append(args[2].method)
        return _calibrate(*args, **kwargs)

    monkeypatch.setattr(calibrators, "calibrate", counted)
    return passes


def _noise_images(folder, count, seed=0):
    from PIL import Image

    folder.mkdir()
    rng = np.random.default_rng(seed)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{i:02d}.png")
    return folder


def test_calibration_cache_hit_skips_calibration_and_every_change_misses(tmp_path, calibrations):
    """A hit is shown by calibration not running (and giving the graph a fresh calibration
    gives); each planted difference in what calibration sees must miss and calibrate again."""
    import shutil
    from dataclasses import replace

    from PIL import Image

    model = _conv_gemm_with_biases(tmp_path / "m.onnx")
    images = _noise_images(tmp_path / "imgs", 20)
    opts = _opts(tmp_path, images=16)  # 16 of the 20 images, seed 0

    def quantize(name, src=model, data=images, **kw):
        before = len(calibrations)
        result = quantize_model(src, tmp_path / name, str(data), replace(opts, **kw), **QUIET)
        return result.recipe["calibration_cache"], len(calibrations) - before

    assert quantize("fresh.onnx", cache_dir="") == ("off", 1)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    assert quantize("a.onnx") == ("written", 1)
    assert quantize("b.onnx") == ("hit", 0)  # no calibration pass ran
    fresh, a, b = (_graph_bytes(tmp_path / n) for n in ("fresh.onnx", "a.onnx", "b.onnx"))
    assert a == fresh and b == fresh  # the cached ranges are the ranges a fresh calibration computes
    # and the files are the same bytes: how the ranges were got is in the result, not the file
    assert len({(tmp_path / n).read_bytes() for n in ("fresh.onnx", "a.onnx", "b.onnx")}) == 1

    # planted differences: each is something calibration sees, so each must miss
    other_pixel = tmp_path / "imgs_pixel"
    shutil.copytree(images, other_pixel)
    for f in sorted(other_pixel.iterdir()):
        img = np.array(Image.open(f))
        img[0, 0, 0] ^= 1  # one pixel in each image (whichever 16 are sampled); same names, count, seed
        Image.fromarray(img).save(f)
    assert quantize("pixel.onnx", data=other_pixel) == ("written", 1)
    assert quantize("seed.onnx", seed=1) == ("written", 1)  # another 16 of the 20
    assert quantize("mean.onnx", mean=(0.4, 0.5, 0.5)) == ("written", 1)  # same images, other tensors
    assert quantize("pct.onnx", percentile=99.9) == ("written", 1)
    assert quantize("minmax.onnx", method="minmax") == ("written", 1)
    assert quantize("entropy.onnx", method="entropy") == ("written", 1)
    original = model.read_bytes()
    changed = onnx.load(model)
    w = next(t for t in changed.graph.initializer if t.name == "conv.weight")
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w) * np.float32(1.001), w.name))
    onnx.save(changed, model)  # same path, other weights
    assert quantize("weights.onnx") == ("written", 1)
    model.write_bytes(original)
    # and the original settings still hit: no entry was overwritten by the others
    assert quantize("again.onnx") == ("hit", 0)
    assert _graph_bytes(tmp_path / "again.onnx") == fresh


def _graph_bytes(path):
    return onnx.load(path).graph.SerializeToString()


@pytest.mark.parametrize("form", ["custom", "decomposed"])
def test_fp16_keeps_aft_core_and_layernorm_in_fp32(onnx_models, form, tmp_path, cifar10):
    out = tmp_path / "fp16.onnx"
    result = quantize_model(onnx_models[form], out, str(cifar10 / "train.tar"),
                            _opts(tmp_path, precision="fp16"), **QUIET)  # fmt: skip
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert graph_precision(model) == "fp16"
    types = {v.name: v.type.tensor_type.elem_type for v in
             list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)}  # fmt: skip
    types.update({t.name: t.data_type for t in model.graph.initializer})
    assert types["image"] == TensorProto.FLOAT and types["logits"] == TensorProto.FLOAT
    core = set(aft_core_nodes(model))
    fp32_nodes = [n for n in model.graph.node if n.name in core or n.op_type == "LayerNormalization"]
    assert fp32_nodes
    for node in fp32_nodes:
        for name in list(node.input) + list(node.output):
            if name in types and types[name] in (TensorProto.FLOAT, TensorProto.FLOAT16):
                assert types[name] == TensorProto.FLOAT, (node.name, name)
    assert any(t == TensorProto.FLOAT16 for t in types.values())
    # between two fp32 nodes the value stays fp32: no fp32 -> fp16 -> fp32 cast pair (ONNX Runtime's
    # converter writes one between every two nodes it keeps; the decomposed core had 56)
    casts = {n.output[0]: n for n in model.graph.node if n.op_type == "Cast"}
    assert not [c for c in casts.values() if c.input[0] in casts]
    assert result.nonfinite == [] and result.agreement["top1_agreement"] >= 95
    assert _run(out, 3).dtype == np.float32


def test_fp16_overflow_is_reported(onnx_models, tmp_path, cifar10):
    """A head whose logits overflow fp16 (> 65504) must be reported, not hidden."""
    model = onnx.load(onnx_models["custom"])
    gemm = [n for n in model.graph.node if n.op_type == "Gemm"][-1]  # the head
    for t in model.graph.initializer:
        if t.name == gemm.input[1]:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * 1e6, t.name))
    src = tmp_path / "hot.onnx"
    onnx.save(model, src)
    result = quantize_model(src, tmp_path / "hot16.onnx", str(cifar10 / "train.tar"),
                            _opts(tmp_path, precision="fp16", images=16), **QUIET)  # fmt: skip
    assert result.nonfinite and all(r["count"] > 0 for r in result.nonfinite)
    assert any(r["module"] == "head" for r in result.nonfinite)


def test_nonfinite_count_is_isfinite_for_every_half_float_bit_pattern():
    """The fp16 probe counts by the bits: against NumPy's isfinite on all 65,536 fp16 values,
    on fp32 and fp64, a strided view and integers."""
    from aft_export.quantization.fp16 import nonfinite_count

    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    assert nonfinite_count(every) == int((~np.isfinite(every)).sum()) == 2 * 2**10  # +-Inf and the NaNs
    assert nonfinite_count(every.reshape(256, 256)[:, ::3]) == int((~np.isfinite(every.reshape(256, 256)[:, ::3])).sum())
    wide = np.array([1.0, np.inf, -np.inf, np.nan, 3e38], np.float32)
    assert nonfinite_count(wide) == nonfinite_count(wide.astype(np.float64)) == 3
    assert nonfinite_count(np.arange(5)) == 0


def test_sensitivity_ranks_the_real_graph_by_module(onnx_models, tmp_path, cifar10):
    result = quantize_model(onnx_models["custom"], tmp_path / "s.onnx", str(cifar10 / "train.tar"),
                            _opts(tmp_path, sensitivity=True, budget=0.0, images=32), **QUIET)  # fmt: skip
    ranking = result.sensitivity
    assert ranking and [r["gain"] for r in ranking] == sorted((r["gain"] for r in ranking), reverse=True)
    assert all(r["module"] for r in ranking)
    excluded = [r["node"] for r in ranking if r.get("excluded")]
    assert excluded == [r["node"] for r in ranking[: len(excluded)]]  # worst first
    assert set(excluded) <= set(result.recipe["excluded_nodes"])
    # (that the search stops once the budget is met: test_sensitivity_excludes_the_planted_culprit_and_stops_at_the_budget)


def test_sensitivity_excludes_the_planted_culprit_and_stops_at_the_budget(tmp_path):
    """A graph whose int8 form is planted to disagree: conv channel 0 is a constant 1000
    the head ignores (weight 0) and channels 1-3 carry everything, ~1 in size. The head's
    input is quantised per tensor, so its scale (~1000/127) rounds channels 1-3 to 0 and
    the int8 head predicts from its bias alone. Putting the head back in float is the
    one fix needed (the convolution's int8 weights and input are fine), so sensitivity
    must rank the head first, exclude it, reach budget 0 and stop there."""
    rng = np.random.default_rng(0)
    conv_w = rng.standard_normal((4, 3, 8, 8)) * 0.1
    conv_w[0] = 0
    head_w = rng.standard_normal((10, 4, 4, 4))
    head_w[:, 0] = 0
    src = _conv_head(tmp_path / "m.onnx", conv_w, [1000.0, 0, 0, 0], head_w.reshape(10, 64), np.zeros(10))
    x = rng.standard_normal((64, 3, 32, 32)).astype(np.float32)  # preprocessed tensors, used as given
    np.save(tmp_path / "x.npy", x)
    ref = _logits(src, x).argmax(1)
    calib = str(tmp_path / "x.npy")
    plain = quantize_model(src, tmp_path / "q.onnx", calib, _opts(tmp_path, images=64), **QUIET)
    assert np.mean(_logits(tmp_path / "q.onnx", x).argmax(1) != ref) > 0.5  # the plant works
    assert "head" in _quantized(tmp_path / "q.onnx") and plain.sensitivity == []

    out = tmp_path / "s.onnx"
    result = quantize_model(src, out, calib, _opts(tmp_path, images=64, sensitivity=True, budget=0.0), **QUIET)
    assert [r["node"] for r in result.sensitivity] == ["head", "conv"]
    assert [r["node"] for r in result.sensitivity if r.get("excluded")] == ["head"]  # and not the conv
    assert result.recipe["excluded_nodes"] == ["head"]
    assert _quantized(out) == {"conv"}
    assert np.mean(_logits(out, x).argmax(1) != ref) == 0 == result.agreement["disagreement"]


def _quantized(path):
    """Names of the nodes that read a dequantised value: the ones computing in int8."""
    return _consumers_of_dq(onnx.load(path))


def _calibrated_range(tmp_path, x, method):
    """The int8 range calibration gives the image input of a small Conv+Gemm graph when the
    calibration set is ``x`` itself (float32 NCHW in .npy is taken as preprocessed): the
    symmetric int8 scale on ``image`` is range / 127."""
    rng = np.random.default_rng(1)
    src = _conv_head(tmp_path / "r.onnx", rng.standard_normal((4, 3, 2, 2)), np.zeros(4),
                     rng.standard_normal((10, 64)), np.zeros(10), size=8)  # fmt: skip
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / f"{method}.onnx"
    opts = _opts(tmp_path, images=len(x), method=method, cache_dir="", rest_precision="fp32")
    quantize_model(src, out, str(tmp_path / "x.npy"), opts, **QUIET)
    model = onnx.load(out)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    (scale,) = [inits[n.input[1]] for n in model.graph.node
                if n.op_type == "QuantizeLinear" and n.input[0] == "image"]  # fmt: skip
    return float(scale) * 127


def test_entropy_calibration_clips_rare_outliers_that_minmax_and_percentile_keep(tmp_path):
    """Activations from a known distribution: N(0, 1) with 4 values of 49,152 (0.008%)
    planted at +-40. Min-max must give 40, the planted maximum. Percentile 99.999 must give
    the 99.999th percentile of |x| counted here (an outlier: they are more than 0.001%), to a
    bin of its 2048-bin histogram. Entropy (the 2048/128-bin setting) must clip the rare
    outliers, far below both, and keep the body: TensorRT's algorithm as published puts a
    Gaussian's threshold near 4 sigma (3.9-4.1 on samples like this one); under 3 sigma it
    would clip 0.27% of the values."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 3, 8, 8)).astype(np.float32)
    x.flat[rng.choice(x.size, 4, replace=False)] = [40, -40, 40, -40]
    minmax, percentile, entropy = (
        _calibrated_range(tmp_path, x, method) for method in ("minmax", "percentile", "entropy"))
    assert minmax == pytest.approx(40, rel=1e-6)
    ordered = np.sort(np.abs(x).ravel())
    at = ordered[int(np.ceil(0.99999 * ordered.size)) - 1]  # the 99.999th percentile of |x|
    bin_width = 40 / 2048
    assert at - 2 * bin_width <= percentile <= at
    assert percentile > 30  # the outliers are more than 0.001% of the values: kept
    assert 3.0 <= entropy < minmax / 4


@pytest.mark.parametrize("method, passes", [("minmax", 1), ("percentile", 1), ("entropy", 2)])
def test_each_method_is_a_calibrator_fed_batch_by_batch_by_a_calibration_reader(tmp_path, monkeypatch, method,
                                                                                passes):  # fmt: skip
    """One Calibrator per method of options.METHODS, fed by aft_export.data.calibration.CalibrationReader
    (ONNX Runtime's CalibrationDataReader protocol): each pass reads every image once, the
    first alone (its values' size sets the chunk), then at most batch_size at a time."""
    from aft_export.data.calibration import CalibrationReader
    from aft_export.options import METHODS
    from aft_export.quantization.calibrators import CALIBRATORS, Calibrator

    assert sorted(CALIBRATORS) == sorted(METHODS)
    assert all(issubclass(c, Calibrator) and c.method == m for m, c in CALIBRATORS.items())
    batches = []
    real = CalibrationReader.get_next

    def counted(self):
        item = real(self)
        batches.append(None if item is None else len(item["image"]))
        return item

    monkeypatch.setattr(CalibrationReader, "get_next", counted)
    rng = np.random.default_rng(1)
    src = _conv_head(tmp_path / "r.onnx", rng.standard_normal((4, 3, 2, 2)), np.zeros(4),
                     rng.standard_normal((10, 64)), np.zeros(10), size=8)  # fmt: skip
    np.save(tmp_path / "x.npy", rng.standard_normal((20, 3, 8, 8)).astype(np.float32))
    opts = _opts(tmp_path, images=20, method=method, batch_size=8, cache_dir="", rest_precision="fp32")
    quantize_model(src, tmp_path / "q.onnx", str(tmp_path / "x.npy"), opts, **QUIET)
    assert batches == [1, 8, 8, 3, None] * passes


def test_entropy_calibration_finds_the_edge_of_a_uniform_body(tmp_path):
    """U(-1, 1) with one value planted at 10. A threshold inside the empty gap folds the
    outlier into a bin the quantised distribution Q leaves empty (infinite KL); one inside
    the body folds body mass into the top bin; so the KL-optimal threshold is the body's
    edge, 1, to a bin. TensorRT's algorithm as published (2048 bins of |x|, 128 levels,
    GTC 2017 s7310) gives 1.001 on this data."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (256, 3, 8, 8)).astype(np.float32)
    x.flat[rng.integers(x.size)] = 10
    entropy = _calibrated_range(tmp_path, x, "entropy")
    assert 1.0 <= entropy <= 1.0 + 2 * 20 / 2048  # two bins of a 2048-bin histogram over [-10, 10]


def test_bad_input_writes_nothing(onnx_models, tmp_path, cifar10):
    out = tmp_path / "o.onnx"
    calib = str(cifar10 / "train.tar")
    with pytest.raises(AFTExportError, match="int8 needs calibration images"):
        quantize_model(onnx_models["custom"], out, None, _opts(tmp_path), **QUIET)
    few = tmp_path / "few"
    few.mkdir()
    from PIL import Image

    for i in range(3):
        Image.new("RGB", (32, 32), (i, 2 * i, 3 * i)).save(few / f"{i}.png")
    with pytest.raises(AFTExportError, match="has 3 images but 64 were asked for"):
        quantize_model(onnx_models["custom"], out, str(few), _opts(tmp_path), **QUIET)
    ok = quantize_model(onnx_models["custom"], out, str(few), _opts(tmp_path, allow_fewer=True), **QUIET)
    assert ok.recipe["calibration"]["count"] == 3 and ok.recipe["calibration"]["requested"] == 64
    out.unlink()
    with pytest.raises(AFTExportError, match=r"already quantised to int8 \(QDQ form: QuantizeLinear"):
        quantize_model(_int8_file(onnx_models, tmp_path, calib), out, calib, _opts(tmp_path), **QUIET)
    for precision in ("int8", "fp16"):  # fp16 keeps `exclude` in fp32: a misspelt name is refused there too
        with pytest.raises(AFTExportError, match="`exclude` names nodes the graph does not have"):
            opts = _opts(tmp_path, precision=precision, exclude=("nope",))
            quantize_model(onnx_models["custom"], out, calib, opts, **QUIET)
    with pytest.raises(AFTExportError, match="does not exist"):
        quantize_model(tmp_path / "missing.onnx", out, calib, _opts(tmp_path), **QUIET)
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(AFTExportError, match="not a readable ONNX file"):
        quantize_model(tmp_path / "junk.onnx", out, calib, _opts(tmp_path), **QUIET)
    with pytest.raises(AFTExportError, match="output directory .* does not exist"):
        quantize_model(onnx_models["custom"], tmp_path / "no" / "o.onnx", calib, _opts(tmp_path), **QUIET)
    with pytest.raises(AFTExportError, match="`precision` takes one of int8, fp16, got 'int4'"):
        QuantizeOptions(precision="int4")
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))


def _int8_file(onnx_models, tmp_path, calib):
    path = tmp_path / "already.onnx"
    quantize_model(onnx_models["custom"], path, calib, _opts(tmp_path, images=16), **QUIET)
    return path


def test_model_without_metadata_needs_explicit_preprocessing(onnx_models, tmp_path, cifar10):
    model = onnx.load(onnx_models["custom"])
    del model.metadata_props[:]
    bare = tmp_path / "bare.onnx"
    onnx.save(model, bare)
    calib = str(cifar10 / "train.tar")
    with pytest.raises(AFTExportError, match=r"give `input_size`, `mean` and `std`, or write bare\.preprocess\.json "
                                             r"beside it"):  # what QuantizeOptions takes, nothing else
        quantize_model(bare, tmp_path / "o.onnx", calib, _opts(tmp_path), **QUIET)
    opts = _opts(tmp_path, input_size=32, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), images=16)
    result = quantize_model(bare, tmp_path / "o.onnx", calib, opts, **QUIET)
    assert result.recipe["calibration"]["preprocess"]["mean"] == [0.5, 0.5, 0.5]


def test_cli_quantize(onnx_models, tmp_path, cifar10):
    runner = CliRunner()
    out = tmp_path / "cli8.onnx"
    args = ["quantize", str(onnx_models["custom"]), "-o", str(out), "--precision", "int8",
            "--calib", str(cifar10 / "train.tar"), "--images", "32", "--cache-dir", str(tmp_path / "c")]  # fmt: skip
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "int8:" in res.output and "top-1 agreement" in res.output and out.exists()
    res = runner.invoke(main, args + ["--json"])
    assert res.exit_code == 0
    report = json.loads(res.stdout)
    assert report["precision"] == "int8" and report["recipe"]["calibration_cache"] == "hit"
    bad = runner.invoke(main, ["quantize", str(out), "-o", str(tmp_path / "x.onnx"), "--precision", "fp16"])
    assert bad.exit_code == 2 and bad.output.startswith("error: ") and "already quantised to int8" in bad.output
    assert "Traceback" not in bad.output
    bad = runner.invoke(main, ["quantize", str(onnx_models["custom"]), "-o", str(tmp_path / "y.onnx"),
                               "--precision", "int8", "--calib", str(cifar10 / "train.tar"), "--mean", "1,2"])  # fmt: skip
    assert bad.exit_code == 2 and "--mean takes three finite numbers (a list, or r,g,b text), got '1,2'" in bad.output


def test_node_modules_survive_quantisation(onnx_models, tmp_path, cifar10):
    """Q/DQ nodes (and the fp16 rest's casts) are new; every original node keeps the PyTorch module it came
    from."""
    out = tmp_path / "m.onnx"
    quantize_model(onnx_models["custom"], out, str(cifar10 / "train.tar"), _opts(tmp_path, images=16), **QUIET)
    model = onnx.load(out)
    originals = [n for n in model.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear", "Cast")]
    assert all(node_module(n) is not None for n in originals)


def test_calibration_recipes(onnx_models, tmp_path, cifar10, monkeypatch):
    """A recipe names source, count and seed; explicit options win; the bundled one works."""
    from PIL import Image

    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for i in range(10):
        Image.new("RGB", (32, 32), (20 * i, 3 * i, 7)).save(imgs / f"{i}.png")
    recipe = tmp_path / "mine.json"
    recipe.write_text(json.dumps({"source": "imgs", "count": 6, "seed": 4}))
    r = quantize_model(onnx_models["custom"], tmp_path / "r.onnx", str(recipe), QuantizeOptions(cache_dir=""), **QUIET)
    assert r.recipe["calibration"]["count"] == 6 and r.recipe["calibration"]["seed"] == 4
    assert r.recipe["calibration"]["source"] == "imgs"  # relative to the artifact r.onnx, as the file records it
    r = quantize_model(onnx_models["custom"], tmp_path / "r.onnx", str(recipe),
                       QuantizeOptions(cache_dir="", images=3, seed=0), **QUIET)  # fmt: skip
    assert r.recipe["calibration"]["count"] == 3 and r.recipe["calibration"]["seed"] == 0
    recipe.write_text("{}")
    with pytest.raises(AFTExportError, match="malformed.*needs a 'source'"):
        quantize_model(onnx_models["custom"], tmp_path / "r.onnx", str(recipe), QuantizeOptions(), **QUIET)
    monkeypatch.setenv("AFT_CIFAR10_DIR", str(cifar10))
    bundled = REPO / "calibration" / "cifar10.json"
    r = quantize_model(onnx_models["custom"], tmp_path / "r.onnx", str(bundled),
                       QuantizeOptions(cache_dir="", images=16), **QUIET)  # fmt: skip
    assert r.recipe["calibration"]["source"] == "cifar10:train"


def _conv_head(path, conv_weight, conv_bias, head_weight, head_bias, size=32):
    """image (N, 3, size, size) -> Conv "conv" (kernel = stride = size/4, so a 4x4 grid) ->
    Flatten -> Gemm "head": a graph small enough to plant a property in its weights."""
    from onnx import helper

    k = size // 4
    inits = [numpy_helper.from_array(np.asarray(a, np.float32), n) for n, a in (
        ("conv.weight", conv_weight), ("conv.bias", conv_bias),
        ("head.weight", head_weight), ("head.bias", head_bias))]  # fmt: skip
    nodes = [helper.make_node("Conv", ["image", "conv.weight", "conv.bias"], ["c"], name="conv",
                              kernel_shape=[k, k], strides=[k, k]),
             helper.make_node("Flatten", ["c"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "head.weight", "head.bias"], ["logits"], name="head",
                              transB=1)]  # fmt: skip
    n_out = len(head_bias)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                         ["N", 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", n_out])],
                              inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    for key, value in (("classes", json.dumps([str(i) for i in range(n_out)])),
                       ("input_size", f"[3, {size}, {size}]"), ("mean", "[0.5, 0.5, 0.5]"),
                       ("std", "[0.25, 0.25, 0.25]")):  # fmt: skip
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, path)
    return path


def _conv_gemm_with_biases(path):
    """image -> Conv(+bias) -> Flatten -> Gemm(+bias): the layers whose biases ONNX Runtime's
    quantiser turns into INT32 DequantizeLinear inputs unless told not to."""
    rng = np.random.default_rng(0)
    return _conv_head(path, rng.standard_normal((4, 3, 8, 8)) * 0.1, rng.standard_normal(4),
                      rng.standard_normal((10, 64)) * 0.1, rng.standard_normal(10))  # fmt: skip


def test_int8_biases_stay_float_for_tensorrt(tmp_path, cifar10):
    """TensorRT's DequantizeLinear takes int8 (fp8/int4) inputs only: an INT32 bias
    DequantizeLinear, which ONNX Runtime's QDQ quantiser writes by default, is refused
    (onnx-tensorrt issue 850; ORT's guidance for TensorRT is to leave biases unquantised)."""
    src = _conv_gemm_with_biases(tmp_path / "cg.onnx")
    out = tmp_path / "cg.int8.onnx"
    quantize_model(src, out, str(cifar10 / "train.tar"), _opts(tmp_path, images=16), **QUIET)
    model = onnx.shape_inference.infer_shapes(onnx.load(out))
    types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.value_info) + list(model.graph.input)}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    dq_inputs = {n.input[0]: types.get(n.input[0]) for n in model.graph.node if n.op_type == "DequantizeLinear"}
    assert dq_inputs and set(dq_inputs.values()) == {TensorProto.INT8}, dq_inputs
    assert {"Conv", "Gemm"} <= {n.op_type for n in model.graph.node if n.name in _consumers_of_dq(model)}
    biases = {n.input[2] for n in model.graph.node if n.op_type in ("Conv", "Gemm")}
    assert biases == {"conv.bias", "head.bias"}, "biases are read as float initializers"


def _aft_block(path, size=8):
    """image (N, 3, 8, 8) -> Conv "embed" (4 tokens of width 8) -> LayerNormalization "norm"
    -> MatMul "qkv" (the fused q/k/v projection, owned by the AFT module itself, as the
    exporter writes it) + bias -> Split -> the AFT core (Exp, Mul, MatMul "core_matmul"
    with a constant positive left operand, Sigmoid gate), MatMul "proj"; the norm output
    is read by a second layer too, MatMul "side" -> ReduceMean -> Gemm "head"."""
    from onnx import helper

    from aft_export.artifacts.graph import set_props

    rng = np.random.default_rng(0)
    d, t = 8, 4
    arrays = {"embed.w": rng.standard_normal((d, 3, 4, 4)) * 0.2, "embed.b": np.zeros(d),
              "norm.g": np.ones(d), "norm.b": np.zeros(d), "qkv.w": rng.standard_normal((d, 3 * d)) * 0.3,
              "qkv.b": rng.standard_normal(3 * d) * 0.1, "split": np.array([d, d, d], np.int64),
              "pos": np.exp(rng.standard_normal((t, t)) * 0.1 - 0.5), "proj.w": rng.standard_normal((d, d)) * 0.3,
              "side.w": rng.standard_normal((d, d)) * 0.3, "shape": np.array([0, d, t], np.int64),
              "axes": np.array([1], np.int64), "head.w": rng.standard_normal((10, d)), "head.b": np.zeros(10)}  # fmt: skip
    inits = [numpy_helper.from_array(a.astype(np.int64 if a.dtype == np.int64 else np.float32), n)
             for n, a in arrays.items()]  # fmt: skip
    mixer, core = ("mixer", "AFTFull"), ("mixer", "AFTFull")
    spec = [  # (op, inputs, outputs, name, module, attributes)
        ("Conv", ["image", "embed.w", "embed.b"], ["e"], "embed", ("embed", "Conv2d"), dict(kernel_shape=[4, 4], strides=[4, 4])),
        ("Reshape", ["e", "shape"], ["r"], "reshape", None, {}),
        ("Transpose", ["r"], ["x"], "tokens", None, dict(perm=[0, 2, 1])),
        ("LayerNormalization", ["x", "norm.g", "norm.b"], ["n"], "norm", ("norm", "LayerNorm"), dict(axis=-1)),
        ("MatMul", ["n", "qkv.w"], ["qkv0"], "qkv", mixer, {}),
        ("Add", ["qkv0", "qkv.b"], ["qkv1"], "qkv_bias", mixer, {}),
        ("Split", ["qkv1", "split"], ["q", "k", "v"], "split", mixer, dict(axis=-1)),
        ("Exp", ["k"], ["ek"], "core_exp", core, {}),
        ("Mul", ["ek", "v"], ["ekv"], "core_mul", core, {}),
        ("MatMul", ["pos", "ekv"], ["num"], "core_matmul", core, {}),
        ("MatMul", ["pos", "ek"], ["den"], "core_den", core, {}),
        ("Div", ["num", "den"], ["y"], "core_div", core, {}),
        ("Sigmoid", ["q"], ["g"], "core_gate", core, {}),
        ("Mul", ["g", "y"], ["gy"], "core_out", core, {}),
        ("MatMul", ["gy", "proj.w"], ["p"], "proj", ("mixer.proj", "Linear"), {}),
        ("MatMul", ["n", "side.w"], ["s"], "side", ("side", "Linear"), {}),
        ("Add", ["p", "s"], ["ps"], "residual", None, {}),
        ("ReduceMean", ["ps", "axes"], ["m"], "pool", None, dict(keepdims=0)),
        ("Gemm", ["m", "head.w", "head.b"], ["logits"], "head", ("head", "Linear"), dict(transB=1)),
    ]  # fmt: skip
    nodes = []
    for op, ins, outs, name, module, attrs in spec:
        node = helper.make_node(op, ins, outs, name=name, **attrs)
        if module:
            set_props(node, {"aft.module": module[0], "aft.module_type": module[1]})
        nodes.append(node)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    for key, value in (("classes", json.dumps([str(i) for i in range(10)])), ("input_size", f"[3, {size}, {size}]"),
                       ("mean", "[0.5, 0.5, 0.5]"), ("std", "[0.25, 0.25, 0.25]")):  # fmt: skip
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, path)
    return path


def test_placement_quantises_projections_keeps_the_core_float_and_lets_ort_fuse_each(tmp_path):
    """The fused q/k/v MatMul belongs to the AFT module but is a projection: int8. The
    core's MatMuls (a constant positive operand times exp(K)-weighted values) stay float.
    ``qkv`` and ``side`` read the same LayerNorm output: each gets its own Q -> DQ, so
    ONNX Runtime fuses both into MatMulIntegerToFloat (a shared Q left them float)."""
    from aft_export.artifacts.graph import aft_core_nodes

    src = _aft_block(tmp_path / "b.onnx")
    core = set(aft_core_nodes(onnx.load(src)))
    assert core == {"core_exp", "core_mul", "core_matmul", "core_den", "core_div", "core_gate", "core_out"}
    x = np.random.default_rng(1).standard_normal((64, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "q.onnx"
    # the fp32 rest: ONNX Runtime's integer kernels on the CPU are what is tested (an fp16 rest is for GPUs)
    result = quantize_model(src, out, str(tmp_path / "x.npy"), _opts(tmp_path, images=64, rest_precision="fp32"),
                            **QUIET)  # fmt: skip
    assert _quantized(out) == {"embed", "qkv", "proj", "side", "head"}
    assert set(result.recipe["excluded_nodes"]) == core
    model = onnx.load(out)
    consumers = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    for q in (n for n in model.graph.node if n.op_type == "QuantizeLinear"):
        assert [c.op_type for c in consumers[q.output[0]]] == ["DequantizeLinear"], q.name
        assert len(consumers[consumers[q.output[0]][0].output[0]]) == 1, q.name
    # what ONNX Runtime makes of it: every int8 MatMul fused, the core's two still float
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(tmp_path / "opt.onnx").graph.node]
    assert ops.count("MatMulIntegerToFloat") == 3 and ops.count("MatMul") == 2
    # the graph's own numbers: Q/DQ as written, unfused. The fused kernels' numbers depend on
    # the CPU: without VNNI (AVX2 only) ONNX Runtime's u8s8 MatMul saturates its int16 pair
    # sums (vpmaddubsw), 0.55 here on an AMD EPYC where the graph itself is off by 0.09
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = _logits(src, x)
    got = ort.InferenceSession(str(out), plain, providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    assert np.abs(ref - got).max() < 0.05 * np.abs(ref).max()


def test_quantize_aft_core_option_puts_the_core_matmuls_in_int8(tmp_path):
    src = _aft_block(tmp_path / "b.onnx")
    x = np.random.default_rng(1).standard_normal((64, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "q.onnx"
    quantize_model(src, out, str(tmp_path / "x.npy"), _opts(tmp_path, images=64, quantize_aft_core=True), **QUIET)
    assert {"core_matmul", "core_den", "qkv"} <= _quantized(out)


def test_trained_biases_keep_every_int8_matmul_on_an_integer_kernel(onnx_models, tmp_path):
    """With non-zero biases (as after training) onnxsim would turn each token Linear's
    MatMul + Add into Reshape -> Gemm -> Reshape, and ONNX Runtime runs an int8 Gemm with
    a float bias in float: the trained zoo's int8 was slower than its fp32. The export
    keeps MatMul + Add; every int8 MatMul then runs as MatMulIntegerToFloat."""
    src = onnx.load(onnx_models["custom"])
    assert [n.op_type for n in src.graph.node].count("Gemm") == 1  # the head, on (B, d)
    x = np.random.default_rng(2).standard_normal((64, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "q.onnx"
    quantize_model(onnx_models["custom"], out, str(tmp_path / "x.npy"), _opts(tmp_path, rest_precision="fp32"),
                   **QUIET)  # fmt: skip
    q = onnx.load(out)
    made = {o: n.op_type for n in q.graph.node for o in n.output}
    int8_matmuls = [n for n in q.graph.node if n.op_type == "MatMul" and made.get(n.input[0]) == "DequantizeLinear"]
    assert len(int8_matmuls) >= 4
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(tmp_path / "opt.onnx").graph.node]
    assert ops.count("MatMulIntegerToFloat") == len(int8_matmuls)



@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_a_graph_over_two_gib_is_refused_before_any_work(tmp_path, precision):
    """It used to end, after a minute and 6.5 GB, in protobuf's "exceeds the size limit"
    traceback; now one line at once, the weights never read (their file is sparse here)."""
    from tests.test_onnxio import over_limit_onnx

    path = over_limit_onnx(tmp_path)
    calib = ["--calib", "cifar10:train"] if precision == "int8" else []
    res = CliRunner().invoke(main, ["quantize", str(path), "--precision", precision, *calib, "-o",
                                    str(tmp_path / "q.onnx")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "more than the 2 GiB protobuf lets one ONNX graph hold, and quantize works on the whole graph in " \
           "memory; build, check, parity and eval take the file as it is" in res.output  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.data", "big.onnx"]


# ---------------------------------------------------------------- int8 with the rest in fp16 (issue 28)


def _value_types(model):
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.input) + list(g.output)}
    types.update({t.name: t.data_type for t in g.initializer})
    return types


def _output_type(path, node_name):
    model = onnx.load(path)
    node = next(n for n in model.graph.node if n.name == node_name)
    return _value_types(model)[node.output[0]]


@pytest.mark.parametrize("form", ["custom", "decomposed"])
def test_int8_rest_is_fp16_at_opset_19_with_the_fixed_rule_in_fp32(int8_of, form, cifar10):
    """The tensorrt target's int8: what is not int8 is fp16 (opset 19: fp16 into QuantizeLinear, fp16 out
    of DequantizeLinear through fp16 scales), except the fixed rule's AFT core and LayerNorm, kept fp32
    with no fp16 value between two of their nodes; input and output fp32; the NaN/Inf check ran."""
    from aft_export.quantization.fp16 import FP32_RULE
    from aft_export.runners import ReferenceRunner

    out, result = int8_of(form)
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    recipe = json.loads({p.key: p.value for p in model.metadata_props}["quantization"])
    assert recipe["rest_precision"] == "fp16" and recipe["opset"] == 19 and recipe["scales"] == "fp16"
    # every kind of the rule the graph has (a pixel file's first nodes only where the file takes pixels)
    assert recipe["fp32_rule"] == [k.name for k in FP32_RULE if not k.only_where_present]
    assert recipe["scale_max_relative_error"] < 1e-3
    assert [o.version for o in model.opset_import if o.domain == ""] == [19] and model.ir_version >= 9
    assert all(o.version == 19 for f in model.functions for o in f.opset_import if o.domain == "")
    types = _value_types(model)
    assert types["image"] == types["logits"] == TensorProto.FLOAT
    qdq = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert qdq and {types[n.input[1]] for n in qdq} == {TensorProto.FLOAT16}  # every scale
    assert {types[n.input[2]] for n in qdq} == {TensorProto.INT8}
    reads_dq = _consumers_of_dq(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    for node in model.graph.node:
        if node.name in reads_dq:  # an int8 layer: its dequantised inputs are fp16, straight from the DQ
            assert {types[i] for i in node.input[:2] if producer.get(i) is not None
                    and producer[i].op_type == "DequantizeLinear"} == {TensorProto.FLOAT16}  # fmt: skip
    rule = set(result.recipe["fp32_nodes"]) | {n.name for n in model.graph.node if n.op_type == "LayerNormalization"}
    assert set(aft_core_nodes(model)) <= rule
    for node in (n for n in model.graph.node if n.name in rule):
        for name in list(node.input) + list(node.output):
            if types.get(name) in (TensorProto.FLOAT, TensorProto.FLOAT16):
                assert types[name] == TensorProto.FLOAT, (node.name, name)
    casts = {n.output[0]: n for n in model.graph.node if n.op_type == "Cast"}
    assert not [c for c in casts.values() if c.input[0] in casts]  # no fp32 -> fp16 -> fp32 round trip
    assert sum(t == TensorProto.FLOAT16 for t in types.values()) > len(qdq)
    assert result.nonfinite == [] and result.agreement["top1_agreement"] >= 90
    x = _calibration_tensors(model, cifar10 / "train.tar", 32)[:4]
    # the ONNX reference computes the fp16 rest as fp16; ONNX Runtime runs the same graph
    ref, got = ReferenceRunner(str(out)).logits(x), _logits(out, x)
    assert np.isfinite(ref).all() and np.abs(ref - got).max() < 0.25 * np.abs(got).max()


def test_rest_precision_fp32_and_the_targets_defaults(onnx_models, tmp_path, cifar10):
    """``rest_precision=fp32`` writes the opset-18 int8 graph with fp32 scales and no fp16; a tensorrt8
    file's rest is fp32 by default and an fp16 one is refused (TensorRT 8 takes it from builder flags)."""
    from aft_export.options import EXPORT_TARGETS

    assert {n: t.int8_rest for n, t in EXPORT_TARGETS.items()} == {"tensorrt": "fp16", "tensorrt8": "fp32",
                                                                  "portable": "fp32"}  # fmt: skip
    calib = str(cifar10 / "train.tar")
    out = tmp_path / "int8.onnx"
    result = quantize_model(onnx_models["custom"], out, calib, _opts(tmp_path, images=16, rest_precision="fp32"),
                            **QUIET)  # fmt: skip
    model = onnx.load(out)
    assert result.recipe["rest_precision"] == "fp32" and "opset" not in result.recipe and result.nonfinite == []
    assert [o.version for o in model.opset_import if o.domain == ""] == [18]
    assert TensorProto.FLOAT16 not in set(_value_types(model).values())
    trt8 = onnx.load(onnx_models["custom"])
    next(p for p in trt8.metadata_props if p.key == "export_target").value = "tensorrt8"
    onnx.save(trt8, tmp_path / "trt8.onnx")
    with pytest.raises(AFTExportError, match="`rest_precision=fp16`.*TensorRT 8"):
        quantize_model(tmp_path / "trt8.onnx", tmp_path / "o.onnx", calib, _opts(tmp_path, rest_precision="fp16"),
                       **QUIET)  # fmt: skip
    with pytest.raises(AFTExportError, match="`rest_precision`"):
        QuantizeOptions(rest_precision="bf16")
    assert not (tmp_path / "o.onnx").exists()


OPSET_18 = onnx.helper.make_opsetid("", 18)


def test_fp16_round_trips_removed_only_where_the_value_is_fp32():
    """The converter's fp32 -> fp16 -> fp32 casts between two nodes kept fp32 go (the second reads the
    first's fp32 value itself); a Cast to float of an int64 value (Shape) or of an fp16 one, converted to
    fp16 and cast back for a kept node, is no round trip: its reader keeps the cast (the graph stays well
    typed)."""
    from onnx import helper

    from aft_export.quantization.fp16 import to_fp16

    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2]) for n in ("x", "y"))
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="before"), helper.make_node("Mul", ["a", "a"], ["m1"],
             name="keep1"), helper.make_node("Mul", ["m1", "m1"], ["m2"], name="keep2"),
             helper.make_node("Relu", ["m2"], ["y"], name="after")]  # fmt: skip
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[OPSET_18])
    converted, _ = to_fp16(model, [], ["keep1", "keep2"], kinds=())
    by_name = {n.name: n for n in converted.graph.node}
    assert by_name["keep2"].input[0] == by_name["keep1"].output[0]  # no Cast pair between the two
    casts = {n.output[0]: n for n in converted.graph.node if n.op_type == "Cast"}
    assert not [c for c in casts.values() if c.input[0] in casts]
    for source in ("Shape", "Relu"):
        nodes = [helper.make_node(source, ["x"], ["s"], name="source"),
                 helper.make_node("Cast", ["s"], ["f"], to=TensorProto.FLOAT, name="cast"),
                 helper.make_node("Mul", ["x", "f"], ["m"], name="keep"),
                 helper.make_node("Relu", ["m"], ["y"], name="after")]  # fmt: skip
        model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[OPSET_18])
        converted, _ = to_fp16(model, [], ["keep"], kinds=())
        onnx.checker.check_model(converted, full_check=True)
        session = ort.InferenceSession(converted.SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run(None, {"x": np.full((2, 2), 2, np.float32)})[0]
        assert np.allclose(got, 4.0), source


def test_opset_19_upgrade_takes_ops_whose_meaning_is_unchanged():
    """AveragePool-19 only adds dilations (default 1): an opset-18 graph with one takes an fp16 rest;
    an op whose meaning changed (ReduceMean's axes became an input at 18) is refused from opset 17."""
    from onnx import helper

    from aft_export.quantization.fp16 import upgrade_to_opset_19

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 2, 2])
    pool = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="pool")
    model = helper.make_model(helper.make_graph([pool], "g", [x], [y]), opset_imports=[OPSET_18])
    upgrade_to_opset_19(model)
    assert [o.version for o in model.opset_import] == [19]
    onnx.checker.check_model(model, full_check=True)
    mean = helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], name="mean")
    m = helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 1, 4, 4])
    opset_17 = helper.make_opsetid("", 17)
    old = helper.make_model(helper.make_graph([mean], "g", [x], [m]), opset_imports=[opset_17])
    with pytest.raises(AFTExportError, match="ReduceMean change meaning between opset 17 and 19"):
        upgrade_to_opset_19(old)


def test_nodes_chosen_by_regex_and_op_type_kept_fp32_and_recorded(tmp_path):
    """On a hand-made block: ``quantize_op_types`` names what is quantised (the Conv stays float), ``exclude_regex``
    and ``exclude_op_types`` keep nodes out of int8 (in the fp16 rest), ``keep_fp32`` keeps one out of
    int8 and in fp32; the recipe records each pattern with the nodes it matched."""
    src = _aft_block(tmp_path / "b.onnx")
    x = np.random.default_rng(1).standard_normal((32, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "q.onnx"
    opts = _opts(tmp_path, images=32, quantize_op_types=("MatMul", "Gemm"), exclude_regex=("si",),
                 exclude_op_types=("Gemm",), keep_fp32=("pro",))  # fmt: skip
    result = quantize_model(src, out, str(tmp_path / "x.npy"), opts, **QUIET)
    assert _quantized(out) == {"qkv"}  # embed: a Conv; side: the regex; head: a Gemm; proj: kept fp32
    r = result.recipe
    assert r["op_types"] == ["MatMul", "Gemm"] and r["exclude_regex"] == {"si": 1}
    assert r["exclude_op_types"] == {"Gemm": 1} and r["keep_fp32"] == {"pro": 1}
    assert {"side", "head", "proj"} <= set(r["excluded_nodes"]) and "proj" in r["fp32_nodes"]
    assert _output_type(out, "proj") == TensorProto.FLOAT and _output_type(out, "side") == TensorProto.FLOAT16
    # fp16 graphs take keep_fp32 too; the int8-only choices are refused there
    fp16 = quantize_model(src, tmp_path / "h.onnx", None, _opts(tmp_path, precision="fp16", keep_fp32=("side",)),
                          **QUIET)  # fmt: skip
    assert "side" in fp16.recipe["fp32_nodes"] and fp16.recipe["keep_fp32"] == {"side": 1}
    assert _output_type(tmp_path / "h.onnx", "side") == TensorProto.FLOAT
    with pytest.raises(AFTExportError, match=r"`exclude_regex` is an int8 option \(it chooses what int8 covers\)"):
        QuantizeOptions(precision="fp16", exclude_regex=("side",))


@pytest.mark.parametrize("option, value, says", [
    ("exclude_regex", ("blocks",), "`exclude_regex` pattern 'blocks' matches no node"),
    ("keep_fp32", ("nothing",), "`keep_fp32` pattern 'nothing' matches no node"),
    ("exclude_op_types", ("Softmax",), "`exclude_op_types` names Softmax, but it is not quantised"),
    ("quantize_op_types", ("Softmax",), "`quantize_op_types` names Softmax, which no node of the graph is"),
])  # fmt: skip
def test_a_pattern_or_op_type_that_matches_nothing_is_a_user_error(tmp_path, option, value, says):
    src = _aft_block(tmp_path / "b.onnx")
    np.save(tmp_path / "x.npy", np.zeros((8, 3, 8, 8), np.float32))
    with pytest.raises(AFTExportError, match=says):
        quantize_model(src, tmp_path / "q.onnx", str(tmp_path / "x.npy"), _opts(tmp_path, images=8, **{option: value}),
                       **QUIET)  # fmt: skip
    assert not (tmp_path / "q.onnx").exists()


def test_cli_pattern_errors_are_one_line_exit_2(tmp_path):
    src = _aft_block(tmp_path / "b.onnx")
    np.save(tmp_path / "x.npy", np.zeros((8, 3, 8, 8), np.float32))
    base = ["quantize", str(src), "-o", str(tmp_path / "q.onnx"), "--precision", "int8", "--calib",
            str(tmp_path / "x.npy"), "--images", "8", "--no-cache"]  # fmt: skip
    for extra, says in ((["--exclude-regex", "nomatch"], "'nomatch' matches no node"),
                        (["--keep-fp32", "("], "is not a regular expression"),
                        (["--exclude-op-type", "Conv", "--quantize-op-type", "MatMul"], "Conv, but it is not quantised")):
        res = CliRunner().invoke(main, base + extra)
        assert res.exit_code == 2 and res.output.startswith("error: ") and says in res.output, res.output
        assert res.output.count("\n") == 1 and "Traceback" not in res.output
    assert not (tmp_path / "q.onnx").exists()


# ---------------------------------------------------------------- the target decides int8's defaults (issue 33)


def _weights_max(model):
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return max(int(np.abs(inits[n.input[0]].astype(np.int32)).max()) for n in model.graph.node
               if n.op_type == "DequantizeLinear" and inits.get(n.input[0], np.zeros(0)).dtype == np.int8)  # fmt: skip


def test_quantize_for_another_target_converts_the_default_export_as_the_exporter_does(onnx_models, tmp_path, cifar10):
    """`target=portable` on the default export writes the CPU's int8: the portable form (functions
    inlined, opset 19, IR 9), its defaults (fp32 rest, 7-bit weights), the metadata naming the target;
    `target=tensorrt8` the TensorRT 8 form, `weight_bits` overriding its 8 bits. Ranges computed on a
    converted graph are cached apart from the file's own. (tests/export/test_portable.py: the same
    bytes as exporting portable and quantising.)"""
    from aft_export.artifacts.onnxio import compute_precisions

    calib, logs = str(cifar10 / "train.tar"), []
    opts = _opts(tmp_path, images=8, target="portable")
    cpu = quantize_model(onnx_models["custom"], tmp_path / "cpu.onnx", calib, opts, log=logs.append)
    model = onnx.load(tmp_path / "cpu.onnx")
    meta = {p.key: p.value for p in model.metadata_props}
    assert (meta["export_target"], meta["opset"], meta["precision"]) == ("portable", "19", "int8")
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 19)] and model.ir_version == 9
    assert not model.functions and {n.domain for n in model.graph.node} == {""}
    assert (cpu.recipe["converted_from"], cpu.recipe["weight_bits"], cpu.recipe["rest_precision"]) == (
        "tensorrt", 7, "fp32")
    assert _weights_max(model) <= 64 and compute_precisions(model)["int8"] == cpu.recipe["quantized_nodes"] >= 8
    assert "fp16" not in compute_precisions(model)
    assert "ranges computed and cached" in logs[-1]
    quantize_model(onnx_models["custom"], tmp_path / "cpu2.onnx", calib, opts, log=logs.append)
    assert "ranges reused from the cache" in logs[-1]
    own = quantize_model(onnx_models["custom"], tmp_path / "own.onnx", calib,
                         _opts(tmp_path, images=8, rest_precision="fp32"), log=logs.append)  # fmt: skip
    assert "ranges computed and cached" in logs[-1] and "converted_from" not in own.recipe
    trt8 = quantize_model(onnx_models["custom"], tmp_path / "trt8.onnx", calib,
                          _opts(tmp_path, images=8, target="tensorrt8", weight_bits=7), **QUIET)  # fmt: skip
    model = onnx.load(tmp_path / "trt8.onnx")
    meta = {p.key: p.value for p in model.metadata_props}
    assert (meta["export_target"], meta["opset"]) == ("tensorrt8", "17") and trt8.recipe["weight_bits"] == 7
    assert not any(n.op_type == "LayerNormalization" for n in model.graph.node) and _weights_max(model) <= 64
    with pytest.raises(AFTExportError, match="`target` takes one of tensorrt, tensorrt8, portable, got 'trt'"):
        QuantizeOptions(target="trt")


def test_conversions_that_are_not_made_say_to_export_for_that_target(onnx_models, tmp_path, cifar10):
    """A portable or tensorrt8 file is not converted to another form (nor back), nor a default export of
    another opset than 18: one line, exit 2, nothing written, saying to export with that target."""
    from aft_export.exporting.forms import conversion_problem

    for source, target in (("portable", "tensorrt"), ("tensorrt8", "portable"), ("portable", "tensorrt8")):
        model = onnx.load(onnx_models["custom"])
        next(p for p in model.metadata_props if p.key == "export_target").value = source
        path = tmp_path / f"{source}.onnx"
        onnx.save(model, path)
        res = CliRunner().invoke(main, ["quantize", str(path), "-o", str(tmp_path / "o.onnx"), "--precision", "int8",
                                        "--target", target, "--calib", str(cifar10 / "train.tar")])  # fmt: skip
        assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
        # what the file is (an fp32 file of another target), not "not quantised", and both ways out
        assert f"is an fp32 file of the {source} target, which cannot be put in the {target} form here: a {source} " \
               f"graph" in res.output
        assert res.output.strip().endswith(f"export the model with aft-export export --target {target} and quantise "
                                           f"that file, or leave --target out to quantise this one for {source}")  # fmt: skip
    assert not (tmp_path / "o.onnx").exists()
    model = onnx.load(onnx_models["custom"])
    assert conversion_problem(model, "tensorrt", "portable") is None
    model.opset_import[0].version = 20
    assert "this graph is opset 20" in conversion_problem(model, "tensorrt", "portable")


def test_cli_weight_bits_and_target(onnx_models, tmp_path, cifar10):
    out = tmp_path / "cpu8.onnx"
    res = CliRunner().invoke(main, ["quantize", str(onnx_models["conv_custom"]), "-o", str(out), "--precision", "int8",
                                    "--target", "portable", "--weight-bits", "8", "--calib", str(cifar10 / "train.tar"),
                                    "--images", "8", "--no-cache", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    recipe = json.loads(res.stdout)["recipe"]
    assert "weight_bits" not in recipe and recipe["converted_from"] == "tensorrt"  # 8 bits: the recipe's default
    assert _weights_max(onnx.load(out)) > 64
    from aft_export.artifacts.purpose import file_purpose

    assert "OpenVINO on CPUs with VNNI only" in file_purpose(onnx.load(out))["for"]  # what info says of it
    res = CliRunner().invoke(main, ["quantize", str(onnx_models["conv_custom"]), "-o", str(out), "--weight-bits", "6",
                                    "--precision", "int8"])  # fmt: skip
    assert res.exit_code == 2 and "'6' is not one of '7', '8'" in res.output


def test_compute_nodes_of_our_int8_files(int8_of):
    """The default int8 (rest fp16): every quantised node counts int8, the rest mostly fp16, the fixed
    fp32 rule's nodes (AFT core, LayerNorm) fp32; TensorRT-RTX's parser finds the same int8 layers."""
    from aft_export.tensorrt.build import network_summary
    from aft_export.artifacts.onnxio import compute_precisions
    from tests.rtx import need_rtx, parse

    path, result = int8_of("custom")
    counts = compute_precisions(onnx.load(path))
    assert counts["int8"] == result.recipe["quantized_nodes"] and counts["fp16"] > 0 and counts["fp32"] > 0
    parsed = parse(onnx.load(path))
    assert parsed.ok and network_summary(need_rtx(), parsed.network)["compute"]["int8"] == counts["int8"]


def test_the_precision_is_chosen_once_as_one_strategy_per_precision():
    """int8 or fp16 is one strategy picked by name where the stage starts; nothing else in the
    stage asks the precision string (a new precision is one class, not five branches)."""
    import inspect
    import re

    from aft_export.options import PRECISIONS
    from aft_export.quantization import stage

    assert tuple(stage.PRECISION_STRATEGIES) == PRECISIONS
    assert all(how.name == name for name, how in stage.PRECISION_STRATEGIES.items())
    int8, fp16 = stage.PRECISION_STRATEGIES["int8"], stage.PRECISION_STRATEGIES["fp16"]
    assert fp16.computes_fp16(QuantizeOptions(precision="fp16"))
    assert [int8.computes_fp16(QuantizeOptions(rest_precision=r)) for r in ("fp16", "fp32")] == [True, False]
    with pytest.raises(AFTExportError, match="int8 needs calibration images"):
        int8.without_calibration()
    fp16.without_calibration()  # optional: no agreement to measure
    source = inspect.getsource(stage)  # (rest_precision is another option, the int8 strategy's)
    assert len(re.findall(r"\bopts\.precision\b", source)) == 1
    assert not re.search(r"(?<!rest_)precision [!=]= \"", source)


def test_a_cached_range_file_must_cover_every_operand_the_quantiser_reads(tmp_path):
    """An activation x activation MatMul (the AFT core's) reads two quantised operands: a cache entry that
    has the first's range alone (made for another form of the graph) is recomputed, not trusted."""
    import json

    from aft_export.quantization.cache import cached_ranges_ok

    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4, 4]) for n in "ab"],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 4])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    entry = tmp_path / "ranges.json"
    for covered, trusted in ((["a"], False), (["a", "b"], True)):
        entry.write_text(json.dumps({"data": {n: {"lowest": -1.0, "highest": 1.0} for n in covered}}))
        assert cached_ranges_ok(entry, model) is trusted
