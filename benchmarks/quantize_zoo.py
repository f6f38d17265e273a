"""Quantise every zoo model to fp16 and int8 and measure each on the CIFAR-10 test split.

For each ``models/*.pt``: export fp32 ONNX (tensorrt target, custom op form), quantise to fp16
and to int8 twice, the rest in fp32 and the rest in fp16 (calibrated on
``calibration/cifar10.json``: 512 training images, seed 0), then evaluate every file on the
10,000 test images, decoded once (ONNX Runtime on the CPU). Prints top-1, the drop from fp32 and
the top-1 agreement with fp32, and checks the floors: fp16 within 0.2 points of fp32, int8
(either rest) within 0.3. ``--cpu-int8`` adds the CPU's int8 (``quantize --target portable`` of the
same export: the rest in fp32, 7-bit weights), held to int8's 0.3; ``--trt8-int8`` the int8 for TensorRT
8.5/8.6 on Jetson (``quantize --target tensorrt8``: LayerNorm decomposed, the rest in fp32, 8-bit
weights), held to the same. Exit code 1 if a floor is missed.
``--checkpoint`` evaluates the checkpoint itself (PyTorch) in the same pass: the top-1 its card shows.
The test split is decoded once for every model of one input size, and the files of a model are
evaluated side by side on one thread each (``aft_export.verify.evaluate.side_by_side``).
``--exports DIR`` takes the fp32 exports from DIR where they are (``aft-export export`` with its
default options writes the same bytes) instead of exporting again.

ONNX Runtime on the CPU computes many fp16 nodes in fp32, so the first ``--reference-images``
test images also go through the ONNX reference evaluator, where an fp16 value is computed as
fp16: fp32, fp16 and int8 with the fp16 rest, top-1 and agreement with fp32 there. Where
TensorRT-RTX is installed, each file's parsed network is counted too: compute layers per
precision (``aft_export.tensorrt.build.network_summary``).

    python benchmarks/quantize_zoo.py                      # all zoo models
    python benchmarks/quantize_zoo.py --models aft_full_cifar --json /tmp/quant.json
    python benchmarks/quantize_zoo.py --int8-rest fp16 --cpu-int8 --checkpoint --reference-images 0 --no-networks
                                                           # what CI runs (tests/test_zoo.py)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOORS = {"fp16": 0.2, "int8_fp32_rest": 0.3, "int8_fp16_rest": 0.3, "int8_cpu": 0.3, "int8_trt8": 0.3}
# kind -> (precision, rest precision, export target): int8_cpu is the CPU's int8, `quantize --target portable`
# of the default export (the rest in fp32, 7-bit weights)
KINDS = {"fp16": ("fp16", None, None), "int8_fp32_rest": ("int8", "fp32", None),
         "int8_fp16_rest": ("int8", "fp16", None), "int8_cpu": ("int8", None, "portable"),
         "int8_trt8": ("int8", None, "tensorrt8")}
TITLES = {"fp32": "fp32", "fp16": "fp16", "int8_fp32_rest": "int8, fp32 rest", "int8_fp16_rest": "int8, fp16 rest",
          "int8_cpu": "CPU int8 (portable)", "int8_trt8": "TensorRT 8 int8 (tensorrt8)"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="zoo names (default: every models/*.pt)")
    parser.add_argument("--out", default=str(REPO / "runs" / "quantize_zoo"), help="where the ONNX files go")
    parser.add_argument("--data", default="cifar10:test", help="labelled evaluation set")
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--method", default="percentile", choices=["minmax", "entropy", "percentile"])
    parser.add_argument("--int8-rest", nargs="+", default=["fp32", "fp16"], choices=["fp32", "fp16"],
                        help="the int8 files to make: the rest in fp32, in fp16, or both")
    parser.add_argument("--reference-images", type=int, default=300,
                        help="test images through the ONNX reference evaluator (0: none)")
    parser.add_argument("--no-networks", action="store_true", help="do not parse the files with TensorRT-RTX")
    parser.add_argument("--quantize-aft-core", action="store_true",
                        help="int8: quantise the AFT core too (measures what the option costs in accuracy)")
    parser.add_argument("--cpu-int8", action="store_true", help="also the CPU's int8 (quantize --target portable: "
                        "the rest in fp32, 7-bit weights)")
    parser.add_argument("--trt8-int8", action="store_true", help="also the int8 for TensorRT 8.5/8.6 (quantize "
                        "--target tensorrt8: LayerNorm decomposed, the rest in fp32)")
    parser.add_argument("--checkpoint", action="store_true",
                        help="also evaluate each checkpoint itself (PyTorch), in the same pass as its files")
    parser.add_argument("--exports", help="a folder of fp32 exports already made (`aft-export export`, default options): "
                        "<name>.onnx there is used instead of exporting the model again")
    parser.add_argument("--json", help="also write the table as JSON here")
    args = parser.parse_args(argv)

    from aft_export.data.datasets import load_labelled
    from aft_export.verify.evaluate import evaluate_artifacts
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model
    from aft_export.runners import ReferenceRunner

    names = args.models or sorted(p.stem for p in (REPO / "models").glob("*.pt"))
    kinds = ["fp16"] + [f"int8_{r}_rest" for r in ("fp32", "fp16") if r in args.int8_rest]
    kinds += ["int8_cpu"] if args.cpu_int8 else []
    kinds += ["int8_trt8"] if args.trt8_int8 else []
    networks = not args.no_networks and importlib.util.find_spec("tensorrt_rtx") is not None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quiet = dict(log=lambda *a: None)
    rows, decoded = [], {}  # the test split by input size, decoded once
    for name in names:
        t0 = time.perf_counter()
        fp32 = out / f"{name}.onnx"
        made = Path(args.exports) / f"{name}.onnx" if args.exports else None  # the same bytes, made before
        if made and made.is_file():
            shutil.copyfile(made, fp32)
        else:
            export_checkpoint(REPO / "models" / f"{name}.pt", fp32, ExportOptions(data=args.data), **quiet)
        files = {"fp32": fp32}
        reports, last = {}, None
        for kind in kinds:
            precision, rest, target = KINDS[kind]
            files[kind] = out / f"{name}.{kind.replace('_', '-')}.onnx"
            # each quantisation takes the previous one's decoded calibration set and fp32 logits
            last = reports[kind] = quantize_model(
                fp32, files[kind], args.calib, QuantizeOptions(precision=precision, method=args.method,
                                                               rest_precision=rest, target=target,
                                                               quantize_aft_core=args.quantize_aft_core and
                                                               precision == "int8"),
                progress=False, calibration=last and last.calibration, fp32_logits=last and last.fp32_logits,
                **quiet)  # fmt: skip
        keys = ["fp32", *kinds]
        size = last.calibration.tensors.shape[-1]  # the input size the files are fed (N, 3, H, W)
        if size not in decoded:
            decoded[size] = load_labelled(args.data, size)
        if args.checkpoint:  # last: the agreement columns are with fp32
            files["checkpoint"] = REPO / "models" / f"{name}.pt"
            keys.append("checkpoint")
        evals = evaluate_artifacts([str(files[k]) for k in keys], decoded[size])
        row = {"model": name, "seconds": 0.0}
        for key, ev in zip(keys, evals):
            row[key] = {"top1": ev["top1"], "top5": ev["top5"], "agreement": ev["agreement"], "images": ev["images"],
                        "file": str(files[key])}  # fmt: skip
        for kind in kinds:
            drop = round(row["fp32"]["top1"] - row[kind]["top1"], 2)
            row[kind].update(drop=drop, floor=FLOORS[kind], passed=drop <= FLOORS[kind], recipe=reports[kind].recipe,
                             nonfinite=len(reports[kind].nonfinite))  # fmt: skip
        if args.reference_images:
            ref_keys = [k for k in ("fp32", "fp16", "int8_fp16_rest") if k in files]
            runners = {str(files[k]): ReferenceRunner(str(files[k])) for k in ref_keys}
            ref = evaluate_artifacts([str(files[k]) for k in ref_keys], args.data, limit=args.reference_images,
                                     runners=runners, batch_size=50)  # fmt: skip
            row["reference"] = {k: {"images": r["images"], "top1": r["top1"], "agreement": r["agreement"]}
                                for k, r in zip(ref_keys, ref)}  # fmt: skip
        if networks:
            from aft_export.tensorrt.build import parse

            row["networks"] = {k: {"compute": parse(str(f), "tensorrt-rtx").network["compute"]} for k, f in files.items()
                               if k != "checkpoint"}  # fmt: skip
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"{name}: done in {row['seconds']}s", file=sys.stderr)

    print(f"CIFAR-10 test split ({args.data}), ONNX Runtime CPU; int8: {args.method}, calibration "
          f"{Path(args.calib).name}" + (", AFT core in int8 too" if args.quantize_aft_core else ""))  # fmt: skip
    print("| model | fp32 | " + " | ".join(f"{TITLES[k]} | drop | agree" for k in kinds) + " | ok |")
    print("|---|---|" + "---|---|---|" * len(kinds) + "---|")
    for r in rows:
        ok = all(r[k]["passed"] for k in kinds)
        print(f"| {r['model']} | {r['fp32']['top1']:.2f} | "
              + " | ".join(f"{r[k]['top1']:.2f} | {r[k]['drop']:+.2f} | {r[k]['agreement']:.2f}" for k in kinds)
              + f" | {'yes' if ok else 'NO'} |")  # fmt: skip
    print("floors: " + ", ".join(f"{TITLES[k]} drop <= {FLOORS[k]}" for k in kinds) + " points of fp32 top-1")
    if args.checkpoint:
        print("the checkpoints in PyTorch, top-1: " + ", ".join(f"{r['model']} {r['checkpoint']['top1']:.2f}"
                                                             for r in rows))  # fmt: skip
    if args.reference_images and rows:
        keys = list(rows[0]["reference"])
        print(f"\nThe ONNX reference evaluator (fp16 computed as fp16), first {args.reference_images} test images: "
              f"top-1 (agreement with fp32 there)")  # fmt: skip
        print("| model | " + " | ".join(TITLES[k] for k in keys) + " |")
        print("|---|" + "---|" * len(keys))
        for r in rows:
            print(f"| {r['model']} | " + " | ".join(f"{r['reference'][k]['top1']:.2f} ({r['reference'][k]['agreement']:.2f})"
                                                  for k in keys) + " |")  # fmt: skip
    if networks and rows:
        keys = list(rows[0]["networks"])
        print("\nTensorRT-RTX's parsed networks: compute layers int8 / fp16 / fp32 (constants, shuffles, casts "
              "and Q/DQ not counted)")  # fmt: skip
        print("| model | " + " | ".join(TITLES[k] for k in keys) + " |")
        print("|---|" + "---|" * len(keys))
        for r in rows:
            cells = [r["networks"][k]["compute"] for k in keys]
            print(f"| {r['model']} | " + " | ".join(" / ".join(str(c.get(p, 0)) for p in ("int8", "fp16", "fp32"))
                                                  for c in cells) + " |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"data": args.data, "method": args.method, "rows": rows}, indent=2))
    return 0 if all(r[k]["passed"] for r in rows for k in kinds) else 1


if __name__ == "__main__":
    sys.exit(main())
