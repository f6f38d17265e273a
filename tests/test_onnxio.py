import json

import onnx
import pytest
from onnx import TensorProto, helper

from aft_export.onnxio import ArtifactMeta


def _model():
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 2, 2])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, 2, 2])
    return helper.make_model(helper.make_graph([helper.make_node("Identity", ["image"], ["logits"])], "g", [x], [y]))


def test_artifact_meta_writes_reads_and_parses_the_metadata_in_one_place():
    model = _model()
    meta = ArtifactMeta({"classes": json.dumps(["a", "b"]), "input_size": "[3, 2, 2]", "mean": "[0.5, 0.5, 0.5]",
                         "std": "[0.25, 0.25, 0.25]", "source_sha256": "ab" * 32, "export_target": "tensorrt8"})  # fmt: skip
    meta["precision"] = "fp16"
    meta.write(model)
    assert [p.key for p in model.metadata_props] == sorted(p.key for p in model.metadata_props)  # deterministic
    back = ArtifactMeta.of(onnx.load_from_string(model.SerializeToString()), "m.onnx")
    assert back.classes == ["a", "b"] and back.input_size == (3, 2, 2) and back.mean == (0.5, 0.5, 0.5)
    assert back.std == (0.25, 0.25, 0.25) and back.source_sha256 == "ab" * 32 and back["precision"] == "fp16"
    assert back.export_target == "tensorrt8" and back.op_form == "custom" and back.where == "m.onnx"
    assert "classes" in back and back.get("nothing", "x") == "x"


def test_missing_and_malformed_values_raise_what_callers_turn_into_one_line_errors():
    empty = ArtifactMeta.of(_model())
    with pytest.raises(KeyError):
        empty.classes
    assert empty.source_sha256 == "" and empty.export_target == "tensorrt"
    with pytest.raises(ValueError):
        ArtifactMeta({"mean": "[0.5, "}).mean


def test_nonfinite_weights_are_found_in_initializers_constants_and_functions():
    import numpy as np
    from onnx import numpy_helper

    from aft_export.onnxio import nonfinite_weights

    model = _model()
    model.graph.initializer.extend([numpy_helper.from_array(np.array([1.0, np.nan, np.nan], np.float32), "w"),
                                    numpy_helper.from_array(np.array([1.0, 2.0], np.float16), "ok"),
                                    numpy_helper.from_array(np.array([7], np.int64), "shape")])  # fmt: skip
    inf = numpy_helper.from_array(np.array([np.inf, -np.inf, 0.0]), "c")  # float64
    model.graph.node.append(helper.make_node("Constant", [], ["c"], value=inf))
    body = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([np.nan], np.float16)))
    model.functions.append(helper.make_function("com.x", "F", [], ["k"], [body], [helper.make_opsetid("", 18)]))
    assert nonfinite_weights(model) == [("w", 2, 0), ("c", 0, 2), ("k", 1, 0)]
    assert nonfinite_weights(_model()) == []
