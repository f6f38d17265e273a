"""The DeepStream nvinfer config (aft_export/serving/deepstream.py): the written config and labels file
parsed as GKeyFile reads them and held to our keys table; the file it names proven from raw pixels."""

from __future__ import annotations

import json

import onnx
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.data.images import FLOAT_NCHW, PROBABILITIES, UINT8_NHWC
from aft_export.errors import AFTExportError
from aft_export.options import DeepStreamOptions
from aft_export.serving.deepstream import (KEYS, LABELS, NETWORK_MODE, PINNED, RELEASES, engine_name,
                                           write_deepstream)  # fmt: skip

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


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


@pytest.fixture(scope="module")
def deepstream_files(tmp_path_factory, zoo_onnx):
    """The zoo's AFT-conv in the DeepStream form (fp32), and its normal export."""
    root = tmp_path_factory.mktemp("ds")
    ds = zoo_onnx.export("aft_conv_cifar", root / "model.deepstream.onnx", input_format=FLOAT_NCHW,
                         output_format=PROBABILITIES)  # fmt: skip
    return root, ds


def test_every_key_is_in_the_table_with_its_type_and_values(deepstream_files, tmp_path):
    root, ds = deepstream_files
    opts = DeepStreamOptions(mode="secondary", batch_size=4, gpu_id=1, threshold=0.25, unique_id=3)
    result = write_deepstream([str(ds)], str(tmp_path / "out"), opts)
    (config,) = result.configs
    text = (tmp_path / "out" / "config_infer_model_deepstream.txt").read_text()
    groups = gkeyfile(text)
    assert list(groups) == ["property"]
    prop = groups["property"]
    assert set(prop) == set(KEYS), "every key written is in the table, and every key of the table is written"
    values = {}
    for key, raw in prop.items():
        spec = KEYS[key]
        values[key] = typed(raw, spec.type)
        if spec.values:
            assert values[key] in spec.values, (key, values[key])
        assert PINNED in RELEASES and "gstnvinfer_property_parser" in spec.source, key
    assert values["process-mode"] == 2 and values["network-type"] == 1 and values["batch-size"] == 4
    assert values["gpu-id"] == 1 and values["gie-unique-id"] == 3 and values["classifier-threshold"] == 0.25
    assert values["network-mode"] == NETWORK_MODE["fp32"] and values["infer-dims"] == [3, 32, 32]
    assert values["model-color-format"] == 0 and values["net-scale-factor"] == 1.0 and values["offsets"] == [0, 0, 0]
    assert values["output-blob-names"] == [o.name for o in onnx.load(ds).graph.output] == ["probabilities"]
    # paths relative to the config file, as nvinfer resolves them; the engine named as nvinfer names its own
    out = tmp_path / "out"
    assert (out / values["onnx-file"]).resolve() == ds.resolve()
    engine = (out / values["model-engine-file"]).resolve()
    assert engine.parent == ds.parent.resolve() and engine.name == "model.deepstream.onnx_b4_gpu1_fp32.engine"
    assert config["engine"] == engine.name == engine_name(ds, 4, 1, "fp32")
    assert "--batch-profile 1,4,4" in config["build"] and "--library tensorrt" in config["build"]
    assert (out / values["labelfile-path"]) == out / LABELS
    assert (out / LABELS).read_text() == ";".join(CLASSES) + "\n"  # one output layer: one line, ';'-separated
    assert "DeepStream cannot be installed" in text and "stretches" in text and "weakly typed" in text
    assert sorted(p.name for p in out.iterdir()) == ["config_infer_model_deepstream.txt", LABELS]


def test_a_run_directory_gives_a_config_per_precision_and_the_cli_says_what_to_run(deepstream_files, tmp_path,
                                                                                   cifar10):  # fmt: skip
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    root, ds = deepstream_files
    run = tmp_path / "run"
    run.mkdir()
    (run / ds.name).write_bytes(ds.read_bytes())
    quantize_model(run / ds.name, run / "model.deepstream.fp16.onnx", None, QuantizeOptions(precision="fp16"),
                   log=lambda *a: None)  # fmt: skip
    (run / "model.onnx").write_bytes(b"")  # not a DeepStream file: left alone
    r = CliRunner().invoke(main, ["deepstream", str(run), "-o", str(tmp_path / "ds"), "--json"])
    assert r.exit_code == 0, r.output
    configs = {c["precision"]: c for c in json.loads(r.output)["configs"]}
    assert sorted(configs) == ["fp16", "fp32"]
    fp16 = gkeyfile((tmp_path / "ds" / "config_infer_model_deepstream_fp16.txt").read_text())["property"]
    assert fp16["network-mode"] == "2" and fp16["model-engine-file"].endswith("model.deepstream.fp16.onnx_b1_gpu0_fp16.engine")
    r = CliRunner().invoke(main, ["deepstream", str(run / ds.name), "-o", str(tmp_path / "ds2")])
    assert r.exit_code == 0 and "build it on the device: aft-export build model.deepstream.onnx" in r.output


@pytest.mark.parametrize("form", [(UINT8_NHWC, "logits"), (FLOAT_NCHW, "logits")])
def test_a_file_not_in_the_deepstream_form_is_refused_saying_how_to_export_one(zoo_onnx, tmp_path, form):
    f = zoo_onnx.export("aft_conv_cifar", tmp_path / "m.onnx", input_format=form[0], output_format=form[1])
    r = CliRunner().invoke(main, ["deepstream", str(f), "-o", str(tmp_path / "ds")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "--input-format float-nchw --output-format probabilities" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "ds").exists()
    with pytest.raises(AFTExportError, match="input_format='float-nchw'|--input-format float-nchw"):
        import aft_export

        aft_export.deepstream(str(f), str(tmp_path / "ds"))
    r = CliRunner().invoke(main, ["deepstream", str(tmp_path), "-o", str(tmp_path / "ds")])
    assert r.exit_code == 2 and "--pixel-form deepstream" in r.output
