"""trtexec/polygraphy command lines for our artifacts, checked against the consumers.

trtexec cannot run here (no TensorRT): its flags are checked against what the module
says each TensorRT generation takes. polygraphy can: every generated ``polygraphy run``
line goes through polygraphy's own parser and script generator (``--gen-script``, which
builds the whole run without executing it), and the ONNX Runtime half really runs on
the exported graphs. Nothing here runs or imitates TensorRT.
"""

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner
import pytest

from aft_export.errors import AFTExportError
from aft_export.tensorrt.nvtools import (fp16_layer_plan, fp32_rule_plan, verification_commands,
                                write_verification_commands)  # fmt: skip
from aft_export.verify.compare import TOLERANCES
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.runners import OrtRunner
from tests.conftest import need_module

QUIET = dict(log=lambda *a: None)
PRECISION_FLAGS = ("--fp16", "--int8", "--best", "--precisionConstraints", "--layerPrecisions", "--layerOutputTypes")


@pytest.fixture(scope="module")
def models(tmp_path_factory, cifar10, tiny_onnx):
    """Tiny exports: AFT-full with dynamic and fixed batch, fp16 and int8 of it, AFT-conv
    with dynamic H/W, and the fp16/int8 graphs relabelled for the tensorrt8 target
    (functions inlined, ``export_target=tensorrt8``) as that exporter will write them."""
    d = tmp_path_factory.mktemp("nv")
    full = tiny_onnx.ckpt(d / "full.pt", "aft_full_test")
    conv = tiny_onnx.ckpt(d / "conv.pt", "aft_conv_test")
    out = {"fp32": d / "full.onnx", "b4": d / "full_b4.onnx", "hw": d / "conv_hw.onnx"}
    tiny_onnx.export(full, out["fp32"])
    tiny_onnx.export(full, out["b4"], batch_dim="4")
    tiny_onnx.export(conv, out["hw"], dynamic_hw=True)
    for p in ("fp16", "int8", "int8_fp32"):  # int8: the rest in fp16 (the tensorrt target's); int8_fp32 in fp32
        out[p] = d / f"full.{p}.onnx"
        quantize_model(out["fp32"], out[p], str(cifar10 / "train.tar"),
                       QuantizeOptions(precision=p[:4], images=16, cache_dir="",
                                       rest_precision="fp32" if p == "int8_fp32" else None),
                       progress=False, **QUIET)  # fmt: skip
    for p in ("fp32", "fp16", "int8"):  # a tensorrt8 int8 keeps its rest in fp32
        m = onnx.inliner.inline_local_functions(onnx.load(out["int8_fp32" if p == "int8" else p]))
        entry = m.metadata_props.add()
        entry.key, entry.value = "export_target", "tensorrt8"
        out[f"{p}_trt8"] = d / f"full8.{p}.onnx"
        onnx.save(m, out[f"{p}_trt8"])
    # and an int8 file of the real tensorrt8 export (its inlined core and decomposed LayerNorm keep their modules)
    out["trt8_export"] = d / "full.trt8.onnx"
    tiny_onnx.export(full, out["trt8_export"], target="tensorrt8")
    out["trt8_export_int8"] = d / "full.trt8.int8.onnx"
    quantize_model(out["trt8_export"], out["trt8_export_int8"], str(cifar10 / "train.tar"),
                   QuantizeOptions(images=16, cache_dir=""), progress=False, **QUIET)  # fmt: skip
    return out


def _argv(command: str) -> list[str]:
    return shlex.split(command)


def _opt(argv, name):
    """Values of ``--name=value`` options, or of ``--name v1 v2 ...`` (up to the next option)."""
    vals = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
    if name in argv:
        i = argv.index(name) + 1
        while i < len(argv) and not argv[i].startswith("--"):
            vals.append(argv[i])
            i += 1
    return vals


# ---------------------------------------------------------------- shapes


