"""TensorRT path: everything that does not need TensorRT runs here for real; the rest is
marked ``trt``/``gpu`` and skips with the reason. Nothing here pretends to be TensorRT."""

import hashlib
import importlib.util
import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from aft_export.cli import main
from aft_export.environment import has_gpu
from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.tensorrt.build import build_engine
from aft_export.runners import TrtRunner
from aft_export.tensorrt.library import (RTX, BuildOptions, Profile, build_plan, check_engine_name, check_trt_version,
                                         choose_library, compute_capabilities, engine_name, input_profile,
                                         network_flags, precision_flags, rtx_runs_on,
                                         version_compatible_runs)  # fmt: skip
from aft_export.tensorrt.manifest import check_manifest, make_manifest, manifest_path, rebuild_command

HAS_TRT = importlib.util.find_spec("tensorrt") is not None
HAS_GPU = has_gpu()
MISSING = [what for what, ok in (("TensorRT is not installed", HAS_TRT), ("no CUDA GPU is visible", HAS_GPU)) if not ok]
needs_trt_and_gpu = pytest.mark.skipif(bool(MISSING), reason="; ".join(MISSING) + " here")
QUIET = dict(log=lambda *a: None)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory, tiny_onnx):
    """The session's tiny exports (tests/conftest.py ``tiny_onnx``), shared with other modules."""
    d = tmp_path_factory.mktemp("trt")
    out = {}
    for key, name, kw in (("dynamic", "aft_full_test", {}), ("fixed", "aft_full_test", {"batch_dim": "4"}),
                          ("hw", "aft_conv_test", {"dynamic_hw": True})):  # fmt: skip
        ckpt = tiny_onnx.ckpt(d / f"{name.split('_')[1]}.pt", name)
        out[key] = d / f"{key}.onnx"
        tiny_onnx.export(ckpt, out[key], **kw)
    return out


def test_profile_parsing():
    assert Profile.parse("1,8,32", 1, "batch", "batch_profile") == Profile(1, 8, 32)
    assert Profile.parse("16", 1, "batch", "batch_profile") == Profile(16, 16, 16)
    assert Profile.parse(None, 4, "batch", "batch_profile") == Profile(4, 4, 4)
    for bad, msg in (("4,2,8", "inconsistent"), ("0,1,2", "inconsistent"), ("1,2", "1 or 3 numbers"),
                     ("a,b,c", "bad batch profile")):  # fmt: skip
        with pytest.raises(AFTExportError, match=msg):
            Profile.parse(bad, 1, "batch", "batch_profile")


def test_input_profiles_from_the_graph(graphs):
    dyn = input_profile(onnx.load(graphs["dynamic"]), BuildOptions(batch_profile="1,8,32"))
    assert (dyn.name, dyn.min, dyn.opt, dyn.max) == ("image", (1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))
    fixed = onnx.load(graphs["fixed"])
    assert input_profile(fixed, BuildOptions(batch_profile=None)).max == (4, 3, 32, 32)
    assert input_profile(fixed, BuildOptions(batch_profile="4")).min == (4, 3, 32, 32)
    with pytest.raises(AFTExportError, match="fixed batch of 4"):
        input_profile(fixed, BuildOptions(batch_profile="1,8,32"))
    hw = onnx.load(graphs["hw"])
    p = input_profile(hw, BuildOptions(batch_profile="1,2,4", hw_profile="16,32,64"))
    assert p.min == (1, 3, 16, 16) and p.max == (4, 3, 64, 64)
    assert input_profile(hw, BuildOptions(batch_profile="2")).opt == (2, 3, 32, 32)  # the training size by default
    with pytest.raises(AFTExportError, match="takes 32x32 images only"):
        input_profile(onnx.load(graphs["dynamic"]), BuildOptions(hw_profile="16,32,64"))


