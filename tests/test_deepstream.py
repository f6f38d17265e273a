"""The DeepStream nvinfer config (aft_export/serving/deepstream.py, aft_export/serving/nvinfer.py): each release's
config parsed as GKeyFile reads it and held to that release's keys and types; the release chosen from the file and
checked by the rules; the engine named apart from nvinfer's own; nvinfer's scaling measured against aft-export's
preprocessing; and the device check of a config's engine, with TensorRT-RTX engines."""

from __future__ import annotations

import json
import shlex

import onnx
import pytest
from click.testing import CliRunner

import aft_export
from aft_export.cli import main
from aft_export.data.images import FLOAT_NCHW, PROBABILITIES, UINT8_NHWC
from aft_export.errors import AFTExportError
from aft_export.options import DeepStreamOptions
from aft_export.options.deepstream import DEEPSTREAM_RELEASES, SCALING_FILTERS, SCALING_HW
from aft_export.serving.deepstream import LABELS, default_release, engine_name, write_deepstream
from aft_export.serving.nvinfer import COMPUTE, FILTERS, KEYS, NETWORK_MODE, RELEASES, SECONDARY_KEYS

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
DS = {"input_format": FLOAT_NCHW, "output_format": PROBABILITIES}


def gkeyfile(text: str) -> dict[str, dict[str, str]]:
    """A GKeyFile as glib reads one: ``[group]`` lines, ``key=value`` lines, ``#`` comments and
    blank lines; a key twice in a group, or a line of none of these kinds, is an error."""
    groups: dict[str, dict[str, str]] = {}
    group = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = groups.setdefault(line[1:-1], {})
            continue
        assert group is not None and "=" in line, f"line {n} is not a key of a group: {line!r}"
        key, value = line.split("=", 1)
        assert key.strip() not in group, f"line {n}: {key} twice"
        group[key.strip()] = value.strip()
    return groups


def typed(value: str, kind: str):
    """The value as g_key_file_get_<kind> returns it (ValueError where glib would set an error)."""
    if kind.endswith(" list"):
        items = [v for v in value.split(";")]
        if items and items[-1] == "":
            items.pop()  # glib allows a trailing separator
        return [typed(v, kind.removesuffix(" list")) for v in items]
    if kind == "integer":
        return int(value)
    if kind == "double":
        return float(value)
    if kind == "boolean":
        if value not in ("true", "false", "1", "0"):
            raise ValueError(value)
        return value in ("true", "1")
    if kind == "string":
        return value
    raise AssertionError(kind)


def held_to_its_release(text: str, release: str) -> dict:
    """The config's ``[property]`` values, each key one its release's parser reads, of its type and values."""
    groups = gkeyfile(text)
    assert list(groups) == ["property"]
    values = {}
    for key, raw in groups["property"].items():
        assert key in RELEASES[release].reads, (release, key)
        values[key] = typed(raw, KEYS[key].type)
        if KEYS[key].values:
            assert values[key] in KEYS[key].values, (key, values[key])
    return values


@pytest.fixture(scope="module")
def ds_files(tmp_path_factory, tiny_onnx):
    """A tiny AFT-conv's DeepStream form for the default target and for TensorRT 8 (JetPack 5.1 and 6.0)."""
    root = tmp_path_factory.mktemp("ds")
    ckpt = tiny_onnx.ckpt(root / "m.pt", "aft_conv_test")
    return {"tensorrt": tiny_onnx.export(ckpt, root / "model.deepstream.onnx", **DS),
            "tensorrt8": tiny_onnx.export(ckpt, root / "model.trt8.deepstream.onnx", target="tensorrt8", **DS),
            "ckpt": ckpt, "root": root}  # fmt: skip


