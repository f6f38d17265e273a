"""Our int8 placement against NVIDIA ModelOpt's, on the same fp32 files and calibration images.

For each model: export the portable fp32 ONNX (ModelOpt reads that form; its opset-19 upgrade
drops the com.aft functions of the default export), draw the calibration images once (512 of
CIFAR-10's training split, seed 0: what ``aft-export quantize`` draws) and save them as the
.npy ModelOpt reads, then quantise the one fp32 file three ways:

- ours: ``quantize_model`` (MatMul/Conv/Gemm inputs, the AFT core kept in float; 8-bit weights,
  as for the TensorRT targets, so the placement is what differs);
- ModelOpt default: ``python -m modelopt.onnx.quantization --quantize_mode int8`` (entropy
  calibration, what is not quantised in fp16);
- ModelOpt, our op set: the same with ``--op_types_to_quantize MatMul Conv Gemm``.

Then evaluates all four on the CIFAR-10 test images with ONNX Runtime on the CPU (``eval``'s
code; ModelOpt's files carry none of our metadata, so they are fed with the checkpoint's
preprocessing, as ``parity`` does) and prints top-1 and top-1 agreement with fp32.

ModelOpt installs onnxruntime-gpu, which must not enter aft-export's environment (two ONNX
Runtime wheels share one package directory): it runs from a virtual environment of its own,
given by ``--modelopt-python`` or ``$AFT_MODELOPT_PYTHON``::

    python -m venv ../modelopt-venv
    ../modelopt-venv/bin/pip install torch==2.13.0          # first: the torch we use, not another
    ../modelopt-venv/bin/pip install 'nvidia-modelopt[onnx]==0.47.0'
    python benchmarks/modelopt_compare.py --modelopt-python ../modelopt-venv/bin/python

Without it the script says so and exits 3 (nothing measured). Figures: docs/quantize.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("aft_conv_cifar", "aft_full_cifar")
OUR_OP_SET = ("MatMul", "Conv", "Gemm")
VARIANTS = {"modelopt": [], "modelopt_ops": ["--op_types_to_quantize", *OUR_OP_SET]}


def modelopt_python(given: str | None) -> str | None:
    """The ModelOpt environment's python, if it has ModelOpt."""
    python = given or os.environ.get("AFT_MODELOPT_PYTHON")
    if not python or not Path(python).is_file():
        return None
    probe = subprocess.run([python, "-c", "import modelopt.onnx.quantization, modelopt; print(modelopt.__version__)"],
                           capture_output=True, text=True)  # fmt: skip
    return python if probe.returncode == 0 else None