def test_build_options_and_versions():
    with pytest.raises(AFTExportError, match="workspace"):
        BuildOptions(workspace_mb=0)
    with pytest.raises(AFTExportError, match="`hardware_compatibility`"):
        BuildOptions(hardware_compatibility="turing")
    assert check_trt_version("8.5.2.2") == (8, 5, 2, 2)  # JetPack 5.1
    assert check_trt_version("8.6.2.3")[:2] == (8, 6)  # JetPack 6.0
    assert check_trt_version("10.3.0.26") == (10, 3, 0, 26)
    assert check_trt_version("11.4.1")[:2] == (11, 4)
    with pytest.raises(AFTExportError, match=r"TensorRT 8\.4\.3 is too old: aft-export needs 8\.5 .*v3"):
        check_trt_version("8.4.3")
    with pytest.raises(AFTExportError, match="9.x was a limited release"):
        check_trt_version("9.2.0")
    with pytest.raises(AFTExportError, match=r"newer than this aft-export knows \(8\.5 to 11\.x\): its API"):
        check_trt_version("12.0.0")


def test_network_flags_per_version():
    explicit = ("NetworkDefinitionCreationFlag.EXPLICIT_BATCH",)
    strong = ("NetworkDefinitionCreationFlag.STRONGLY_TYPED",)
    assert network_flags((8, 5, 2)) == network_flags((8, 6, 1)) == explicit
    assert network_flags((10, 3, 0)) == network_flags((10, 13, 3)) == strong
    assert network_flags((11, 4, 0)) == ()


def test_precision_follows_the_graph_per_version():
    for v in ((8, 5), (8, 6, 1)):
        assert precision_flags(v, "int8") == ("BuilderFlag.INT8",)  # no FP16: the float parts stay fp32
        assert precision_flags(v, "fp16") == ("BuilderFlag.FP16", "BuilderFlag.OBEY_PRECISION_CONSTRAINTS")
        assert precision_flags(v, "fp32") == ()
    for v in ((10, 3), (10, 13), (11, 4)):
        assert all(precision_flags(v, p) == () for p in ("fp32", "fp16", "int8"))
    assert build_plan((8, 6), "fp16", BuildOptions()).pin_fp32_layers
    assert not build_plan((8, 6), "int8", BuildOptions()).pin_fp32_layers
    assert not build_plan((10, 3), "fp16", BuildOptions()).pin_fp32_layers


def test_same_cc_on_tensorrt_10_3_is_a_clear_error_before_any_build():
    with pytest.raises(AFTExportError, match=r"same-cc` needs TensorRT 10\.9 or newer .*this is 10\.3\.0; "
                                             r"use ampere\+ or none"):  # fmt: skip
        build_plan((10, 3, 0), "fp32", BuildOptions(hardware_compatibility="same-cc"))
    plan = build_plan((10, 13, 3), "fp32", BuildOptions(hardware_compatibility="same-cc"))
    assert plan.hardware_compatibility_level == "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY"
    ampere = build_plan((10, 3), "fp32", BuildOptions(hardware_compatibility="ampere+"))
    assert ampere.hardware_compatibility_level == "HardwareCompatibilityLevel.AMPERE_PLUS"
    with pytest.raises(AFTExportError, match="ampere\\+` needs TensorRT 8.6 or newer; this is 8.5"):
        build_plan((8, 5), "fp32", BuildOptions(hardware_compatibility="ampere+"))
    with pytest.raises(AFTExportError, match="`version_compatible` needs TensorRT 8.6 or newer; this is 8.5"):
        build_plan((8, 5, 2), "int8", BuildOptions(version_compatible=True))
    assert build_plan((8, 6), "int8", BuildOptions(version_compatible=True)).builder_flags == (
        "BuilderFlag.INT8", "BuilderFlag.VERSION_COMPATIBLE")


def test_version_compatibility_as_nvidia_states_it():
    assert version_compatible_runs((10, 8, 0), (10, 9, 0)) and version_compatible_runs((10, 3, 0), (11, 4, 0))
    assert version_compatible_runs((8, 6, 1), (10, 3, 0)) and version_compatible_runs((11, 0, 0), (11, 4, 1))
    assert not version_compatible_runs((10, 9, 0), (10, 8, 0))  # never backwards
    assert not version_compatible_runs((11, 0, 0), (10, 13, 0))
    assert not version_compatible_runs((8, 6, 1), (11, 4, 0))  # "a TensorRT 8 engine cannot run with ... 11"
    assert not version_compatible_runs((8, 5, 2), (8, 6, 1))  # version compatibility begins with 8.6


