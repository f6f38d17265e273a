"""ONNX Runtime vs PyTorch eager latency for the same model, as ratios from one run.

Exports each zoo model (fp32, custom AFT op), then times the checkpoint in PyTorch
eager mode and the ONNX file in ONNX Runtime, alternating rounds in one process with
the same thread count, at batch 1 and 32. Prints p50 latency and the speed-up of ONNX
Runtime over PyTorch.

    python benchmarks/bench_ort_vs_torch.py                      # every zoo model, 1 thread
    python benchmarks/bench_ort_vs_torch.py --models aft_conv_cifar --threads 2 --json /tmp/b.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench_ort_vs_torch"))
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 32])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    from aft_export.verify.bench import bench_runner
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.runners import OrtRunner, TorchRunner

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.models or sorted(p.stem for p in (REPO / "models").glob("*.pt"))
    rows = []
    for name in names:
        ckpt, onnx_path = REPO / "models" / f"{name}.pt", out / f"{name}.onnx"
        export_checkpoint(ckpt, onnx_path, ExportOptions(images=0), log=lambda *a: None)
        runners = {"torch": TorchRunner(str(ckpt), threads=args.threads),
                   "onnxruntime": OrtRunner(str(onnx_path), threads=args.threads)}  # fmt: skip
        for batch in args.batches:
            p50 = {k: [] for k in runners}
            for r in runners.values():
                bench_runner(r, batch, warmup=5, iters=1)
            for _ in range(args.rounds):
                for k, r in runners.items():
                    p50[k].append(bench_runner(r, batch, warmup=0, iters=args.iters)["p50_ms"])
            med = {k: sorted(v)[len(v) // 2] for k, v in p50.items()}
            rows.append({"model": name, "batch": batch, "torch_ms": med["torch"], "ort_ms": med["onnxruntime"],
                         "speedup": med["torch"] / med["onnxruntime"]})  # fmt: skip
        print(f"  {name}: done", file=sys.stderr)
    print(f"CPU, {args.threads} thread(s) each; p50 latency, median of {args.rounds} alternating rounds")
    print(f"{'model':18s} {'batch':>5s} {'torch ms':>9s} {'ORT ms':>9s} {'ORT speed-up':>13s}")
    for r in rows:
        print(f"{r['model']:18s} {r['batch']:5d} {r['torch_ms']:9.2f} {r['ort_ms']:9.2f} {r['speedup']:12.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": args.threads, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
