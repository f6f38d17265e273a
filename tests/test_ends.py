"""What a file takes and gives, read from its graph (aft_export/artifacts/ends.py): every form the exporter
writes read for what it is, with its marks and without them (tools that rewrite graphs drop node
metadata), at every precision; a claim the graph contradicts is one line naming both; an engine's manifest
held to its own input profile."""

from __future__ import annotations

import copy
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aft_export.artifacts.ends import (Claim, Contradicted, disagreements, engine_format, engine_input_problem,
                                       ends_of, graph_ends)  # fmt: skip
from aft_export.artifacts.onnxio import ArtifactMeta
from aft_export.data.formats import FLOAT_NCHW, FORMATS, NORMALIZED, UINT8_NHWC
from aft_export.errors import AFTExportError
from aft_export.exporting.pixels import with_pixel_input, with_probabilities
from aft_export.readers import Malformed

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


@pytest.fixture(scope="module")
def normal(tmp_path_factory, tiny_onnx):
    root = tmp_path_factory.mktemp("ends")
    return onnx.load(tiny_onnx.export(tiny_onnx.ckpt(root / "m.pt", "aft_simple_test"), root / "m.onnx"))


def _form(model, form: str, probabilities: bool = False):
    out = with_pixel_input(copy.deepcopy(model), form, MEAN, STD)
    return with_probabilities(out) if probabilities else out


def _unmarked(model):
    """``model`` as a tool that rewrites graphs leaves it: no node metadata, no model metadata."""
    out = copy.deepcopy(model)
    for node in out.graph.node:
        del node.metadata_props[:]
    del out.metadata_props[:]
    return out


def _set(model, **values):
    out = copy.deepcopy(model)
    props = {p.key: p.value for p in out.metadata_props} | values
    helper.set_model_props(out, props)
    return out


@pytest.mark.parametrize("form, probabilities", [(NORMALIZED, False), (UINT8_NHWC, False), (FLOAT_NCHW, False),
                                                 (FLOAT_NCHW, True)])  # fmt: skip
def test_the_graph_says_what_each_form_takes_and_gives_marked_or_not(normal, form, probabilities):
    model = normal if form == NORMALIZED and not probabilities else _form(normal, form, probabilities)
    for m, how in ((model, "mark"), (_unmarked(model), "nodes")):
        ends = graph_ends(m)
        assert ends.takes is FORMATS[form] and ends.gives == ("probabilities" if probabilities else "logits")
        assert ends.fits and ends.width == 10 and ends.chw == (3, 32, 32)
        assert ends.prologue == ("" if form == NORMALIZED else how)
        assert ends_of(m, "m.onnx") == ends  # our metadata, or none, agrees with it


def test_a_prologue_is_a_scale_by_255_at_the_input(normal):
    """Multiplying by 1/255 is the same prologue; dividing by 256, or by 255 anywhere but at the input, is not."""
    fl = _unmarked(_form(normal, FLOAT_NCHW))
    first = fl.graph.node[0]
    assert first.op_type == "Div" and first.input[0] == "image"

    def scaled(op: str, value: float):
        m = copy.deepcopy(fl)
        node = m.graph.node[0]
        node.op_type = op
        init = next(t for t in m.graph.initializer if t.name == node.input[1])
        init.CopyFrom(numpy_helper.from_array(np.array(value, np.float32), init.name))
        return graph_ends(m).takes.name

    assert scaled("Mul", 1 / 255) == FLOAT_NCHW and scaled("Div", 256.0) == NORMALIZED
    deeper = copy.deepcopy(fl)  # the same division after another node: not at the input
    deeper.graph.node.insert(0, helper.make_node("Identity", ["image"], ["image_copy"]))
    deeper.graph.node[1].input[0] = "image_copy"
    assert graph_ends(deeper).takes.name == NORMALIZED