def test_the_tables_are_one_per_kind_and_cite_their_sources():
    assert tuple(RELEASES) == DEEPSTREAM_RELEASES and tuple(FILTERS) == SCALING_FILTERS and tuple(COMPUTE) == SCALING_HW
    assert [f.value for f in FILTERS.values()] == list(range(7)) and FILTERS["default"].gpu.startswith("nearest")
    for key in KEYS.values():
        assert "gstnvinfer_property_parser.cpp" in key.source and key.type, key.name
    assert "strongly-typed" not in RELEASES["6.3"].reads and "strongly-typed" in RELEASES["9.1"].reads
    for r in RELEASES.values():  # the TensorRT of each release: the JetPack table of trtcheck/versions.py
        assert r.jetpack.deepstream == r.name and r.jetpack.column in ("8.5", "8.6", "10.3", "10.13")
        assert r.sourced == (r.name in ("6.3", "9.0", "9.1")) and r.source
    assert [default_release(t).name for t in (aft_export.options.EXPORT_TARGETS[n] for n in ("tensorrt8", "tensorrt",
                                                                                           "portable"))] == ["6.3", "7.1", "7.1"]


@pytest.mark.parametrize("release", DEEPSTREAM_RELEASES)
@pytest.mark.parametrize("mode", ["primary", "secondary"])
def test_each_release_s_config_names_only_keys_its_parser_reads(ds_files, tmp_path, release, mode):
    target = "tensorrt8" if release in ("6.3", "7.0") else "tensorrt"
    opts = DeepStreamOptions(mode=mode, release=release, batch_size=4, gpu_id=1, threshold=0.25, unique_id=3,
                             **({"operate_on_class_ids": (2, 7)} if mode == "secondary" else {}))  # fmt: skip
    result = write_deepstream([str(ds_files[target])], str(tmp_path / "out"), opts)
    (config,) = result.configs
    out = tmp_path / "out"
    text = (out / config["config"].rsplit("/", 1)[-1]).read_text()
    values = held_to_its_release(text, release)
    strongly = RELEASES[release].strongly_typed
    assert values["network-mode"] == (0 if strongly else NETWORK_MODE["fp32"]) and ("strongly-typed" in values) == strongly
    assert values["scaling-filter"] == FILTERS["cubic"].value != FILTERS["default"].value
    assert values["scaling-compute-hw"] == COMPUTE["gpu"].value
    assert values["process-mode"] == (2 if mode == "secondary" else 1) and values["batch-size"] == 4
    assert values["gpu-id"] == 1 and values["gie-unique-id"] == 3 and values["classifier-threshold"] == 0.25
    assert values["infer-dims"] == [3, 32, 32] and values["net-scale-factor"] == 1.0 and values["offsets"] == [0, 0, 0]
    graph = onnx.load(ds_files[target])
    assert values["output-blob-names"] == [o.name for o in graph.graph.output]  # the graph's own output
    assert set(SECONDARY_KEYS) <= set(values) if mode == "secondary" else not set(SECONDARY_KEYS) & set(values)
    if mode == "secondary":
        assert values["operate-on-gie-id"] == 1 and values["operate-on-class-ids"] == [2, 7]
        assert values["input-object-min-width"] == values["input-object-min-height"] == 16
    # paths relative to the config file, as nvinfer resolves them; the engine named apart from nvinfer's own
    assert (out / values["onnx-file"]).resolve() == ds_files[target].resolve()
    engine = (out / values["model-engine-file"]).resolve()
    assert engine.parent == ds_files[target].parent.resolve() and engine.name == engine_name(ds_files[target], 4, 1)
    assert not engine.name.startswith(ds_files[target].name + "_b")  # <onnx>_b4_gpu1_<mode>.engine is nvinfer's
    assert config["release"] == release and "--batch-profile 1,4,4" in config["build"] and "tensorrt" in config["build"]
    assert (out / LABELS).read_text() == ";".join(f"class{i}" for i in range(10)) + "\n"  # one line, ';'-separated
    assert "Not run here" in text and "stretches" in text and f"DeepStream {release}" in text
    assert ("no source of its nvinfer was found" in text) == (not RELEASES[release].sourced)


