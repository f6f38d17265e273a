"""tools/make_trt_op_table.py parses onnx-tensorrt operators.md, and the committed ops.json is its output."""

import importlib.util
import json

import pytest

from tests.conftest import REPO

SAMPLE = """# Supported ONNX Operators

TensorRT 10.15 supports operators in the inclusive range of opset 9 to opset 24. More details below.

TensorRT supports the following ONNX data types: FLOAT32, INT8

> Note: UINT8 is only supported as network input or output tensor types.

## Operator Support Matrix

| Operator                  | Supported  | Supported Types | Restrictions |
|---------------------------|------------|-----------------|--------------|
| Add                       | Y          | FP32, FP16, INT32 |
| DequantizeLinear          | Y          | INT8, FP8 | `x_zero_point` must be zero      |
| DynamicQuantizeLinear     | N          | Not supported. Compose it from ONNX operators.
| Slice                     | Y          | FP32, BOOL | `axes` must be an initializer |
| Xor                       | Y          | BOOL
"""


def _script():
    spec = importlib.util.spec_from_file_location("make_trt_op_table", REPO / "tools" / "make_trt_op_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parses_header_and_rows():
    parsed = _script().parse_operators_md(SAMPLE)
    assert parsed["header"]["opset_min"] == 9 and parsed["header"]["opset_max"] == 24
    ops = parsed["operators"]
    assert ops["Add"] == {"supported": True, "types": ["FP32", "FP16", "INT32"], "restrictions": ""}
    assert ops["DequantizeLinear"]["restrictions"] == "`x_zero_point` must be zero"
    assert ops["DynamicQuantizeLinear"]["supported"] is False
    assert ops["DynamicQuantizeLinear"]["types"] == []
    assert ops["Xor"]["types"] == ["BOOL"]


def test_old_header_has_no_minimum():
    parsed = _script().parse_operators_md(SAMPLE.replace(
        "supports operators in the inclusive range of opset 9 to opset 24", "supports operators up to Opset 17"))
    assert parsed["header"]["opset_min"] is None and parsed["header"]["opset_max"] == 17


def test_derivation_refuses_a_changelog_without_the_quoted_line():
    mod = _script()
    with pytest.raises(SystemExit, match="Changelog line not found"):
        mod.build({"8.5-GA": SAMPLE, "8.6-GA": SAMPLE, "10.1-GA": SAMPLE, "10.15": SAMPLE}, "# empty changelog\n")


def test_committed_table_covers_every_target_with_its_source():
    data = json.loads((REPO / "aft_export" / "trtcheck" / "ops.json").read_text())
    versions = data["versions"]
    assert set(versions) == {"8.5", "8.6", "10.3", "10.13", "11.4"}
    for entry in versions.values():
        assert entry["source"]["file"] == "docs/operators.md" and entry["derivation"]
    assert versions["8.5"]["operators"]["LayerNormalization"]["supported"] is False
    assert versions["8.6"]["operators"]["LayerNormalization"]["supported"] is True
    assert "CastLike" not in versions["8.6"]["operators"]
    assert versions["10.3"]["operators"]["Slice"]["restrictions"] == ""
    assert versions["10.13"]["operators"]["Attention"]["supported"] is False
    assert versions["11.4"]["kind"] == "derived_unverified"
