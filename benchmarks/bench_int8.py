"""ONNX Runtime CPU throughput of fp32 vs int8 at batch 1 and 32, as ratios from one run.

Exports a zoo model, quantises it to int8 (calibration/cifar10.json), then times both
files alternately in the same process (warm-up first, then interleaved rounds, so
that a busy machine slows both alike) and prints images/s and the int8/fp32 ratio.

    python benchmarks/bench_int8.py                       # aft_full_cifar
    python benchmarks/bench_int8.py --model aft_conv_cifar --threads 2 --json /tmp/b.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="aft_full_cifar", help="zoo name or checkpoint path")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench_int8"))
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 32])
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: all cores)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per batch size")
    parser.add_argument("--iters", type=int, default=20, help="runs per round")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    ckpt = Path(args.model)
    if not ckpt.is_file():
        ckpt = REPO / "models" / f"{args.model}.pt"
    if not ckpt.is_file():
        zoo = ", ".join(sorted(p.stem for p in (REPO / "models").glob("*.pt")))
        parser.error(f"--model {args.model}: neither a checkpoint file nor a zoo name ({zoo})")
    name = ckpt.stem

    from aft_export.verify.bench import bench_runner
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model
    from aft_export.runners import OrtRunner

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fp32, int8 = out / f"{name}.onnx", out / f"{name}.int8.onnx"
    quiet = dict(log=lambda *a: None)
    export_checkpoint(ckpt, fp32, ExportOptions(images=0), **quiet)
    quantize_model(fp32, int8, str(REPO / "calibration" / "cifar10.json"), QuantizeOptions(), progress=False, **quiet)
    runners = {"fp32": OrtRunner(str(fp32), threads=args.threads), "int8": OrtRunner(str(int8), threads=args.threads)}

    rows = []
    for batch in args.batches:
        times = {p: [] for p in runners}
        for r in runners.values():
            bench_runner(r, batch, warmup=10, iters=1)
        for _ in range(args.rounds):
            for p, r in runners.items():
                res = bench_runner(r, batch, warmup=0, iters=args.iters)
                times[p].append(res["images_per_s"])
        ips = {p: sorted(v)[len(v) // 2] for p, v in times.items()}  # median over rounds
        rows.append({"batch": batch, "fp32_images_per_s": ips["fp32"], "int8_images_per_s": ips["int8"],
                     "ratio_int8_over_fp32": ips["int8"] / ips["fp32"]})  # fmt: skip

    threads = runners["fp32"].threads
    print(f"{name}, ONNX Runtime CPU, {threads} threads, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; median of {args.rounds} interleaved rounds of {args.iters} runs")  # fmt: skip
    print(f"{'batch':>5s} {'fp32 img/s':>11s} {'int8 img/s':>11s} {'int8/fp32':>10s}")
    for r in rows:
        print(f"{r['batch']:5d} {r['fp32_images_per_s']:11.1f} {r['int8_images_per_s']:11.1f} "
              f"{r['ratio_int8_over_fp32']:9.2f}x")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"model": name, "threads": threads, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
