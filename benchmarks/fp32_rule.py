#!/usr/bin/env python3
"""The measurement behind the fixed fp32 rule of fp16 graphs and int8 graphs' fp16 rest
(``aft_export.artifacts.fp32_rule.FP32_RULE``: the AFT core and LayerNorm stay fp32).

For each zoo model: export (tensorrt target), inline the ``com.aft`` functions (so the core's
own nodes can be put in fp16 too), quantise to int8 with the fp32 rest, then write the fp16
rest four ways: the rule (core and LayerNorm fp32), the core in fp16 as well, LayerNorm in
fp16 as well, and nothing kept in fp32. Each runs in the ONNX reference evaluator, where an
fp16 value is computed in fp16 (ONNX Runtime on the CPU computes many fp16 nodes in fp32),
on the first ``--images`` CIFAR-10 test images, against the fp32 graph in the same evaluator:
top-1 agreement, largest and mean |logit error|, NaN/Inf.

Beside it, what each layer kind's values look like in fp32 on the same images (ONNX Runtime):
the largest |value| (fp16's largest is 65504), the share of non-zero values below fp16's
smallest normal number (6.1e-5: they lose precision there, and flush to zero below 6e-8), and
for LayerNorm the statistics it computes: the largest sum of x^2 over a row's channels (what an
fp16 accumulation would have to hold) and the smallest row variance.

    python benchmarks/fp32_rule.py                       # every zoo model, 200 images
    python benchmarks/fp32_rule.py --models aft_conv_cifar --images 50 --json /tmp/rule.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {"rule": ("aft_core", "layernorm"), "core fp16": ("layernorm",), "layernorm fp16": ("aft_core",),
            "all fp16": ()}  # fmt: skip
FP16_MIN_NORMAL = 6.1035e-05


def kinds_of(model, core: set[str]) -> dict[str, list]:
    """The graph's nodes by layer kind."""
    from aft_export.artifacts.graph import node_module

    out: dict[str, list] = {}
    for n in model.graph.node:
        mod = (node_module(n) or ("", ""))[1]
        kind = ("aft_core" if n.name in core else "layernorm" if n.op_type == "LayerNormalization" or mod == "LayerNorm"
                else "gelu" if mod == "GELU" else "residual" if mod == "Block" and n.op_type == "Add"
                else "projections" if mod in ("Linear", "Conv2d", "BatchNorm2d") else "other")  # fmt: skip
        out.setdefault(kind, []).append(n)
    return out


def value_stats(model, core: set[str], x: np.ndarray) -> dict:
    """Per layer kind, over the values its nodes produce on ``x`` (fp32, ONNX Runtime)."""
    from aft_export.artifacts.graph import with_outputs
    from aft_export.runners import OrtRunner

    kinds = kinds_of(model, core)
    names = {k: [o for n in nodes for o in n.output if o] for k, nodes in kinds.items()}
    ln_inputs = [n.input[0] for n in kinds.get("layernorm", []) if n.op_type == "LayerNormalization"]
    # the core's two accumulations: the numerator and denominator sums its Div divides
    divs = [n for n in kinds.get("aft_core", []) if n.op_type == "Div"]
    nums, dens = [n.input[0] for n in divs], [n.input[1] for n in divs]
    wanted = sorted({o for v in names.values() for o in v} | set(ln_inputs) | set(nums) | set(dens))
    run = OrtRunner(with_outputs(model, wanted), optimize=False)
    stats = {k: {"absmax": 0.0, "nonzero": 0, "below_normal": 0} for k in names}
    ln = {"row_sum_sq_max": 0.0, "row_var_min": float("inf")}
    by_norm = dict.fromkeys(ln_inputs, 0.0)  # each LayerNorm's largest row sum of x^2, in graph order
    core_sums = {"num_absmax": 0.0, "den_min": float("inf"), "den_max": 0.0}
    for i in range(0, len(x), 25):
        out = run.run({run.input_name: x[i : i + 25]})
        for k, outs in names.items():
            for o in outs:
                a = out.get(o)
                if a is None or a.dtype.kind != "f":
                    continue
                a = np.abs(a.astype(np.float64))
                nz = a[a > 0]
                stats[k]["absmax"] = max(stats[k]["absmax"], float(a.max(initial=0)))
                stats[k]["nonzero"] += int(nz.size)
                stats[k]["below_normal"] += int((nz < FP16_MIN_NORMAL).sum())
        for o in nums:
            core_sums["num_absmax"] = max(core_sums["num_absmax"], float(np.abs(out[o]).max()))
        for o in dens:
            core_sums["den_min"] = min(core_sums["den_min"], float(out[o].min()))
            core_sums["den_max"] = max(core_sums["den_max"], float(out[o].max()))
        for o in ln_inputs:
            a = out[o].astype(np.float64)
            by_norm[o] = max(by_norm[o], float((a**2).sum(-1).max()))
            ln["row_sum_sq_max"] = max(ln["row_sum_sq_max"], by_norm[o])
            ln["row_var_min"] = min(ln["row_var_min"], float(a.var(-1).min()))
    for s in stats.values():
        s["below_normal_pct"] = round(100.0 * s.pop("below_normal") / max(s.pop("nonzero"), 1), 4)
        s["absmax"] = float(f"{s['absmax']:.4g}")
    if ln_inputs:
        stats["layernorm"].update({k: float(f"{v:.4g}") for k, v in ln.items()})
        stats["layernorm"]["row_sum_sq_by_norm"] = [float(f"{v:.4g}") for v in by_norm.values()]
    if divs:
        stats["aft_core"].update({k: float(f"{v:.4g}") for k, v in core_sums.items()})
    return stats


