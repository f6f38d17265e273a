"""What to deploy where (aft_export.verify.deploy): the marks, the table on a tiny model, bench --reference."""

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from aft_export.verify import deploy
from aft_export.cli import main
from aft_export.data.images import LabelledImages
from aft_export.verify.deploy import DeployRow, DeployTable, deploy_table, mark_fastest, runs_on, time_rows
from aft_export.errors import NotForThisCPU
from aft_export.exporting.exporter import ExportOptions, export_checkpoint
from aft_export.options import QuantizeOptions
from aft_export.quantization.stage import quantize_model
from aft_export.workflow.plots import deploy_plots
from aft_export.workflow.report import deploy_lines
from aft_export.runners import Runner, TorchRunner
from tests.conftest import need_openvino
from tests.export.test_exporter import make_ckpt


def _row(artifact, runtime, device="cpu", p50=1.0, ips=100.0, parity="pass", status="ok"):
    return DeployRow(artifact, runtime, device, "fp32", 1, status, "", parity, 50.0, 10, p50, ips)


def test_the_fastest_that_passes_is_marked_per_device_class():
    rows = [_row("a", "onnxruntime", p50=2.0, ips=500), _row("b", "openvino", p50=1.0, ips=400),
            _row("c", "openvino", p50=0.1, ips=9000, parity="fail"),  # faster, but fails parity: never marked
            _row("d", "openvino", p50=0.1, ips=9000, status="skipped"),  # not for this CPU: never marked
            _row("m.pt", "torch", p50=5.0, ips=100, parity="reference"),
            _row("e", "torch-cuda", "gpu", p50=0.5, ips=20000, parity="reference"),
            _row("f", "onnxruntime-cuda", "gpu", p50=0.2, ips=10000)]  # fmt: skip
    mark_fastest(rows)
    marks = {r.artifact: r.fastest for r in rows}
    assert marks == {"a": ["throughput"], "b": ["latency"], "c": [], "d": [], "m.pt": [], "e": ["throughput"],
                     "f": ["latency"]}  # fmt: skip
    table = DeployTable(rows, {}, {}, 32, "m.pt", "cifar10:test")
    assert table.best("cpu", "latency").artifact == "b" and table.best("gpu", "throughput").artifact == "e"
    assert table.to_dict()["recommended"]["gpu"] == {"latency": {"artifact": "f", "runtime": "onnxruntime-cuda"},
                                                     "throughput": {"artifact": "e", "runtime": "torch-cuda"}}
    mark_fastest([_row("x", "onnxruntime", parity="fail")])  # nothing offered: nothing marked, no error


def test_a_near_tie_goes_to_the_file_made_for_the_device():
    trt = _row("model.int8.onnx", "openvino", p50=1.00, ips=3000)
    cpu = _row("model.portable.int8.onnx", "openvino", p50=1.02, ips=2950)  # within 3%: a tie
    slow = _row("model.onnx", "onnxruntime", p50=0.90, ips=1000)  # faster at batch 1 by 10%: not a tie
    trt.made_for, cpu.made_for = "gpu", "cpu"
    mark_fastest([trt, cpu, slow])
    assert (trt.fastest, cpu.fastest, slow.fastest) == ([], ["throughput"], ["latency"])
    cpu.images_per_s = 2000  # far behind: the faster file wins, whatever it is made for
    mark_fastest([trt, cpu, slow])
    assert (trt.fastest, cpu.fastest) == (["throughput"], [])


def test_which_runtime_runs_which_file():
    assert runs_on("m.pt", "torch") and runs_on("m.pt", "torch-cuda") and not runs_on("m.pt", "openvino")
    assert runs_on("m.onnx", "openvino") and runs_on("m.onnx", "onnxruntime") and not runs_on("m.onnx", "torch")
    assert runs_on("m.engine", "tensorrt") and not runs_on("m.rtx.engine", "tensorrt", "tensorrt-rtx")
    assert runs_on("m.rtx.engine", "tensorrt-rtx", "tensorrt-rtx")


