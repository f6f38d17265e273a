"""`aft-export check` on what the exporter and the quantiser write: targets, versions, the
defects the landed code had, the gates in export/quantize/build, the CLI's exit codes."""

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.errors import AFTExportError
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.trtcheck import SUPPORTED, check_model

QUIET = dict(log=lambda *a: None)


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tiny_onnx):
    """aft_conv_test in both targets and both op forms, fp32 (verification off: the
    exporter's own tests verify numerics)."""
    d = tmp_path_factory.mktemp("check")
    ckpt = tiny_onnx.ckpt(d / "conv.pt", "aft_conv_test")
    out = {}
    for target in ("tensorrt", "tensorrt8"):
        for form in ("custom", "decomposed"):
            path = d / f"conv.{target}.{form}.onnx"
            tiny_onnx.export(ckpt, path, op_form=form, target=target)
            out[target, form] = path
    return out


def _quantized(src, tmp_path, precision, cifar10):
    out = tmp_path / f"{src.stem}.{precision}.onnx"
    opts = QuantizeOptions(precision=precision, images=16, cache_dir=str(tmp_path / "cache"))
    quantize_model(src, out, str(cifar10 / "train.tar"), opts, progress=False, **QUIET)
    return out


@pytest.mark.parametrize("form", ["custom", "decomposed"])
@pytest.mark.parametrize("target", ["tensorrt", "tensorrt8"])
def test_every_precision_passes_every_targeted_version(exports, form, target, tmp_path, cifar10):
    fp32 = exports[target, form]
    for path in (fp32, _quantized(fp32, tmp_path, "fp16", cifar10), _quantized(fp32, tmp_path, "int8", cifar10)):
        report = check_model(path)
        checked = SUPPORTED if target == "tensorrt8" else ("10.3", "10.13", "11.4")
        assert report.checked == list(checked), report.status
        assert report.exit_code == 0, [(f.rule, f.versions, f.message) for f in report.findings]
        rtx = check_model(path, ["rtx-1.7"])  # TensorRT-RTX's column, asked for (not a default column)
        assert rtx.status == {"rtx-1.7": "accepts"}, [(f.rule, f.message) for f in rtx.findings]


def test_the_tensorrt_form_is_not_for_tensorrt_8(exports):
    report = check_model(exports["tensorrt", "custom"], ["8.5", "8.6"])
    rules = {f.rule for f in report.findings}
    assert report.exit_code == 1
    assert {"opset.range", "functions.not-imported"} <= rules
    default = check_model(exports["tensorrt", "custom"])
    assert default.status["8.5"] == default.status["8.6"] == "not targeted"
    assert any("aft-export export --target tensorrt8" in n for n in default.notes)


def test_the_landed_defects_are_named_inside_the_function_body(exports, tmp_path):
    """What the landed code wrote: AFTConv bodies whose Convs have no kernel_shape. The
    check names each Conv inside the inlined body, with the calling node."""
    model = onnx.load(exports["tensorrt", "custom"])
    for f in model.functions:
        for node in f.node:
            keep = [a for a in node.attribute if a.name != "kernel_shape"]
            del node.attribute[:]
            node.attribute.extend(keep)
    report = check_model(model)
    assert report.status == {"8.5": "not targeted", "8.6": "not targeted", "10.3": "refuses", "10.13": "accepts",
                             "11.4": "accepts"}  # fmt: skip
    found = [f for f in report.findings if f.rule == "conv.kernel-shape"]
    assert len(found) == 2 * 2  # two Convs in the body of each of the two AFT-conv layers
    calls = {n.name: n.op_type for n in model.graph.node if n.op_type.startswith("AFTConv.")}
    for f in found:
        assert f.function["call"] in calls and f.function["name"] == calls[f.function["call"]] and f.module
        assert f"in the body of com.aft::{f.function['name']} called by {f.function['call']}" in f.where()
        assert f"{f.module}/Conv_" in f.node  # the body's node is named after its layer