def _fake_engine(tmp_path, **manifest):
    """An engine file and a manifest whose hash matches it (for aft-export's own checks)."""
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"engine bytes")
    data = {"engine_sha256": hashlib.sha256(engine.read_bytes()).hexdigest(), "tensorrt": "10.8.0",
            "gpu": "NVIDIA A100", "compute_capability": "8.0", "build_options": {}, **manifest}  # fmt: skip
    manifest_path(engine).write_text(json.dumps(data))
    return engine


def test_manifest_checks(tmp_path):
    here = {"tensorrt": "10.8.0", "gpu": "NVIDIA A100", "compute_capability": "8.0"}
    engine = _fake_engine(tmp_path)
    assert check_manifest(engine, here)["tensorrt"] == "10.8.0"
    assert check_manifest(engine, {"tensorrt": None, "compute_capability": None})  # nothing to compare with
    with pytest.raises(AFTExportError, match="built with TensorRT 10.8.0, this machine has 10.9.0.*rebuild"):
        check_manifest(engine, {**here, "tensorrt": "10.9.0"})
    with pytest.raises(AFTExportError, match="compute capability 8.0 .*this GPU is 8.6.*rebuild"):
        check_manifest(engine, {**here, "compute_capability": "8.6"})
    compat = _fake_engine(tmp_path, build_options={"version_compatible": True, "hardware_compatibility": "ampere+"})
    assert check_manifest(compat, {**here, "tensorrt": "10.9.0", "compute_capability": "8.9"})
    assert check_manifest(compat, {**here, "tensorrt": "11.4.0"})  # NVIDIA: version-compatible 10 runs on 11
    with pytest.raises(AFTExportError, match="built with TensorRT 10.8.0, this machine has 10.7.0: a vers"):
        check_manifest(compat, {**here, "tensorrt": "10.7.0"})  # never backwards
    (tmp_path / "old").mkdir()
    old = _fake_engine(tmp_path / "old", tensorrt="8.6.1", build_options={"version_compatible": True})
    assert check_manifest(old, {**here, "tensorrt": "10.3.0"})  # 8.6 on 10.x: the other supported pair
    with pytest.raises(AFTExportError, match="built with TensorRT 8.6.1, this machine has 11.4.0: a version"):
        check_manifest(old, {**here, "tensorrt": "11.4.0"})  # and no other pair across majors
    with pytest.raises(AFTExportError, match="compute capability"):  # ampere+ does not reach Turing
        check_manifest(compat, {**here, "tensorrt": "10.8.0", "compute_capability": "7.5"})
    compat.write_bytes(b"engine bytes, truncated or replaced")
    with pytest.raises(AFTExportError, match="corrupt or was replaced.*rebuild"):
        check_manifest(compat, here)
    manifest_path(compat).unlink()
    with pytest.raises(AFTExportError, match="has no manifest"):
        check_manifest(compat, here)
    manifest_path(compat).write_text("{not json")
    with pytest.raises(AFTExportError, match="manifest .* is unreadable"):
        check_manifest(compat, here)


def test_manifest_records_the_tensorrt_flags(graphs, tmp_path):
    from dataclasses import asdict

    engine = tmp_path / "m.engine"
    engine.write_bytes(b"engine bytes")
    opts = BuildOptions(batch_profile="1,2,4")
    plan = build_plan((8, 6, 1), "fp16", opts)
    env = {"tensorrt": "8.6.1", "cuda": "12.2", "gpu": "Orin", "compute_capability": "8.7"}
    shapes = input_profile(onnx.load(graphs["dynamic"]), opts)
    manifest = make_manifest(engine, graphs["dynamic"], "fp16", shapes, opts, env, 1.0, {},
                             {**asdict(plan), "pinned_fp32_layers": 12})  # fmt: skip
    recorded = json.loads(json.dumps(manifest))["tensorrt_build"]
    assert recorded == {"network_flags": ["NetworkDefinitionCreationFlag.EXPLICIT_BATCH"],
                        "builder_flags": ["BuilderFlag.FP16", "BuilderFlag.OBEY_PRECISION_CONSTRAINTS"],
                        "hardware_compatibility_level": None, "pin_fp32_layers": True,
                        "pinned_fp32_layers": 12, "library": "tensorrt", "compute_capabilities": []}  # fmt: skip
    assert manifest["library"] == "tensorrt" and manifest["library_version"] == manifest["tensorrt"] == "8.6.1"
    assert manifest["compute_capabilities"] == ["8.7"] and "note" not in manifest


