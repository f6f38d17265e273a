#!/usr/bin/env python3
"""Export every zoo checkpoint in both AFT op forms and print time, node counts and parity.

Usage: python benchmarks/export_zoo.py [--out DIR] [--verify-data ../shared/data/cifar10/test.tar] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aft_export.exporting.exporter import ExportOptions, export_checkpoint  # noqa: E402


def main() -> int:
    default = Path(os.environ.get("AFT_CIFAR10_DIR", REPO.parent / "shared" / "data" / "cifar10")) / "test.tar"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="directory for the ONNX files (default: a temporary one)")
    parser.add_argument("--verify-data", default=str(default))
    parser.add_argument("--verify-images", type=int, default=64)
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="aft-zoo-onnx-"))
    out.mkdir(parents=True, exist_ok=True)

    rows = []
    print(f"{'model':18s} {'form':10s} {'total s':>7s} {'export s':>8s} {'nodes':>5s} {'final':>5s} "
          f"{'aft':>3s} {'max abs':>9s} {'mean abs':>9s} {'min cos':>9s} {'top1 agr':>8s}")  # fmt: skip
    for ckpt in sorted((REPO / "models").glob("*.pt")):
        for form in ("custom", "decomposed"):
            t = time.perf_counter()
            res = export_checkpoint(ckpt, out / f"{ckpt.stem}.{form}.onnx", ExportOptions(
                op_form=form, data=args.verify_data, images=args.verify_images))  # fmt: skip
            total = time.perf_counter() - t
            p = res.parity
            print(f"{ckpt.stem:18s} {form:10s} {total:7.1f} {res.seconds['export']:8.1f} {res.nodes_exported:5d} "
                  f"{res.nodes_final:5d} {res.aft_nodes:3d} {p.max_abs:9.2e} {p.mean_abs:9.2e} "
                  f"{p.cosine_min:9.7f} {100 * p.top1_agreement:7.1f}%")  # fmt: skip
            rows.append({"model": ckpt.stem, "form": form, "total_s": round(total, 2), **res.to_dict()})
    print(f"files in {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
