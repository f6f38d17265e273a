#!/usr/bin/env python3
"""The two ways to write an int8 graph's fp16 rest, side by side in TensorRT-RTX's parsed network.

At opset 18 QuantizeLinear takes fp32 only and DequantizeLinear returns its scale's type (fp32),
so an fp16 rest needs a Cast on each side of every Q/DQ pair; at opset 19 both take fp16 scales,
and the pairs sit in the fp16 graph as they are. For each zoo model this writes both from the
same int8 graph (the fixed fp32 rule of ``aft_export.quantization.fp16`` in both), parses and builds
each with TensorRT-RTX on the CPU, and prints: all layers, Cast layers, the type the
DequantizeLinear layers produce, what feeds the int8 matrix products (a dequantisation directly,
or through a cast), the compute layers per precision, and the engine's size. aft-export writes
the opset-19 form (docs/quantize.md says why).

    python benchmarks/int8_rest_forms.py                      # every zoo model
    python benchmarks/int8_rest_forms.py --models aft_conv_cifar --json /tmp/forms.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def casts_form(qmodel, core: list[str]):
    """The fp16 rest at opset 18: Q/DQ kept fp32, a Cast on each side of every pair (the
    library's conversion, with QuantizeLinear/DequantizeLinear blocked too)."""
    from aft_export.quantization.fp16 import FP32_KINDS, _convert, fp32_nodes

    return _convert(qmodel, fp32_nodes(qmodel, core), FP32_KINDS, also_blocked=("QuantizeLinear", "DequantizeLinear"))


def network(path: Path) -> dict:
    """The parsed network's layers, casts, DQ output types, what feeds the int8 products, and the build."""
    from aft_export.tensorrt.build import DTYPES, _build, parse
    from aft_export.artifacts.onnxio import load_onnx
    from aft_export.tensorrt.library import RTX, BuildOptions, build_plan, input_profile

    parsed = parse(path, RTX, keep=True)
    trt, builder, net, _, _ = parsed.objects
    producer, dq_types, fed = {}, Counter(), Counter()
    for i in range(net.num_layers):
        layer = net.get_layer(i)
        for j in range(layer.num_outputs):
            producer[layer.get_output(j).name] = layer
        if layer.type == trt.LayerType.DEQUANTIZE:
            dq_types[DTYPES[layer.get_output(0).dtype.name]] += 1
    quantized = set(parsed.network["quantized"])
    for i in range(net.num_layers):
        layer = net.get_layer(i)
        if layer.name in quantized:
            for j in range(2):
                src = producer.get(layer.get_input(j).name)
                while src is not None and src.type == trt.LayerType.SHUFFLE:
                    src = producer.get(src.get_input(0).name)
                fed[src.type.name if src is not None else "input"] += 1
    model = load_onnx(path, external_data=False)
    opts = BuildOptions(library=RTX)
    plan = build_plan(parsed.version, "int8", opts, RTX)
    serialized, _ = _build(trt, RTX, parsed.version, builder, net, plan, input_profile(model, opts), opts)
    return {"layers": net.num_layers, "casts": parsed.network["layers"].get("CAST", 0), "dq_outputs": dict(dq_types),
            "int8_products_fed_by": dict(fed), "compute": parsed.network["compute"],
            "engine_mb": round(serialized.nbytes / 1e6, 2) if serialized is not None else None}  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="zoo names (default: every models/*.pt)")
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--out", default=str(REPO / "runs" / "int8_rest_forms"), help="where the ONNX files go")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)

    import onnx

    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.artifacts.graph import aft_core_nodes
    from aft_export.artifacts.onnxio import save_onnx
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model

    names = args.models or sorted(p.stem for p in (REPO / "models").glob("*.pt"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quiet = dict(log=lambda *a: None)
    rows = []
    for name in names:
        fp32 = out / f"{name}.onnx"
        export_checkpoint(REPO / "models" / f"{name}.pt", fp32, ExportOptions(images=0), **quiet)
        int8 = out / f"{name}.int8-fp32-rest.onnx"
        first = quantize_model(fp32, int8, args.calib, QuantizeOptions(rest_precision="fp32"), progress=False, **quiet)
        opset19 = out / f"{name}.int8-fp16-rest.onnx"
        quantize_model(fp32, opset19, args.calib, QuantizeOptions(rest_precision="fp16"), progress=False,
                       calibration=first.calibration, fp32_logits=first.fp32_logits, **quiet)  # fmt: skip
        qmodel = onnx.load(str(int8))
        casts = out / f"{name}.int8-fp16-rest-casts.onnx"
        save_onnx(casts_form(qmodel, aft_core_nodes(qmodel)), casts)
        row = {"model": name, "fp32 rest": network(int8), "fp16 rest, opset 18 + casts": network(casts),
               "fp16 rest, opset 19 (written)": network(opset19)}  # fmt: skip
        rows.append(row)
        print(f"{name}: done", file=sys.stderr)

    print("TensorRT-RTX's parsed network of each form of the same int8 graph (compute: int8 / fp16 / fp32 layers, "
          "constants, shuffles, casts and Q/DQ not counted)")  # fmt: skip
    print("| model | form | layers | Cast layers | DQ outputs | int8 products fed by | compute | engine MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for form, n in r.items():
            if form == "model":
                continue
            c = n["compute"]
            print(f"| {r['model']} | {form} | {n['layers']} | {n['casts']} | "
                  + ", ".join(f"{v} {k}" for k, v in n["dq_outputs"].items()) + " | "
                  + ", ".join(f"{v} {k}" for k, v in n["int8_products_fed_by"].items()) + " | "
                  + " / ".join(str(c.get(k, 0)) for k in ("int8", "fp16", "fp32")) + f" | {n['engine_mb']} |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
