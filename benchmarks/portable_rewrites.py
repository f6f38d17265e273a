"""Before and after: the portable form's rewrites for the CPU readers, timed on every CPU runtime here.

The portable form splits the q/k/v projection torch's exporter fuses back into one MatMul per part,
and the AFT core's merged numerator/denominator product back into two
(``aft_export.exporting.rewrite``: ``split_fused_projections``, ``unmerge_shared_products``). For each
model: its default export, put in the portable form with and without those rewrites
(``to_portable(model, rewrites=False)``), each quantised for the CPU (``quantize --target portable``
defaults, ``--calib-count`` images); the four files timed at each batch on ONNX Runtime, OpenVINO and
(on a CPU with bf16 units) OpenVINO bf16, every runner in interleaved rounds (the deploy table's
timing, ``--repeats`` times, the median taken). Printed: milliseconds a batch before and after, and
the ratio (above 1: the rewrite is faster), with the largest difference between the two files'
outputs (0: the same values). Exit 1 where a file is slower after than ``--slack`` allows.

    python benchmarks/portable_rewrites.py                      # the four 224 configs, batch 8
    python benchmarks/portable_rewrites.py --models aft_full_cifar --batches 1 32
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGENET = ["aft_full_tiny_224", "aft_local_tiny_224", "aft_simple_tiny_224", "aft_conv_tiny_224"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=IMAGENET)
    parser.add_argument("--batches", type=int, nargs="*", default=[8])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--calib-count", type=int, default=64, help="calibration images (speed does not depend on them)")
    parser.add_argument("--slack", type=float, default=0.05, help="the slowdown a run's noise may explain")
    parser.add_argument("--out", default=str(REPO / "runs" / "portable_rewrites"))
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    import onnx

    from aft_export.artifacts.onnxio import read_metadata, save_onnx, set_metadata
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.exporting.forms import to_target
    from aft_export.exporting.portable import to_portable
    from aft_export.machine import cpu_features
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model
    from aft_export.runners import runtime_runner
    from aft_export.verify.deploy import runtimes_here, time_rows
    from bench_openvino import _checkpoint

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quiet = dict(log=lambda *a: None)
    here = runtimes_here(gpu=False)
    runtimes = [r for r in ("onnxruntime", "openvino", "openvino-bf16") if here.get(r) == "ok"]
    rows, slower = [], []
    for name in args.models:
        default = out / f"{name}.onnx"
        if not default.is_file():
            export_checkpoint(_checkpoint(name, out), default, ExportOptions(images=0), **quiet)
        model = onnx.load(str(default))
        files = {}
        after = to_target(model, "portable")
        before = to_portable(model, rewrites=False)
        set_metadata(before, read_metadata(after))  # the target's metadata, as the exporter writes it
        for label, proto in (("before", before), ("after", after)):
            files[label] = out / f"{name}.{label}.portable.onnx"
            save_onnx(proto, files[label])
            files[f"{label} int8"] = out / f"{name}.{label}.portable.int8.onnx"
            quantize_model(files[label], files[f"{label} int8"], args.calib,
                           QuantizeOptions(images=args.calib_count, cache_dir=""), progress=False, **quiet)  # fmt: skip
        runners = {(kind, rt): runtime_runner(str(f), rt, args.threads) for kind, f in files.items() for rt in runtimes}
        for batch in args.batches:
            x = next(iter(runners.values())).random_input(batch, 0)
            got = {k: r.run({r.input_name: x})[r.output_name] for k, r in runners.items()}
            runs = [time_rows(runners, batch, 3 if i == 0 else 0, args.iters) for i in range(args.repeats)]
            ms = {k: statistics.median(r[k]["p50_ms"] for r in runs) for k in runners}
            for precision in ("", " int8"):
                for rt in runtimes:
                    before, after = ms[(f"before{precision}", rt)], ms[(f"after{precision}", rt)]
                    diff = float(np.abs(got[(f"before{precision}", rt)] - got[(f"after{precision}", rt)]).max())
                    row = {"model": name, "file": "fp32" if not precision else "int8", "runtime": rt, "batch": batch,
                           "before_ms": before, "after_ms": after, "x": before / after, "max_diff": diff}  # fmt: skip
                    rows.append(row)
                    if after > before * (1 + args.slack):
                        slower.append(row)
            print(f"{name}: done", file=sys.stderr)
    cpu = cpu_features()
    print(f"{cpu.model or cpu.arch}, {cpu.describe()}; {args.threads} threads; {args.repeats} interleaved timings, "
          f"the median of each")  # fmt: skip
    print("| model | file | runtime | batch | before ms | after ms | x | max diff |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['file']} | {r['runtime']} | {r['batch']} | {r['before_ms']:.2f} | "
              f"{r['after_ms']:.2f} | {r['x']:.2f} | {r['max_diff']:.2g} |")  # fmt: skip
    for r in slower:
        print(f"SLOWER: {r['model']} {r['file']} on {r['runtime']} at batch {r['batch']}: {r['x']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