def test_the_landed_int32_bias_dequantize_is_named(tmp_path):
    """ONNX Runtime's QDQ quantiser with its default QuantizeBias (what the landed code ran)
    writes INT32 bias DequantizeLinear nodes: refused by every version, each named."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from tests.test_quantize import _conv_gemm_with_biases

    src = _conv_gemm_with_biases(tmp_path / "cg.onnx")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"image": np.random.default_rng(i).standard_normal((2, 3, 32, 32)).astype(np.float32)}
                              for i in range(4)])  # fmt: skip

        def get_next(self):
            return next(self.data, None)

    out = tmp_path / "cg.int8.onnx"
    quantize_static(str(src), str(out), Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, per_channel=True,
                    extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})  # fmt: skip
    report = check_model(out, list(SUPPORTED))
    bias = [f for f in report.findings if f.rule == "qdq.dequantize-input"]
    assert {f.node for f in bias} == {n.name for n in onnx.load(out).graph.node
                                      if n.op_type == "DequantizeLinear" and "bias" in n.input[0]}  # fmt: skip
    assert len(bias) == 2 and all(f.versions == list(SUPPORTED) for f in bias)


def test_other_runtime_target_is_checked_by_that_runtime(exports, tmp_path, monkeypatch):
    """TensorRT's rules do not apply to a file made for ONNX Runtime; the offline checker runs no runtime
    (it says the file was not loaded: unverified), the check stage loads it there."""
    import aft_export.runners as runners
    from aft_export.tensorrt.checks import check_files

    model = onnx.load(exports["tensorrt", "decomposed"])
    for p in model.metadata_props:
        if p.key == "export_target":
            p.value = "ort-cpu"
    path = tmp_path / "ort.onnx"
    onnx.save(model, path)

    def no_runtime(*a, **k):
        raise AssertionError("the offline checker ran ONNX Runtime")

    with monkeypatch.context() as m:
        m.setattr(runners, "OrtRunner", no_runtime)
        offline = check_model(model)
    assert offline.status == {"ort-cpu": "not loaded"} and offline.verdict.status == "unverified"
    assert "not TensorRT" in offline.notes[0] and "was not loaded" in offline.verdict.reasons[0]
    report = check_files([str(path)], offline_only=True).reports[0]
    assert report.status == {"ort-cpu": "accepts"} and report.exit_code == 0
    assert "not TensorRT" in report.notes[0] and "loading it in ONNX Runtime" in report.notes[1]
    full = check_files([str(path)])  # the installed TensorRT parser (TensorRT-RTX in CI) is not this file's judge
    assert full.reports[0].status == {"ort-cpu": "accepts"} and full.real == [None] and full.verdict.status == "ok"
    model.graph.node[0].op_type = "NoSuchOp"
    onnx.save(model, path)
    report = check_files([str(path)], offline_only=True).reports[0]
    assert report.status == {"ort-cpu": "refuses"} and [f.rule for f in report.findings] == ["ort.load"]


def test_versions_without_rules_are_warnings_not_passes(exports):
    report = check_model(exports["tensorrt8", "custom"], ["9.2", "10.8", "8.6"])
    assert report.status == {"9.2": "no rules", "10.8": "warnings", "8.6": "accepts"}
    assert report.exit_code == 3


def test_quantize_stops_when_every_version_refuses_and_writes_nothing(exports, tmp_path, cifar10, monkeypatch):
    from aft_export.quantization import placement

    original = placement.ort_quantize

    def int32_bias(model, opts, exclude, ranges):  # the landed behaviour: a bias read through INT32 Q/DQ
        out = original(model, opts, exclude, ranges)
        inits = {t.name: t for t in out.graph.initializer}
        add = next(n for n in out.graph.node if n.op_type == "Add" and n.input[1] in inits
                   and inits[n.input[1]].data_type == onnx.TensorProto.FLOAT)  # fmt: skip
        bias = onnx.numpy_helper.to_array(inits[add.input[1]])
        scale = np.float32(np.abs(bias).max() / 2**20)
        out.graph.initializer.extend([
            onnx.numpy_helper.from_array(np.round(bias / scale).astype(np.int32), "bias_q"),
            onnx.numpy_helper.from_array(scale, "bias_scale"), onnx.numpy_helper.from_array(np.int32(0), "bias_zp")])
        out.graph.node.insert(0, onnx.helper.make_node("DequantizeLinear", ["bias_q", "bias_scale", "bias_zp"],
                                                       ["bias_dq"], name="bias_dq"))  # fmt: skip
        add.input[1] = "bias_dq"
        return out

    monkeypatch.setattr(placement, "ort_quantize", int32_bias)
    out = tmp_path / "refused.onnx"
    with pytest.raises(AFTExportError, match=r"int8 quantisation stops: TensorRT 10\.3, 10\.13, 11\.4 would refuse"):
        quantize_model(exports["tensorrt", "custom"], out, str(cifar10 / "train.tar"),
                       QuantizeOptions(images=16, cache_dir=""), progress=False, **QUIET)  # fmt: skip
    assert not out.exists()


def test_a_version_specific_refusal_warns_and_writes(exports, tmp_path):
    """Only 10.3 refuses a Conv without kernel_shape: the export is still good for 10.13+."""
    from aft_export.trtcheck import enforce

    model = onnx.load(exports["tensorrt", "custom"])
    for node in model.functions[0].node:
        keep = [a for a in node.attribute if a.name != "kernel_shape"]
        del node.attribute[:]
        node.attribute.extend(keep)
    said = []
    enforce(check_model(model), said.append)
    assert len(said) == 1 and said[0].startswith("warning: TensorRT 10.3 would refuse")


def test_build_checks_the_installed_version_before_building(exports):
    from aft_export.tensorrt.build import check_for_version

    assert check_for_version(exports["tensorrt8", "custom"], (8, 5, 2), **QUIET)["status"] == "accepts"
    with pytest.raises(AFTExportError, match="the build stops: TensorRT 8.6 would refuse"):
        check_for_version(exports["tensorrt", "custom"], (8, 6, 1), **QUIET)


def test_a_report_with_also_columns_serves_the_build(exports, monkeypatch):
    """check_model(also=...) reports each column as a check of that column alone does, from the
    same reading of the graph; the build given that report checks nothing itself and says the
    same, a refusal included."""
    import aft_export.tensorrt.build as build

    path = exports["tensorrt", "custom"]
    report = check_model(path, also=("8.6", "rtx-1.7"))
    assert report.to_dict() == check_model(path).to_dict()  # the default report unchanged, columns aside
    for column in ("8.6", "rtx-1.7"):
        alone = check_model(path, [column])
        assert report.columns[column].to_dict() == alone.to_dict(), column
    calls = []
    monkeypatch.setattr(build, "check_model", lambda *a, **k: calls.append(a) or check_model(*a, **k))
    assert build.check_for_version(path, (1, 7, 1), library="tensorrt-rtx", checked=report, **QUIET) == \
        build.check_for_version(path, (1, 7, 1), library="tensorrt-rtx", **QUIET)  # fmt: skip
    assert len(calls) == 1  # the second call, given no report
    with pytest.raises(AFTExportError, match="the build stops: TensorRT 8.6 would refuse"):
        build.check_for_version(path, (8, 6, 1), checked=report, **QUIET)
    assert len(calls) == 1
    # a report without the parser's column: the build checks for itself
    build.check_for_version(path, (1, 7, 1), library="tensorrt-rtx", checked=check_model(path), **QUIET)
    assert len(calls) == 2


def test_cli_exit_codes_and_json(exports, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(main, ["check", str(exports["tensorrt8", "custom"])])
    assert ok.exit_code == 0, ok.output
    assert "TRT 8.5" in ok.output and "the offline rules of every checked version pass it" in ok.output
    refused = runner.invoke(main, ["check", str(exports["tensorrt", "custom"]), "--trt", "8.6"])
    assert refused.exit_code == 1 and "functions.not-imported" in refused.output
    warned = runner.invoke(main, ["check", str(exports["tensorrt", "custom"]), "--trt", "12.1"])
    assert warned.exit_code == 3 and "no rules" in warned.output
    data = runner.invoke(main, ["check", str(exports["tensorrt", "custom"]), "--json"])
    (report,) = json.loads(data.output)["files"]
    assert report["exit_code"] == 0 and report["checked"] == ["10.3", "10.13", "11.4"]
    missing = runner.invoke(main, ["check", str(tmp_path / "none.onnx")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    junk = runner.invoke(main, ["check", str(tmp_path / "junk.onnx")])
    assert junk.exit_code == 2 and "not a readable ONNX file" in junk.output
    bad = runner.invoke(main, ["check", str(exports["tensorrt", "custom"]), "--trt", "ten"])
    assert bad.exit_code == 2 and "give a TensorRT version" in bad.output


def test_cli_lists_every_rule_with_its_versions_and_source():
    from aft_export.trtcheck.rules import RULES

    runner = CliRunner()
    rows = json.loads(runner.invoke(main, ["check", "--rules", "--json"]).output)["rules"]
    assert [r["id"] for r in rows] == list(RULES) and all(r["source"] and r["fix"] for r in rows)
    by_id = {r["id"]: r["versions"] for r in rows}
    assert by_id["functions.not-imported"] == ["8.5", "8.6"]  # local functions arrive in 9.0
    assert by_id["conv.kernel-shape"] == ["8.5", "8.6", "10.3"]  # fixed in 10.4
    assert "11.4" in by_id["typed.mixed-inputs"] and "8.6" not in by_id["typed.mixed-inputs"]
    text = runner.invoke(main, ["check", "--rules", "--trt", "10.3"])
    assert text.exit_code == 0 and f"{len(RULES)} rules" in text.output and "source: " in text.output
    unknown = runner.invoke(main, ["check", "--rules", "--trt", "9.9"])
    assert unknown.exit_code == 2 and "no rules for TensorRT 9.9" in unknown.output
    nothing = runner.invoke(main, ["check"])
    assert nothing.exit_code == 2 and "no ONNX file to check; give one or more" in nothing.output
