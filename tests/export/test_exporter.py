import json
import re
import os

import numpy as np
import onnx
import pytest
import torch

from aft_export.models.checkpoint import load_checkpoint, save_checkpoint
from aft_export.data.images import normalize
from aft_export.data import datasets
from aft_export.data.datasets import load_labelled
from aft_export.exporting import exporter as export_module
from aft_export.errors import AFTExportError
from aft_export.exporting.exporter import ExportOptions, check_graph, export_checkpoint, parse_batch
from aft_export.exporting.functions import DOMAIN
from aft_export.artifacts.graph import aft_kind, node_module
from aft_export.models import create_model, get_config, list_models
from tests.conftest import REPO

VARIANT_OP = {"full": "AFTFull", "local": "AFTLocal", "simple": "AFTSimple", "conv": "AFTConv"}


def make_ckpt(path, name, seed=0):
    torch.manual_seed(seed)
    model = create_model(name)
    with torch.no_grad():  # a non-trivial AFT-conv kernel and biases, as after training
        for m in model.modules():
            if hasattr(m, "gamma"):
                m.gamma.normal_(0, 1)
                m.beta.normal_(0, 1)
            if hasattr(m, "w") and isinstance(m.w, torch.nn.Parameter):
                m.w.normal_(0, 1)
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.normal_(0, 0.1)  # create_model zeroes them; onnxsim treats a zero bias differently
    n = model.cfg.num_classes
    save_checkpoint(path, model, [f"class{i}" for i in range(n)], model_name=name)
    return path


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory, tiny_onnx):
    """make_ckpt's test models (the session's: tests/conftest.py ``tiny_onnx``)."""
    root = tmp_path_factory.mktemp("ckpts")
    return {v: tiny_onnx.ckpt(root / f"{v}.pt", f"aft_{v}_test") for v in VARIANT_OP}


@pytest.fixture(scope="module")
def exported(ckpts, tmp_path_factory, cifar10, tiny_onnx):
    """Each test model exported once (custom form, dynamic batch), verified here; the session
    keeps the files for the modules that read the same exports."""
    root = tmp_path_factory.mktemp("onnx")
    out = {}
    for v, ckpt in ckpts.items():
        path = root / f"{v}.onnx"
        res = tiny_onnx.export_verified(ckpt, path, ExportOptions(data=str(cifar10 / "test.tar")))
        out[v] = (path, res)
    return out


def ort_run(path, x):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(["logits"], {"image": x})[0]


@pytest.mark.parametrize("variant", list(VARIANT_OP))
def test_one_custom_node_per_aft_layer(exported, variant):
    path, res = exported[variant]
    model = onnx.load(path)
    aft = [n for n in model.graph.node if n.domain == DOMAIN]
    depth = get_config(f"aft_{variant}_test").depth
    assert [aft_kind(n) for n in aft] == [VARIANT_OP[variant]] * depth
    assert res.aft_nodes == depth
    # each layer its own function, named after its module (TensorRT keys functions by name)
    layers = [node_module(n)[0] for n in aft]
    assert [n.op_type for n in aft] == [f"{VARIANT_OP[variant]}.{m}" for m in layers] and len(set(layers)) == depth
    assert [(f.domain, f.name) for f in model.functions] == [(DOMAIN, n.op_type) for n in aft]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in aft[0].attribute}
    if variant == "local":
        assert attrs == {"window": 2, "grid": [4, 4]}
    if variant == "conv":
        assert attrs == {"heads": 4, "kernel_size": 3}
    check_graph(model)  # full checker + every value has a shape