def run_modelopt(python: str, fp32: Path, calib: Path, out: Path, extra: list[str], log: Path) -> float:
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        done = subprocess.run([python, "-m", "modelopt.onnx.quantization", "--onnx_path", str(fp32), "--quantize_mode",
                               "int8", "--calibration_data_path", str(calib), "--output_path", str(out), *extra],
                              stdout=fh, stderr=subprocess.STDOUT)  # fmt: skip
    if done.returncode != 0 or not out.is_file():
        raise SystemExit(f"ModelOpt failed on {fp32.name} (exit {done.returncode}); its log: {log}")
    return time.perf_counter() - t0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), help="zoo names")
    parser.add_argument("--modelopt-python", help="python of the environment ModelOpt is installed in "
                        "[default: $AFT_MODELOPT_PYTHON]")  # fmt: skip
    parser.add_argument("--out", default=str(REPO / "runs" / "modelopt_compare"), help="where the files go")
    parser.add_argument("--calib", default="cifar10:train", help="calibration images")
    parser.add_argument("--calib-images", type=int, default=512)
    parser.add_argument("--data", default="cifar10:test", help="labelled evaluation set")
    parser.add_argument("--images", type=int, help="evaluate a fixed subset of N images [default: all]")
    parser.add_argument("--json", help="also write the table as JSON here")
    args = parser.parse_args(argv)

    python = modelopt_python(args.modelopt_python)
    if python is None:
        print("ModelOpt is not installed in an environment of its own: nothing measured. Make one (see this "
              "script's docstring) and pass --modelopt-python or set AFT_MODELOPT_PYTHON.")  # fmt: skip
        return 3

    import numpy as np

    from aft_export.data.calibration import load_calibration
    from aft_export.models.checkpoint import load_checkpoint
    from aft_export.data.datasets import load_labelled
    from aft_export.verify.evaluate import evaluate_artifacts
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.data.preprocess import ForeignPreprocessing
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    version = subprocess.run([python, "-c", "import modelopt; print(modelopt.__version__)"], capture_output=True,
                             text=True).stdout.strip()  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quiet = dict(log=lambda *a: None)
    rows = []
    for name in args.models:
        ckpt = REPO / "models" / f"{name}.pt"
        _, meta = load_checkpoint(ckpt)
        pre = meta.preprocessing
        fp32 = out / f"{name}.portable.onnx"
        export_checkpoint(ckpt, fp32, ExportOptions(target="portable", images=16, data=args.data), **quiet)
        cset = load_calibration(args.calib, pre, args.calib_images, 0, progress=False)
        calib = out / f"{name}.calib.npy"
        np.save(calib, cset.tensors)  # normalised NCHW float32, the input ModelOpt feeds
        files, seconds = {"fp32": fp32}, {}
        t0 = time.perf_counter()
        files["ours"] = out / f"{name}.portable.int8.onnx"
        quantize_model(fp32, files["ours"], args.calib,
                       QuantizeOptions(images=args.calib_images, seed=0, weight_bits=8),
                       progress=False, calibration=cset, **quiet)  # fmt: skip
        seconds["ours"] = time.perf_counter() - t0
        for variant, extra in VARIANTS.items():
            files[variant] = out / f"{name}.{variant}.onnx"
            seconds[variant] = run_modelopt(python, fp32, calib, files[variant], extra, out / f"{name}.{variant}.log")
        images = load_labelled(args.data, pre.input_size, limit=args.images)
        theirs = ForeignPreprocessing.of(pre, f"the checkpoint {ckpt.name}")
        evals = evaluate_artifacts([str(files[k]) for k in ("fp32", "ours", "modelopt", "modelopt_ops")], images,
                                   preprocessing=theirs)  # fmt: skip
        by = dict(zip(("fp32", "ours", "modelopt", "modelopt_ops"), evals))
        rows.append({"model": name, "images": by["fp32"]["images"], "calibration_images": len(cset),
                     **{k: {"top1": r["top1"], "agreement": r["agreement"], "file": Path(r["artifact"]).name,
                            "seconds": round(seconds.get(k, 0.0), 1)} for k, r in by.items()}})  # fmt: skip

    print(f"ModelOpt {version} (python -m modelopt.onnx.quantization --quantize_mode int8) against aft-export "
          f"quantize, on the portable fp32 export; {rows[0]['calibration_images'] if rows else 0} calibration images "
          f"({args.calib}, seed 0); top-1 % on {rows[0]['images'] if rows else 0} images of {args.data} (ONNX Runtime, "
          f"CPU), top-1 agreement with fp32 in brackets\n")  # fmt: skip
    print("| model | fp32 | ours int8 | ModelOpt int8 default | ModelOpt, our op set |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = [f"{r['fp32']['top1']:.2f}"] + [f"{r[k]['top1']:.2f} ({r[k]['agreement']:.2f}% agree)"
                                                  for k in ("ours", "modelopt", "modelopt_ops")]  # fmt: skip
        print(f"| {r['model']} | " + " | ".join(cells) + " |")
    print("\nour op set: --op_types_to_quantize " + " ".join(OUR_OP_SET) + "; ours: 8-bit weights, percentile "
          "calibration, the AFT core in float")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"modelopt": version, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
