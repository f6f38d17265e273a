"""Files that take raw pixels, proven on the zoo: parity from raw pixels, and top-1 against the normal file's.

For each ``models/*.pt``: export the normal file (normalised float input), the two pixel forms
(``--input-format uint8-nhwc`` and ``float-nchw``: the graph normalises 0-255 RGB pixels itself) and
the DeepStream form (float pixels in, ``--output-format probabilities``: compared as log-probabilities), and
quantise each to fp16 and to int8 (calibrated on ``calibration/cifar10.json``: 512 training images,
seed 0; the pixel files calibrate on the same images' pixels). Then:

- parity of every pixel file against the checkpoint, the file fed the decoded test images' raw pixels
  and the checkpoint our normalisation of them, with the per-precision limits of ``aft-export parity``
  (``--parity-images`` images, ONNX Runtime on the CPU; ``--openvino`` repeats it in OpenVINO);
- the largest difference between each pixel file's logits and the normal file's at its precision, each
  fed as it takes the parity images, in ONNX Runtime (and OpenVINO): 0 where the graph's normalisation
  computes what ``normalize_array`` does in the same order;
- top-1 of every file on the 10,000 test images (decoded once, each file fed as its metadata says),
  each pixel file held to within ``FLOOR`` points of the normal file at its precision.

With ``--timing``: each fp32 file's p50 latency at batch 1 and images/s at batch 32 in ONNX Runtime (and
OpenVINO), every file timed in the same interleaved rounds (``aft_export.verify.deploy.time_rows``, 2
threads, each runtime's files together), printed as a ratio to the normal file's: what the graph's
first nodes (and for the uint8 form, its four times smaller input) cost or save. The normalisation is
fp32 in every precision, so the fp32 files say it.

Exit code 1 if a parity check or a floor fails.

    python benchmarks/pixel_zoo.py                          # all four zoo models
    python benchmarks/pixel_zoo.py --models aft_conv_cifar --images 1000 --json /tmp/pixels.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOOR = 0.1  # points of top-1 a pixel file may differ from the normal file at its precision (the issue's)
# form -> (input format, output format)
FORMS = {"normalized": ("normalized", "logits"), "uint8-nhwc": ("uint8-nhwc", "logits"),
         "float-nchw": ("float-nchw", "logits"), "deepstream": ("float-nchw", "probabilities")}
PRECISIONS = ("fp32", "fp16", "int8")


def _files(ckpt: Path, out: Path, calib: str, log) -> dict[tuple[str, str], str]:
    from aft_export import api

    files = {}
    for form, (input_format, output_format) in FORMS.items():
        fp32 = out / f"{ckpt.stem}.{form}.onnx"
        api.export(str(ckpt), str(fp32), input_format=input_format, output_format=output_format, images=0)
        files[form, "fp32"] = str(fp32)
        for precision in ("fp16", "int8"):
            q = out / f"{ckpt.stem}.{form}.{precision}.onnx"
            api.quantize(str(fp32), str(q), precision=precision, calib=calib if precision == "int8" else None)
            files[form, precision] = str(q)
        log(f"  {ckpt.stem}: {form} exported and quantised")
    return files


def _timing(files, backends, iters: int) -> dict:
    """Each fp32 file's p50 at batch 1 and images/s at batch 32, per runtime, interleaved."""
    from aft_export.runners import load_runner
    from aft_export.verify.deploy import time_rows

    out = {}
    for rt in backends:
        runners = {(form, rt): load_runner(files[form, "fp32"], rt, threads=2) for form in FORMS}
        b1 = time_rows(runners, 1, warmup=20, iters=iters, rounds=10)
        b32 = time_rows(runners, 32, warmup=5, iters=max(iters // 4, 10), rounds=10)
        out[rt] = {form: {"p50_ms_b1": b1[form, rt]["p50_ms"], "images_per_s_b32": b32[form, rt]["images_per_s"]}
                   for form in FORMS}  # fmt: skip
    return out


def _g(x) -> str:
    return "" if x is None else f"{x:.3g}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", help="zoo model names (default: every models/*.pt)")
    p.add_argument("--data", default="cifar10:test", help="labelled test images (default: cifar10:test)")
    p.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"), help="calibration recipe or images")
    p.add_argument("--images", type=int, default=None, help="evaluate the first N test images (default: all)")
    p.add_argument("--parity-images", type=int, default=256, help="images parity compares (default 256)")
    p.add_argument("--openvino", action="store_true", help="also run parity in OpenVINO")
    p.add_argument("--timing", action="store_true", help="also time the fp32 files, interleaved (ratios to normal)")
    p.add_argument("--iters", type=int, default=200, help="timed runs per file and batch (default 200)")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)

    import numpy as np

    from aft_export.data.datasets import load_labelled
    from aft_export.runners import load_runner
    from aft_export.runners.base import as_output
    from aft_export.verify.evaluate import evaluate
    from aft_export.verify.parity import run_parity

    names = args.models or sorted(c.stem for c in (REPO / "models").glob("*.pt"))
    report, failed = {"floor": FLOOR, "models": {}}, []
    decoded = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            t0 = time.perf_counter()
            ckpt = REPO / "models" / f"{name}.pt"
            files = _files(ckpt, Path(tmp), args.calib, print)
            from aft_export.runners import TorchRunner

            size = TorchRunner(str(ckpt)).info.input_size[1]
            if size not in decoded:
                decoded[size] = load_labelled(args.data, size, limit=args.images)
            data = decoded[size]
            pixel_files = [f for (form, _), f in files.items() if form != "normalized"]
            parity, same = {}, {}
            backends = ("onnxruntime", *(("openvino",) if args.openvino else ()))
            subset = data.subset(args.parity_images)
            for backend in backends:
                result = run_parity(str(ckpt), pixel_files, data=subset, images=len(subset), backend=backend)
                parity[backend] = {r.artifact: r.to_dict() for r in result.artifacts}
                runners = {f: load_runner(f, backend) for f in files.values()}
                for (form, precision), f in files.items():  # the same images, each file fed as it takes them
                    normal = as_output(runners[files["normalized", precision]].pixel_logits(subset.images),
                                       runners[f].info.output_format)  # a DeepStream file: as log-probabilities
                    same[backend, f] = float(np.abs(runners[f].pixel_logits(subset.images) - normal).max())
            rows = {r["artifact"]: r for r in evaluate(list(files.values()), data=data).rows}
            model = report["models"][name] = {"images": len(data), "files": []}
            for (form, precision), f in files.items():
                top1 = rows[f]["top1"]
                normal = rows[files["normalized", precision]]["top1"]
                entry = {"form": form, "precision": precision, "top1": top1, "vs_normal": round(top1 - normal, 2)}
                for backend, by_file in parity.items():
                    if form != "normalized":
                        r = by_file[f]
                        entry[f"parity_{backend}"] = r["status"]
                        entry[f"max_abs_{backend}"] = r["inputs"]["real"]["max_abs"]
                        entry[f"min_cosine_{backend}"] = round(r["inputs"]["real"]["cosine_min"], 5)
                        entry[f"vs_normal_max_abs_{backend}"] = same[backend, f]
                        if r["status"] != "pass":
                            failed.append(f"{name} {form} {precision} parity on {backend}: {r.get('failures')}")
                if form != "normalized" and abs(top1 - normal) > FLOOR:
                    failed.append(f"{name} {form} {precision}: top-1 {top1:.2f} vs the normal file's {normal:.2f}")
                model["files"].append(entry)
            if args.timing:
                model["timing"] = _timing(files, backends, args.iters)
            model["seconds"] = round(time.perf_counter() - t0, 1)

    print("\n| model | input | precision | top-1 | vs normal | parity (ORT) | max abs | min cosine | logits vs normal "
          "(ORT) |" + (" parity (OpenVINO) | logits vs normal (OpenVINO) |" if args.openvino else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.openvino else ""))
    for name, model in report["models"].items():
        for e in model["files"]:
            cells = [name, e["form"], e["precision"], f"{e['top1']:.2f}", f"{e['vs_normal']:+.2f}",
                     e.get("parity_onnxruntime", "(reference)"), _g(e.get("max_abs_onnxruntime")),
                     str(e.get("min_cosine_onnxruntime", "")), _g(e.get("vs_normal_max_abs_onnxruntime"))]  # fmt: skip
            if args.openvino:
                cells += [e.get("parity_openvino", ""), _g(e.get("vs_normal_max_abs_openvino"))]
            print("| " + " | ".join(cells) + " |")
    print(f"\n{len(names)} models, {next(iter(report['models'].values()))['images']} test images each; floor: a pixel "
          f"file within {FLOOR} points of the normal file's top-1")  # fmt: skip
    if args.timing:
        print("\n| model | runtime | input | p50 ms b1 | vs normal | img/s b32 | vs normal |")
        print("|---|---|---|---|---|---|---|")
        for name, model in report["models"].items():
            for rt, forms in model["timing"].items():
                n = forms["normalized"]
                for form, t in forms.items():
                    print(f"| {name} | {rt} | {form} | {t['p50_ms_b1']:.3f} | {t['p50_ms_b1'] / n['p50_ms_b1']:.2f}x | "
                          f"{t['images_per_s_b32']:.0f} | {t['images_per_s_b32'] / n['images_per_s_b32']:.2f}x |")
    report["failed"] = failed
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    for f in failed:
        print(f"FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