class _Clock:
    """The timing's clock, advanced by the runners below: what it reads depends on nothing of this machine."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class _Echo:
    """A runner that takes a known time per image on :class:`_Clock` (the timing's arithmetic, nothing measured
    of a model), and counts its runs."""

    def __init__(self, ms, clock):
        self.ms, self.clock, self.fixed_batch, self.input_name, self.runs = ms, clock, None, "image", 0
        self.info = type("I", (), {"input_size": (3, 4, 4)})()

    def random_input(self, batch, seed=0):  # what Runner.random_input gives a normalised input
        return np.random.default_rng(seed).standard_normal((batch, *self.info.input_size), dtype=np.float32)

    def run(self, feeds):
        self.clock.now += self.ms * len(feeds["image"]) / 1e3
        self.runs += 1
        return {"logits": feeds["image"]}


def test_interleaved_timing_gives_every_runner_its_runs(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(deploy, "time", clock)
    a, b = _Echo(1.0, clock), _Echo(3.0, clock)
    out = time_rows({("a", "r"): a, ("b", "r"): b}, batch=2, warmup=1, iters=6, rounds=3)
    assert out[("a", "r")]["runs"] == out[("b", "r")]["runs"] == 6 and a.runs == b.runs == 7  # and one warm-up
    assert out[("a", "r")]["p50_ms"] == pytest.approx(2.0) and out[("b", "r")]["p50_ms"] == pytest.approx(6.0)
    assert out[("a", "r")]["images_per_s"] == pytest.approx(1000) and out[("b", "r")]["images_per_s"] == \
        pytest.approx(2000 / 6)  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory, cifar10):
    """A tiny AFT-conv checkpoint with CIFAR-10's names, its default export and the CPU int8."""
    from tests.test_pipeline import CIFAR10
    from aft_export import load_checkpoint
    from aft_export.models.checkpoint import save_checkpoint

    tmp = tmp_path_factory.mktemp("deploy")
    ckpt = make_ckpt(tmp / "tiny.pt", "aft_conv_test")
    model, _ = load_checkpoint(ckpt)
    save_checkpoint(ckpt, model, CIFAR10, model_name="aft_conv_test")
    fp32 = tmp / "model.onnx"
    export_checkpoint(ckpt, fp32, ExportOptions(images=0), log=lambda *a: None)
    cpu = tmp / "model.portable.int8.onnx"
    quantize_model(fp32, cpu, str(cifar10 / "train.tar"), QuantizeOptions(images=64, target="portable"),
                   log=lambda *a: None, progress=False)  # fmt: skip
    return ckpt, fp32, cpu


