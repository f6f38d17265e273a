"""Where the CPU's time goes: each file's node time by op type on ONNX Runtime and OpenVINO.

For each model (default: the four ``*_tiny_224`` configs, seeded random weights: speed does not
depend on them): the default export, and the CPU's int8 (``quantize --target portable``, the AFT core
quantised where the target says) and the same with every AFT core quantised, made as
``benchmarks/deploy_table.py`` makes them; each profiled by ``aft_export.bench(..., profile=True)`` at
``--batch`` on every CPU runtime here: ONNX Runtime's profiler, OpenVINO's node counters with the
kernel each op ran (``ref*``: OpenVINO's reference kernels, the glue that is not optimised). Printed
per file and runtime: the op types above ``--min-share`` of the node time, and the share in
reference kernels and in data movement (Transpose, Reshape, Gather, Split, Concat, Slice, Pad,
Reorder), the numbers a change of what the exporter emits is judged by.

    python benchmarks/profile_cpu.py                             # the four 224 configs, batch 8, 2 threads
    python benchmarks/profile_cpu.py --models aft_full_tiny_224 --json /tmp/p.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGENET = ["aft_full_tiny_224", "aft_local_tiny_224", "aft_simple_tiny_224", "aft_conv_tiny_224"]
MOVEMENT = ("Transpose", "Reshape", "Gather", "Split", "VariadicSplit", "Concat", "Slice", "StridedSlice", "Pad",
            "Reorder", "Squeeze", "Unsqueeze", "Expand", "Shape")  # fmt: skip


def shares(ops: list[dict]) -> dict:
    """The share of the node time in reference kernels and in data movement (OpenVINO's op type is
    ``Kind [kernel]``, ONNX Runtime's the op type alone)."""
    kind = [(op["op_type"].split(" [")[0], op) for op in ops]
    return {"reference": sum(op["share"] for _, op in kind if op.get("reference")),
            "movement": sum(op["share"] for k, op in kind if k in MOVEMENT)}  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=IMAGENET)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--min-share", type=float, default=0.02, help="op types below this share are summed")
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--calib-count", type=int, default=64, help="calibration images (speed does not depend on them)")
    parser.add_argument("--out", default=str(REPO / "runs" / "deploy_table"), help="where the files are made (reused)")
    parser.add_argument("--json", help="also write every profile as JSON here")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import aft_export
    from aft_export.machine import cpu_features
    from aft_export.verify.deploy import runtimes_here
    from deploy_table import _files

    here = runtimes_here(gpu=False)
    runtimes = [r for r in ("onnxruntime", "openvino", "openvino-bf16") if here.get(r) == "ok"]
    cpu = cpu_features()
    print(f"{cpu.model or cpu.arch}, {cpu.describe()}; batch {args.batch}, {args.threads} threads, {args.iters} runs; "
          f"runtimes: {', '.join(runtimes)}")  # fmt: skip
    report = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        _, files = _files(name, out, args.calib, args.calib_count)
        chosen = [f for f in files if ".portable." in f.name or f.name == f"{name}.onnx"]
        for runtime in runtimes:
            result = aft_export.bench([str(f) for f in chosen], batch_sizes=[args.batch], iters=args.iters, warmup=2,
                                      threads=args.threads, backend=runtime, profile=True)  # fmt: skip
            ms = {r["artifact"]: r["p50_ms"] for r in result.rows}
            for prof in result.profiles:
                label = Path(prof["artifact"]).name.removeprefix(name)
                s = shares(prof["ops"])
                report[f"{name}{label}@{runtime}"] = {"p50_ms": ms.get(prof["artifact"]), **s, "ops": prof["ops"]}
                top = [op for op in prof["ops"] if op["share"] >= args.min_share]
                rest = 1 - sum(op["share"] for op in top)
                print(f"\n{name}{label} on {runtime}: {ms.get(prof['artifact'], 0):.2f} ms a batch; reference kernels "
                      f"{100 * s['reference']:.1f}%, data movement {100 * s['movement']:.1f}%")  # fmt: skip
                print("  " + ", ".join(f"{op['op_type']} {100 * op['share']:.1f}%" for op in top)
                      + f", the rest {100 * rest:.1f}%")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
