"""What a file is for (issue 33, item 1): the runtimes each file is made for, from its target and
what its compute runs in, and the note the commands that run files on a CPU give for a TensorRT
int8 (rest fp16): the CPU's int8 beside it, or the command that makes it. Tiny hand-made graphs
(an image classifier of 3x2x2 inputs) stand for the files; tests/test_quantize.py and
tests/test_pipeline.py check real ones."""

import json
import logging

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from aft_export.cli import main
from aft_export.artifacts.purpose import cpu_advice, made_for


def classifier(path, rest="fp16", target="tensorrt", source="ab" * 32, int8=True):
    """A 3x2x2 -> 3 classifier: flatten, one MatMul (int8 Q/DQ, or float), a bias Add and a Relu in the
    rest's precision; our metadata (``target`` None: none, as another tool writes it)."""
    half = rest == "fp16"
    ft = np.float16 if half else np.float32
    inits = [numpy_helper.from_array(np.arange(-18, 18, dtype=np.int8).reshape(12, 3), "w"),
             numpy_helper.from_array(np.array(0.05, ft), "s"), numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.full(3, 0.1, ft), "b")]  # fmt: skip
    nodes = [helper.make_node("Flatten", ["image"], ["f"])]
    x = "f"
    if half:
        nodes.append(helper.make_node("Cast", ["f"], ["h"], to=TensorProto.FLOAT16))
        x = "h"
    if int8:
        nodes += [helper.make_node("QuantizeLinear", [x, "s", "z"], ["q"]),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
                  helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wdq"]),
                  helper.make_node("MatMul", ["dq", "wdq"], ["m"])]  # fmt: skip
    else:
        inits[0] = numpy_helper.from_array(np.ones((12, 3), ft), "w")
        nodes.append(helper.make_node("MatMul", [x, "w"], ["m"]))
    nodes += [helper.make_node("Add", ["m", "b"], ["a"]), helper.make_node("Relu", ["a"], ["r"])]
    nodes.append(helper.make_node("Cast", ["r"], ["logits"], to=TensorProto.FLOAT) if half else
                 helper.make_node("Identity", ["r"], ["logits"]))  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 3, 2, 2])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 3])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    if target is not None:
        helper.set_model_props(model, {"aft_export.format": "1", "classes": json.dumps(["a", "b", "c"]),
                                       "input_size": "[3, 2, 2]", "mean": "[0.5, 0.5, 0.5]", "std": "[0.25, 0.25, 0.25]",
                                       "export_target": target, "source_sha256": source})  # fmt: skip
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def test_each_file_says_the_runtimes_it_is_for():
    int8_fp16_rest, int8_fp32_rest = {"int8": 28, "fp16": 64, "fp32": 97}, {"int8": 28, "fp32": 161}
    assert made_for("tensorrt", "int8", int8_fp16_rest) == \
        "TensorRT 10.3+/11, TensorRT-RTX (slow in ONNX Runtime on CPUs: use the portable int8)"  # fmt: skip
    assert made_for("portable", "int8", int8_fp32_rest) == "CPUs: ONNX Runtime, OpenVINO"
    assert made_for("portable", "int8", int8_fp32_rest, weight_bits=7) == "CPUs: ONNX Runtime, OpenVINO"
    assert "OpenVINO on CPUs with VNNI only" in made_for("portable", "int8", int8_fp32_rest, weight_bits=8)
    assert made_for("tensorrt", "int8", int8_fp32_rest) == "TensorRT 10.3+/11, TensorRT-RTX, ONNX Runtime"
    assert made_for("tensorrt", "fp32", {"fp32": 189}).startswith("TensorRT 10.3+/11")
    assert "OpenVINO" in made_for("portable", "fp32", {"fp32": 189})
    assert made_for("tensorrt8", "int8", int8_fp32_rest).startswith("TensorRT 8.5/8.6")
    assert "slow in ONNX Runtime on CPUs" in made_for("tensorrt", "fp16", {"fp16": 92, "fp32": 97})
    assert "slow in ONNX Runtime on CPUs" in made_for("portable", "fp16", {"fp16": 92, "fp32": 97})
    # another tool's file records no target: judged by its compute alone (ModelOpt's int8, rest fp16)
    assert made_for(None, "int8", {"int8": 27, "fp16": 120}).startswith("GPUs: TensorRT 10.3+/11")
    assert "slow in ONNX Runtime on CPUs" in made_for(None, "int8", {"int8": 27, "fp16": 120})
    assert made_for(None, "int8", int8_fp32_rest) == "not recorded (another tool's file)"


def test_what_an_engine_is_for_shows_what_its_manifest_holds_well_formed(tmp_path):
    """A hand-edited manifest's library or targets of the wrong type are said as malformed, not
    shown (they raised TypeError in bench --reference); deploy reads the manifest without the
    entries manifest_problems names."""
    from aft_export.verify import deploy
    from aft_export.artifacts.purpose import engine_made_for

    rtx = {"library": "tensorrt-rtx", "library_version": "1.7", "compute_capabilities": ["8.6", "8.9"]}
    assert engine_made_for(rtx) == "TensorRT-RTX 1.7 on GPUs of compute capability 8.6, 8.9"
    assert engine_made_for({**rtx, "compute_capabilities": [8.6]}) == "TensorRT-RTX 1.7 (compute capabilities " \
                                                                      "malformed, not shown)"  # fmt: skip
    assert engine_made_for({**rtx, "compute_capabilities": "8.6"}).endswith("(compute capabilities malformed, not shown)")
    assert engine_made_for({**rtx, "library": ["x"]}).startswith("an engine (library malformed, not shown) 1.7 on GPUs")
    assert engine_made_for({"library": "tensorrt", "library_version": ["10"]}) == "TensorRT"
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"engine bytes")
    (tmp_path / "m.engine.json").write_text(json.dumps({**rtx, "library": ["x"], "compute_capabilities": [8.6]}))
    assert deploy._purpose_of(engine) == "TensorRT 1.7"  # both malformed entries left out, as info leaves them
    assert deploy._engine_library(engine) == "tensorrt"