def test_dynamic_batch_profile_in_every_tool(models):
    c = verification_commands(models["fp32"], batch="2,4,16")
    assert c["input"] == {"name": "image", "min": [2, 3, 32, 32], "opt": [4, 3, 32, 32], "max": [16, 3, 32, 32],
                          "dynamic": True}  # fmt: skip
    for key in ("trt11", "trt10"):
        tx = _argv(c["generations"][key]["trtexec_build"])
        assert _opt(tx, "--minShapes") == ["image:2x3x32x32"]
        assert _opt(tx, "--optShapes") == ["image:4x3x32x32"]
        assert _opt(tx, "--maxShapes") == ["image:16x3x32x32"]
        assert _opt(_argv(c["generations"][key]["trtexec_latency"]), "--shapes") == ["image:4x3x32x32"]
        pg = _argv(c["generations"][key]["polygraphy"])
        assert _opt(pg, "--trt-min-shapes") == ["image:[2,3,32,32]"]
        assert _opt(pg, "--trt-opt-shapes") == ["image:[4,3,32,32]"]
        assert _opt(pg, "--trt-max-shapes") == ["image:[16,3,32,32]"]
        assert _opt(pg, "--input-shapes") == ["image:[4,3,32,32]"]
    assert verification_commands(models["fp32"])["input"]["max"] == [32, 3, 32, 32]  # the build default 1,8,32


def test_fixed_batch_graph_gets_no_shape_flags(models):
    """trtexec refuses shapes for a static input ("Static model does not take explicit shapes")."""
    c = verification_commands(models["b4"])
    assert c["input"]["min"] == c["input"]["max"] == [4, 3, 32, 32] and not c["input"]["dynamic"]
    for key in ("trt11", "trt10"):
        g = c["generations"][key]
        for cmd in (g["trtexec_build"], g["trtexec_latency"], g["polygraphy"]):
            assert not [a for a in _argv(cmd) if "Shapes" in a or "shapes" in a], cmd
    with pytest.raises(AFTExportError, match="fixed batch of 4"):
        verification_commands(models["b4"], batch="1,8,32")


def test_dynamic_hw_profile(models):
    c = verification_commands(models["hw"], batch="1,2,4", hw="16,32,64")
    tx = _argv(c["generations"]["trt10"]["trtexec_build"])
    assert _opt(tx, "--minShapes") == ["image:1x3x16x16"] and _opt(tx, "--maxShapes") == ["image:4x3x64x64"]
    assert _opt(_argv(c["generations"]["trt10"]["polygraphy"]), "--input-shapes") == ["image:[2,3,32,32]"]
    default = verification_commands(models["hw"])  # the graph's own size when no --hw is given
    assert default["input"]["min"][2:] == default["input"]["max"][2:] == [32, 32]
    with pytest.raises(AFTExportError, match="height/width"):
        verification_commands(models["hw"], hw="64,32,16")


# ---------------------------------------------------------------- precision per generation


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_strongly_typed_generations_take_precision_from_the_graph(models, precision):
    c = verification_commands(models[precision])
    assert c["precision"] == precision and c["export_target"] == "tensorrt"
    assert c["tolerance"]["atol"] == TOLERANCES[precision].max_abs
    t11, t10 = (_argv(c["generations"][k]["trtexec_build"]) for k in ("trt11", "trt10"))
    assert "--stronglyTyped" in t10 and "--stronglyTyped" not in t11  # a deprecated no-op in 11.x
    for tx in (t11, t10):
        assert not [a for a in tx if a.split("=")[0] in PRECISION_FLAGS]
        assert "--skipInference" in tx and "--noTF32" in tx and "--memPoolSize=workspace:1024" in tx
    for key in ("trt11", "trt10"):
        pg = _argv(c["generations"][key]["polygraphy"])
        assert "--strongly-typed" in pg and not {"--fp16", "--int8", "--tf32"} & set(pg)
        assert _opt(pg, "--atol") == [f"{TOLERANCES[precision].max_abs:g}"] and _opt(pg, "--rtol") == ["0"]
        assert _opt(pg, "--check-error-stat") == ["max"]
    assert not c["generations"]["trt8"]["applies"]  # functions and opset 18: not for TensorRT 8.x
    assert "tensorrt8" in c["generations"]["trt8"]["why_not"]


def test_trt8_int8_is_int8_without_fp16(models):
    g = verification_commands(models["int8_trt8"])["generations"]["trt8"]
    tx, pg = _argv(g["trtexec_build"]), _argv(g["polygraphy"])
    assert "--int8" in tx and "--fp16" not in tx and "--stronglyTyped" not in tx and "--buildOnly" in tx
    assert "--int8" in pg and "--fp16" not in pg and "--strongly-typed" not in pg
    fp32 = verification_commands(models["fp32_trt8"])["generations"]["trt8"]
    assert not [a for a in _argv(fp32["trtexec_build"]) if a.split("=")[0] in PRECISION_FLAGS]