@pytest.mark.parametrize("variant", list(VARIANT_OP))
def test_dynamic_batch_really_works(exported, ckpts, variant):
    path, _ = exported[variant]
    model, _ = load_checkpoint(ckpts[variant])
    for batch in (1, 2, 7, 64):
        x = torch.randn(batch, 3, 32, 32, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            want = model(x).numpy()
        assert np.abs(ort_run(path, x.numpy()) - want).max() < 1e-4, batch


@pytest.mark.parametrize("variant", list(VARIANT_OP))
def test_verification_report(exported, variant):
    _, res = exported[variant]
    p = res.parity
    assert p.passed and p.images == 64
    assert p.max_abs <= 1e-4 and p.top1_agreement == 1.0 and p.cosine_min > 0.99999
    assert res.simplify["applied"] and res.simplify["nodes_after"] <= res.simplify["nodes_before"]


def test_metadata_is_enough_to_preprocess(exported, ckpts, cifar10):
    path, _ = exported["conv"]
    meta = {p.key: p.value for p in onnx.load(path).metadata_props}
    _, ck = load_checkpoint(ckpts["conv"])
    assert meta["model_name"] == "aft_conv_test" and meta["variant"] == "AFT-conv"
    assert json.loads(meta["classes"]) == ck.classes
    assert json.loads(meta["input_size"]) == [3, 32, 32] and meta["input_layout"] == "NCHW"
    assert meta["source_sha256"] == ck.sha256 and meta["opset"] == "18"
    assert meta["tool"].startswith("aft-export ") and meta["torch_version"]
    # preprocessing built only from the file's metadata gives the model's input
    data = load_labelled(cifar10 / "test.tar", json.loads(meta["input_size"])[1], limit=4)
    x = normalize(data.images, json.loads(meta["mean"]), json.loads(meta["std"])).numpy()
    assert np.array_equal(x, normalize(data.images, ck.mean, ck.std).numpy())


def test_decomposed_form_has_no_custom_nodes(ckpts, tmp_path, cifar10, tiny_onnx):
    path = tmp_path / "d.onnx"
    res = tiny_onnx.export_verified(ckpts["conv"], path, ExportOptions(op_form="decomposed", images=16,
                                                                       data=str(cifar10 / "test.tar")))  # fmt: skip
    model = onnx.load(path)
    assert res.aft_nodes == 0 and not any(n.domain == DOMAIN for n in model.graph.node)
    assert not model.functions and res.parity.passed


def test_fixed_batch(ckpts, tmp_path, cifar10):
    path = tmp_path / "b3.onnx"
    export_checkpoint(ckpts["full"], path, ExportOptions(batch_dim="3", images=9,
                                                         data=str(cifar10 / "test.tar")))  # fmt: skip
    dims = [d.dim_value for d in onnx.load(path).graph.input[0].type.tensor_type.shape.dim]
    assert dims == [3, 3, 32, 32]
    assert ort_run(path, np.zeros((3, 3, 32, 32), np.float32)).shape == (3, 10)


def test_conv_dynamic_height_and_width(ckpts, tmp_path):
    path = tmp_path / "hw.onnx"
    export_checkpoint(ckpts["conv"], path, ExportOptions(dynamic_hw=True, images=0))
    model, _ = load_checkpoint(ckpts["conv"])
    for h, w in [(32, 32), (16, 40), (64, 48)]:
        x = torch.randn(2, 3, h, w)
        with torch.no_grad():
            want = model(x).numpy()
        assert np.abs(ort_run(path, x.numpy()) - want).max() < 1e-4, (h, w)


def test_deterministic_and_atomic(ckpts, tmp_path, monkeypatch):
    """Same checkpoint and options, same bytes: the first export here builds torch's registry of
    translations from torchlib, the second takes a copy of it (exporter._torchlib_built_once)."""
    from torch.onnx._internal.exporter._registration import ONNXRegistry

    from aft_export.exporting import exporter

    monkeypatch.setattr(exporter, "_TORCHLIB", {})
    opts = ExportOptions(images=0)
    a, b = tmp_path / "a" / "m.onnx", tmp_path / "b" / "m.onnx"
    a.parent.mkdir()
    b.parent.mkdir()
    export_checkpoint(ckpts["local"], a, opts)
    (kept,) = exporter._TORCHLIB.values()
    export_checkpoint(ckpts["local"], b, opts)
    assert a.read_bytes() == b.read_bytes()
    # the kept registry never holds an export's own translations (the AFT cores), and torch's is torch's again
    assert not [t for t in kept.functions if "aft" in str(t)] and len(kept.functions) > 300
    assert ONNXRegistry.__dict__["from_torchlib"].__func__.__module__ == ONNXRegistry.__module__  # torch's own again
    assert sorted(p.name for p in a.parent.iterdir()) == ["m.onnx"]  # no stray .data or temp files


def test_external_data_when_weights_are_large(ckpts, tmp_path):
    path = tmp_path / "big.onnx"
    res = export_checkpoint(ckpts["full"], path, ExportOptions(images=0, external_data_threshold=0))
    # named after its content: a new .onnx never points at an old data file, nor the reverse
    assert re.fullmatch(r"big\.onnx\.[0-9a-f]{12}\.data", res.external_data)
    assert (tmp_path / res.external_data).is_file()
    assert ort_run(path, np.zeros((2, 3, 32, 32), np.float32)).shape == (2, 10)
    # exporting small again to the same name removes the stale weights file
    export_checkpoint(ckpts["full"], path, ExportOptions(images=0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx"]


def test_simplifier_failure_stops_unless_allowed(ckpts, tmp_path, monkeypatch):
    import onnxsim

    def broken(model, *a, **k):
        raise RuntimeError("simulated onnxsim crash")

    monkeypatch.setattr(onnxsim, "simplify", broken)
    path = tmp_path / "s.onnx"
    with pytest.raises(AFTExportError, match="onnxsim failed: simulated onnxsim crash.*`allow_unsimplified`"):
        export_checkpoint(ckpts["simple"], path, ExportOptions(images=0))
    assert not path.exists()
    res = export_checkpoint(ckpts["simple"], path, ExportOptions(images=0, allow_unsimplified=True))
    assert res.simplify == {"applied": False, "reason": "simulated onnxsim crash"} and path.exists()


def test_simplifier_that_changes_outputs_is_refused(ckpts, tmp_path, monkeypatch, cifar10):
    import onnxsim

    real = onnxsim.simplify

    def perturbing(model, *a, **k):
        out, ok = real(model, *a, **k)
        # shift the logits by 1e-3: a "simplification" that changes the results
        last = next(n for n in out.graph.node if "logits" in n.output)
        last.output[list(last.output).index("logits")] = "logits_raw"
        shift = onnx.numpy_helper.from_array(np.full((1,), 1e-3, np.float32), "shift")
        out.graph.initializer.append(shift)
        out.graph.node.append(onnx.helper.make_node("Add", ["logits_raw", "shift"], ["logits"]))
        return out, ok

    monkeypatch.setattr(onnxsim, "simplify", perturbing)
    with pytest.raises(AFTExportError, match="changes outputs by up to"):
        export_checkpoint(ckpts["full"], tmp_path / "x.onnx",
                          ExportOptions(images=8, data=str(cifar10 / "test.tar")))  # fmt: skip
    assert not (tmp_path / "x.onnx").exists()


def test_failed_verification_writes_nothing(ckpts, tmp_path, cifar10):
    path = tmp_path / "v.onnx"
    with pytest.raises(AFTExportError, match="verification failed.*nothing was written"):
        export_checkpoint(ckpts["full"], path, ExportOptions(images=8, verify_atol=-1.0,
                                                             data=str(cifar10 / "test.tar")))  # fmt: skip
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "kwargs, message",
    [(dict(opset=13), "`opset` takes an ONNX opset >= 18"), (dict(opset=99), "newer than this onnx"),
     (dict(batch_dim="two"), "`batch_dim` takes 'dynamic' or a batch size .*, got 'two'"),
     (dict(batch_dim="0"), "`batch_dim` takes 'dynamic' or a batch size from 1 to 65536"),
     (dict(op_form="fused"), "`op_form` takes one of custom, decomposed, got 'fused'")],
)  # fmt: skip
def test_bad_options(kwargs, message):
    with pytest.raises(AFTExportError, match=message):
        ExportOptions(**kwargs)


def test_parse_batch():
    assert parse_batch("dynamic") is None and parse_batch("8") == 8 and parse_batch(" 1 ") == 1


def test_bad_outputs_and_inputs(ckpts, tmp_path):
    opts = ExportOptions(images=0)
    with pytest.raises(AFTExportError, match="does not exist"):
        export_checkpoint(ckpts["full"], tmp_path / "no" / "x.onnx", opts)
    if os.geteuid() != 0:  # root ignores directory permissions
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(AFTExportError, match="not writable"):
            export_checkpoint(ckpts["full"], ro / "x.onnx", opts)
    with pytest.raises(AFTExportError, match="only AFT-conv models take dynamic height and width"):
        export_checkpoint(ckpts["full"], tmp_path / "x.onnx", ExportOptions(dynamic_hw=True, images=0))
    with pytest.raises(AFTExportError, match="checkpoint .* does not exist"):
        export_checkpoint(tmp_path / "missing.pt", tmp_path / "x.onnx", opts)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_verification_without_data_lists_the_places_tried(tmp_path, monkeypatch):
    """A checkpoint naming no data verifies on cifar10:test, found as every command finds it;
    where it is nowhere, one line says each place tried and what to do (options, not flags)."""
    ckpt = make_ckpt(tmp_path / "m.pt", "aft_simple_test")
    monkeypatch.delenv("AFT_CIFAR10_DIR", raising=False)
    monkeypatch.setenv("AFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(datasets, "CIFAR10_URL", (tmp_path / "offline.tar.gz").as_uri())
    monkeypatch.setattr(datasets, "checkouts", lambda: [])  # no ../shared beside any checkout
    with pytest.raises(AFTExportError) as caught:
        export_checkpoint(ckpt, tmp_path / "x.onnx", ExportOptions())
    message = str(caught.value)
    assert message.startswith("verification needs real images and cifar10:test (the default) was not found: "
                              "$AFT_CIFAR10_DIR is unset; no aft-export checkout here to have ../shared/data/cifar10 "
                              f"beside it; the download into {tmp_path / 'cache'} failed (URLError: ")  # fmt: skip
    assert message.endswith("`data` (a folder or tar of images), or `images=0` to skip verification")
    assert "\n" not in message and "--" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "m.pt"] and not any((tmp_path / "cache").iterdir())


def test_verification_uses_the_data_the_checkpoint_names(tmp_path, monkeypatch):
    """By name, or relative to the checkpoint (as `aft-export train` records it) from any
    directory; an absolute path of an older checkpoint where it exists; else nothing."""
    from PIL import Image

    model, _ = load_checkpoint(make_ckpt(tmp_path / "m.pt", "aft_simple_test"))
    for i in range(4):  # an ImageFolder beside the checkpoint
        (tmp_path / "imgs" / f"class{i % 2}").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (32, 32), (60 * i, 30, 200 - 40 * i)).save(tmp_path / "imgs" / f"class{i % 2}" / f"{i}.png")
    save_checkpoint(tmp_path / "m.pt", model, [f"class{i}" for i in range(10)], provenance={"metrics": {"test_data": "imgs"}})
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    meta = load_checkpoint(tmp_path / "m.pt")[1]
    images, source, _ = export_module._verification_images(meta, ExportOptions(images=4))
    assert images.shape == (4, 3, 32, 32) and source == str(tmp_path / "imgs")
    from aft_export.data.datasets import recorded_test_data as recorded

    for prov, found in [({"data": "cifar10:train", "metrics": {"test_data": "cifar10:test"}}, "cifar10:test"),
                        ({"data": str(tmp_path / "imgs")}, str(tmp_path / "imgs")),
                        ({"data": "/nowhere/train.tar", "train_config": {"test_data": "missing"}}, None), ({}, None)]:
        meta.provenance = prov
        assert recorded(meta) == found, prov


def test_a_model_over_two_gib_is_refused_before_any_work(tmp_path):
    """protobuf holds at most 2 GiB, and torch.onnx, onnx.checker and onnxsim hold the whole
    graph in memory: such a model ended, after minutes and many GB, in onnx.checker's traceback.
    Refused at once, from the sizes: the extra parameter is never touched (torch.empty takes
    no memory until it is), nor the verification data read (it does not exist)."""
    model, meta = load_checkpoint(make_ckpt(tmp_path / "m.pt", "aft_simple_test"))
    model.register_parameter("extra", torch.nn.Parameter(torch.empty(2**29 + 1), requires_grad=False))
    opts = ExportOptions(data=str(tmp_path / "missing"))
    for call in (lambda: export_checkpoint(None, tmp_path / "x.onnx", opts, loaded=(model, meta)),
                 lambda: export_module.export_graph(model, meta, opts)):  # fmt: skip
        with pytest.raises(AFTExportError) as caught:
            call()
        assert str(caught.value).startswith("the model holds 2.00 GiB of weights (2,147,5")
        assert str(caught.value).endswith("more than the 2 GiB protobuf lets one ONNX graph hold; nothing was exported: "
                                          "aft-export exports models up to 2 GiB of weights (docs/export.md), so "
                                          "export a smaller configuration")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]


