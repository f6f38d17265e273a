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
from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.export.exporter import ExportOptions, export_checkpoint
from aft_export.build import build_engine
from aft_export.runners import TrtRunner
from aft_export.trt import (BuildOptions, Profile, build_plan, check_manifest, check_trt_version, environment,
                            input_profile, make_manifest, manifest_path, network_flags, precision_flags,
                            version_compatible_runs)  # fmt: skip
from tests.export.test_exporter import make_ckpt

HAS_TRT = importlib.util.find_spec("tensorrt") is not None
HAS_GPU = environment()["gpu"] is not None
MISSING = [what for what, ok in (("TensorRT is not installed", HAS_TRT), ("no CUDA GPU is visible", HAS_GPU)) if not ok]
needs_trt_and_gpu = pytest.mark.skipif(bool(MISSING), reason="; ".join(MISSING) + " here")
QUIET = dict(log=lambda *a: None)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    d = tmp_path_factory.mktemp("trt")
    out = {}
    for key, name, kw in (("dynamic", "aft_full_test", {}), ("fixed", "aft_full_test", {"batch": "4"}),
                          ("hw", "aft_conv_test", {"dynamic_hw": True})):  # fmt: skip
        ckpt = make_ckpt(d / f"{key}.pt", name)
        out[key] = d / f"{key}.onnx"
        export_checkpoint(ckpt, out[key], ExportOptions(verify_images=0, **kw), **QUIET)
    return out


def test_profile_parsing():
    assert Profile.parse("1,8,32", 1, "batch") == Profile(1, 8, 32)
    assert Profile.parse("16", 1, "batch") == Profile(16, 16, 16)
    assert Profile.parse(None, 4, "batch") == Profile(4, 4, 4)
    for bad, msg in (("4,2,8", "inconsistent"), ("0,1,2", "inconsistent"), ("1,2", "1 or 3 numbers"),
                     ("a,b,c", "bad batch profile")):  # fmt: skip
        with pytest.raises(AFTExportError, match=msg):
            Profile.parse(bad, 1, "batch")


def test_input_profiles_from_the_graph(graphs):
    dyn = input_profile(onnx.load(graphs["dynamic"]), BuildOptions(batch="1,8,32"))
    assert (dyn.name, dyn.min, dyn.opt, dyn.max) == ("image", (1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))
    fixed = onnx.load(graphs["fixed"])
    assert input_profile(fixed, BuildOptions(batch=None)).max == (4, 3, 32, 32)
    assert input_profile(fixed, BuildOptions(batch="4")).min == (4, 3, 32, 32)
    with pytest.raises(AFTExportError, match="fixed batch of 4"):
        input_profile(fixed, BuildOptions(batch="1,8,32"))
    hw = onnx.load(graphs["hw"])
    p = input_profile(hw, BuildOptions(batch="1,2,4", hw="16,32,64"))
    assert p.min == (1, 3, 16, 16) and p.max == (4, 3, 64, 64)
    assert input_profile(hw, BuildOptions(batch="2")).opt == (2, 3, 32, 32)  # the training size by default
    with pytest.raises(AFTExportError, match="takes 32x32 images only"):
        input_profile(onnx.load(graphs["dynamic"]), BuildOptions(hw="16,32,64"))


def test_build_options_and_versions():
    with pytest.raises(AFTExportError, match="workspace"):
        BuildOptions(workspace_mb=0)
    with pytest.raises(AFTExportError, match="hardware-compatibility"):
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
    with pytest.raises(AFTExportError, match=r"same-cc needs TensorRT 10\.9 or newer .*this is 10\.3\.0; "
                                             r"use ampere\+ or none"):  # fmt: skip
        build_plan((10, 3, 0), "fp32", BuildOptions(hardware_compatibility="same-cc"))
    plan = build_plan((10, 13, 3), "fp32", BuildOptions(hardware_compatibility="same-cc"))
    assert plan.hardware_compatibility_level == "HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY"
    ampere = build_plan((10, 3), "fp32", BuildOptions(hardware_compatibility="ampere+"))
    assert ampere.hardware_compatibility_level == "HardwareCompatibilityLevel.AMPERE_PLUS"
    with pytest.raises(AFTExportError, match="ampere\\+ needs TensorRT 8.6 or newer; this is 8.5"):
        build_plan((8, 5), "fp32", BuildOptions(hardware_compatibility="ampere+"))
    with pytest.raises(AFTExportError, match="--version-compatible needs TensorRT 8.6 or newer; this is 8.5"):
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
    opts = BuildOptions(batch="1,2,4")
    plan = build_plan((8, 6, 1), "fp16", opts)
    env = {"tensorrt": "8.6.1", "cuda": "12.2", "gpu": "Orin", "compute_capability": "8.7"}
    shapes = input_profile(onnx.load(graphs["dynamic"]), opts)
    manifest = make_manifest(engine, graphs["dynamic"], "fp16", shapes, opts, env, 1.0, {},
                             {**asdict(plan), "pinned_fp32_layers": 12})  # fmt: skip
    recorded = json.loads(json.dumps(manifest))["tensorrt_build"]
    assert recorded == {"network_flags": ["NetworkDefinitionCreationFlag.EXPLICIT_BATCH"],
                        "builder_flags": ["BuilderFlag.FP16", "BuilderFlag.OBEY_PRECISION_CONSTRAINTS"],
                        "hardware_compatibility_level": None, "pin_fp32_layers": True,
                        "pinned_fp32_layers": 12}  # fmt: skip


@pytest.mark.skipif(HAS_TRT, reason="TensorRT is installed here; this checks the message where it is missing")
def test_missing_tensorrt_is_a_clear_error(graphs, tmp_path):
    with pytest.raises(RuntimeMissing, match="TensorRT is not installed here.*pip install"):
        build_engine(graphs["dynamic"], tmp_path / "m.engine", BuildOptions(), **QUIET)
    assert not (tmp_path / "m.engine").exists() and not manifest_path(tmp_path / "m.engine").exists()
    res = CliRunner().invoke(main, ["build", str(graphs["dynamic"]), "-o", str(tmp_path / "m.engine")])
    assert res.exit_code == 2 and res.output.startswith("error: TensorRT is not installed here")
    meta = {p.key: p.value for p in onnx.load(graphs["dynamic"]).metadata_props}
    engine = _fake_engine(tmp_path, compute_capability=None,
                          model={k: meta[k] for k in ("classes", "input_size", "mean", "std")})  # fmt: skip
    with pytest.raises(RuntimeMissing, match="TensorRT is not installed"):
        TrtRunner(str(engine))


def test_option_errors_come_before_tensorrt(graphs, tmp_path):
    """A bad profile is reported whether or not TensorRT exists."""
    for args, msg in ((["--batch", "8,4,2"], "inconsistent batch profile"),
                      (["--hw", "16,32,64"], "takes 32x32 images only")):  # fmt: skip
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
    result = build_engine(graphs[key], engine, BuildOptions(batch="1,4,8", hw="16,32,48" if key == "hw" else None,
                                                            timing_cache=str(cache)), **QUIET)  # fmt: skip
    assert engine.is_file() and cache.is_file() and result.manifest["precision"] == "fp32"
    runner = TrtRunner(str(engine))
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    want = OrtRunner(str(graphs[key])).run({"image": x})["logits"]
    got = runner.run({"image": x})["logits"]
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-3)
    with pytest.raises(AFTExportError, match="outside the engine's profile"):
        runner.run({"image": np.zeros((9, 3, 32, 32), np.float32)})
