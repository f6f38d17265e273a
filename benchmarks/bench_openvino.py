"""ONNX Runtime vs OpenVINO on the portable form, on this CPU.

    python benchmarks/bench_openvino.py              # zoo + 224 configs, fp32 and int8, batch 1 and 8
    python benchmarks/bench_openvino.py --quick      # one zoo model, a few iterations (the test runs this)
    python benchmarks/bench_openvino.py --json out.json
    python benchmarks/bench_openvino.py --hints --batches 1 8 32   # also OpenVINO's LATENCY vs THROUGHPUT

Every model is exported with ``--target portable`` (the file both runtimes read as
written) and quantised to int8 (Q/DQ, calibrated on 32 images: CIFAR-10 test images for
the zoo, seeded random ones for the 224 configs, whose weights are untrained: speed does
not depend on them). Each file runs in both runtimes with the same thread count (default
2), each on a batch of seeded random inputs, warmed up, then *interleaved*: every
iteration times one ONNX Runtime run and one OpenVINO run, alternating which goes first,
so a change in the machine's load touches both alike. Printed: median milliseconds per
batch of each, and the ratio ORT / OpenVINO from that one run (above 1: OpenVINO is
faster). A file a runtime cannot load is reported as such, not timed.

OpenVINO runs as aft-export runs it: LATENCY for a batch of 1, THROUGHPUT (the batch split
over its optimal number of infer requests) above. ``--hints`` also times OpenVINO's two
modes against each other on every file and batch, interleaved the same way: LATENCY (the
whole batch in one request, every thread on it) and THROUGHPUT; the ratio LATENCY /
THROUGHPUT is above 1 where the split is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ZOO = ["aft_conv_cifar", "aft_full_cifar", "aft_local_cifar", "aft_simple_cifar"]
IMAGENET = ["aft_conv_tiny_224", "aft_full_tiny_224", "aft_local_tiny_224", "aft_simple_tiny_224"]
CALIBRATION = 32


def _checkpoint(name: str, root: Path) -> Path:
    """A zoo checkpoint, or a seeded untrained one of a registry config."""
    if (REPO / "models" / f"{name}.pt").is_file():
        return REPO / "models" / f"{name}.pt"
    import torch

    from aft_export.models.checkpoint import save_checkpoint
    from aft_export.models import create_model

    torch.manual_seed(0)
    model = create_model(name)
    path = root / f"{name}.pt"
    save_checkpoint(path, model, [f"class{i}" for i in range(model.cfg.num_classes)], model_name=name)
    return path


def _calibration(name: str, size: int, root: Path, data: str | None) -> Path:
    import numpy as np

    if data and size == 32:
        from aft_export.data.datasets import load_labelled

        images = load_labelled(data, size, limit=CALIBRATION).images
    else:
        images = np.random.default_rng(0).integers(0, 256, (CALIBRATION, size, size, 3), dtype=np.uint8)
    path = root / f"{name}.calib.npy"
    np.save(path, images)
    return path


def _files(name: str, root: Path, precisions, data: str | None, log) -> dict[str, Path]:
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    ckpt = _checkpoint(name, root)
    fp32 = root / f"{name}.portable.onnx"
    t = time.perf_counter()
    export_checkpoint(ckpt, fp32, ExportOptions(target="portable", images=0), log=lambda *a: None)
    files = {"fp32": fp32}
    if "int8" in precisions:
        from aft_export.runners import OrtRunner

        size = OrtRunner(str(fp32)).info.input_size[1]
        out = root / f"{name}.portable.int8.onnx"
        quantize_model(fp32, out, str(_calibration(name, size, root, data)),
                       QuantizeOptions(images=CALIBRATION, cache_dir=""), log=lambda *a: None,
                       progress=False)  # fmt: skip
        files["int8"] = out
    log(f"{name}: exported and quantised in {time.perf_counter() - t:.0f}s")
    return {p: files[p] for p in precisions}


def _time(runner, x) -> float:
    t = time.perf_counter()
    runner.run({runner.input_name: x})
    return (time.perf_counter() - t) * 1e3


def _interleaved(runners: dict, batch: int, warmup: int, iters: int) -> dict[str, float]:
    """``KEY_ms``: the median ms per batch of each runner on the same random batch, after ``warmup`` runs
    each; every iteration times one run of each, alternating which goes first."""
    import numpy as np

    c, h, w = next(iter(runners.values())).info.input_size
    x = np.random.default_rng(batch).standard_normal((batch, c, h, w)).astype(np.float32)
    for _ in range(warmup):
        for r in runners.values():
            _time(r, x)
    times = {k: [] for k in runners}
    order = list(runners)
    for i in range(iters):
        for key in order if i % 2 == 0 else order[::-1]:
            times[key].append(_time(runners[key], x))
    return {f"{key}_ms": statistics.median(values) for key, values in times.items()}


def compare(path: Path, batch: int, threads: int, warmup: int, iters: int) -> dict:
    """Median ms per batch in ONNX Runtime and OpenVINO, interleaved, and their ratio."""
    import numpy as np

    from aft_export.errors import AFTExportError
    from aft_export.runners import OpenVinoRunner, OrtRunner

    runners, row = {}, {"file": path.name, "batch": batch, "threads": threads}
    for key, make in (("onnxruntime", lambda: OrtRunner(str(path), threads=threads)),
                      ("openvino", lambda: OpenVinoRunner(str(path), threads=threads))):  # fmt: skip
        try:
            runners[key] = make()
        except AFTExportError as exc:
            row[key] = f"cannot load: {exc}"
    if len(runners) < 2:
        return row
    row.update(_interleaved(runners, batch, warmup, iters))
    row["ort_over_openvino"] = row["onnxruntime_ms"] / row["openvino_ms"]
    return row


def compare_hints(path: Path, batch: int, threads: int, warmup: int, iters: int) -> dict:
    """Median ms per batch in OpenVINO's LATENCY and THROUGHPUT modes, interleaved, and their ratio."""
    import numpy as np

    from aft_export.errors import AFTExportError
    from aft_export.runners import OpenVinoRunner

    row = {"file": path.name, "batch": batch, "threads": threads}
    try:
        runners = {hint: OpenVinoRunner(str(path), threads=threads, hint=hint) for hint in ("latency", "throughput")}
    except AFTExportError as exc:
        return {**row, "error": f"cannot load: {exc}"}
    row["requests"] = runners["throughput"].requests()
    row.update(_interleaved(runners, batch, warmup, iters))
    row["latency_over_throughput"] = row["latency_ms"] / row["throughput_ms"]
    return row


