"""The one table of runtimes (aft_export.runtimes): what reads it agrees with it, each runtime's runner is the
one its row says, and what is missing here is said with the row's own hint."""

import pytest

from aft_export import runtimes
from aft_export.errors import AFTExportError
from aft_export.runtimes import BACKENDS, RUNTIMES, TABLE_RUNTIMES, TRITON_BACKENDS, Runtime


def test_every_list_of_runtimes_is_read_from_the_table():
    from aft_export.tensorrt.library import TENSORRT_MODULES
    from aft_export.options import BACKENDS as OPTION_BACKENDS
    from aft_export.options import TRITON_BACKENDS as REPO_BACKENDS
    from aft_export.options.commands import DECLARED
    from aft_export.serving.repository import RUNTIME_NAMES
    from aft_export.verify import deploy

    assert set(BACKENDS) == {r.name for r in RUNTIMES.values() if r.backend} and OPTION_BACKENDS is BACKENDS
    for command in ("eval", "parity", "bench", "infer", "serve"):  # the flag's choices are the table's backends
        assert DECLARED[command]["backend"].kind.values == tuple(BACKENDS), command
    assert DECLARED["triton-repo"]["backend"].kind.values == TRITON_BACKENDS == REPO_BACKENDS
    assert set(RUNTIME_NAMES) == set(TRITON_BACKENDS) and RUNTIME_NAMES["openvino"] == "OpenVINO"
    assert deploy.RUNTIMES == TABLE_RUNTIMES and "onnxruntime-tensorrt" not in TABLE_RUNTIMES
    devices = [RUNTIMES[r].device for r in TABLE_RUNTIMES]  # the CPU's first, then the GPU's
    assert devices == sorted(devices) and deploy.DEVICE == {r: RUNTIMES[r].device for r in TABLE_RUNTIMES}
    assert TENSORRT_MODULES == {"tensorrt": "tensorrt", "tensorrt-rtx": "tensorrt_rtx"}
    # the deploy table runs each kind of file in the runtimes whose row says they run it
    for r in TABLE_RUNTIMES:
        assert deploy.runs_on("m.onnx", r) == (RUNTIMES[r].runs == "onnx")
        assert deploy.runs_on("m.pt", r) == (RUNTIMES[r].runs == "checkpoint")
    assert [r for r in TABLE_RUNTIMES if deploy.runs_on("m.engine", r, "tensorrt-rtx")] == ["tensorrt-rtx"]


def test_a_runtime_says_why_it_cannot_run_here():
    row = RUNTIMES["onnxruntime-cuda"]
    assert row.missing(gpu=False) == "no GPU here"
    assert row.missing(gpu=True, ort_providers=["CPUExecutionProvider"]) == \
        "not installed: onnxruntime-gpu with its CUDA provider"
    assert row.missing(gpu=True, ort_providers=["CUDAExecutionProvider", "CPUExecutionProvider"]) == ""
    gone = Runtime("x", "X", "x, CPU", "cpu", "onnxruntime", "no_such_module_here", "pip install x")
    assert gone.missing(gpu=True) == "not installed: pip install x"
    assert RUNTIMES["onnxruntime"].missing(gpu=False) == ""  # the CPU's needs no GPU
    with pytest.raises(AFTExportError, match="unknown runtime 'onnx'; choose one of torch, onnxruntime"):
        runtimes.runtime("onnx")


def test_the_old_provider_word_is_one_function():
    assert runtimes.backend_of() == "onnxruntime" and runtimes.backend_of(provider="cuda") == "onnxruntime-cuda"
    assert runtimes.backend_of("onnxruntime-tensorrt", "tensorrt") == "onnxruntime-tensorrt"
    with pytest.raises(AFTExportError, match="name two backends"):
        runtimes.backend_of("openvino", "cuda")
    with pytest.raises(AFTExportError, match="unknown provider 'gpu'"):
        runtimes.backend_of(provider="gpu")


def test_each_runtimes_runner_names_itself_as_its_row(served_onnx, tmp_path):
    """The runner :func:`runtime_runner` makes is the one its row's family makes, named as the row (the
    CPU's runtimes here; the GPU's need a GPU and are made by the same factories)."""
    from aft_export.runners import load_runner, onnx_runner, runtime_runner

    onnx, _ = served_onnx
    assert runtime_runner(onnx, "onnxruntime", 1).backend == "onnxruntime"
    pytest.importorskip("openvino")
    assert runtime_runner(onnx, "openvino", 1).backend == "openvino"
    assert load_runner(str(onnx), "openvino").backend == "openvino"
    ckpt = onnx.with_name("conv.pt")
    assert runtime_runner(ckpt, "torch", 1).backend == "torch" == load_runner(str(ckpt), "openvino").backend
    with pytest.raises(AFTExportError, match="ONNX files run in one of onnxruntime, .*, not 'torch'"):
        onnx_runner(onnx, "torch")
