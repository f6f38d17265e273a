"""bf16 on the CPU, proven on the zoo: top-1 and the parity limits of the ``openvino-bf16`` runtime.

For each zoo model (``models/*.pt``): its default export (fp32), run in OpenVINO as fp32 (``openvino``)
and with its fp32 computed in bf16 (``openvino-bf16``), on the CIFAR-10 test images (all 10,000 by
default), beside the checkpoint in PyTorch. Printed per model: top-1 of each and the drop (held to
``FLOOR``: 0.3 points of fp32), then the worst each parity metric reaches on bf16 against PyTorch
over all those images (max abs, per-image cosine, the largest reference top-1/top-2 margin of an
image whose top-1 changed), on the stress inputs of the first 64 (``verify.parity.stress_inputs``),
and the largest relative error of an intermediate value (``verify.localize``, first 16 images).

The bf16 row of ``aft_export.verify.compare.TOLERANCES`` is derived from those worst values: each
error times ``BF16_HEADROOM`` (2.5), rounded up to a preferred number (1, 1.5, 2, 2.5, 3, 4, 5, 6,
8 times a power of ten); cosines as 1 minus that of their shortfall; ``min_top1_agreement`` stays
fp16's 0.99 (on parity's 64 images: no flip beyond the tie margin). The table prints the derived row
beside the one in the code; exit 1 where a floor is missed or a limit in the code is tighter than
what was measured here (it would fail a file that computes as these did).

``--int8`` also quantises each export for the CPU (``quantize --target portable``, calibrated on
``calibration/cifar10.json``) and runs it on both: an int8 file on openvino-bf16 is judged by int8's
limits (the lossier), its top-1 held to the same floor against the fp32 file's.

    python benchmarks/bf16_zoo.py                        # the four zoo models, 10,000 images
    python benchmarks/bf16_zoo.py --int8 --json /tmp/bf16.json
    python benchmarks/bf16_zoo.py --models aft_simple_cifar --images 256   # the test's run

Needs a CPU with bf16 units (AVX512_BF16 or AMX-BF16: OpenVINO's capabilities list BF16); elsewhere
it says so and exits 3.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FLOOR = 0.3  # points of top-1 below fp32's
PREFERRED = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)
STRESS_IMAGES, LOCALISED_IMAGES = 64, 16


def round_up(value: float) -> float:
    """The smallest preferred number (PREFERRED times a power of ten) at or above ``value``."""
    if value <= 0:
        return 0.0
    power = 10.0 ** math.floor(math.log10(value))
    return float(f"{next(p for p in PREFERRED if p * power >= value * (1 - 1e-12)) * power:.6g}")


def derive(worst: dict, headroom: float) -> dict:
    """The bf16 limits from the worst measured values (see the module doc)."""
    return {"max_abs": round_up(worst["max_abs"] * headroom),
            "min_cosine": round(1 - round_up((1 - worst["cosine_min"]) * headroom), 6),
            "min_top1_agreement": 0.99,
            "stress_min_cosine": round(1 - round_up((1 - worst["stress_cosine_min"]) * headroom), 6),
            "tie_margin": round_up(worst["flip_margin"] * headroom),
            "intermediate_rel": round_up(worst["intermediate_rel"] * headroom)}  # fmt: skip


def too_tight(derived: dict, worst: dict, limits: dict) -> list[str]:
    """The limits in the code that the measured worst values break."""
    broken = []
    for name in ("max_abs", "tie_margin", "intermediate_rel"):
        source = "flip_margin" if name == "tie_margin" else name
        if worst[source] > limits[name]:
            broken.append(f"{name} {limits[name]} < measured {worst[source]:.4g}")
    for name, source in (("min_cosine", "cosine_min"), ("stress_min_cosine", "stress_cosine_min")):
        if worst[source] < limits[name]:
            broken.append(f"{name} {limits[name]} > measured {worst[source]:.6f}")
    return broken


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="zoo names (default: every models/*.pt)")
    parser.add_argument("--data", default="cifar10:test", help="labelled evaluation set")
    parser.add_argument("--images", type=int, default=None, help="the first N images (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8", action="store_true", help="also the CPU's int8 file of each model")
    parser.add_argument("--out", default=str(REPO / "runs" / "bf16_zoo"), help="where the ONNX files go")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from aft_export.data.datasets import load_labelled
    from aft_export.data.images import normalize_array
    from aft_export.errors import RuntimeMissing
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.machine import cpu_features
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model
    from aft_export.runners import TorchRunner, runtime_runner
    from aft_export.runtimes import RUNTIMES
    from aft_export.verify.compare import BF16_HEADROOM, INTERMEDIATE_REL, TOLERANCES, judge, metrics
    from aft_export.verify.localize import localize
    from aft_export.verify.parity import stress_inputs

    why = RUNTIMES["openvino-bf16"].missing(gpu=False)
    if why:
        print(f"openvino-bf16 cannot run here: {why}", file=sys.stderr)
        return 3
    names = args.models or sorted(p.stem for p in (REPO / "models").glob("*.pt"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quiet = dict(log=lambda *a: None)
    data = load_labelled(args.data, 32, limit=args.images)
    labels = np.asarray(data.labels)
    rows = []
    try:
        for name in names:
            t0 = time.perf_counter()
            ckpt = REPO / "models" / f"{name}.pt"
            files = {"fp32": out / f"{name}.onnx"}
            export_checkpoint(ckpt, files["fp32"], ExportOptions(data=args.data, images=0), **quiet)
            if args.int8:
                files["int8"] = out / f"{name}.portable.int8.onnx"
                quantize_model(files["fp32"], files["int8"], str(REPO / "calibration" / "cifar10.json"),
                               QuantizeOptions(target="portable"), progress=False, **quiet)  # fmt: skip
            ref = TorchRunner(str(ckpt), threads=args.threads)
            x = normalize_array(data.images, ref.info.mean, ref.info.std)
            want = ref.logits(x)
            row = {"model": name, "images": len(x), "torch": float((want.argmax(1) == labels).mean() * 100)}
            stress = stress_inputs(x[:STRESS_IMAGES], ref.info.mean, ref.info.std)
            stress_want = {k: ref.logits(v) for k, v in stress.items()}
            for kind, path in files.items():
                for runtime in ("openvino", "openvino-bf16"):
                    runner = runtime_runner(str(path), runtime, args.threads)
                    got = runner.logits(x)
                    m = metrics(want, got)
                    cell = {"top1": float((got.argmax(1) == labels).mean() * 100), "judged_as": runner.judged_as,
                            "max_abs": m["max_abs"], "cosine_min": m["cosine_min"],
                            "top1_agreement": m["top1_agreement"], "flip_margin": max(m["flip_margins"] or [0.0]),
                            "stress_cosine_min": min(metrics(stress_want[k], runner.logits(v))["cosine_min"]
                                                     for k, v in stress.items())}  # fmt: skip
                    if kind == "fp32" and runtime == "openvino-bf16":
                        # judged as parity judges a file, on every image (int8's limits are for parity's 64)
                        cell["failures"] = judge(m, TOLERANCES[runner.judged_as])
                        loc = localize(path, path, x[:LOCALISED_IMAGES], "bf16", backend=runtime)
                        cell["intermediate_rel"] = max(r["rel"] for r in loc["nodes"])
                    row[f"{kind}/{runtime}"] = cell
            for kind in files:
                drop = row["fp32/openvino"]["top1"] - row[f"{kind}/openvino-bf16"]["top1"]
                row[f"{kind}/openvino-bf16"].update(drop=round(drop, 2), passed=drop <= FLOOR)
            row["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            print(f"{name}: done in {row['seconds']}s", file=sys.stderr)
    except RuntimeMissing as exc:  # OpenVINO says this CPU cannot compute in bf16
        print(f"openvino-bf16 cannot run here: {exc}", file=sys.stderr)
        return 3

    bf16 = [r["fp32/openvino-bf16"] for r in rows]
    worst = {"max_abs": max(c["max_abs"] for c in bf16), "cosine_min": min(c["cosine_min"] for c in bf16),
             "flip_margin": max(c["flip_margin"] for c in bf16),
             "stress_cosine_min": min(c["stress_cosine_min"] for c in bf16),
             "intermediate_rel": max(c["intermediate_rel"] for c in bf16)}  # fmt: skip
    derived = derive(worst, BF16_HEADROOM)
    code = {**{k: getattr(TOLERANCES["bf16"], k) for k in derived if k != "intermediate_rel"},
            "intermediate_rel": INTERMEDIATE_REL["bf16"]}  # fmt: skip
    broken = too_tight(derived, worst, code)

    cpu = cpu_features()
    print(f"{args.data}, {len(data)} images; {cpu.model or cpu.arch}, {cpu.describe()}; {args.threads} threads; "
          f"OpenVINO fp32 (`openvino`) and bf16 (`openvino-bf16`) against the checkpoint in PyTorch")  # fmt: skip
    kinds = list(rows[0]) if rows else []
    kinds = [k for k in ("fp32", "int8") if f"{k}/openvino" in kinds]
    print("| model | PyTorch | " + " | ".join(f"{k} | {k} on bf16 | drop | worst cos | worst max abs" for k in kinds)
          + " | ok |")  # fmt: skip
    print("|---|---|" + "---|---|---|---|---|" * len(kinds) + "---|")
    for r in rows:
        cells = []
        for k in kinds:
            b = r[f"{k}/openvino-bf16"]
            cells.append(f"{r[f'{k}/openvino']['top1']:.2f} | {b['top1']:.2f} | {b['drop']:+.2f} | "
                         f"{b['cosine_min']:.4f} | {b['max_abs']:.3f}")  # fmt: skip
        ok = all(r[f"{k}/openvino-bf16"]["passed"] for k in kinds)
        print(f"| {r['model']} | {r['torch']:.2f} | " + " | ".join(cells) + f" | {'yes' if ok else 'NO'} |")
    print(f"floor: top-1 on bf16 within {FLOOR} points of the fp32 file's in OpenVINO fp32")
    print(f"\nThe fp32 files on openvino-bf16, worst over {len(rows)} models: " +
          ", ".join(f"{k} {v:.6g}" for k, v in worst.items()))  # fmt: skip
    print(f"| limit | derived here (x{BF16_HEADROOM}) | in the code |")
    print("|---|---|---|")
    for k in derived:
        print(f"| {k} | {derived[k]:g} | {code[k]:g} |")
    failed_rows = [f"{r['model']}: {'; '.join(r['fp32/openvino-bf16']['failures'])}" for r in rows
                   if r["fp32/openvino-bf16"]["failures"]]  # fmt: skip
    for line in broken:
        print(f"TOO TIGHT: {line}")
    for line in failed_rows:
        print(f"OUTSIDE THE BF16 LIMITS on all {len(data)} images: {line}")
    if args.json:
        Path(args.json).write_text(json.dumps({"data": args.data, "images": len(data), "rows": rows, "worst": worst,
                                               "derived": derived, "code": code, "broken": broken}, indent=2))  # fmt: skip
    floors = all(r[f"{k}/openvino-bf16"]["passed"] for r in rows for k in kinds)
    return 0 if floors and not broken and not failed_rows else 1


if __name__ == "__main__":
    sys.exit(main())
