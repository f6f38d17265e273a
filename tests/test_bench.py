"""aft-export bench --profile: ONNX Runtime's and OpenVINO's time per op type, rendered and in JSON."""

import json
import tempfile
from pathlib import Path

from click.testing import CliRunner

from aft_export.cli import main


def _profile_dirs() -> set:
    return set(Path(tempfile.gettempdir()).glob("aft-ort-profile-*"))


def test_bench_profile_shares_by_op_type(tmp_path, tiny_onnx):
    ckpt = tiny_onnx.ckpt(tmp_path / "full.pt", "aft_full_test")
    onnx_path = tmp_path / "full.onnx"
    tiny_onnx.export(ckpt, onnx_path)
    before = _profile_dirs()
    res = CliRunner().invoke(main, ["bench", str(onnx_path), str(ckpt), "--batch-size", "2", "--iters", "3",
                                    "--warmup", "1", "--threads", "1", "--profile", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    onnx_prof, ckpt_prof = report["profiles"]
    assert onnx_prof["artifact"] == str(onnx_path) and onnx_prof["batch"] == 2 and onnx_prof["runs"] == 3
    ops = {r["op_type"]: r for r in onnx_prof["ops"]}
    assert abs(sum(r["share"] for r in ops.values()) - 1.0) < 1e-6
    assert ops["MatMul"]["nodes"] >= 4 and ops["MatMul"]["ms"] > 0
    # the exported GELU runs fused: Gelu, or BiasGelu with the fc1 bias Add (non-zero biases)
    assert {"Gelu", "BiasGelu"} & set(ops) and "Erf" not in ops
    shares = [r["share"] for r in onnx_prof["ops"]]
    assert shares == sorted(shares, reverse=True)
    assert ckpt_prof["ops"] == [] and "ONNX Runtime" in ckpt_prof["reason"]
    assert _profile_dirs() == before  # the profiler's JSON is removed

    res = CliRunner().invoke(main, ["bench", str(onnx_path), "--batch-size", "1", "--iters", "2", "--profile"])
    assert res.exit_code == 0, res.output
    assert "ONNX Runtime profile over 2 runs on onnxruntime" in res.output and "MatMul" in res.output
    res = CliRunner().invoke(main, ["bench", str(onnx_path), "--batch-size", "1", "--iters", "2", "--json"])
    assert "profiles" not in json.loads(res.output)


def test_bench_profile_on_openvino_names_each_kernel_and_the_reference_ones(tmp_path, tiny_onnx):
    """OpenVINO's node counters, by node type and the kernel it ran: the shares sum to one, the runs
    counted are the timed ones (the warm-up left out), and reference kernels (ref*) are flagged."""
    from tests.conftest import need_openvino

    need_openvino()
    ckpt = tiny_onnx.ckpt(tmp_path / "full.pt", "aft_full_test")
    onnx_path = tmp_path / "full.onnx"
    tiny_onnx.export(ckpt, onnx_path)
    res = CliRunner().invoke(main, ["bench", str(onnx_path), "--backend", "openvino", "--batch-size", "2", "--iters",
                                    "3", "--warmup", "1", "--threads", "1", "--profile", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (prof,) = json.loads(res.output)["profiles"]
    assert (prof["batch"], prof["runs"]) == (2, 3) and abs(sum(r["share"] for r in prof["ops"]) - 1.0) < 1e-6
    kinds = {r["op_type"].split(" [")[0] for r in prof["ops"]}
    assert {"MatMul", "FullyConnected"} & kinds and all(r["op_type"].endswith("]") for r in prof["ops"])
    assert all(r["reference"] == r["op_type"].split(" [")[1].startswith("ref") for r in prof["ops"])
    res = CliRunner().invoke(main, ["bench", str(onnx_path), "--backend", "openvino", "--batch-size", "2", "--iters",
                                    "2", "--threads", "1", "--profile"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "OpenVINO profile over 2 runs on openvino" in res.output
    assert ("reference kernels" in res.output) == any(r["reference"] for r in prof["ops"])
