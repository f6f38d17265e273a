"""What to deploy where, for the zoo and the 224 configs: the deploy table's rows as ratios to ONNX Runtime fp32.

For each model: the default export (fp32, tensorrt target), its TensorRT int8 (the rest in fp16),
the CPU's int8 (``quantize --target portable``: the rest in fp32, 7-bit weights) and the same with
the AFT core quantised too (``--quantize-aft-core``), each on every runtime installed here (PyTorch
eager for the checkpoint; ONNX Runtime, OpenVINO and, on a CPU with bf16 units, OpenVINO with its
fp32 computed in bf16 for the ONNX files), through :func:`aft_export.verify.deploy.deploy_table`: parity against the checkpoint, top-1,
and timing in interleaved rounds at one thread count for every runner, the whole timing done
``--repeats`` times and the median of each row taken. Prints, per model, every row's ratio to ONNX
Runtime fp32 (latency at batch 1, images/s at the large batch: above 1 is faster) and the rows the
table recommends on the CPU, with the machine's instruction sets and load average.

The zoo models (32x32) are timed at batch 1 and 32; the ``*_tiny_224`` configs (seeded random
weights with non-zero biases, as in bench_imagenet.py) at batch 1 and 8, proven on CIFAR-10 test images
resized to 224 (parity only: random weights have no top-1 to speak of; int8's top-1 agreement limit
is 0.9 for them, ``UNTRAINED``, the other limits are the defaults). The goals
(issue "the right artifact for every runtime"): at 224 and batch 8 the recommended CPU file runs
at least 1.5x ONNX Runtime fp32; on the zoo at batch 1 and 32 it is never slower than ONNX Runtime
fp32; every recommended int8 file is faster than its own fp32 on the same runtime.

    python benchmarks/deploy_table.py                                   # zoo + tiny_224, 3 repeats
    python benchmarks/deploy_table.py --models aft_conv_tiny_224 --repeats 1 --json /tmp/d.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
ZOO = ["aft_conv_cifar", "aft_full_cifar", "aft_local_cifar", "aft_simple_cifar"]
IMAGENET = ["aft_full_tiny_224", "aft_local_tiny_224", "aft_simple_tiny_224", "aft_conv_tiny_224"]
QUIET = dict(log=lambda *a: None)
# the 224 configs' random weights give near-tie logits over 1000 classes, where int8 flips top-1 more
# than a trained model (64 images: 4 decisive flips, 0.9375); max abs and cosine keep their limits
UNTRAINED = ["int8.min_top1_agreement=0.9"]


# the int8 files beside the default export: (suffix, quantize's target, whether the AFT core is quantised too)
FILES = ((".int8.onnx", None, False), (".portable.int8.onnx", "portable", False),
         (".portable.core.int8.onnx", "portable", True))  # fmt: skip


def _files(name: str, out: Path, calib: str, calib_count: int) -> tuple[Path, list[Path]]:
    """The checkpoint and the three ONNX files of ``name`` (made once, reused from ``out``)."""
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    if name in ZOO:
        ckpt = REPO / "models" / f"{name}.pt"
    else:
        from bench_imagenet import _checkpoint

        ckpt = _checkpoint(name, out)
    fp32 = out / f"{name}.onnx"
    if not fp32.is_file():
        export_checkpoint(ckpt, fp32, ExportOptions(images=0), **QUIET)
    files = [fp32]
    for suffix, target, core in FILES:
        path = out / f"{name}{suffix}"
        if not path.is_file():
            quantize_model(fp32, path, calib, QuantizeOptions(precision="int8", target=target, images=calib_count,
                                                              quantize_aft_core=core),
                           progress=False, **QUIET)  # fmt: skip
        files.append(path)
    return ckpt, files


def measure(name: str, args) -> dict:
    from aft_export.verify import deploy
    from aft_export.data.images import LabelledImages
    from aft_export.data.datasets import load_labelled
    from aft_export.runners import TorchRunner

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ckpt, files = _files(name, out, args.calib, args.calib_count)
    reference = TorchRunner(str(ckpt), threads=args.threads)
    size = reference.info.input_size[1]
    decoded = load_labelled(args.data, size, limit=args.images if name in ZOO else args.parity_images)
    if name not in ZOO:  # random weights, ImageNet's 1000 classes: real images for parity, no top-1 to speak of
        decoded = LabelledImages(decoded.images, decoded.labels, list(reference.info.classes), decoded.source)
    batches = (1, 32) if name in ZOO else (1, 8)
    table = deploy.deploy_table(reference, [str(f) for f in files], decoded, runtimes=deploy.runtimes_here(),
                                make_runner=partial(deploy.make_runner, threads=args.threads),
                                batches=batches, iters=args.iters, repeats=args.repeats, threads=args.threads,
                                overrides=None if name in ZOO else UNTRAINED,
                                data_label=args.data, log=lambda *a: None)  # fmt: skip
    return table.to_dict()


def ratios(table: dict) -> list[dict]:
    """Each row's latency ratio (ORT fp32 p50 / the row's) and throughput ratio (the row's images/s /
    ORT fp32's), both above 1 when faster than ONNX Runtime on the fp32 file."""
    base = next(r for r in table["rows"] if r["runtime"] == "onnxruntime" and r["artifact"].endswith(".onnx")
                and r["precision"] == "fp32")  # fmt: skip
    out = []
    for r in table["rows"]:
        lat = base["p50_ms"] / r["p50_ms"] if r["p50_ms"] else None
        thr = r["images_per_s"] / base["images_per_s"] if r["images_per_s"] else None
        out.append({**r, "latency_x": lat, "throughput_x": thr})
    return out


def print_table(name: str, table: dict) -> None:
    b = table["batch"]
    print(f"\n{name} (batch 1 and {b}; ratios to ONNX Runtime fp32, above 1 is faster)")
    print(f"| file | runtime | prec | parity | top-1 | p50 ms b1 | x b1 | img/s b{b} | x b{b} | marked |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in ratios(table):
        state = r["parity"] if r["status"] == "ok" else f"{r['status']}: {r['reason'][:60]}"
        state = f"fail ({r['reason'][:50]})" if r["parity"] == "fail" else state
        cells = [r["artifact"].removeprefix(name), r["runtime"], r["precision"] or "-", state or "-",
                 "-" if r["top1"] is None or name not in ZOO else f"{r['top1']:.2f}",
                 "-" if r["p50_ms"] is None else f"{r['p50_ms']:.2f}",
                 "-" if r["latency_x"] is None else f"{r['latency_x']:.2f}x",
                 "-" if r["images_per_s"] is None else f"{r['images_per_s']:.0f}",
                 "-" if r["throughput_x"] is None else f"{r['throughput_x']:.2f}x", " + ".join(r["fastest"])]  # fmt: skip
        print("| " + " | ".join(cells) + " |")


COLUMNS = [(".onnx", "openvino", "fp32 OV"), (".onnx", "openvino-bf16", "fp32 OV bf16"),
           (".int8.onnx", "onnxruntime", "TRT int8 ORT"), (".portable.int8.onnx", "onnxruntime", "CPU int8 ORT"),
           (".int8.onnx", "openvino", "TRT int8 OV"), (".portable.int8.onnx", "openvino", "CPU int8 OV"),
           (".portable.int8.onnx", "openvino-bf16", "CPU int8 OV bf16"),
           (".portable.core.int8.onnx", "onnxruntime", "CPU int8 +core ORT"),
           (".portable.core.int8.onnx", "openvino", "CPU int8 +core OV")]  # fmt: skip


def summary(tables: dict) -> list[str]:
    """One line per model and batch: ONNX Runtime fp32's figure, every other ONNX row's ratio to it
    (latency at batch 1, images/s at the large batch), and the row the table recommends."""
    lines = ["| model | batch | ORT fp32 | " + " | ".join(c[2] for c in COLUMNS) + " | recommended (x) |",
             "|---|---|---|" + "---|" * len(COLUMNS) + "---|"]
    for name, table in tables.items():
        rows = {(r["artifact"].removeprefix(name), r["runtime"]): r for r in ratios(table)}
        base = rows[(".onnx", "onnxruntime")]
        for by, key, unit in (("latency", "latency_x", "ms"), ("throughput", "throughput_x", "img/s")):
            batch = 1 if by == "latency" else table["batch"]
            pick = table["recommended"]["cpu"][by]
            best = rows[(pick["artifact"].removeprefix(name), pick["runtime"])] if pick else None
            figure = f"{base['p50_ms']:.2f} ms" if by == "latency" else f"{base['images_per_s']:.0f} img/s"
            cells = []
            for suffix, runtime, _ in COLUMNS:
                r = rows.get((suffix, runtime))
                mark = "" if r is None or r["parity"] in ("pass", "reference") else " (fails parity)"
                cells.append("-" if r is None or r[key] is None else f"{r[key]:.2f}x{mark}")
            said = "-" if best is None else (f"{best['artifact'].removeprefix(name)} {best['runtime']} "
                                             f"({best[key]:.2f}x)")  # fmt: skip
            lines.append(f"| {name} | {batch} | {figure} | " + " | ".join(cells) + f" | {said} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=ZOO + IMAGENET)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timings per table (median taken)")
    parser.add_argument("--iters", type=int, default=30, help="timed runs per row and batch in each timing")
    parser.add_argument("--images", type=int, default=1000, help="labelled test images for the zoo's top-1 (parity: 64)")
    parser.add_argument("--parity-images", type=int, default=64, help="real images for the 224 configs' parity "
                        "(random weights: no top-1)")
    parser.add_argument("--data", default="cifar10:test")
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--calib-count", type=int, default=512)
    parser.add_argument("--out", default=str(REPO / "runs" / "deploy_table"))
    parser.add_argument("--json", help="also write every table as JSON here")
    parser.add_argument("--from-json", help="print the summary of tables an earlier run wrote (--json), measuring nothing")
    args = parser.parse_args(argv)
    if args.from_json:
        tables = {}
        for path in args.from_json.split(","):
            tables.update(json.loads(Path(path).read_text()))
        print("\n".join(summary(tables)))
        return 0
    tables, started = {}, time.time()
    for name in args.models:
        tables[name] = measure(name, args)
        print_table(name, tables[name])
        m = tables[name]["machine"]
        print(f"load average {m['load_average']} -> {m['load_average_after']}", flush=True)
    first = next(iter(tables.values()))["machine"]
    print(f"\nmachine: {first['cpu']}, {first['cores']} cores, instruction sets {first['instruction_sets']}, "
          f"{args.threads} threads per runner; {time.time() - started:.0f} s")  # fmt: skip
    print("\n" + "\n".join(summary(tables)))
    if args.json:
        Path(args.json).write_text(json.dumps(tables, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