def hints_table(rows: list[dict]) -> str:
    lines = ["| model | precision | batch | requests | LATENCY ms | THROUGHPUT ms | LATENCY / THROUGHPUT |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cells = (f"{r['requests']} | {r['latency_ms']:.2f} | {r['throughput_ms']:.2f} | "
                 f"{r['latency_over_throughput']:.2f}" if "error" not in r else f"| | | {r['error']}")  # fmt: skip
        lines.append(f"| {r['model']} | {r['precision']} | {r['batch']} | {cells} |")
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    lines = ["| model | precision | batch | ONNX Runtime ms | OpenVINO ms | ORT / OpenVINO |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "ort_over_openvino" in r:
            cells = f"{r['onnxruntime_ms']:.2f} | {r['openvino_ms']:.2f} | {r['ort_over_openvino']:.2f}"
        else:
            cells = " | ".join(str(r.get(k, "")) for k in ("onnxruntime", "openvino")) + " | n/a"
        lines.append(f"| {r['model']} | {r['precision']} | {r['batch']} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="aft_simple_cifar only, 3 warm-up + 10 runs")
    parser.add_argument("--models", nargs="+", help=f"default: {' '.join(ZOO + IMAGENET)}")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8"], choices=["fp32", "int8"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--data", help="CIFAR-10 test tar for the zoo's int8 calibration [default: "
                                       "$AFT_CIFAR10_DIR/test.tar, else ../shared/data/cifar10/test.tar]")
    parser.add_argument("--hints", action="store_true", help="also OpenVINO's LATENCY vs THROUGHPUT mode")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from aft_export.runners.openvino import openvino_version
    from tests.conftest import cifar10_dir

    models = args.models or (["aft_simple_cifar"] if args.quick else ZOO + IMAGENET)
    warmup, iters = (3, 10) if args.quick else (args.warmup, args.iters)
    data = args.data or str(cifar10_dir() / "test.tar")
    data = data if Path(data).exists() else None

    import onnxruntime

    rows, hint_rows = [], []
    load = [os.getloadavg()[0]] if hasattr(os, "getloadavg") else []
    with tempfile.TemporaryDirectory(prefix="bench-openvino-") as tmp:
        for name in models:
            files = _files(name, Path(tmp), args.precisions, data, lambda m: print(m, file=sys.stderr))
            for precision, path in files.items():
                for batch in args.batches:
                    rows.append({"model": name, "precision": precision,
                                 **compare(path, batch, args.threads, warmup, iters)})  # fmt: skip
                    if args.hints:
                        hint_rows.append({"model": name, "precision": precision,
                                          **compare_hints(path, batch, args.threads, warmup, iters)})  # fmt: skip
    load += [os.getloadavg()[0]] if load else []
    print(f"ONNX Runtime {onnxruntime.__version__} vs OpenVINO {openvino_version()}, portable form, {args.threads} "
          f"threads, median of {iters} interleaved runs each (ORT / OpenVINO > 1: OpenVINO faster)"
          + (f"; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end" if load else ""))  # fmt: skip
    print(table(rows))
    if args.hints:
        print(f"\nOpenVINO's LATENCY vs THROUGHPUT mode, same files, {args.threads} threads, median of {iters} "
              f"interleaved runs each (LATENCY / THROUGHPUT > 1: the split batch is faster)")  # fmt: skip
        print(hints_table(hint_rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"warmup": warmup, "iters": iters, "rows": rows, "hints": hint_rows,
                                               "load_average": load}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