def test_the_header_says_only_what_the_sources_show_of_nvinfer_s_own_build(ds_files, tmp_path, cifar10):
    """6.3 (TensorRT 8.5): no flag for fp32, the FP16 flag for fp16, and for int8 without a calibration file the
    FP16 flag only, under an _fp16 name; 9.x: a strongly typed network and no precision flag; 7.x/8.0: no source."""
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    root = ds_files["root"]
    int8 = root / "model.trt8.deepstream.int8.onnx"
    if not int8.exists():
        quantize_model(ds_files["tensorrt8"], int8, str(cifar10 / "train.tar"), QuantizeOptions(images=16),
                       log=lambda *a: None)  # fmt: skip
    result = write_deepstream([str(int8)], str(tmp_path / "a"), DeepStreamOptions(release="6.3"))
    text = (tmp_path / "a" / "config_infer_model_trt8_deepstream_int8.txt").read_text()
    assert "network-mode=1" in text and "INT8 calibration file not specified" in text
    assert "model.trt8.deepstream.int8.onnx_b1_gpu0_fp16.engine" in " ".join(text.split())  # its own build's name
    assert result.configs[0]["precision"] == "int8"
    write_deepstream([str(int8)], str(tmp_path / "b"), DeepStreamOptions(release="9.1"))
    text = " ".join((tmp_path / "b" / "config_infer_model_trt8_deepstream_int8.txt").read_text().split())
    assert "strongly-typed=1" in text and "network-mode=0" in text and "strongly typed network" in text
    assert "model.trt8.deepstream.int8.onnx_b1_gpu0_fp32.engine" in text
    write_deepstream([str(int8)], str(tmp_path / "c"), DeepStreamOptions(release="7.0"))
    text = " ".join((tmp_path / "c" / "config_infer_model_trt8_deepstream_int8.txt").read_text().split())
    assert "is not shown by any source" in text and "strongly" not in text.split("[property]")[1]


def test_a_release_whose_tensorrt_does_not_read_the_file_is_refused_naming_the_export(ds_files, tmp_path):
    with pytest.raises(AFTExportError, match=r"the TensorRT 8\.5\.2 of DeepStream 6\.3 \(JetPack 5\.1\.2\) does not "
                                             r"read it \(opset\.range.*; give it the file of aft-export export CKPT "
                                             r"--output model\.trt8\.deepstream\.onnx --target tensorrt8"):
        aft_export.deepstream(ds_files["tensorrt"], tmp_path / "out", release="6.3")
    assert not (tmp_path / "out").exists()


def test_a_run_directory_gives_a_config_per_file_each_for_its_oldest_release(ds_files, tmp_path, cifar10):
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    run = tmp_path / "run"
    run.mkdir()
    for f in (ds_files["tensorrt"], ds_files["tensorrt8"]):
        (run / f.name).write_bytes(f.read_bytes())
    quantize_model(run / "model.deepstream.onnx", run / "model.deepstream.fp16.onnx", None,
                   QuantizeOptions(precision="fp16"), log=lambda *a: None)  # fmt: skip
    (run / "model.onnx").write_bytes(b"")  # not a DeepStream file: left alone
    r = CliRunner().invoke(main, ["deepstream", str(run), "-o", str(tmp_path / "ds"), "--json"])
    assert r.exit_code == 0, r.output
    configs = {c["onnx"].rsplit("/", 1)[-1]: c for c in json.loads(r.output)["configs"]}
    assert {k: (c["release"], c["precision"]) for k, c in configs.items()} == {
        "model.deepstream.onnx": ("7.1", "fp32"), "model.deepstream.fp16.onnx": ("7.1", "fp16"),
        "model.trt8.deepstream.onnx": ("6.3", "fp32")}  # fmt: skip
    fp16 = gkeyfile((tmp_path / "ds" / "config_infer_model_deepstream_fp16.txt").read_text())["property"]
    assert fp16["network-mode"] == "2" and fp16["model-engine-file"].endswith("model.deepstream.fp16.b1.gpu0.engine")
    r = CliRunner().invoke(main, ["deepstream", str(run / "model.deepstream.onnx"), "-o", str(tmp_path / "ds2")])
    assert r.exit_code == 0 and "beside model.deepstream.onnx: aft-export build model.deepstream.onnx" in r.output


