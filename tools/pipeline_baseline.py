"""Record, or compare against, what the pipeline produces for every zoo model: each ONNX
artifact's sha256 and every artifact's top-1 on a fixed evaluation subset.

A refactoring that is meant to change nothing is checked with it: record before the
first change, compare after the last.

    python tools/pipeline_baseline.py record baseline.json [--eval-limit 1000]
    python tools/pipeline_baseline.py compare baseline.json

``compare`` exits 1 when an ONNX artifact's bytes or a top-1 differ, and prints each
difference. Engines are left out of the sha256s (a TensorRT-RTX build is not byte-for-byte
repeatable) but not out of the list of artifacts. Runs go to a temporary directory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ZOO = ("aft_conv_cifar", "aft_full_cifar", "aft_local_cifar", "aft_simple_cifar")


def run(eval_limit: int) -> dict:
    from aft_export.options import PipelineOptions
    from aft_export.workflow.pipeline import run_pipeline

    out = {"eval_limit": eval_limit, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ZOO:
            run_dir = Path(tmp) / name
            opts = PipelineOptions(output=str(run_dir), eval_images=eval_limit, bench_iters=1, bench_batch_sizes=(1,))
            result = run_pipeline(str(REPO / "models" / f"{name}.pt"), opts, log=lambda *a: None)
            out["models"][name] = {
                "artifacts": sorted(p.name for p in run_dir.iterdir() if p.suffix in (".onnx", ".engine")),
                "sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                           for p in sorted(run_dir.glob("*.onnx"))},
                "top1": {r["artifact"]: r["top1"] for r in result.summary},
                "passed": result.passed,
            }  # fmt: skip
            print(f"{name}: " + ", ".join(f"{a} {t}" for a, t in out["models"][name]["top1"].items()), file=sys.stderr)
    return out


def compare(before: dict, after: dict) -> list[str]:
    diffs = []
    for name, b in before["models"].items():
        a = after["models"].get(name)
        if a is None:
            diffs.append(f"{name}: not run")
            continue
        for key in ("artifacts", "sha256", "top1", "passed"):
            if a[key] != b[key]:
                diffs.append(f"{name} {key}: {b[key]} -> {a[key]}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("record", "compare"))
    ap.add_argument("path")
    ap.add_argument("--eval-limit", type=int, default=1000)
    args = ap.parse_args()
    if args.mode == "record":
        data = run(args.eval_limit)
        Path(args.path).write_text(json.dumps(data, indent=2) + "\n")
        print(f"recorded {args.path}")
        return 0
    before = json.loads(Path(args.path).read_text())
    diffs = compare(before, run(before["eval_limit"]))
    print("\n".join(diffs) if diffs else "unchanged: every artifact's bytes and every top-1")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