def test_the_table_of_a_tiny_model(files, cifar10):
    need_openvino()
    ckpt, fp32, cpu = files
    ref = TorchRunner(str(ckpt), threads=1)
    rng = np.random.default_rng(0)
    decoded = LabelledImages(rng.integers(0, 255, (24, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 24),
                             ref.info.classes, "random")  # fmt: skip

    def make(artifact, runtime):
        if runtime == "openvino" and artifact == str(cpu):
            raise NotForThisCPU("not for this CPU: a made-up refusal")  # the runner's own refusal, said as a skip
        return deploy.make_runner(artifact, runtime, threads=1)

    # openvino-bf16 as this machine has it: run where its CPU has bf16 units, else a row that says why not
    runtimes = {"torch": "ok", "onnxruntime": "ok", "openvino": "ok", "torch-cuda": "no GPU here",
                "openvino-bf16": deploy.runtimes_here(gpu=False)["openvino-bf16"]}  # fmt: skip
    table = deploy_table(ref, [str(fp32), str(cpu)], decoded, runtimes=runtimes, make_runner=make, batches=(1, 3),
                         warmup=1, iters=2, threads=1, overrides=["int8.min_top1_agreement=0", "int8.max_abs=100",
                         "int8.min_cosine=0.01"], data_label="random", log=lambda *a: None)  # fmt: skip
    rows = {(r.artifact, r.runtime): r for r in table.rows}
    bf16 = {("model.onnx", "openvino-bf16"), ("model.portable.int8.onnx", "openvino-bf16")}
    assert set(rows) == {("tiny.pt", "torch"), ("model.onnx", "onnxruntime"), ("model.portable.int8.onnx",
                         "onnxruntime"), ("model.onnx", "openvino"), ("model.portable.int8.onnx", "openvino"),
                         *(bf16 if runtimes["openvino-bf16"] == "ok" else ())}  # fmt: skip
    if runtimes["openvino-bf16"] == "ok":  # the fp32 file proven against the bf16 limits, the int8 against int8's
        on_bf16 = rows[("model.onnx", "openvino-bf16")]
        assert (on_bf16.parity, on_bf16.precision, on_bf16.device, set(on_bf16.timing)) == ("pass", "fp32", "cpu",
                                                                                             {1, 3})  # fmt: skip
    else:
        assert f"Not run: openvino-bf16: {runtimes['openvino-bf16']}" in "\n".join(deploy_lines(table.to_dict()))
    skipped = rows[("model.portable.int8.onnx", "openvino")]
    assert (skipped.status, skipped.reason, skipped.p50_ms, skipped.fastest) == (
        "skipped", "not for this CPU: a made-up refusal", None, [])  # fmt: skip
    ov = rows[("model.onnx", "openvino")]
    assert ov.parity == "pass" and ov.images == 24 and ov.precision == "fp32" and set(ov.timing) == {1, 3}
    assert rows[("tiny.pt", "torch")].parity == "reference" and rows[("tiny.pt", "torch")].top1 is not None
    # the table's mechanics, on an untrained model whose int8 is judged with loosened limits (above): the
    # verdict is what its rows say, whatever they say (test_bench_against_the_checkpoint: the real limits)
    assert sum("latency" in r.fastest for r in table.rows) == 1
    assert table.verdict.ok == (not any(r.parity == "fail" or r.status == "failed" for r in table.rows))
    d = json.loads(json.dumps(table.to_dict()))
    assert d["data"] == "random" and d["runtimes"]["torch-cuda"] == "no GPU here" and "path" not in d["rows"][0]
    text = "\n".join(deploy_lines(d, markdown=False))
    assert "not for this CPU" in text and "Not run: torch-cuda: no GPU here." in text
    assert "Deploy on the CPU: fastest at batch 1:" in text and "rerun" in text
    plots = deploy_plots(d)
    assert set(plots) == {"deploy_latency.svg", "deploy_throughput.svg"} and "model.onnx / openvino" in \
        plots["deploy_latency.svg"] and "model.portable.int8.onnx / openvino</text>" not in plots["deploy_latency.svg"]  # fmt: skip


def test_bench_against_the_checkpoint(files, cifar10):
    ckpt, fp32, cpu = files
    args = ["bench", "--reference", str(ckpt), str(fp32), str(cpu), "--backend", "onnxruntime", "--images", "16",
            "--data", str(cifar10 / "test.tar"), "--batch-size", "1", "--batch-size", "2", "--iters", "2",
            "--warmup", "0"]  # fmt: skip
    res = CliRunner().invoke(main, args + ["--json"])
    # an untrained model's int8 may miss int8's limits on 16 images: the table says so, with exit 1
    assert res.exit_code in (0, 1), res.output
    table = json.loads(res.stdout)
    assert {r["runtime"] for r in table["rows"]} == {"torch", "onnxruntime"}  # --backend: that one, beside PyTorch
    assert table["runtimes"].keys() == {"torch", "onnxruntime"} and table["data"].endswith("test.tar")
    assert res.exit_code == (1 if any(r["parity"] == "fail" for r in table["rows"]) else 0)
    assert "note:" not in res.stderr  # the table answers which file is faster: no note besides it


class _Breaks(Runner):
    """A runner that a runtime made but that fails to run the file (OpenVINO compiling its THROUGHPUT model on
    the first large batch, say)."""

    backend, threads = "openvino", 1

    def __init__(self, inner):
        super().__init__(inner.path, inner.info)
        self.input_name = inner.input_name

    def run(self, feeds):
        raise RuntimeError("Exception from src/inference/src/cpp/infer_request.cpp: made up\nsecond line")


def test_a_runtime_failing_on_a_file_fails_its_row_not_the_table(files, tmp_path):
    need_openvino()
    ckpt, fp32, cpu = files
    other = tmp_path / "b"
    other.mkdir()
    twin = other / "model.onnx"  # the same name as fp32's, in another folder
    twin.write_bytes(fp32.read_bytes())
    ref = TorchRunner(str(ckpt), threads=1)
    rng = np.random.default_rng(0)
    decoded = LabelledImages(rng.integers(0, 255, (8, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 8),
                             ref.info.classes, "random")  # fmt: skip

    def make(artifact, runtime):
        runner = deploy.make_runner(artifact, runtime, threads=1)
        return _Breaks(runner) if runtime == "openvino" and artifact == str(twin) else runner

    table = deploy_table(ref, [str(fp32), str(twin)], decoded, runtimes={"torch": "ok", "openvino": "ok"},
                         make_runner=make, batches=(2, 4), warmup=0, iters=1, threads=1, log=lambda *a: None)  # fmt: skip
    rows = {(r.artifact, r.runtime): r for r in table.rows}
    assert set(rows) == {("tiny.pt", "torch"), (str(fp32), "openvino"), (str(twin), "openvino")}  # names clash
    broken = rows[(str(twin), "openvino")]
    assert broken.status == "failed" and "made up" in broken.reason and "\n" not in broken.reason
    assert rows[(str(fp32), "openvino")].status == "ok" and rows[(str(fp32), "openvino")].p50_ms is not None
    assert table.latency_batch == 2 and table.verdict.status == "unverified"
    assert "p50 ms b2" in deploy_lines(table.to_dict())[0]


def test_bench_reference_refusals(files, tmp_path):
    ckpt, fp32, _ = files
    res = CliRunner().invoke(main, ["bench", str(fp32), "--data", "cifar10:test"])
    assert res.exit_code == 2 and "--data" in res.output and "--reference" in res.output
    res = CliRunner().invoke(main, ["bench", str(fp32), "--reference", str(fp32)])
    assert res.exit_code == 2 and "checkpoint" in res.output
    res = CliRunner().invoke(main, ["bench", str(fp32), "--reference", str(ckpt), "--profile"])
    assert res.exit_code == 2 and "--profile" in res.output
    res = CliRunner().invoke(main, ["bench", str(fp32), "--images", "10"])
    assert res.exit_code == 2 and "--images" in res.output and "--reference" in res.output
    res = CliRunner().invoke(main, ["bench", str(fp32), "--reference", str(ckpt), "--backend", "onnxruntime-tensorrt"])
    assert res.exit_code == 2 and "--backend onnxruntime-tensorrt" in res.output


def test_a_runtime_not_installed_is_listed_as_such(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    here = deploy.runtimes_here(gpu=False)
    assert here["openvino"] == "not installed: pip install 'aft-export[openvino]'" and here["torch"] == "ok"
    table = DeployTable([_row("m.onnx", "onnxruntime")], here, {}, 32, "m.pt", "d")
    mark_fastest(table.rows)
    text = "\n".join(deploy_lines(table.to_dict(), markdown=False))
    assert "Not run: openvino, openvino-bf16: not installed: pip install 'aft-export[openvino]'." in text
    assert table.verdict.ok  # a runtime missing here changes no exit status


def test_the_table_checks_what_it_is_given_before_anything_runs(files, cifar10, tmp_path, monkeypatch):
    """The same file twice (or by another path) is measured once, with a note, from Python as from the command
    line; a file made from another checkpoint, and a batch beyond memory, are one error each before the table
    runs anything (the table itself is replaced by a failure here: it must not be reached)."""
    import aft_export
    from aft_export.errors import AFTExportError

    ckpt, fp32, _ = files
    link = tmp_path / "link.onnx"
    link.symlink_to(fp32)
    kw = dict(reference=str(ckpt), backend="onnxruntime", data=str(cifar10 / "test.tar"), images=4,
              batch_sizes=[1], iters=1, warmup=0)  # fmt: skip
    result = aft_export.bench([fp32, str(fp32), link], **kw)
    table = result.deploy  # bench's one result type holds the table, whose JSON it prints and whose verdict it has
    assert result.to_dict() == table.to_dict() and result.verdict == table.verdict and result.notes == table.notes
    timed = sorted((os.path.basename(r["artifact"]), r["backend"], r["batch"]) for r in result.rows)
    assert timed == [("model.onnx", "onnxruntime", 1), ("tiny.pt", "torch", 1)]
    assert sorted((r.artifact, r.runtime) for r in table.rows) == [("model.onnx", "onnxruntime"), ("tiny.pt", "torch")]
    assert table.notes == [f"{fp32} was given more than once: measured once",
                           f"{link} is {fp32}: measured once, as {fp32}"]  # fmt: skip
    assert f"Note: {link} is {fp32}: measured once, as {fp32}." in deploy_lines(table.to_dict(), markdown=False)

    def reached(*a, **k):
        raise AssertionError("the table ran")

    monkeypatch.setattr(deploy, "deploy_table", reached)
    other = make_ckpt(tmp_path / "other.pt", "aft_conv_test", seed=1)
    with pytest.raises(AFTExportError, match=rf"^{fp32} was exported from another checkpoint .*: it was not made from "
                                             rf"the reference {other}; give the checkpoint it was made from as "
                                             rf"`reference`, or bench it without `reference`$"):  # fmt: skip
        aft_export.bench([fp32], **{**kw, "reference": str(other)})
    monkeypatch.setattr("aft_export.runners.base.available_memory", lambda: 2**20)
    with pytest.raises(AFTExportError, match=r"^batch 64 of tiny\.pt needs about .* but 1 MB is available; use "
                                             r"`batch_sizes=\d+` or less$"):  # fmt: skip
        aft_export.bench([fp32], **{**kw, "batch_sizes": [1, 64]})
    with pytest.raises(AFTExportError, match=r"not a runtime the deploy table runs; with `reference` choose "
                                             r"onnxruntime, onnxruntime-cuda, openvino, openvino-bf16, or leave"):  # fmt: skip
        aft_export.bench([fp32], **{**kw, "backend": "onnxruntime-tensorrt"})
