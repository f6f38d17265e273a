"""Every file we write computes the same function in every runtime that reads it.

The zoo x every form we write ({custom, decomposed, tensorrt8, portable} x {fp32, fp16, int8})
against the fp32 PyTorch model, on real CIFAR-10 test images, within the parity tolerances of
the file's precision (:data:`aft_export.verify.compare.TOLERANCES`, judged by
:func:`aft_export.verify.compare.judge`): ONNX Runtime and OpenVINO at batch 1, 2 and 8 (OpenVINO's
batch 8 in its THROUGHPUT mode, split over its infer requests), the ONNX reference evaluator
(the spec's own implementation) at batch 2. OpenVINO reads the custom form (the default
export) through the runner, which inlines its com.aft functions in memory.

One case depends on the CPU: on an x86 CPU without VNNI, OpenVINO computes int8 files with
8-bit weights wrongly (the TensorRT forms' int8), and the runner refuses them (NotForThisCPU).
Both sides are checked on every machine: the refusal with the CPU's features simulated (a CPU
without VNNI refuses them, one with VNNI takes them, the 7-bit portable int8 is taken by both),
and the real computation where the CPU has VNNI, held to the tolerance like everything else;
on a CPU without it those comparisons cannot run, and say so.
``test_every_comparison_ran`` asserts the count and prints the table of largest absolute
differences that docs/runtimes.md shows (``python -m pytest tests/test_conformance.py -s``).

Cost: one torch export per model and op form, made once per session (tests/conftest.py
``zoo_onnx``, shared with test_build and test_zoo; tensorrt8 and portable are made from the
custom export with :func:`aft_export.exporting.exporter.to_target`, the exporter's own last
step; tests/export/test_portable.py checks it gives the same graph), int8 calibrated on a
few test images (others than those compared), fp16 without calibration images.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from aft_export.models.checkpoint import load_checkpoint
from aft_export.verify.compare import TOLERANCES, judge, metrics
from aft_export.data.images import normalize
from aft_export.data.datasets import load_labelled
from aft_export.errors import NotForThisCPU
from aft_export.exporting.exporter import to_target
from aft_export.artifacts.graph import int8_weight_bits
from aft_export.machine import cpu_features
from aft_export.artifacts.onnxio import load_onnx, save_onnx
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.runners import OpenVinoRunner, OrtRunner, ReferenceRunner, TorchRunner
from tests.conftest import REPO, need_openvino

MODELS = [m["name"] for m in json.loads((REPO / "models" / "zoo.json").read_text())["models"]]
FORMS = ("custom", "decomposed", "tensorrt8", "portable")
PRECISIONS = ("fp32", "fp16", "int8")
RUNTIMES = {"onnxruntime": (1, 2, 8), "openvino": (1, 2, 8), "reference": (2,)}
# compared images: 24 of the subset of 56 that also gives the calibration images (its other 32),
# then 24 more. int8 agreement is judged on 48: two top-1 flips stay within its 0.95. The int8 files
# whose rest is fp16 flip close calls (PyTorch's top-1/top-2 margin 0.14 and 0.24) in one runtime
# or another: ONNX Runtime one of the first 24, OpenVINO both
FIRST, IMAGES = 24, 48
REFERENCE_IMAGES = 4  # the reference evaluator is NumPy (fp16 slowest): 2 batches of 2
CALIBRATION = 32
# OpenVINO's CPU int8 kernels on x86 without VNNI sum pairs of u8 x s8 products in saturating
# 16 bits, which full-range (8-bit) int8 weights overflow; the portable target's int8 files have
# 7-bit weights (QuantizeOptions.weight_bits) and are right there, the TensorRT forms keep 8 bits
# (TensorRT has no such limit). On such a CPU the runner refuses them
# (test_the_refusal_of_8_bit_int8_follows_vnni, simulated on every machine); on a CPU with VNNI OpenVINO
# must agree like everything else, and on one without it that comparison cannot run here.
VNNI = cpu_features().vnni is not False
SATURATES = "OpenVINO int8 with 8-bit weights on a CPU without VNNI (saturating 16-bit pair sums)"
NOT_HERE: set[tuple] = set()  # comparisons this CPU cannot make, by (model, form, precision, runtime, batch)
EXPECTED = sum(len(RUNTIMES[r]) for m in MODELS for f in FORMS for p in PRECISIONS for r in RUNTIMES)
RESULTS: dict[tuple, float] = {}  # (model, form, precision, runtime, batch) -> max abs difference


class Zoo:
    """Every form of every zoo model, made on first use and kept for the module."""

    def __init__(self, root, cifar10, exports):
        self.root, self.exports = root, exports
        tar = str(cifar10 / "test.tar")
        data = load_labelled(tar, 32, limit=FIRST + CALIBRATION).images
        seen = {image.tobytes() for image in data}  # a larger subset holds the smaller one
        more = [image for image in load_labelled(tar, 32, limit=IMAGES + CALIBRATION).images
                if image.tobytes() not in seen]  # fmt: skip
        self.images = np.concatenate([data[:FIRST], np.stack(more[: IMAGES - FIRST])])
        assert len(self.images) == IMAGES
        self.calib = root / "calibration.npy"
        np.save(self.calib, data[FIRST:])
        self.reference: dict[str, tuple] = {}
        self.files: dict[tuple, str] = {}

    def logits(self, model: str) -> tuple[np.ndarray, np.ndarray]:
        """(preprocessed images, fp32 PyTorch logits) of ``model``."""
        if model not in self.reference:
            ckpt = REPO / "models" / f"{model}.pt"
            loaded = load_checkpoint(str(ckpt))
            torch_runner = TorchRunner(str(ckpt), loaded=loaded)
            info = torch_runner.info
            x = normalize(self.images, info.mean, info.std).numpy()
            self.reference[model] = (x, torch_runner.finite_logits(x))
            self._export(model)
        return self.reference[model]

    def _export(self, model: str) -> None:
        """The session's exports of the checkpoint (tests/conftest.py ``zoo_onnx``: the bytes
        ``export_checkpoint`` writes), the other targets made from the custom one."""
        for op_form in ("custom", "decomposed"):
            path = self.exports.export(model, self.root / f"{model}.{op_form}.fp32.onnx", op_form=op_form)
            self.files[model, op_form, "fp32"] = str(path)
        custom = load_onnx(self.files[model, "custom", "fp32"])
        for target in ("tensorrt8", "portable"):
            path = self.root / f"{model}.{target}.fp32.onnx"
            save_onnx(to_target(custom, target), path)
            self.files[model, target, "fp32"] = str(path)

    def file(self, model: str, form: str, precision: str) -> str:
        self.logits(model)
        key = (model, form, precision)
        if key not in self.files:
            out = self.root / f"{model}.{form}.{precision}.onnx"
            calib = str(self.calib) if precision == "int8" else None
            quantize_model(self.files[model, form, "fp32"], out, calib,
                           QuantizeOptions(precision=precision, images=CALIBRATION, cache_dir=""),
                           log=lambda *a: None, progress=False)  # fmt: skip
            self.files[key] = str(out)
        return self.files[key]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, cifar10, zoo_onnx):
    return Zoo(tmp_path_factory.mktemp("conformance"), cifar10, zoo_onnx)


def _runner(runtime: str, path: str):
    if runtime == "onnxruntime":
        return OrtRunner(path)
    if runtime == "openvino":
        need_openvino()
        return OpenVinoRunner(path)
    return ReferenceRunner(path)


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("model", MODELS)
def test_runtime_agrees_with_pytorch(zoo, model, form, precision, runtime):
    x, want = zoo.logits(model)
    path = zoo.file(model, form, precision)
    bits = int8_weight_bits(load_onnx(path))
    assert bits == ({"int8": 7 if form == "portable" else 8}.get(precision)), (form, precision, bits)
    if runtime == "openvino" and bits == 8 and not VNNI:  # refused here (as simulated on every machine)
        with pytest.raises(NotForThisCPU):
            _runner(runtime, path)
        NOT_HERE.update((model, form, precision, runtime, b) for b in RUNTIMES[runtime])
        pytest.skip(f"{SATURATES}: this CPU ({cpu_features().describe()}) cannot compute it; it is compared with "
                    f"PyTorch on a CPU with VNNI")  # fmt: skip
    runner = _runner(runtime, path)
    assert runner.info.precision == precision and (runner.input_name, runner.output_name) == ("image", "logits")
    n = REFERENCE_IMAGES if runtime == "reference" else IMAGES
    failures = []
    for batch in RUNTIMES[runtime]:
        got = runner.logits(x[:n], batch_size=batch)
        m = metrics(want[:n], got)
        RESULTS[model, form, precision, runtime, batch] = m["max_abs"]
        failures += [f"batch {batch}: {f}" for f in judge(m, TOLERANCES[precision])]
    assert not failures, f"{runtime} on {model} {form} {precision}: " + "; ".join(failures)


def table() -> str:
    """Largest |logit - PyTorch| over the zoo: a row per form and precision, a column per runtime and batch."""
    cols = [(r, b) for r, batches in RUNTIMES.items() for b in batches]
    lines = ["| form | precision | " + " | ".join(f"{r} b{b}" for r, b in cols) + " |",
             "|---|---|" + "---|" * len(cols)]  # fmt: skip
    for form in FORMS:
        for precision in PRECISIONS:
            cells = []
            for r, b in cols:
                values = [RESULTS.get((m, form, precision, r, b)) for m in MODELS]
                if any((m, form, precision, r, b) in NOT_HERE for m in MODELS):
                    cells.append("(!)")
                elif any(v is None for v in values):
                    cells.append("?")
                else:
                    cells.append(f"{max(values):.2g}")
            lines.append(f"| {form} | {precision} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_every_comparison_ran(request):
    """Runs after the comparisons (file order): all of them, when the whole module was selected."""
    selected = [i for i in request.session.items if i.module is request.module and "agrees" in i.name]
    if len(selected) != len(MODELS) * len(FORMS) * len(PRECISIONS) * len(RUNTIMES):
        pytest.skip(f"only {len(selected)} of the conformance tests were selected")
    print(f"\nmax |logit - PyTorch fp32| over {', '.join(MODELS)} ({IMAGES} CIFAR-10 test images; the reference "
          f"evaluator {REFERENCE_IMAGES}); CPU {cpu_features().describe()}"  # fmt: skip
          + (f"; (!): {SATURATES}, not compared on this CPU ({len(NOT_HERE)} comparisons)" if NOT_HERE else "")
          + "\n" + table())
    assert EXPECTED == 336 and len(NOT_HERE) == (0 if VNNI else len(MODELS) * 3 * len(RUNTIMES["openvino"]))
    assert len(RESULTS) == EXPECTED - len(NOT_HERE)


@pytest.mark.parametrize("vnni", [False, True])
def test_the_refusal_of_8_bit_int8_follows_vnni(zoo, monkeypatch, vnni):
    """Simulated, so that every machine checks both sides: an x86 CPU without VNNI refuses OpenVINO the int8
    files with 8-bit weights (the TensorRT forms'), naming the file that is safe there, and takes the portable
    int8 (7-bit weights); a CPU with VNNI takes both."""
    import aft_export.runners.openvino as ov
    from aft_export.machine import CpuFeatures

    need_openvino()
    cpu = CpuFeatures("x86_64", "a simulated CPU", vnni=vnni, avx512=True, amx=False, avx2=True, bf16=False)
    monkeypatch.setattr(ov, "cpu_features", lambda: cpu)
    model = MODELS[0]
    eight, seven = zoo.file(model, "custom", "int8"), zoo.file(model, "portable", "int8")
    assert (int8_weight_bits(load_onnx(eight)), int8_weight_bits(load_onnx(seven))) == (8, 7)
    if vnni:
        assert OpenVinoRunner(eight).info.precision == "int8"
    else:
        with pytest.raises(NotForThisCPU, match=r"not for this CPU: OpenVINO computes int8 with 8-bit weights wrongly "
                                                r"on x86 CPUs without VNNI \(this one: x86_64 \(AVX2, AVX-512; no VNNI, BF16, "
                                                r"AMX\).*portable int8 \(7-bit weights"):  # fmt: skip
            OpenVinoRunner(eight)
    assert OpenVinoRunner(seven).info.precision == "int8"
