"""artifacts.kinds: the one place a path's name decides what kind of file it is."""

import pytest

from aft_export.artifacts.kinds import CHECKPOINT, ENGINE, KINDS, ONNX, SOURCE, expected, is_model_source, kind_of


@pytest.mark.parametrize("name, kind", [
    ("model.onnx", ONNX), ("MODEL.INT8.ONNX", ONNX), ("run/model.fp16.rtx.engine", ENGINE), ("m.plan", ENGINE),
    ("ckpt.pt", CHECKPOINT), ("w.PTH", CHECKPOINT), ("w.safetensors", CHECKPOINT), ("spec.yaml", SOURCE),
    ("spec.json", SOURCE), ("notes.txt", None), ("onnx", None), ("", None), (".onnx", None),
])  # fmt: skip
def test_a_path_has_the_kind_its_suffix_names(name, kind):
    assert kind_of(name) is kind


def test_model_sources_are_what_pytorch_runs():
    assert [k.name for k in KINDS if k.model_source] == ["checkpoint", "source"]
    assert is_model_source("a.pt") and is_model_source("a.yml") and not is_model_source("a.onnx")
    assert not is_model_source("a.txt")


def test_a_stem_drops_only_the_kinds_own_suffix():
    assert ONNX.stem("model.int8.ONNX") == "model.int8" and ONNX.stem("model.engine") == "model.engine"
    assert ENGINE.stem("m.rtx.engine") == "m.rtx" and ENGINE.stem("m.plan") == "m"


def test_messages_list_the_kinds_and_their_suffixes():
    assert expected(ONNX, ENGINE) == "an ONNX file (.onnx) or an engine (.engine, .plan)"
    assert expected().count("(") == len(KINDS) and ".safetensors" in expected()