def test_trt8_int8_with_the_fp16_rest_names_its_flags(models):
    """TensorRT 8 takes precision from builder flags: the script's trt8_fp16_rest builds the same int8
    layers with --fp16 allowed and the fixed rule's layers (AFT core, LayerNorm) pinned to fp32, the
    precisions the tensorrt target's int8 file carries in its graph."""
    from aft_export.artifacts.graph import aft_core_nodes, node_module

    c = verification_commands(models["trt8_export_int8"])
    r = c["generations"]["trt8"]["fp16_rest"]
    tx, pg = _argv(r["trtexec_build"]), _argv(r["polygraphy"])
    assert {"--int8", "--fp16", "--precisionConstraints=obey", "--buildOnly"} <= set(tx)
    spec = dict(item.rsplit(":", 1) for item in _opt(tx, "--layerPrecisions")[0].split(","))
    assert set(spec.values()) == {"fp32"} and "*" not in spec  # the rest is TensorRT's choice, fp16 allowed
    assert _opt(tx, "--layerOutputTypes") == _opt(tx, "--layerPrecisions") and r["engine"] in _opt(tx, "--saveEngine")[0]
    model = onnx.load(models["trt8_export_int8"])
    core = set(aft_core_nodes(model))
    norms = {n.name for n in model.graph.node if (node_module(n) or ("", ""))[1] == "LayerNorm"}
    # every layer of the (inlined) core and the (decomposed) LayerNorm that computes in float, nothing else
    ops, spec = {n.name: n.op_type for n in model.graph.node}, set(spec)
    assert core and norms and spec <= core | norms
    assert {"Exp", "Div", "MatMul"} <= {ops[x] for x in spec & core} and "Constant" not in {ops[x] for x in spec}
    assert {"ReduceMean", "Sqrt"} <= {ops[x] for x in spec & norms} and "Shape" not in {ops[x] for x in spec}
    assert {"--int8", "--fp16"} <= set(pg) and _opt(pg, "--precision-constraints") == ["obey"]
    assert set(_opt(pg, "--layer-precisions")) == {f"{x}:float32" for x in spec}
    assert any("trt8_fp16_rest" in note for note in c["generations"]["trt8"]["notes"])
    script = write_verification_commands(models["trt8_export_int8"]).read_text()
    assert "trt8_fp16_rest() {" in script and "trt8|trt8_fp16_rest|rtx|onnxrt)" in script
    assert "fp16_rest" not in verification_commands(models["int8"])["generations"]["trt10"]
    # a node the recipe's `keep_fp32` chose is pinned fp32 too, as the tensorrt target's fp16 rest keeps it
    kept = next(n.name for n in model.graph.node if n.op_type == "MatMul" and n.name not in core | norms)
    meta = next(p for p in model.metadata_props if p.key == "quantization")
    meta.value = json.dumps({**json.loads(meta.value), "keep_fp32": {re.escape(kept) + "$": 1}})
    assert kept not in spec and set(fp32_rule_plan(model)) == spec | {kept}
    # a pattern an older release recorded (compiled by Python's re) that RE2 does not take: the file's recipe is
    # malformed, said by its metadata key (the option's name would be turned into another command's flag)
    for old, said in [("", "pattern '' is empty"), ("(?=x)", "is not a regular expression RE2 takes")]:
        meta.value = json.dumps({**json.loads(meta.value), "keep_fp32": {old: 1}})
        with pytest.raises(AFTExportError) as err:
            fp32_rule_plan(model, "m.int8.onnx")
        message = str(err.value)
        assert message.startswith("m.int8.onnx's metadata: quantization records a keep_fp32 pattern this release "
                                  "cannot use (") and said in message and "`keep_fp32`" not in message, message
        assert message.endswith("; quantise the model again with this release (`aft-export quantize`)")