@pytest.mark.skipif(HAS_TRT, reason="TensorRT is installed here; this checks the message where it is missing")
def test_missing_tensorrt_is_a_clear_error(graphs, tmp_path):
    with pytest.raises(RuntimeMissing, match="TensorRT is not installed here.*pip install"):
        build_engine(graphs["dynamic"], tmp_path / "m.engine", BuildOptions(library="tensorrt"), **QUIET)
    assert not (tmp_path / "m.engine").exists() and not manifest_path(tmp_path / "m.engine").exists()
    res = CliRunner().invoke(main, ["build", str(graphs["dynamic"]), "-o", str(tmp_path / "m.engine"),
                                    "--library", "tensorrt"])  # fmt: skip
    assert res.exit_code == 2 and res.output.startswith("error: TensorRT is not installed here")
    meta = {p.key: p.value for p in onnx.load(graphs["dynamic"]).metadata_props}
    engine = _fake_engine(tmp_path, compute_capability=None,
                          model={k: meta[k] for k in ("classes", "input_size", "mean", "std")})  # fmt: skip
    with pytest.raises(RuntimeMissing, match="TensorRT is not installed|loads only with standard TensorRT"):
        TrtRunner(str(engine))


def test_option_errors_come_before_tensorrt(graphs, tmp_path):
    """A bad profile is reported whether or not TensorRT exists."""
    for args, msg in ((["--batch-profile", "8,4,2"], "inconsistent batch profile"),
                      (["--hw-profile", "16,32,64"], "takes 32x32 images only")):  # fmt: skip
        res = CliRunner().invoke(main, ["build", str(graphs["dynamic"]), "-o", str(tmp_path / "x.engine"), *args])
        assert res.exit_code == 2 and msg in res.output
    res = CliRunner().invoke(main, ["build", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "x.engine")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_infer_prints_top_k(graphs, tmp_path, cifar10):
    import tarfile

    imgs = tmp_path / "imgs"
    with tarfile.open(cifar10 / "test.tar") as tar:
        members = [m for m in tar.getmembers() if m.isfile()][:3]
        tar.extractall(imgs, members=members, filter="data")
    res = CliRunner().invoke(main, ["infer", str(graphs["dynamic"]), str(imgs), "--top-k", "3"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 3 and all(line.count("%") == 3 for line in lines)
    res = CliRunner().invoke(main, ["infer", str(graphs["dynamic"]), str(imgs), "--json"])
    report = json.loads(res.output)
    assert report["backend"] == "onnxruntime" and len(report["results"]) == 3
    probs = [t["probability"] for t in report["results"][0]["top"]]
    assert probs == sorted(probs, reverse=True) and sum(probs) <= 1.0001
    res = CliRunner().invoke(main, ["infer", str(graphs["dynamic"]), str(tmp_path / "nothing.png")])
    assert res.exit_code == 2 and "does not exist" in res.output


@pytest.mark.trt
@pytest.mark.gpu
@needs_trt_and_gpu
@pytest.mark.parametrize("key", ["dynamic", "hw"])
def test_engine_builds_runs_and_matches_onnx_runtime(graphs, tmp_path, key):
    from aft_export.runners import OrtRunner

    engine = tmp_path / f"{key}.engine"
    cache = tmp_path / "timing.cache"
    result = build_engine(graphs[key], engine, BuildOptions(batch_profile="1,4,8",
                                                            hw_profile="16,32,48" if key == "hw" else None,
                                                            timing_cache=str(cache)), **QUIET)  # fmt: skip
    assert engine.is_file() and cache.is_file() and result.manifest["precision"] == "fp32"
    runner = TrtRunner(str(engine))
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    want = OrtRunner(str(graphs[key])).run({"image": x})["logits"]
    got = runner.run({"image": x})["logits"]
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-3)
    with pytest.raises(AFTExportError, match="outside the engine's profile"):
        runner.run({"image": np.zeros((9, 3, 32, 32), np.float32)})


# ---------------------------------------------------------------- TensorRT-RTX: pure choices, no library needed


def test_library_choice():
    both, rtx_only, trt_only = {"tensorrt", RTX}, {RTX}, {"tensorrt"}
    assert choose_library("auto", both) == "tensorrt"  # builds for the GPU here; Hopper and Jetson need it
    assert choose_library("auto", rtx_only) == RTX and choose_library("auto", trt_only) == "tensorrt"
    assert choose_library(RTX, both) == RTX and choose_library("tensorrt", both) == "tensorrt"
    with pytest.raises(RuntimeMissing, match="neither TensorRT nor TensorRT-RTX is installed.*tensorrt-rtx-cu12=="):
        choose_library("auto", set())
    with pytest.raises(RuntimeMissing, match="TensorRT-RTX is not installed here .*aft-export\\[rtx\\]"):
        choose_library(RTX, trt_only)
    with pytest.raises(RuntimeMissing, match="^TensorRT is not installed here"):
        choose_library("tensorrt", rtx_only)
    with pytest.raises(AFTExportError, match="unknown TensorRT library 'rtx'"):
        choose_library("rtx", both)
    with pytest.raises(AFTExportError, match="`library` takes one of auto, tensorrt, tensorrt-rtx, got 'rtx'"):
        BuildOptions(library="rtx")


def test_rtx_versions_are_not_tensorrt_versions():
    """TensorRT-RTX reports 1.x: refused as standard TensorRT, accepted as itself from 1.7 (the API checked)."""
    assert check_trt_version("1.7.1.116", RTX) == (1, 7, 1, 116)
    assert check_trt_version("1.9.0", RTX)[:2] == (1, 9)
    for bad in ("1.6.0", "2.0.0"):
        with pytest.raises(AFTExportError, match=f"TensorRT-RTX {bad} is not supported.*1.7 to 1.x"):
            check_trt_version(bad, RTX)
    with pytest.raises(AFTExportError, match="TensorRT 1.7.1.116 is too old"):
        check_trt_version("1.7.1.116")  # never read as standard TensorRT


@pytest.mark.parametrize("version", [(1, 7, 1, 116), (1, 8), (1, 12)])
def test_rtx_build_plan(version):
    """Strongly typed always, no precision flags, no TensorRT 8 pinning, whatever the precision."""
    for precision in ("fp32", "fp16", "int8"):
        plan = build_plan(version, precision, BuildOptions(), RTX)
        assert plan.network_flags == ("NetworkDefinitionCreationFlag.STRONGLY_TYPED",)
        assert plan.builder_flags == () and not plan.pin_fp32_layers and plan.hardware_compatibility_level is None
        assert precision_flags(version, precision, RTX) == ()
    assert network_flags(version, RTX) == ("NetworkDefinitionCreationFlag.STRONGLY_TYPED",)
    assert build_plan(version, "int8", BuildOptions(compute_capabilities=("7.5", "8.6", "7.5")), RTX) \
        .compute_capabilities == ("ComputeCapability.SM75", "ComputeCapability.SM86")  # fmt: skip


def test_options_rtx_lacks_are_refused_in_one_line():
    for kw in (dict(dla_core=0), dict(version_compatible=True), dict(hardware_compatibility="ampere+"),
               dict(tf32=True), dict(timing_cache="t.cache")):  # fmt: skip
        with pytest.raises(AFTExportError, match=f"TensorRT-RTX has no `{next(iter(kw))}` .*`library=tensorrt`$") as err:
            build_plan((1, 7), "fp32", BuildOptions(**kw), RTX)
        assert "\n" not in str(err.value)
    with pytest.raises(AFTExportError, match="has no `dla_core`, `tf32` "):
        build_plan((1, 7), "fp32", BuildOptions(dla_core=1, tf32=True), RTX)
    with pytest.raises(AFTExportError, match="`compute_capabilities` are TensorRT-RTX's"):
        build_plan((10, 13), "fp32", BuildOptions(compute_capabilities=("8.6",)), "tensorrt")


def test_compute_capabilities():
    assert compute_capabilities((), RTX) == ()
    assert compute_capabilities(("12.0", "8.9"), RTX) == ("ComputeCapability.SM120", "ComputeCapability.SM89")
    for cc in ("9.0", "8.7", "10.0", "7.2"):  # Hopper, Orin, data-centre Blackwell, Xavier: standard TensorRT
        with pytest.raises(AFTExportError, match=f"compute capability {cc} is not a TensorRT-RTX target.*`library=tensorrt`"):
            compute_capabilities((cc,), RTX)
    for bad in ("86", "8.6.1", "sm86", "8."):
        with pytest.raises(AFTExportError, match="MAJOR.MINOR"):
            BuildOptions(compute_capabilities=(bad,))


def test_where_an_rtx_engine_runs():
    assert all(rtx_runs_on([], cc) for cc in ("8.6", "8.9", "12.0", "12.1", "12.2"))
    assert not any(rtx_runs_on([], cc) for cc in ("7.5", "9.0", "8.7", "10.0", "11.0", "8.0"))
    assert rtx_runs_on(["7.5"], "7.5") and not rtx_runs_on(["7.5"], "8.6")
    assert rtx_runs_on(["8.6", "8.9"], "8.9") and not rtx_runs_on(["8.6", "8.9"], "12.0")


def test_engine_names_tell_the_libraries_apart(tmp_path):
    assert engine_name(tmp_path / "model.int8.onnx", RTX).name == "model.int8.rtx.engine"
    assert engine_name(tmp_path / "model.int8.onnx", "tensorrt").name == "model.int8.engine"
    check_engine_name("m.rtx.engine", RTX)
    check_engine_name("m.plan", "tensorrt")
    with pytest.raises(AFTExportError, match="name a TensorRT-RTX engine \\*.rtx.engine.*`output=m.rtx.engine`"):
        check_engine_name("m.engine", RTX)
    with pytest.raises(AFTExportError, match="names a TensorRT-RTX engine.*`output=m.engine` or `library=tensorrt-rtx`"):
        check_engine_name("m.rtx.engine", "tensorrt")


def _rtx_engine(tmp_path, **manifest):
    engine = tmp_path / "m.int8.rtx.engine"
    engine.write_bytes(b"rtx engine bytes")
    data = {"engine_sha256": hashlib.sha256(engine.read_bytes()).hexdigest(), "library": RTX,
            "library_version": "1.7.1.116", "tensorrt": None, "compute_capabilities": [], "onnx": "m.int8.onnx",
            "build_options": {"batch_profile": "1,8,32", "compute_capabilities": []}, **manifest}  # fmt: skip
    manifest_path(engine).write_text(json.dumps(data))
    return engine


MODEL = {"classes": json.dumps(["a", "b"]), "input_size": "[3, 32, 32]", "mean": "[0.5, 0.5, 0.5]",
         "std": "[0.5, 0.5, 0.5]"}  # fmt: skip
PROFILE = {"name": "image", "min": [1, 3, 32, 32], "opt": [4, 3, 32, 32], "max": [8, 3, 32, 32]}


def test_what_running_an_engine_reads_from_its_manifest_is_checked_first():
    """The runner reads the input profile (min, max), the precision and the model's metadata; a
    hand-edited manifest where one of them is malformed is one line, decided without TensorRT or
    a GPU (check_manifest refuses only what it decides with)."""
    from aft_export.runners.engine import manifest_info

    good = {"precision": "int8", "input": PROFILE, "model": MODEL}
    info = manifest_info(good, "m.engine")
    assert (info.classes, info.input_size, info.precision) == (["a", "b"], (3, 32, 32), "int8")
    for entry, value in [("input", {"min": 5}), ("input", "x"), ("input", {**PROFILE, "min": []}),
                         ("input", {**PROFILE, "max": [8, 3, 32]}), ("input", {**PROFILE, "opt": None}),
                         ("precision", ["fp32"]), ("model", [1, 2])]:  # fmt: skip
        with pytest.raises(AFTExportError) as err:
            manifest_info({**good, entry: value}, "m.engine")
        assert str(err.value) == (f"engine manifest of m.engine has malformed entries ({entry}), so aft-export cannot "
                                  f"tell what the engine takes; rebuild it with `aft-export build`")  # fmt: skip
    with pytest.raises(AFTExportError, match=r"^engine manifest of m\.engine has no input profile \(input\)"):
        manifest_info({"precision": "fp32", "model": MODEL}, "m.engine")


def test_a_manifests_network_holds_counts():
    """info renders network.compute as counts per precision: anything else is malformed, not shown."""
    from aft_export.tensorrt.manifest import manifest_problems

    ok = {"outputs": {"fp32": 3}, "num_layers": 3, "compute": {"int8": 2, "fp32": 1}}
    assert manifest_problems({"network": ok}) == [] and manifest_problems({"network": None}) == []
    for bad in ({**ok, "compute": [3]}, {**ok, "compute": "x"}, {**ok, "compute": {"int8": "2"}},
                {**ok, "compute": {"int8": -1}}, {**ok, "num_layers": True}, {**ok, "outputs": {"fp32": 1.5}}):
        assert manifest_problems({"network": bad}) == ["network"], bad


def test_loading_refuses_an_engine_of_another_library_version_or_gpu(tmp_path):
    engine = _rtx_engine(tmp_path)
    cpu_rtx = {"tensorrt": None, "tensorrt_rtx": "1.7.1.116", "gpu": None, "compute_capability": None}
    assert check_manifest(engine, cpu_rtx)["library"] == RTX  # checks pass; running it needs a GPU
    rtx_gpu = {**cpu_rtx, "gpu": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"}
    assert check_manifest(engine, rtx_gpu)
    rebuild = "aft-export build m.int8.onnx --library tensorrt-rtx --batch-profile 1,8,32"
    with pytest.raises(AFTExportError, match=f"TensorRT-RTX 1.7.1.116, this machine has 1.8.0: .*release that "
                                             f"built them; rebuild it here: {rebuild} --output m.int8.rtx.engine$"):
        check_manifest(engine, {**rtx_gpu, "tensorrt_rtx": "1.8.0"})
    with pytest.raises(RuntimeMissing, match="built with TensorRT-RTX 1.7.1.116 and loads only with it; this machine "
                                             "has TensorRT 10.13.3 .*--library tensorrt --batch-profile 1,8,32 "
                                             "--output m.int8.engine$"):
        check_manifest(engine, {**rtx_gpu, "tensorrt": "10.13.3", "tensorrt_rtx": None})
    turing = {**rtx_gpu, "gpu": "NVIDIA GeForce RTX 2080 Ti", "compute_capability": "7.5"}
    with pytest.raises(AFTExportError, match="for compute capability the default .*this GPU is 7.5 .* "
                                             "--batch-profile 1,8,32 --compute-capability 7.5 "
                                             "--output m.int8.rtx.engine$"):
        check_manifest(engine, turing)
    with pytest.raises(AFTExportError, match="9.0 is not a TensorRT-RTX target: build for standard TensorRT"):
        check_manifest(engine, {**rtx_gpu, "gpu": "NVIDIA H100", "compute_capability": "9.0"})
    (tmp_path / "t").mkdir()
    for_turing = _rtx_engine(tmp_path / "t", compute_capabilities=["7.5"])
    assert check_manifest(for_turing, turing)
    with pytest.raises(AFTExportError, match="for compute capability 7.5, this GPU is 8.9"):
        check_manifest(for_turing, rtx_gpu)
    standard = _fake_engine(tmp_path, onnx="m.onnx")  # a manifest from before TensorRT-RTX: library tensorrt
    with pytest.raises(RuntimeMissing, match="loads only with standard TensorRT; this machine has TensorRT-RTX "
                                             "1.7.1.116 .*--library tensorrt-rtx --output m.rtx.engine$"):
        check_manifest(standard, cpu_rtx)


def test_rebuild_command():
    from pathlib import Path

    m = {"onnx": "model.fp16.onnx", "library": RTX, "build_options": {"batch_profile": "1,8,32",
                                                                     "hw_profile": "16,32,64",
                                                                     "compute_capabilities": ["7.5"]}}  # fmt: skip
    line = ("aft-export build model.fp16.onnx --library tensorrt-rtx --batch-profile 1,8,32 --hw-profile 16,32,64 "
            "--compute-capability 7.5 --output model.fp16.rtx.engine")  # fmt: skip
    assert rebuild_command(Path("x/model.fp16.rtx.engine"), m) == line
    # a manifest written before the fields were renamed after their flags (batch, hw): the same line
    old = {**m, "build_options": {"batch": "1,8,32", "hw": "16,32,64", "compute_capabilities": ["7.5"]}}
    assert rebuild_command(Path("x/model.fp16.rtx.engine"), old) == line
    assert rebuild_command(Path("m.engine"), {}) == "aft-export build MODEL.onnx --library tensorrt --output m.engine"