def _compare(want: np.ndarray, got: np.ndarray) -> dict:
    from aft_export.verify.compare import agreement

    finite = bool(np.isfinite(got).all())
    got = np.nan_to_num(got)
    a = agreement(want, got)
    return {"agreement": round(a["top1_agreement"], 2), "max_abs": float(f"{a['max_abs']:.4g}"),
            "mean_abs": float(f"{np.abs(want - got).mean():.4g}"), "finite": finite}  # fmt: skip


def _print_variants(results: list, images: int) -> None:
    print(f"int8 with the fp16 rest, in the ONNX reference evaluator (fp16 computed as fp16), first {images} "
          f"CIFAR-10 test images: against the same int8 graph with the fp32 rest (what fp16 costs), and against "
          f"fp32 (both in the same evaluator)")  # fmt: skip
    print("| model | kept fp32 | vs fp32 rest: agree % | max abs | mean abs | vs fp32: agree % | max abs | finite |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        b = r["int8_fp32_rest"]
        print(f"| {r['model']} | (int8, fp32 rest) | | | | {b['agreement']:.2f} | {b['max_abs']:.3g} | yes |")
        for variant, v in r["variants"].items():
            kept, a, f = ", ".join(v["fp32"]) or "nothing", v["vs_fp32_rest"], v["vs_fp32"]
            print(f"| {r['model']} | {kept} | {a['agreement']:.2f} | {a['max_abs']:.3g} | {a['mean_abs']:.3g} | "
                  f"{f['agreement']:.2f} | {f['max_abs']:.3g} | {'yes' if a['finite'] else 'NO'} |")  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="zoo names (default: every models/*.pt)")
    parser.add_argument("--images", type=int, default=200, help="CIFAR-10 test images through the reference")
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--out", default=str(REPO / "runs" / "fp32_rule"), help="where the ONNX files go")
    parser.add_argument("--stats-only", action="store_true", help="only the fp32 value statistics (no reference runs)")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)

    import onnx

    from aft_export.data.images import normalize
    from aft_export.data.datasets import load_labelled
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.artifacts.graph import aft_core_nodes, inline_functions, name_nodes
    from aft_export.artifacts.onnxio import save_onnx
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model
    from aft_export.quantization.fp16 import int8_rest_to_fp16
    from aft_export.runners import ReferenceRunner

    names = args.models or sorted(p.stem for p in (REPO / "models").glob("*.pt"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quiet = dict(log=lambda *a: None)
    results = []
    for name in names:
        t0 = time.perf_counter()
        fp32 = out / f"{name}.onnx"
        export_checkpoint(REPO / "models" / f"{name}.pt", fp32, ExportOptions(images=0), **quiet)
        inlined = inline_functions(onnx.load(str(fp32)))
        name_nodes(inlined)
        flat = out / f"{name}.inlined.onnx"
        save_onnx(inlined, flat)
        core = aft_core_nodes(inlined)
        data = load_labelled("cifar10:test", 32, limit=args.images)
        ref = ReferenceRunner(str(flat))
        x = normalize(data.images, ref.info.mean, ref.info.std).numpy()
        row = {"model": name, "images": len(x), "stats": value_stats(inlined, set(core), x), "variants": {}}
        results.append(row)
        if args.stats_only:
            continue
        int8 = out / f"{name}.inlined.int8.onnx"
        quantize_model(flat, int8, args.calib, QuantizeOptions(rest_precision="fp32"), progress=False, **quiet)
        qmodel = onnx.load(str(int8))
        want = ref.logits(x, batch_size=25)
        base = ReferenceRunner(str(int8)).logits(x, batch_size=25)  # the same int8 layers, the rest in fp32
        row["int8_fp32_rest"] = _compare(want, base)
        for variant, kinds in VARIANTS.items():
            graph, _ = int8_rest_to_fp16(qmodel, core, [], kinds)
            path = out / f"{name}.int8.{variant.replace(' ', '-')}.onnx"
            save_onnx(graph, path)
            with np.errstate(over="ignore", invalid="ignore"):  # the reference's Sigmoid computes both branches
                got = ReferenceRunner(str(path)).logits(x, batch_size=25)
            row["variants"][variant] = {"fp32": list(kinds), "vs_fp32_rest": _compare(base, got),
                                        "vs_fp32": _compare(want, got)}  # fmt: skip
            print(f"{name} {variant}: {row['variants'][variant]}", file=sys.stderr)
        row["seconds"] = round(time.perf_counter() - t0, 1)

    if not args.stats_only:
        _print_variants(results, args.images)
    print()
    print("values per layer kind in fp32 (ONNX Runtime), same images: largest |v|, % of non-zero |v| below fp16's "
          "smallest normal (6.1e-5); LayerNorm: largest row sum of x^2, smallest row variance")  # fmt: skip
    print("| model | kind | max abs | % below fp16 normal | LN row sum x^2 max | first -> last LN | LN row var min "
          "| core num max abs | core den min | core den max |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for kind, s in sorted(r["stats"].items()):
            norms = s.get("row_sum_sq_by_norm")
            extra = [s.get("row_sum_sq_max", ""), f"{norms[0]:.4g} -> {norms[-1]:.4g}" if norms else ""]
            extra += [s.get(k, "") for k in ("row_var_min", "num_absmax", "den_min", "den_max")]
            print(f"| {r['model']} | {kind} | {s['absmax']:.4g} | {s['below_normal_pct']:.3f} | "
                  + " | ".join(map(str, extra)) + " |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"images": args.images, "rows": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