def test_trt8_fp16_pins_the_graphs_fp32_islands(models):
    """fp16 on 8.x: --fp16 with every layer fp32 unless the graph computes it in fp16."""
    g = verification_commands(models["fp16_trt8"])["generations"]["trt8"]
    tx = _argv(g["trtexec_build"])
    assert "--fp16" in tx and "--int8" not in tx and "--precisionConstraints=obey" in tx
    spec = dict(item.rsplit(":", 1) for item in _opt(tx, "--layerPrecisions")[0].split(","))
    outs = dict(item.rsplit(":", 1) for item in _opt(tx, "--layerOutputTypes")[0].split(","))
    assert spec.pop("*") == "fp32" and outs.pop("*") == "fp32"
    assert set(spec.values()) == {"fp16"} and set(outs.values()) == {"fp16"}
    model = onnx.load(models["fp16_trt8"])
    by_name = {n.name: n for n in model.graph.node}
    # LayerNorm and the (inlined) AFT core are fp32 in the graph: never named fp16
    kept = {n.name for n in model.graph.node if n.op_type in ("LayerNormalization", "Exp", "ReduceMax")}
    assert kept and not kept & set(spec) and not kept & set(outs)
    assert {by_name[x].op_type for x in spec} >= {"MatMul", "Conv"} and "Cast" not in {by_name[x].op_type for x in spec}
    assert any(by_name[x].op_type == "Cast" for x in outs)  # casts to fp16 keep their output type
    plan = fp16_layer_plan(model)
    pg = _opt(_argv(g["polygraphy"]), "--layer-precisions")
    assert set(pg) == {f"{x}:float16" for x in plan["fp16"]} | {f"{x}:float32" for x in plan["fp32"]}
    assert kept <= set(plan["fp32"])


def test_unknown_export_target_is_a_user_error(models, tmp_path):
    m = onnx.load(models["fp32"])
    entry = m.metadata_props.add()
    entry.key, entry.value = "export_target", "tensorrt7"
    onnx.save(m, tmp_path / "x.onnx")
    with pytest.raises(AFTExportError, match="export_target"):
        verification_commands(tmp_path / "x.onnx")
    with pytest.raises(AFTExportError, match="does not exist"):
        verification_commands(tmp_path / "missing.onnx")


# ---------------------------------------------------------------- the script


def test_script_is_executable_atomic_and_honours_the_umask(models, tmp_path):
    src = tmp_path / "m.int8.onnx"
    src.write_bytes(models["int8"].read_bytes())
    old = os.umask(0o027)
    try:
        path = write_verification_commands(src)
    finally:
        os.umask(old)
    assert path == tmp_path / "m.int8.verify.sh"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.int8.onnx", "m.int8.verify.sh"]  # no temp left
    text = path.read_text()
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    assert "--stronglyTyped" in text and "aft_export.verify.compare.TOLERANCES['int8'].max_abs" in text
    usage = subprocess.run(["bash", str(path)], check=False, capture_output=True, text=True)
    assert usage.returncode == 2 and "trt11|trt10|trt8|rtx|onnxrt" in usage.stderr
    trt8 = subprocess.run(["bash", str(path), "trt8"], check=False, capture_output=True, text=True)
    assert trt8.returncode == 2 and "tensorrt8 target" in trt8.stderr
    with pytest.raises(AFTExportError, match="beside"):
        write_verification_commands(src, out_path=tmp_path.parent / "elsewhere.sh")


def test_tensorrt_rtx_lines(models):
    """Our build with --library tensorrt-rtx and NVIDIA's tensorrt_rtx tool, with the same profile."""
    hw = verification_commands(models["hw"], batch="1,2,4", hw="16,32,48")["rtx"]
    ours = _argv(hw["aft_export_build"])
    assert ours[:5] == ["aft-export", "build", "conv_hw.onnx", "--library", "tensorrt-rtx"]
    assert _opt(ours, "--batch-profile") == ["1,2,4"] and _opt(ours, "--hw-profile") == ["16,32,48"]
    assert _opt(ours, "--output") == ["conv_hw.rtx.engine"]
    tool = _argv(hw["tensorrt_rtx_build"])
    assert tool[:2] == ["tensorrt_rtx", "--onnx=conv_hw.onnx"] and tool[-1] == "--skipInference"
    assert "--minShapes=image:1x3x16x16" in tool and "--maxShapes=image:4x3x48x48" in tool
    assert "--saveEngine=conv_hw.tensorrt_rtx.engine" in tool
    assert _argv(hw["tensorrt_rtx_latency"]) == ["tensorrt_rtx", "--loadEngine=conv_hw.tensorrt_rtx.engine",
                                                 "--shapes=image:2x3x32x32"]  # fmt: skip
    fixed = verification_commands(models["b4"])["rtx"]
    assert "--batch-profile" not in fixed["aft_export_build"] and "Shapes" not in fixed["tensorrt_rtx_build"]