@pytest.mark.parametrize("form", [(UINT8_NHWC, "logits"), (FLOAT_NCHW, "logits")])
def test_a_file_not_in_the_deepstream_form_is_refused_saying_how_to_export_one(ds_files, tiny_onnx, tmp_path, form):
    f = tiny_onnx.export(ds_files["ckpt"], tmp_path / "m.onnx", input_format=form[0], output_format=form[1])
    r = CliRunner().invoke(main, ["deepstream", str(f), "-o", str(tmp_path / "ds")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "--input-format float-nchw --output-format probabilities" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "ds").exists()
    with pytest.raises(AFTExportError, match="input_format='float-nchw'|--input-format float-nchw"):
        aft_export.deepstream(str(f), str(tmp_path / "ds"))
    r = CliRunner().invoke(main, ["deepstream", str(tmp_path), "-o", str(tmp_path / "ds")])
    assert r.exit_code == 2 and "--pixel-form deepstream" in r.output


def test_the_build_command_is_quoted_for_a_posix_shell(ds_files, tmp_path):
    odd = tmp_path / "a b;$(touch pwned)'"
    odd.mkdir()
    f = odd / "m;rm -rf ~.deepstream.onnx"
    f.write_bytes(ds_files["tensorrt"].read_bytes())
    result = aft_export.deepstream(f, tmp_path / "out")
    (config,) = result.configs
    words = shlex.split(config["build"])  # one word per argument, as the shell reads it
    assert words[:3] == ["aft-export", "build", f.name] and words[4] == "m;rm -rf ~.deepstream.b1.gpu0.engine"
    text = (tmp_path / "out" / config["config"].rsplit("/", 1)[-1]).read_text()
    cd = next(line for line in text.splitlines() if "&& aft-export build" in line)
    assert shlex.split(cd.lstrip("# "))[1] == "../a b;$(touch pwned)'"


@pytest.fixture(scope="module")
def cifar_ds(tmp_path_factory):
    """A tiny AFT-simple of CIFAR-10's classes in the DeepStream form: what a labelled set of CIFAR-10 evaluates."""
    import torch

    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.models import create_model
    from aft_export.models.checkpoint import save_checkpoint

    root = tmp_path_factory.mktemp("ds_cifar")
    torch.manual_seed(0)
    save_checkpoint(root / "c.pt", create_model("aft_simple_test"), CLASSES, model_name="aft_simple_test")
    export_checkpoint(root / "c.pt", root / "c.deepstream.onnx", ExportOptions(images=0, **DS), log=lambda *a: None)
    return root / "c.deepstream.onnx"


def test_scaling_measured_as_nvinfer_scales_beside_aft_export_s_preprocessing(cifar_ds, tmp_path, cifar10):
    """Both faces measure each file's top-1 under nvinfer's scaling (stretched, the filter's CPU stand-in) and under
    aft-export's own; at the native size the decodings are the same image, larger objects differ."""
    from aft_export.data.datasets import load_labelled
    from aft_export.data.images import cropped, stretched

    ours = load_labelled(str(cifar10 / "test.tar"), 32, limit=8)
    assert (load_labelled(str(cifar10 / "test.tar"), 32, limit=8, resize=stretched("NEAREST")).images
            == ours.images).all()  # 32x32 images stretched to 32x32: nothing to scale  # fmt: skip
    big = load_labelled(str(cifar10 / "test.tar"), 32, limit=8, resize=stretched("NEAREST", 77)).images
    smooth = load_labelled(str(cifar10 / "test.tar"), 32, limit=8, resize=cropped(77)).images
    assert (big != smooth).any()
    result = aft_export.deepstream(cifar_ds, tmp_path / "out", data=str(cifar10 / "test.tar"), images=16,
                                   object_size=77)  # fmt: skip
    (row,) = result.scaling
    assert row["images"] == 16 and row["filter"] == "cubic" and row["stand_in"] == "PIL BICUBIC"
    assert all(0 <= row[k] <= 100 for k in ("aft_export_top1", "nvinfer_top1", "nvinfer_default_top1"))
    r = CliRunner().invoke(main, ["deepstream", str(cifar_ds), "-o", str(tmp_path / "out2"), "--data",
                                  str(cifar10 / "test.tar"), "--images", "16", "--object-size", "77",
                                  "--scaling-filter", "bilinear"])  # fmt: skip
    assert r.exit_code == 0 and "with aft-export's preprocessing" in r.output and "stretched with bilinear" in r.output


# ---------------------------------------------------------------- on the device: deepstream-check


@pytest.fixture(scope="module")
def rtx_engine(ds_files):
    """An engine of the DeepStream file built by TensorRT-RTX (profile 1,4,4), as a config names it."""
    from tests.rtx import need_rtx

    need_rtx()
    engine = ds_files["root"] / "model.deepstream.b4.gpu0.rtx.engine"
    if not engine.exists():
        aft_export.build(ds_files["tensorrt"], engine, batch_profile="1,4,4", library="tensorrt-rtx")
    return engine


def _config(tmp_path, ds_files, engine, **values) -> str:
    out = tmp_path / "ds"
    if not out.exists():
        aft_export.deepstream(ds_files["tensorrt"], out, batch_size=4)
    config = out / "config_infer_model_deepstream.txt"
    text = config.read_text().replace(engine_name(ds_files["tensorrt"], 4, 0), engine.name)
    for key, value in values.items():
        text = "\n".join(f"{key}={value}" if line.startswith(key + "=") else line for line in text.splitlines()) + "\n"
    config.write_text(text)
    return str(config)


def test_the_device_check_passes_the_engine_of_the_config_s_file_and_says_what_only_the_device_shows(
        ds_files, rtx_engine, tmp_path):  # fmt: skip
    result = aft_export.deepstream_check(_config(tmp_path, ds_files, rtx_engine))
    checks = {c["check"]: c for c in result.configs[0]["checks"]}
    assert [checks[k]["status"] for k in ("engine", "onnx-file", "batch-size", "infer-dims")] == ["ok"] * 4
    assert checks["deserialise"]["status"] == "skipped" and "only the device it runs on can show it" in \
        checks["deserialise"]["detail"]  # fmt: skip
    assert result.verdict.status == "unverified"  # exit 3: not everything could be checked here
    r = CliRunner().invoke(main, ["deepstream-check", str(tmp_path / "ds")])
    assert r.exit_code == 3 and "skipped  deserialise" in r.output


@pytest.mark.parametrize("edit, check, said", [
    ({"batch-size": "8"}, "batch-size", "takes batches 1 to 4, and nvinfer sends 1 to batch-size 8"),
    ({"infer-dims": "3;64;64"}, "infer-dims", "takes 32x32x... images|takes 3x32x32 images; infer-dims 3;64;64"),
    ({"onnx-file": "other.onnx"}, "onnx-file", "was built from another file than other.onnx"),
])  # fmt: skip
def test_the_device_check_fails_an_engine_that_nvinfer_would_rebuild(ds_files, rtx_engine, tmp_path, edit, check,
                                                                     said):  # fmt: skip
    if "onnx-file" in edit:
        (tmp_path / "other.onnx").write_bytes(ds_files["tensorrt8"].read_bytes())
        edit = {"onnx-file": str(tmp_path / "other.onnx")}
    result = aft_export.deepstream_check(_config(tmp_path, ds_files, rtx_engine, **edit))
    row = next(c for c in result.configs[0]["checks"] if c["check"] == check and c["status"] == "failed")
    assert __import__("re").search(said, row["detail"]) and result.verdict.status == "failed"


def test_the_device_check_of_a_missing_engine_says_the_line_that_builds_it(ds_files, tmp_path):
    out = tmp_path / "ds"
    aft_export.deepstream(ds_files["tensorrt"], out)
    r = CliRunner().invoke(main, ["deepstream-check", str(out / "config_infer_model_deepstream.txt")])
    assert r.exit_code == 1 and "does not exist; build it beside the ONNX file" in r.output
    assert "aft-export build model.deepstream.onnx --output model.deepstream.b1.gpu0.engine" in r.output
    (tmp_path / "bad.txt").write_text("[property]\nonnx-file\n")
    r = CliRunner().invoke(main, ["deepstream-check", str(tmp_path / "bad.txt")])
    assert r.exit_code == 2 and "line 2 is not a [group] or a key=value line" in r.output