def test_an_input_no_format_describes_is_said_so(normal):
    planar = copy.deepcopy(normal)  # uint8 channels first: no format of the table
    planar.graph.input[0].type.tensor_type.elem_type = TensorProto.UINT8
    ends = graph_ends(planar)
    assert not ends.fits and "uint8 [N, 3, 32, 32], which no input format describes" in ends.what
    with pytest.raises(Contradicted, match="says input_format uint8-nhwc; its graph takes uint8 \\[N, 3, 32, 32\\]"):
        ends_of(_set(planar, input_format=UINT8_NHWC), "p.onnx")


def test_metadata_the_graph_contradicts_is_one_line_naming_both(normal):
    with pytest.raises(Contradicted) as err:
        ends_of(_set(normal, input_format=UINT8_NHWC), "liar.onnx")
    assert str(err.value) == ("liar.onnx: its metadata says input_format uint8-nhwc; its graph takes float32 "
                              "[N, 3, 32, 32] normalised images (no pixel prologue: nothing divides the input by "
                              "255); export it again with `aft-export export`")  # fmt: skip
    with pytest.raises(Contradicted, match="says output_format probabilities; its graph gives logits \\(no Softmax "
                                           "makes its output \"logits\"\\)"):  # fmt: skip
        ends_of(_set(normal, output_format="probabilities"), "liar.onnx")
    ds = _form(normal, FLOAT_NCHW, probabilities=True)
    with pytest.raises(Contradicted, match="says output_format logits; its graph gives probabilities"):
        ends_of(_set(ds, output_format="logits"), "liar.onnx")
    with pytest.raises(Malformed, match="input_format is \"rgb565\", not one of normalized, uint8-nhwc, float-nchw"):
        ends_of(_set(normal, input_format="rgb565"), "odd.onnx")
    malformed: list[str] = []  # info: said, not raised
    claim = Claim.of_meta(ArtifactMeta.of(_set(normal, input_format="rgb565", output_format="probabilities")),
                          malformed)  # fmt: skip
    assert malformed == ["input_format"] and claim.output_format == "probabilities"
    assert len(disagreements(graph_ends(normal), claim, "odd.onnx")) == 1


def test_an_image_size_the_graph_contradicts_is_one_line_naming_both(normal):
    """input_size too: the graph's fixed (C, H, W) is the truth, in either layout; a size the graph leaves free
    (AFT-conv's dynamic height and width) contradicts nothing."""
    with pytest.raises(Contradicted) as err:
        ends_of(_set(normal, input_size="[3, 64, 64]"), "liar.onnx")
    assert str(err.value) == ("liar.onnx: its metadata says input_size [3, 64, 64]; its graph takes float32 "
                              "[N, 3, 32, 32]; export it again with `aft-export export`")  # fmt: skip
    with pytest.raises(Contradicted, match="says input_size \\[1, 32, 32\\]; its graph takes uint8 \\[N, 32, 32, 3\\]"):
        ends_of(_set(_form(normal, UINT8_NHWC), input_size="[1, 32, 32]"), "liar.onnx")
    assert ends_of(_set(_form(normal, UINT8_NHWC), input_size="[3, 32, 32]"), "ok.onnx").takes.name == UINT8_NHWC
    free = copy.deepcopy(normal)
    for d in free.graph.input[0].type.tensor_type.shape.dim[2:]:
        d.dim_param = "side"
    assert ends_of(_set(free, input_size="[3, 64, 64]"), "free.onnx").takes.name == NORMALIZED
    with pytest.raises(Malformed, match="input_size"):
        ends_of(_set(normal, input_size="[3, 1e400, 32]"), "odd.onnx")
    malformed = ["input_size"]  # info's reading of the describing keys found it first: said once
    assert Claim.of_meta(ArtifactMeta.of(_set(normal, input_size="[3, 1e400, 32]")), malformed).input_size is None
    assert malformed == ["input_size"]