def test_a_checkpoint_over_two_gib_is_refused_before_it_is_loaded(tmp_path):
    """Loading a 2.3 GiB checkpoint takes over a minute (building the model, checking every
    weight is finite): a source that can tell its size is refused before it is loaded."""
    from aft_export.models.checkpoint import weight_bytes
    from aft_export.models.sources import CheckpointSource

    path = make_ckpt(tmp_path / "m.pt", "aft_simple_test")
    model, _ = load_checkpoint(path)
    assert weight_bytes(path) == sum(t.nbytes for t in model.state_dict().values())  # told from the sizes
    torch.save({"model": model.state_dict(), "epoch": 3}, tmp_path / "plain.pt")
    assert weight_bytes(tmp_path / "plain.pt") == weight_bytes(path)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    assert weight_bytes(tmp_path / "junk.pt") is None  # the full load gives its error

    class Huge(CheckpointSource):
        def weight_bytes(self):
            return 2**31 + 1

        def load(self, log=None):
            raise AssertionError("loaded")

    with pytest.raises(AFTExportError, match=r"^.*m\.pt holds 2\.00 GiB of weights \(2,147,483,649 bytes\), more than"):
        export_checkpoint(Huge(str(path)), tmp_path / "x.onnx", ExportOptions())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.pt", "m.pt", "plain.pt"]


