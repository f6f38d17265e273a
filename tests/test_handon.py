"""Stages hand their results on (issue 21): in one pipeline run the calibration set is decoded
once, each artifact is checked by the offline TensorRT check once and parity takes PyTorch's
logits from the export's verification, with the same results as
the same run in which every stage computes everything itself.

Spies wrap the real functions (they still run) and count calls; "hand-on off" wraps the stage
functions the pipeline calls so that they are given nothing and hand nothing back, which is
what each CLI command does on its own.
"""

import collections
import json

import pytest

import aft_export.tensorrt.build as build
import aft_export.data.calibration as calib
import aft_export.exporting.exporter as exporter
import aft_export.workflow.pipeline as pipeline
import aft_export.quantization.stage as quantize
from aft_export.options import PipelineOptions
from tests.test_pipeline import UNTRAINED_INT8_LIMITS, tiny_cifar10_ckpt

CALIB_IMAGES = 32
# the CPU's int8 (the portable target's) is quantised from model.onnx beside the TensorRT int8
ONNX_ARTIFACTS = ("model.onnx", "model.fp16.onnx", "model.int8.onnx", "model.portable.int8.onnx")


def _spy(monkeypatch, counts, module, name, key, per=lambda result: 1):
    """Count the calls of ``module.name`` (``per``: what one call adds, e.g. the images it decoded)."""
    real = getattr(module, name)

    def spy(*args, **kwargs):
        result = real(*args, **kwargs)
        counts[key] += per(result)
        return result

    monkeypatch.setattr(module, name, spy)


def _without(monkeypatch, name, dropped, keep_report=True):
    """The pipeline's ``name`` called without the hand-on keywords ``dropped``, its result
    handing no check report on (the stage as a CLI command runs it)."""
    real = getattr(pipeline, name)

    def call(*args, **kwargs):
        result = real(*args, **{k: v for k, v in kwargs.items() if k not in dropped})
        if hasattr(result, "check_report"):
            result.check_report = None
        return result

    monkeypatch.setattr(pipeline, name, call)


def _run(tmp_path, cifar10, ckpt, name, hand_on: bool):
    counts = collections.Counter()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AFT_CACHE_DIR", str(tmp_path / f"cache-{name}"))  # both runs compute their ranges
        _spy(mp, counts, calib, "decode_pixels", "calibration decodes", per=len)  # images decoded
        for module in (exporter, quantize, build, pipeline):  # every binding of check_model a run reaches
            _spy(mp, counts, module, "check_model", "check_model")
        if not hand_on:
            _without(mp, "export_checkpoint", ("also_check",))
            _without(mp, "quantize_model", ("calibration", "fp32_logits", "also_check"))
            _without(mp, "build_engine", ("checked",))
            _without(mp, "run_parity", ("reference_logits",))
        out = tmp_path / name
        # a tiny untrained model (what is counted does not depend on accuracy), held to int8 limits that
        # its near-tie logits meet: a file failing parity would be localised, which checks its graphs again
        pipeline.run_pipeline(str(ckpt), PipelineOptions(
            output=str(out), calib=str(cifar10 / "train.tar"), data=str(cifar10 / "test.tar"), calib_images=CALIB_IMAGES,
            parity_images=16, eval_images=32, bench_batch_sizes=(1,), bench_iters=1, tolerances=UNTRAINED_INT8_LIMITS),
            log=lambda *a: None)  # fmt: skip
    return counts, json.loads((out / "manifest.json").read_text())


def _results(manifest, run_dir) -> dict:
    """What a run found, less timings and its own directory's name."""
    r = manifest["results"]
    text = json.dumps({
        "trt_check": r["trt_check"],
        "quantize": {k: {f: v for f, v in q.items() if f != "seconds"} for k, q in r["quantize"].items()},
        "engines": {k: {f: v for f, v in e.items() if f != "build_seconds"} for k, e in r.get("engines", {}).items()},
        "parity": r["parity"], "eval": [{f: v for f, v in e.items() if f != "seconds"} for e in r["eval"]],
        "summary": [{f: v for f, v in s.items() if f not in ("latency_ms", "images_per_s")} for s in manifest["summary"]],
    }, sort_keys=True)  # fmt: skip
    partial = json.loads(text)["trt_check"]["model.onnx"]["path"].rsplit("/", 1)[0]  # the run's temporary name
    return json.loads(text.replace(partial, "RUN").replace(str(run_dir), "RUN"))


def test_a_pipeline_run_decodes_calibration_once_and_checks_each_artifact_once(tmp_path, cifar10):
    ckpt = tiny_cifar10_ckpt(tmp_path / "tiny.pt")  # test_pipeline's tiny model, held to its int8 limits
    counts, manifest = _run(tmp_path, cifar10, ckpt, "handed", hand_on=True)
    engines = [a for a in manifest["artifacts"] if a.endswith(".engine")]
    assert manifest["inputs"]["calibration"]["count"] == CALIB_IMAGES
    assert counts["calibration decodes"] == CALIB_IMAGES  # one pass, shared by fp16 and both int8
    assert counts["check_model"] == len(ONNX_ARTIFACTS)  # export and quantize check; pipeline and build reuse it

    # the same run with every stage computing for itself: what the hand-on saves, and the same results
    old_counts, old = _run(tmp_path, cifar10, ckpt, "alone", hand_on=False)
    assert old_counts["calibration decodes"] == 3 * CALIB_IMAGES
    assert old_counts["check_model"] == len(ONNX_ARTIFACTS) * (3 if engines else 2)
    sha = {a: v["sha256"] for a, v in manifest["artifacts"].items() if a.endswith(".onnx")}
    assert set(sha) == set(ONNX_ARTIFACTS)
    assert sha == {a: v["sha256"] for a, v in old["artifacts"].items() if a.endswith(".onnx")}
    # engines are compared by what the parser made of them: TensorRT-RTX's engine bytes differ
    # between two builds of the same file
    assert _results(manifest, tmp_path / "handed") == _results(old, tmp_path / "alone")
    for engine in engines:  # the build's offline check, handed on or its own, found the same
        checked = [json.loads((tmp_path / run / f"{engine}.json").read_text())["tensorrt_build"]["offline_check"]
                   for run in ("handed", "alone")]  # fmt: skip
        assert checked[0] == checked[1] and checked[0]["status"] == "accepts", engine