def test_what_a_user_says_of_another_tool_s_file_is_held_to_its_graph(normal):
    theirs = _unmarked(_form(normal, UINT8_NHWC))
    said = Claim("its preprocessing (theirs.preprocess.json)", "correct input_format in theirs.preprocess.json",
                 input_format=FLOAT_NCHW)  # fmt: skip
    with pytest.raises(Contradicted, match="theirs.onnx: its preprocessing \\(theirs.preprocess.json\\) says "
                                           "input_format float-nchw; its graph takes uint8 \\[N, 32, 32, 3\\] raw "
                                           "pixels \\(its first nodes divide by 255\\); correct input_format"):
        ends_of(theirs, "theirs.onnx", said)
    assert ends_of(theirs, "theirs.onnx", Claim("it", input_format=UINT8_NHWC)).takes.name == UINT8_NHWC


@pytest.mark.parametrize("entry, profile, problem", [
    ({"input_format": NORMALIZED}, {"min": [1, 32, 32, 3]}, "its input profile \\[1, 32, 32, 3\\] is not NCHW"),
    ({"input_format": UINT8_NHWC}, {"dtype": "float32", "min": [1, 32, 32, 3]}, "its input is float32, not uint8"),
    ({"input_format": UINT8_NHWC}, {"dtype": "uint8", "min": [1, 3, 32, 32]},
     "its input profile \\[1, 3, 32, 32\\] is not NHWC with 3 channels"),
    ({"input_format": FLOAT_NCHW}, {"dtype": "uint8", "min": [1, 3, 32, 32]}, "its input is uint8, not float32"),
])  # fmt: skip
def test_an_engine_s_manifest_is_held_to_its_own_input(entry, profile, problem):
    with pytest.raises(Contradicted, match=f"the manifest of e.engine says input_format .*, but {problem}"):
        engine_format(entry, profile, "e.engine")


def test_an_engine_s_manifest_decides_where_it_agrees():
    assert engine_format({}, {"min": [1, 3, 32, 32]}, "old.engine").name == NORMALIZED  # before pixel inputs
    assert engine_format({"input_format": UINT8_NHWC}, {"dtype": "uint8", "min": [1, 32, 32, 3]}, "e").name == UINT8_NHWC
    with pytest.raises(Malformed, match="model.input_format is \"bgr\""):
        engine_format({"input_format": "bgr"}, {}, "e.engine")
    # what the TensorRT runner reads of a loaded engine: its input's dtype and shape (-1: dynamic)
    assert engine_input_problem(FORMATS[UINT8_NHWC], "uint8", (-1, 32, 32, 3)) is None
    assert engine_input_problem(FORMATS[NORMALIZED], "uint8", (-1, 3, 32, 32)) == "its input is uint8, not float32"


def test_a_built_engine_s_manifest_records_what_its_file_takes(normal, tmp_path):
    """build writes the input's dtype and the graph's formats into the manifest: an engine of a uint8 file is fed
    uint8 pixels (before, the manifest kept no input_format, and the TensorRT runner fed it normalised floats
    cast to uint8)."""
    from tests.rtx import need_rtx

    need_rtx()
    from aft_export.options import BuildOptions
    from aft_export.runners.engine import manifest_info
    from aft_export.tensorrt.build import build_engine

    u8 = tmp_path / "u8.onnx"
    onnx.save(_form(normal, UINT8_NHWC), u8)
    result = build_engine(u8, tmp_path / "u8.rtx.engine", BuildOptions(library="tensorrt-rtx"), log=lambda *a: None)
    manifest = json.loads((tmp_path / "u8.rtx.engine.json").read_text())
    assert manifest["input"]["dtype"] == "uint8" and manifest["model"]["input_format"] == UINT8_NHWC
    assert manifest_info(manifest, result.engine).input_format == UINT8_NHWC
    manifest["model"]["input_format"] = NORMALIZED  # hand-edited: its own profile contradicts it
    with pytest.raises(AFTExportError, match="says input_format normalized, but its input is uint8"):
        manifest_info(manifest, result.engine)
