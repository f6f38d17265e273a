#!/usr/bin/env python3
"""TensorRT-RTX's parser and builder on the full product of what aft-export writes, on this CPU.

Every zoo model x target (tensorrt, tensorrt8) x op form (custom, decomposed) x precision
(fp32, fp16, int8, int8 --rest-precision fp32, int8 --per-tensor, int8 --quantize-aft-core), AFT-conv with dynamic
height/width, every registered 224 config (untrained) and the bring-your-own examples
(untrained) in fp32, fp16 and int8. Each artifact is exported and quantised through
aft-export's API, then built with ``aft_export.tensorrt.build.build_engine(library="tensorrt-rtx")``;
the table says, per artifact: whether it parsed, parse and build seconds, engine MB, how many
layers of the parsed network produce int8, fp16 and fp32 tensors, how many MatMul/Conv layers
take dequantised int8 inputs, and what the engine carries: the weights found in it verbatim
(bytes of the ONNX initializers), the number of generated CUDA kernels stored as source
(TensorRT-RTX compiles them just in time on the GPU; counted as ``__global__`` in the engine)
and the MB of that source (runs of 256 or more printable bytes).
The test suite (tests/test_build.py) builds each *kind* once; this is the whole product.

    python benchmarks/rtx_build.py                 # the full product (about 20 min on 2 cores)
    python benchmarks/rtx_build.py --quick         # the kinds tests/test_build.py builds
    python benchmarks/rtx_build.py --quick --json out.json
    python benchmarks/rtx_build.py --int8-variants # the zoo in fp32, fp16 and three int8 forms

The int8 variants say where an int8 engine's size comes from (docs/tensorrt.md): the int8 graph
with the rest in fp32 (``--rest-precision fp32``), the same with its activation Q/DQ pairs removed
(weight-only int8, what TensorRT-RTX's support matrix lists as its INT8 GEMM; not an artifact
aft-export writes), and the tensorrt target's int8 (the rest in fp16).

Timings depend on the machine and its load; they are reported, never asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ZOO = ["aft_conv_cifar", "aft_full_cifar", "aft_local_cifar", "aft_simple_cifar"]
IMAGENET = ["aft_full_tiny_224", "aft_full_small_224", "aft_conv_tiny_224", "aft_conv_small_224",
            "aft_local_tiny_224", "aft_simple_tiny_224"]  # fmt: skip
BYO = ["aft_pytorch_cifar", "comvex_cifar", "own_cifar"]
INT8 = {"int8": {}, "int8-fp32-rest": {"rest_precision": "fp32"}, "int8-per-tensor": {"per_channel": False},
        "int8-aft-core": {"quantize_aft_core": True}}  # fmt: skip
CALIBRATION = 8


def kinds(quick: bool, int8_variants: bool = False) -> list[tuple[str, dict]]:
    """(name, recipe) for every artifact: recipe keys source, target, op_form, dynamic_hw, precision."""
    out = []
    if int8_variants:
        for m in ZOO:
            out += [(f"{m} {p}", dict(source=m, target="tensorrt", precision=p))
                    for p in ("fp32", "fp16", "int8-fp32-rest", "int8-weight-only", "int8")]  # fmt: skip
        return out
    if quick:  # the kinds tests/test_build.py builds
        for m in ZOO:
            for t in ("tensorrt", "tensorrt8"):
                out += [(f"{m} {t} {p}", dict(source=m, target=t, precision=p)) for p in ("fp32", "fp16", "int8")]
        conv = dict(source="aft_conv_cifar", target="tensorrt")
        out += [("aft_conv_cifar decomposed fp32", dict(conv, op_form="decomposed", precision="fp32")),
                ("aft_conv_cifar dynamic-hw fp32", dict(conv, dynamic_hw=True, precision="fp32")),
                ("aft_conv_cifar int8 --quantize-aft-core", dict(conv, precision="int8-aft-core")),
                ("aft_conv_cifar int8 --per-tensor", dict(conv, precision="int8-per-tensor"))]  # fmt: skip
        for m in ("aft_full_tiny_224", "aft_conv_tiny_224"):
            out += [(f"{m} {p}", dict(source=m, target="tensorrt", precision=p)) for p in ("fp32", "int8")]
        out += [(f"byo {b} fp32", dict(source=b, target="tensorrt", precision="fp32")) for b in BYO]
        return out
    for m in ZOO:
        for t in ("tensorrt", "tensorrt8"):
            for form in ("custom", "decomposed"):
                out += [(f"{m} {t} {form} {p}", dict(source=m, target=t, op_form=form, precision=p))
                        for p in ("fp32", "fp16", *INT8)]  # fmt: skip
    for t in ("tensorrt", "tensorrt8"):
        out += [(f"aft_conv_cifar {t} dynamic-hw {p}", dict(source="aft_conv_cifar", target=t, dynamic_hw=True,
                                                             precision=p)) for p in ("fp32", "fp16", "int8")]
    for m in IMAGENET:
        out += [(f"{m} {p}", dict(source=m, target="tensorrt", precision=p)) for p in ("fp32", "fp16", "int8")]
    for b in BYO:
        out += [(f"byo {b} {p}", dict(source=b, target="tensorrt", precision=p)) for p in ("fp32", "fp16", "int8")]
    return out


class Maker:
    def __init__(self, root: Path, calib: str):
        self.root, self.calib, self.fp32 = root, calib, {}
        self.quantised = {}  # fp32 graph -> its last QuantizeResult (calibration set, logits to hand on)
        self.quiet = dict(log=lambda *a: None)

    def fp32_graph(self, r: dict) -> Path:
        from aft_export.exporting.exporter import ExportOptions, export_checkpoint

        key = (r["source"], r["target"], r.get("op_form", "custom"), r.get("dynamic_hw", False))
        if key in self.fp32:
            return self.fp32[key]
        out = self.root / ("_".join(map(str, key)) + ".onnx")
        opts = ExportOptions(target=key[1], op_form=key[2], dynamic_hw=key[3], images=0)
        if key[0] in BYO:
            _export_example(key[0], out, opts)
        else:
            ckpt = REPO / "models" / f"{key[0]}.pt"
            if not ckpt.is_file():  # a registry config: untrained, the graph is what is measured
                from aft_export.models.checkpoint import save_checkpoint
                from aft_export.models import create_model

                ckpt = self.root / f"{key[0]}.pt"
                save_checkpoint(ckpt, create_model(key[0]), [str(i) for i in range(1000)], model_name=key[0])
            export_checkpoint(ckpt, out, opts, **self.quiet)
        self.fp32[key] = out
        return out

    def make(self, name: str, r: dict) -> Path:
        from aft_export.options import QuantizeOptions
        from aft_export.quantization.stage import quantize_model

        fp32 = self.fp32_graph(r)
        p = r["precision"]
        if p == "fp32":
            return fp32
        out = self.root / (name.replace(" ", "_").replace("--", "") + ".onnx")
        if p == "int8-weight-only":
            int8 = self.make(name.rsplit(" ", 1)[0] + " int8-fp32-rest", {**r, "precision": "int8-fp32-rest"})
            _weight_only(int8, out)
            return out
        kw = INT8.get(p, {})
        last = self.quantised.get(fp32)
        int8 = p.startswith("int8")
        opts = QuantizeOptions(precision="int8" if int8 else p, images=CALIBRATION, cache_dir="", **kw)
        result = quantize_model(fp32, out, self.calib if int8 else None, opts, progress=False,
                                calibration=last and last.calibration, fp32_logits=last and last.fp32_logits,
                                **self.quiet)  # fmt: skip
        if result.calibration is not None:
            self.quantised[fp32] = result
        return out


def _weight_only(int8: Path, out: Path) -> None:
    """The int8 graph less its activation QuantizeLinear -> DequantizeLinear pairs: int8 weights only."""
    import onnx

    m = onnx.load(str(int8))
    q = {n.output[0]: n for n in m.graph.node if n.op_type == "QuantizeLinear"}
    pairs = [(n, q[n.input[0]]) for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in q]
    rename = {dq.output[0]: qn.input[0] for dq, qn in pairs}
    for n in m.graph.node:
        n.input[:] = [rename.get(x, x) for x in n.input]
    for dq, qn in pairs:
        for node in (dq, qn):
            if node in m.graph.node:
                m.graph.node.remove(node)
    onnx.save(m, str(out))


def _export_example(stem: str, out: Path, opts) -> None:
    from aft_export.byo.export import export_model
    from aft_export.data.images import Preprocessing

    spec = importlib.util.spec_from_file_location(f"byo_{stem}", REPO / "examples" / "byo" / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pre = Preprocessing(32, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
    export_model(module.build().eval(), out, pre, opts, log=lambda *a: None)


def engine_contents(onnx_path: Path, engine: Path) -> dict:
    """What a TensorRT-RTX engine file carries: the ONNX initializers of 4 KiB or more found in it
    verbatim (64 bytes from the middle of each, so a layout change would miss them), and the
    generated kernels stored as CUDA source."""
    import re

    import onnx
    from onnx import numpy_helper

    data = engine.read_bytes()
    source = sum(len(m.group(0)) for m in re.finditer(rb"[\t\n\r\x20-\x7e]{256,}", data))
    weights = found = 0
    for t in onnx.load(str(onnx_path)).graph.initializer:
        a = numpy_helper.to_array(t)
        if a.nbytes >= 4096:
            b = a.tobytes()
            weights += a.nbytes
            found += a.nbytes * (b[len(b) // 2 : len(b) // 2 + 64] in data)
    return {"weights_mb": round(weights / 1e6, 3), "weights_in_engine_mb": round(found / 1e6, 3),
            "cuda_kernels": data.count(b"__global__"), "source_mb": round(source / 1e6, 2)}  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the kinds tests/test_build.py builds")
    parser.add_argument("--int8-variants", action="store_true",
                        help="the zoo in fp32, fp16, int8 with the fp32 rest, weight-only int8 and int8 (the fp16 rest)")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--keep", help="write the artifacts and engines here (default: a temporary directory)")
    parser.add_argument("--calib", default=os.environ.get("AFT_CIFAR10_DIR", str(REPO.parent / "shared" / "data"
                                                                                 / "cifar10")) + "/test.tar")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("tensorrt_rtx") is None:
        raise SystemExit("TensorRT-RTX is not installed: pip install -e '.[rtx]'")
    from aft_export.tensorrt.build import build_engine
    from aft_export.tensorrt.library import RTX, BuildOptions

    rows = []
    with tempfile.TemporaryDirectory(prefix="rtx-build-") as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        maker = Maker(root, args.calib)
        for name, recipe in kinds(args.quick, args.int8_variants):
            row = {"artifact": name}
            try:
                t0 = time.perf_counter()
                path = maker.make(name, recipe)
                row["make_s"] = round(time.perf_counter() - t0, 2)
                batch = "1" if "224" in name else "1,8,32"
                hw = "16,32,48" if recipe.get("dynamic_hw") else None
                result = build_engine(path, root / (path.stem + ".rtx.engine"),
                                      BuildOptions(library=RTX, batch_profile=batch, hw_profile=hw),
                                      log=lambda *a: None)  # fmt: skip
                m = result.manifest
                out = m["network"]["outputs"]
                row.update(parse="ok", parse_s=m["tensorrt_build"]["parse_seconds"], build_s=m["build_seconds"],
                           engine_mb=round(Path(result.engine).stat().st_size / 1e6, 2), int8=out.get("int8", 0),
                           fp16=out.get("fp16", 0), fp32=out.get("fp32", 0),
                           quantized_mm_conv=len(m["network"]["quantized"]), float_mm_conv=len(m["network"]["float"]),
                           compute=m["network"]["compute"],
                           **engine_contents(path, Path(result.engine)))  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - a row that failed says why; the rest go on
                row.update(parse="FAILED", error=str(exc).splitlines()[0][:300])
            rows.append(row)
            print(_line(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    failed = [r["artifact"] for r in rows if r["parse"] != "ok"]
    print(f"\n{len(rows) - len(failed)}/{len(rows)} artifacts parsed and built with TensorRT-RTX"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


HEAD = ("| artifact | parse | parse s | build s | engine MB | int8 | fp16 | fp32 | compute int8 / fp16 / fp32 | "
        "int8 MatMul/Conv | weights MB (in engine) | CUDA kernels (source MB) |")  # fmt: skip


def _line(r: dict, _printed=[False]) -> str:  # noqa: B006 - prints the header once
    head = "" if _printed[0] else HEAD + "\n" + "|---" * 12 + "|\n"
    _printed[0] = True
    if r["parse"] != "ok":
        return head + f"| {r['artifact']} | FAILED: {r.get('error', '')} |" + " |" * 10
    return head + (f"| {r['artifact']} | ok | {r['parse_s']:.2f} | {r['build_s']:.2f} | {r['engine_mb']:.2f} | "
                   f"{r['int8']} | {r['fp16']} | {r['fp32']} | "
                   + " / ".join(str(r["compute"].get(k, 0)) for k in ("int8", "fp16", "fp32"))
                   + f" | {r['quantized_mm_conv']} | {r['weights_mb']:.2f} "
                   f"({r['weights_in_engine_mb']:.2f}) | {r['cuda_kernels']} ({r['source_mb']:.2f}) |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
