"""Quantise every zoo model to fp16 and int8 and measure each on the CIFAR-10 test split.

For each ``models/*.pt``: export fp32 ONNX (custom op form), quantise to fp16 and to
int8 (calibrated on ``calibration/cifar10.json``: 512 training images, seed 0), then
evaluate fp32, fp16 and int8 on the 10,000 test images, decoded once. Prints top-1,
the drop from fp32 and the top-1 agreement with fp32, and checks the floors: fp16
within 0.2 points of fp32, int8 within 1.0. Exit code 1 if a floor is missed.

    python benchmarks/quantize_zoo.py                      # all zoo models
    python benchmarks/quantize_zoo.py --models aft_full_cifar --json /tmp/quant.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOORS = {"fp16": 0.2, "int8": 1.0}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="zoo names (default: every models/*.pt)")
    parser.add_argument("--out", default=str(REPO / "runs" / "quantize_zoo"), help="where the ONNX files go")
    parser.add_argument("--data", default="cifar10:test", help="labelled evaluation set")
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--method", default="percentile", choices=["minmax", "entropy", "percentile"])
    parser.add_argument("--quantize-aft-core", action="store_true",
                        help="int8: quantise the AFT core too (measures what the option costs in accuracy)")
    parser.add_argument("--json", help="also write the table as JSON here")
    args = parser.parse_args(argv)

    from aft_export.evaluate import evaluate_artifacts
    from aft_export.export.exporter import ExportOptions, export_checkpoint
    from aft_export.quantize import QuantizeOptions, quantize_model

    names = args.models or sorted(p.stem for p in (REPO / "models").glob("*.pt"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quiet = dict(log=lambda *a: None)
    rows = []
    for name in names:
        t0 = time.perf_counter()
        fp32 = out / f"{name}.onnx"
        export_checkpoint(REPO / "models" / f"{name}.pt", fp32, ExportOptions(verify_data=args.data), **quiet)
        files = {"fp32": fp32}
        reports, last = {}, None
        for precision in ("fp16", "int8"):
            files[precision] = out / f"{name}.{precision}.onnx"
            # the second quantisation takes the first's decoded calibration set and fp32 logits
            last = reports[precision] = quantize_model(
                fp32, files[precision], args.calib, QuantizeOptions(precision=precision, method=args.method,
                                                                    quantize_aft_core=args.quantize_aft_core),
                progress=False, calibration=last and last.calibration, fp32_logits=last and last.fp32_logits,
                **quiet)  # fmt: skip
        evals = evaluate_artifacts([str(files[p]) for p in ("fp32", "fp16", "int8")], args.data)
        row = {"model": name, "seconds": 0.0}
        for precision, ev in zip(("fp32", "fp16", "int8"), evals):
            row[precision] = {"top1": ev["top1"], "top5": ev["top5"], "agreement": ev["agreement"],
                              "file": str(files[precision])}  # fmt: skip
        for precision, limit in FLOORS.items():
            drop = round(row["fp32"]["top1"] - row[precision]["top1"], 2)
            row[precision].update(drop=drop, floor=limit, passed=drop <= limit,
                                  recipe=reports[precision].recipe)  # fmt: skip
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"{name}: done in {row['seconds']}s", file=sys.stderr)

    header = (f"{'model':18s} {'fp32':>6s} | {'fp16':>6s} {'drop':>5s} {'agree':>6s} | "
              f"{'int8':>6s} {'drop':>5s} {'agree':>6s} | ok")  # fmt: skip
    print(f"CIFAR-10 test split ({args.data}); int8: {args.method}, calibration {Path(args.calib).name}"
          + (", AFT core in int8 too" if args.quantize_aft_core else ""))
    print(header)
    print("-" * len(header))
    for r in rows:
        ok = r["fp16"]["passed"] and r["int8"]["passed"]
        print(f"{r['model']:18s} {r['fp32']['top1']:6.2f} | {r['fp16']['top1']:6.2f} {r['fp16']['drop']:5.2f} "
              f"{r['fp16']['agreement']:6.2f} | {r['int8']['top1']:6.2f} {r['int8']['drop']:5.2f} "
              f"{r['int8']['agreement']:6.2f} | {'yes' if ok else 'NO'}")  # fmt: skip
    print(f"floors: fp16 drop <= {FLOORS['fp16']}, int8 drop <= {FLOORS['int8']} points of fp32 top-1")
    if args.json:
        Path(args.json).write_text(json.dumps({"data": args.data, "method": args.method, "rows": rows}, indent=2))
    return 0 if all(r["fp16"]["passed"] and r["int8"]["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