_FAST = [n for n in list_models() if not n.endswith("_224")]
_SLOW = [pytest.param(n, marks=pytest.mark.slow) for n in list_models() if n.endswith("_224")]


_ZOO = {p.stem for p in (REPO / "models").glob("*.pt")}


@pytest.mark.parametrize("op_form", ["custom", "decomposed"])
@pytest.mark.parametrize("name", _FAST + _SLOW)
def test_every_registered_config_exports_and_verifies(name, op_form, tmp_path, cifar10, tiny_onnx, zoo_onnx):
    """A config with a zoo checkpoint exports that checkpoint, any other make_ckpt's (made once per
    session). The export and its verification run here, and the session keeps the file for the
    modules that read the same export (tests/conftest.py: test_conformance, test_zoo and
    test_build read the zoo's, test_build the 224 configs')."""
    options = ExportOptions(op_form=op_form, images=8, data=str(cifar10 / "test.tar"))
    if name in _ZOO:
        res = zoo_onnx.export_verified(name, tmp_path / "m.onnx", options)
    else:
        res = tiny_onnx.export_verified(tiny_onnx.ckpt(tmp_path / "m.pt", name), tmp_path / "m.onnx", options)
    cfg = get_config(name)
    assert res.aft_nodes == (cfg.depth if op_form == "custom" else 0)
    assert res.parity.passed, res.parity


@pytest.mark.parametrize("opset", [18, 21])
def test_opsets_keep_the_custom_nodes(ckpts, tmp_path, opset, cifar10):
    path = tmp_path / "o.onnx"
    res = export_checkpoint(ckpts["conv"], path, ExportOptions(opset=opset, images=8,
                                                               data=str(cifar10 / "test.tar")))  # fmt: skip
    model = onnx.load(path)
    assert dict((o.domain, o.version) for o in model.opset_import) == {"": opset, DOMAIN: 1}
    assert res.aft_nodes == 2 and res.parity.passed
    assert all(i.version == opset for f in model.functions for i in f.opset_import if i.domain == "")