def test_the_script_builds_with_tensorrt_rtx(models, tmp_path):
    """`bash X.verify.sh rtx` builds the engine with TensorRT-RTX for real (on this CPU), and says that
    NVIDIA's tensorrt_rtx tool is not here rather than pretending it ran."""
    need_module("tensorrt_rtx", "pip install -e '.[rtx]'")
    src = tmp_path / "m.int8.onnx"
    src.write_bytes(models["int8"].read_bytes())
    path = write_verification_commands(src)
    env = {**os.environ, "AFT_EXPORT": str(Path(sys.executable).parent / "aft-export"),
           "TENSORRT_RTX": str(tmp_path / "no-such-tool")}  # fmt: skip
    run = subprocess.run(["bash", str(path), "rtx"], check=False, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "built, not run" in run.stdout or "built ahead of time" in run.stdout
    assert (tmp_path / "m.int8.rtx.engine").stat().st_size > 0 and (tmp_path / "m.int8.rtx.engine.json").is_file()
    assert "tensorrt_rtx (TensorRT-RTX SDK) not found" in run.stderr


def test_image_inputs_are_checked(models, tmp_path):
    np.save(tmp_path / "few.npy", np.zeros((3, 3, 32, 32), np.float32))
    # fewer images than the opt batch: batches of all of them, where the profile's min allows
    assert verification_commands(models["fp32"], inputs=tmp_path / "few.npy")["data"]["batch"] == 3
    with pytest.raises(AFTExportError, match="fewer than one batch of 4"):
        verification_commands(models["fp32"], batch="4,8,16", inputs=tmp_path / "few.npy")
    np.save(tmp_path / "wrong.npy", np.zeros((8, 3, 16, 16), np.float32))
    with pytest.raises(AFTExportError, match="opt shape"):
        verification_commands(models["fp32"], inputs=tmp_path / "wrong.npy")


# ---------------------------------------------------------------- polygraphy, for real

POLYGRAPHY = [sys.executable, "-c", "import sys; from polygraphy.tools import main; sys.exit(main())"]


def _polygraphy(argv, cwd, check=True):
    need_module("polygraphy", "pip install -e '.[test]'")
    assert argv[0] == "polygraphy"
    r = subprocess.run(POLYGRAPHY + argv[1:], cwd=cwd, check=False, capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


@pytest.mark.parametrize("key", ["fp32", "b4", "hw", "fp16", "int8", "fp16_trt8", "int8_trt8", "trt8_export_int8"])
def test_polygraphy_accepts_every_generated_run(models, key, tmp_path):
    """polygraphy parses each line and writes the script it would run (``--gen-script``
    needs no TensorRT); the script says what the line meant."""
    c = verification_commands(models[key])
    for gen, block in c["generations"].items():
        if not block["applies"]:
            continue
        script = tmp_path / f"{gen}.py"
        _polygraphy(_argv(block["polygraphy"]) + ["--gen-script", str(script)], models[key].parent)
        text = script.read_text()
        assert "TrtRunner(" in text and "OnnxrtRunner(" in text
        assert float(re.search(r"atol=\{'': ([^}]+)\}", text).group(1)) == c["tolerance"]["atol"]
        assert "rtol={'': 0}" in text and "check_error_stat={'': 'max'}" in text
        assert ("strongly_typed=True" in text) == (gen != "trt8")
        assert ("fp16=True" in text) == (gen == "trt8" and c["precision"] == "fp16")
        assert ("int8=True" in text) == (gen == "trt8" and c["precision"] == "int8")
        if "fp16_rest" in block:
            script = tmp_path / f"{gen}_fp16_rest.py"
            _polygraphy(_argv(block["fp16_rest"]["polygraphy"]) + ["--gen-script", str(script)], models[key].parent)
            text = script.read_text()
            assert "fp16=True" in text and "int8=True" in text and "precision_constraints='obey'" in text
        i = c["input"]
        if i["dynamic"]:
            assert f"min={i['min']}, opt={i['opt']}, max={i['max']}" in text
        else:
            assert "Profile()" not in text


def test_onnxrt_half_runs_our_graph_on_the_stated_inputs(models, tmp_path):
    """The ONNX Runtime half of the check runs here; its outputs are our runner's on its inputs."""
    c = verification_commands(models["hw"], batch="1,2,4")
    cwd = models["hw"].parent
    _polygraphy(_argv(c["onnxrt"]) + ["--save-inputs", str(tmp_path / "in.json"),
                                      "--save-outputs", str(tmp_path / "out.json")], cwd)  # fmt: skip
    from polygraphy.comparator import RunResults
    from polygraphy.json import load_json

    feeds = load_json(str(tmp_path / "in.json"))
    assert len(feeds) == c["data"]["iterations"]
    lo, hi = c["data"]["range"]
    runner = OrtRunner(str(models["hw"]))
    (_, results), = RunResults.load(str(tmp_path / "out.json")).items()  # fmt: skip
    for feed, result in zip(feeds, results):
        x = feed["image"]
        assert x.shape == (2, 3, 32, 32) and lo <= x.min() and x.max() <= hi
        np.testing.assert_allclose(result["logits"], runner.run({"image": x})["logits"], atol=1e-5)


def test_real_images_through_the_loader_script(models, tmp_path):
    images = np.random.default_rng(0).standard_normal((20, 3, 32, 32)).astype(np.float32)
    onnx_path = tmp_path / "full.onnx"
    onnx_path.write_bytes(models["fp32"].read_bytes())
    np.save(tmp_path / "verify_inputs.npy", images)
    script = write_verification_commands(onnx_path, inputs=tmp_path / "verify_inputs.npy")
    c = verification_commands(onnx_path, inputs=tmp_path / "verify_inputs.npy")
    assert c["data"] == {"kind": "images", "npy": "verify_inputs.npy", "loader": "full_inputs.py", "batch": 8,
                         "images": 20}  # fmt: skip
    assert "--data-loader-script full_inputs.py" in script.read_text()
    _polygraphy(_argv(c["onnxrt"]) + ["--save-inputs", str(tmp_path / "in.json")], tmp_path)
    from polygraphy.json import load_json

    feeds = load_json(str(tmp_path / "in.json"))
    np.testing.assert_array_equal(np.concatenate([f["image"] for f in feeds]), images[:16])  # whole batches


def test_tolerance_flags_pass_fp16_and_bite(models, tmp_path):
    """polygraphy's comparison with our flags: the fp16 graph is within fp16's max_abs of the
    fp32 graph on the stated inputs, and the same comparison fails when the limit is tiny."""
    cwd = models["fp32"].parent
    fp32 = verification_commands(models["fp32"])
    _polygraphy(_argv(fp32["onnxrt"]) + ["--save-outputs", str(tmp_path / "ref.json")], cwd)
    fp16 = verification_commands(models["fp16"])
    argv = _argv(fp16["generations"]["trt10"]["polygraphy"])
    compare = argv[argv.index("--atol") : argv.index("--check-error-stat") + 2]
    assert compare == ["--atol", "0.05", "--rtol", "0", "--check-error-stat", "max"]
    run = _argv(fp16["onnxrt"]) + ["--load-outputs", str(tmp_path / "ref.json")]
    ok = _polygraphy(run + compare, cwd, check=False)
    assert ok.returncode == 0 and "PASSED" in ok.stdout + ok.stderr, ok.stdout[-2000:]
    tight = _polygraphy(run + ["--atol", "1e-7", "--rtol", "0", "--check-error-stat", "max"], cwd, check=False)
    assert tight.returncode != 0 and "FAILED" in tight.stdout + tight.stderr


def test_script_onnxrt_block_runs(models, tmp_path):
    need_module("polygraphy", "pip install -e '.[test]'")
    src = tmp_path / "m.fp16.onnx"
    src.write_bytes(models["fp16"].read_bytes())
    script = write_verification_commands(src)
    shim = tmp_path / "polygraphy-here"
    shim.write_text(f"#!/bin/sh\nexec {shlex.join(POLYGRAPHY)} \"$@\"\n")
    shim.chmod(0o755)
    r = subprocess.run(["bash", str(script), "onnxrt"], check=False, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "POLYGRAPHY": str(shim)})  # fmt: skip
    assert r.returncode == 0 and "PASSED" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