def test_a_tensorrt_int8_on_a_cpu_is_pointed_at_the_cpu_int8(tmp_path):
    trt = classifier(tmp_path / "m.int8.onnx")
    advice = cpu_advice(trt)
    assert advice.compute == {"int8": 1, "fp16": 2} and advice.better is None and advice.fp32 is None
    assert advice.text.endswith("aft-export quantize MODEL.onnx --precision int8 --target portable --calib IMAGES "
                                "--output m.portable.int8.onnx")  # fmt: skip
    classifier(tmp_path / "m.onnx", rest="fp32", int8=False)
    assert cpu_advice(trt).fp32 == str(tmp_path / "m.onnx")
    # a portable int8 of another model is not it; the same model's is
    classifier(tmp_path / "m.portable.int8.onnx", rest="fp32", target="portable", source="cd" * 32)
    assert cpu_advice(trt).better is None
    classifier(tmp_path / "m.portable.int8.onnx", rest="fp32", target="portable")
    assert cpu_advice(trt).better == "m.portable.int8.onnx"
    assert "the CPU's int8 beside it, m.portable.int8.onnx, is faster here" in cpu_advice(trt).text
    # no advice for files that are fast on a CPU, or that it cannot read
    assert cpu_advice(tmp_path / "m.portable.int8.onnx") is None and cpu_advice(tmp_path / "m.onnx") is None
    assert cpu_advice(classifier(tmp_path / "rest32.int8.onnx", rest="fp32")) is None
    (tmp_path / "bad.onnx").write_bytes(b"not onnx")
    assert cpu_advice(tmp_path / "bad.onnx") is None and cpu_advice(tmp_path / "x.pt") is None
    # another tool's int8 whose rest is fp16 gets the same advice
    assert cpu_advice(classifier(tmp_path / "theirs.onnx", target=None)).made == "theirs.portable.int8.onnx"


def test_the_commands_that_run_files_on_a_cpu_say_it_once_per_file_as_a_note(tmp_path):
    """bench (eval, infer, parity and serve share the path): one note per file on stderr, in the
    command's words (quantize's flags for the command line it suggests), the exit status and the
    --json output unchanged; none on a GPU provider."""
    trt = classifier(tmp_path / "m.int8.onnx")
    classifier(tmp_path / "m.onnx", rest="fp32", int8=False)
    args = ["bench", str(trt), str(trt), "--batch-size", "1", "--iters", "1", "--warmup", "0", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: m.int8.onnx is int8 with its rest in fp16 (1 int8, 2 fp16 compute nodes), made for "
                     f"TensorRT: slow in ONNX Runtime on a CPU; the CPU's int8 is faster here: aft-export quantize {tmp_path}/m.onnx "
                     f"--precision int8 --target portable --calib IMAGES --output m.portable.int8.onnx"]  # fmt: skip
    assert json.loads(res.stdout)["rows"]  # the report as ever
    classifier(tmp_path / "m.portable.int8.onnx", rest="fp32", target="portable")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and "m.portable.int8.onnx, is faster here" in res.stderr
    res = CliRunner().invoke(main, ["bench", str(tmp_path / "m.portable.int8.onnx"), "--batch-size", "1", "--iters",
                                    "1", "--warmup", "0"])  # fmt: skip
    assert res.exit_code == 0 and "note:" not in res.output


@pytest.mark.parametrize("backend, cpu", [(None, True), ("onnxruntime", True), ("onnxruntime-cuda", False),
                                          ("onnxruntime-tensorrt", False),
                                          ("openvino", False)])  # it computes the fp16 rest in fp32: fast
def test_only_cpu_runners_get_the_note(tmp_path, caplog, backend, cpu):
    from aft_export.api import cpu_notes

    trt = classifier(tmp_path / "m.int8.onnx")
    with caplog.at_level(logging.WARNING, logger="aft_export"):
        cpu_notes([str(trt), str(trt)], backend)
    said = [r.getMessage() for r in caplog.records if "note: m.int8.onnx is int8 with its rest in fp16" in r.getMessage()]
    assert len(said) == cpu


def test_a_python_caller_gets_the_note_in_its_words(tmp_path, caplog):
    """The note comes from the library: a notebook's bench gets it as a warning of the aft_export logger,
    with the command line that makes the CPU's int8 (in flags on both faces: it is typed in a shell)."""
    import aft_export

    trt = classifier(tmp_path / "m.int8.onnx")
    with caplog.at_level(logging.WARNING, logger="aft_export"):
        result = aft_export.bench(trt, batch_sizes=1, iters=1, warmup=0)
    assert result.passed
    (note,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("note: ")]
    assert note.startswith("note: m.int8.onnx is int8 with its rest in fp16") and "--precision int8" in note
