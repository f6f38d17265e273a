"""The OpenVINO runner (the default export inlined in memory, its two hints, the CPUs it refuses
files for), and the OpenVINO CPU defect AFT-conv's decomposed form ran into.

``reduce_then_scale``: a ``ReduceSum`` over the last axis of an ``(N, C, T)`` tensor with
``keepdims=1`` (output ``(N, C, 1)``), then a ``Mul`` by a ``(1, C, 1)`` constant. ONNX
defines the product with multidirectional (NumPy) broadcasting, ``y[n, c, 0] = r[n, c, 0] *
s[0, c, 0]``; ONNX Runtime and the reference evaluator compute that. OpenVINO's CPU plugin
(checked: 2026.4.1) gets it wrong for ``N >= 2``: it scales every channel of image ``n``
by ``s[n]``, the constant indexed by the batch position instead of the channel. At
``N = 1`` it is right. The same reduction over the last two axes of an ``(N, C, H, W)``
tensor, scaled by a ``(1, C, 1, 1)`` constant, is right in all three: AFT-conv's global sums
are written that way (:func:`aft_export.layers.cores.aft_conv_core`, and the ``AFTConv``
body) so that every runtime computes the same.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aft_export.errors import AFTExportError, NotForThisCPU
from aft_export.machine import CpuFeatures
from aft_export.runners.openvino import OPENVINO_LATENCY_MAX_BATCH
from aft_export.runners import ModelInfo, OpenVinoRunner, OrtRunner, ReferenceRunner, runtime_runner
from aft_export.verify.compare import TOLERANCES
from aft_export.runners.openvino import cpu_problem, hint_for
from tests.conftest import need_openvino

C = 4


def reduce_then_scale(rank: int):
    """``y = ReduceSum(x, axes=all but N and C, keepdims=1) * s``, ``s = [1, 2, .., C]`` on the
    channel axis: rank 3 ``(N, C, 3)`` is the form OpenVINO gets wrong, rank 4 ``(N, C, 3, 2)`` the
    equivalent form it gets right."""
    spatial = [3] if rank == 3 else [3, 2]
    axes = list(range(2, rank))
    ones = [1] * (rank - 2)
    s = numpy_helper.from_array(np.arange(1, C + 1, dtype=np.float32).reshape(1, C, *ones), "s")
    a = numpy_helper.from_array(np.array(axes, np.int64), "axes")
    nodes = [helper.make_node("ReduceSum", ["image", "axes"], ["r"], name="reduce", keepdims=1),
             helper.make_node("Mul", ["r", "s"], ["y"], name="scale")]  # fmt: skip
    graph = helper.make_graph(nodes, f"reduce_then_scale_{rank}d",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", C, *spatial])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", C, *ones])], [s, a])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model


def _inputs(rank: int, n: int) -> np.ndarray:
    shape = (n, C, 3) if rank == 3 else (n, C, 3, 2)
    return np.random.default_rng(n).standard_normal(shape).astype(np.float32)


def _formula(x: np.ndarray) -> np.ndarray:
    """The ONNX definition in float64: the sum over the spatial axes, times s on the channel axis."""
    s = np.arange(1, C + 1, dtype=np.float64).reshape(1, C, *[1] * (x.ndim - 2))
    return x.astype(np.float64).sum(axis=tuple(range(2, x.ndim)), keepdims=True) * s


INFO = ModelInfo([], (C, 3, 2), (0.0,) * C, (1.0,) * C)


def _run(runner_class, model, x, **kw):
    runner = runner_class(model, info=INFO, **kw)
    return runner.run({runner.input_name: x})[runner.output_name]


def _unsplit(model, x):
    """OpenVINO on the whole batch in one request (its LATENCY model): the THROUGHPUT mode
    splits a batch of 2 into two of 1, where the defect below does not show."""
    return _run(OpenVinoRunner, model, x, hint="latency")


@pytest.mark.parametrize("rank", [3, 4])
def test_onnx_runtime_and_the_reference_compute_the_spec(rank):
    for n in (1, 2, 8):
        x = _inputs(rank, n)
        want = _formula(x)
        assert np.abs(_run(OrtRunner, reduce_then_scale(rank), x) - want).max() < 1e-5
        assert np.abs(_run(ReferenceRunner, reduce_then_scale(rank), x) - want).max() < 1e-5


def test_openvino_scales_a_3d_reduction_by_the_batch_position():
    """The defect, pinned: the test fails when OpenVINO is fixed (then docs/runtimes.md's
    report can be closed; the 4-D form stays, it costs nothing)."""
    ov = need_openvino()
    x1 = _inputs(3, 1)
    assert np.abs(_unsplit(reduce_then_scale(3), x1) - _formula(x1)).max() < 1e-5  # right at N = 1
    x = _inputs(3, 2)
    got = _unsplit(reduce_then_scale(3), x)
    want = _formula(x)
    assert np.abs(got - want).max() > 0.1, f"OpenVINO {ov.get_version()} computes the 3-D form right now"
    # what it computes: image n's sums, every channel times s[n] (n + 1)
    sums = x.astype(np.float64).sum(axis=2, keepdims=True)
    assert np.abs(got - sums * np.array([1.0, 2.0]).reshape(2, 1, 1)).max() < 1e-5


def test_openvino_computes_the_4d_form_right():
    need_openvino()
    for n in (1, 2, 8):
        x = _inputs(4, n)
        assert np.abs(_unsplit(reduce_then_scale(4), x) - _formula(x)).max() < 1e-5


def test_openvino_runner_inlines_the_model_local_functions_of_a_com_aft_graph():
    """OpenVINO's front end has no conversion rule for a custom domain's functions; the runner
    inlines them in memory (as TensorRT's parser does) and runs the standard ops of their body."""
    ov = need_openvino()
    node = helper.make_node("AFTSimple", ["image", "image", "image"], ["y"], domain="com.aft", name="mixer")
    body = onnx.helper.make_function("com.aft", "AFTSimple", ["q", "k", "v"], ["y"],
                                     [helper.make_node("Mul", ["q", "k"], ["y"])],
                                     [helper.make_opsetid("", 18)])  # fmt: skip
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", C, 3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", C, 3, 2])])  # fmt: skip
    model = helper.make_model(graph, functions=[body], ir_version=9,
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.aft", 1)])  # fmt: skip
    x = _inputs(4, 2)
    assert np.abs(_run(OrtRunner, model, x) - x * x).max() == 0  # a valid graph: ONNX Runtime runs it
    core = ov.Core()
    with pytest.raises(Exception, match="No conversion rule.*com.aft"):  # OpenVINO alone still refuses it
        core.read_model(model.SerializeToString(), b"")
    assert np.abs(_run(OpenVinoRunner, model, x) - x * x).max() == 0


def test_openvino_runner_threads_and_fixed_batch():
    need_openvino()
    runner = OpenVinoRunner(reduce_then_scale(4), info=INFO, threads=1)
    assert runner.threads == 1 and runner.fixed_batch is None and runner.backend == "openvino"
    x = _inputs(4, 5)
    assert np.abs(runner.logits(x, batch_size=2).reshape(5, C) - _formula(x).reshape(5, C)).max() < 1e-5


def test_openvino_bf16_computes_in_bf16_where_the_cpu_can_and_is_refused_where_it_cannot(served_onnx, monkeypatch):
    """openvino-bf16 asks OpenVINO for bf16: where OpenVINO says this CPU computes it, the numbers are not
    fp32's (the hint took) and are within the bf16 limits; where it does not (simulated on every machine,
    and real on a CPU without bf16 units), the runner is refused as not for this CPU, never run as fp32."""
    import aft_export.runners.openvino as ov_runner

    ov = need_openvino()
    dynamic, _ = served_onnx
    fp32 = runtime_runner(str(dynamic), "openvino", 1)
    x = fp32.random_input(4, 0)
    assert (fp32.backend, fp32.compute, fp32.judged_as) == ("openvino", "", "fp32")
    if "BF16" in ov_runner.capabilities(ov.Core()):
        bf16 = runtime_runner(str(dynamic), "openvino-bf16", 1)
        assert (bf16.backend, bf16.compute, bf16.judged_as, bf16.info.precision) == (
            "openvino-bf16", "bf16", "bf16", "fp32")  # fmt: skip
        assert 0 < np.abs(bf16.logits(x) - fp32.logits(x)).max() <= TOLERANCES["bf16"].max_abs
    else:
        with pytest.raises(NotForThisCPU, match="OpenVINO cannot compute in bf16 on this CPU"):
            runtime_runner(str(dynamic), "openvino-bf16", 1)
    monkeypatch.setattr(ov_runner, "capabilities", lambda core, device="CPU": ["FP32", "INT8"])
    with pytest.raises(NotForThisCPU, match=r"^OpenVINO cannot compute in bf16 on this CPU \(.*\): run .* in "
                                            r"openvino, which computes it as the file says$"):  # fmt: skip
        OpenVinoRunner(str(dynamic), compute="bf16")
    assert OpenVinoRunner(str(dynamic), threads=1).backend == "openvino"  # fp32 needs no units
    with pytest.raises(AFTExportError, match=r"^unknown OpenVINO compute precision 'fp16'; choose one of '', 'bf16'$"):
        OpenVinoRunner(str(dynamic), compute="fp16")


def test_a_batch_split_over_the_throughput_requests_gives_the_unsplit_logits(served_onnx):
    """The default export (com.aft functions, inlined in memory) at batches of 1 to 9: the
    THROUGHPUT model's batch split over OpenVINO's requests gives, image by image, the logits of
    the whole batch in one LATENCY request, and both agree with ONNX Runtime within fp32's limit."""
    need_openvino()
    path = str(served_onnx[0])
    auto, latency = OpenVinoRunner(path, threads=2), OpenVinoRunner(path, threads=2, hint="latency")
    throughput = OpenVinoRunner(path, threads=2, hint="throughput")
    reference = OrtRunner(path, threads=2)
    assert auto.requests() >= 1 and auto.fixed_batch is None
    rng = np.random.default_rng(0)
    for batch in (1, 2, 5, 9):
        x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
        whole = latency.run({"image": x})["logits"]
        assert whole.shape == (batch, 10)
        for runner in (auto, throughput):
            assert np.abs(runner.run({"image": x})["logits"] - whole).max() <= 1e-6, (batch, runner.hint)
        assert np.abs(whole - reference.run({"image": x})["logits"]).max() <= 1e-4
    assert hint_for(1) == "LATENCY" and hint_for(OPENVINO_LATENCY_MAX_BATCH + 1) == "THROUGHPUT"
    assert hint_for(64, "latency") == "LATENCY" and hint_for(1, "throughput") == "THROUGHPUT"
    assert set(auto._compiled) == {"LATENCY", "THROUGHPUT"} and set(latency._compiled) == {"LATENCY"}
    with pytest.raises(AFTExportError, match="unknown OpenVINO hint 'fast'"):
        OpenVinoRunner(path, hint="fast")


def test_a_fixed_batch_graph_runs_whole(served_onnx):
    """A fixed-batch export takes its batch in one request, whatever the hint."""
    need_openvino()
    runner = OpenVinoRunner(str(served_onnx[1]), hint="throughput")
    assert runner.fixed_batch == 2
    x = np.random.default_rng(1).standard_normal((3, 3, 32, 32)).astype(np.float32)
    want = OrtRunner(str(served_onnx[1])).logits(x)
    assert np.abs(runner.logits(x) - want).max() <= 1e-4


X86_VNNI = CpuFeatures("x86_64", "an x86 CPU with VNNI", vnni=True, avx512=True, amx=False, avx2=True, bf16=False)
X86_AVX2 = CpuFeatures("x86_64", "an x86 CPU without VNNI", vnni=False, avx512=False, amx=False, avx2=True, bf16=False)
X86_UNKNOWN = CpuFeatures("x86_64", "", vnni=None, avx512=None, amx=None, avx2=None, bf16=None)
ARM = CpuFeatures("aarch64", "an Arm CPU", vnni=False, avx512=False, amx=False, avx2=False, bf16=False)


def test_not_for_this_cpu_is_8_bit_int8_weights_on_x86_without_vnni():
    """The decision, for both CPU answers (this machine's CPU decides nothing here): only
    full-range int8 weights on an x86 CPU known to lack VNNI are refused."""
    problem = cpu_problem(8, X86_AVX2)
    assert problem.startswith("OpenVINO computes int8 with 8-bit weights wrongly on x86 CPUs without VNNI")
    assert "x86_64 (AVX2; no AVX-512, VNNI, BF16, AMX)" in problem and "saturating 16 bits" in problem
    for bits, cpu in ((8, X86_VNNI), (7, X86_AVX2), (None, X86_AVX2), (8, ARM), (8, X86_UNKNOWN)):
        assert cpu_problem(bits, cpu) is None, (bits, cpu)


def test_openvino_errors_keep_their_reason_without_its_source_lines():
    """OpenVINO puts the file and line of its own sources first, then headings: the reason is further down
    (the first one, with the node it validated: what follows is often what that failure made fail)."""
    from aft_export.runners.openvino import _reason

    where = "Exception from src/inference/src/cpp/core.cpp:84:\nCheck 'false' failed at src/frontends/common/src/x.cpp:47:\n"
    assert _reason(Exception(where + "Loading input model\nPath '../w.bin' resolves to '/a/w.bin' which is outside "
                                     "the base directory '/a/m'\n\n")) == \
        "Path '../w.bin' resolves to '/a/w.bin' which is outside the base directory '/a/m'"  # fmt: skip
    assert _reason(Exception(where + "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted.\n"
                                     "Summary:\n-- No conversion rule found for operations: x.FooBar\n")) == \
        "No conversion rule found for operations: x.FooBar"  # fmt: skip
    assert _reason(Exception(where + "Model wasn't fully converted. Failed operations detailed log:\n-- MatMul-18 with "
                                     "a message:\nWhile validating ONNX node '<Node(MatMul): MatMul_0>': Check 'a' "
                                     "failed at src/core/m.hpp:65:\nWhile validating node 'x' with friendly_name 'y':\n"
                                     "Incompatible MatMul matrix dimension.\n\n-- ReduceMax-18 with a message:\n"
                                     "Unsupported input type dynamic\n")) == \
        "MatMul node MatMul_0: Incompatible MatMul matrix dimension."  # fmt: skip
    assert _reason(Exception("one line")) == "one line" and _reason(Exception("")) == "no reason given"
