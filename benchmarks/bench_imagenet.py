"""ImageNet-size AFT models (224x224, random weights): where the time goes, as ratios from one run.

CPU (default): PyTorch eager fp32 (``torch.inference_mode()``) and ONNX Runtime fp32,
int8 and fp16 of the same model, the same thread count, timed in alternating rounds in
one process (p50 of each runner's per-round medians). Prints ORT fp32 / PyTorch latency,
the int8 and fp16 speed-ups over ORT fp32, the share of MatMul/Gemm/Conv FLOPs that run
in int8 (fed by DequantizeLinear, and of those, run by ONNX Runtime on an integer kernel
rather than dequantised to float), and ONNX Runtime's profiler breakdown by op type at the largest batch.

CUDA (``--device cuda``): PyTorch eager and ``torch.compile`` in fp32 and fp16
autocast, and ONNX Runtime's CUDA provider on the fp32 export where onnxruntime-gpu is
installed; median of CUDA-event timings.

    python benchmarks/bench_imagenet.py                                   # the four *_tiny_224 + aft_full_small_224
    python benchmarks/bench_imagenet.py --models aft_conv_tiny_224 --batches 1 8 --json /tmp/b.json
    python benchmarks/bench_imagenet.py --device cuda --batches 1 8 64
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODELS = ["aft_full_tiny_224", "aft_local_tiny_224", "aft_simple_tiny_224", "aft_conv_tiny_224",
          "aft_full_small_224"]  # fmt: skip
QUIET = dict(log=lambda *a: None)


def _checkpoint(name: str, out: Path) -> Path:
    """A checkpoint of the registered config with seeded random weights (and biases)."""
    import torch

    from aft_export import create_model
    from aft_export.models.checkpoint import save_checkpoint

    path = out / f"{name}.random-biased.pt"  # seeded; the name changed when biases stopped being zero
    if not path.is_file():
        torch.manual_seed(0)
        model = create_model(name).eval()
        with torch.no_grad():  # non-zero biases as after training: a zero bias exports as another graph
            for m in model.modules():
                if isinstance(m, torch.nn.Linear) and m.bias is not None:
                    m.bias.normal_(0, 0.02)
        save_checkpoint(path, model, [f"class{i}" for i in range(model.cfg.num_classes)], model_name=name)
    return path


def _flops(model_path: Path, batch: int) -> dict:
    """MatMul/Gemm/Conv multiply-add FLOPs at ``batch``, total and in int8 (fed by DequantizeLinear)."""
    import onnx

    from aft_export.artifacts.graph import inline_functions

    # the AFT cores' products are in the com.aft function bodies: count them too
    model = inline_functions(onnx.load(str(model_path)))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = batch
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    shapes.update({t.name: list(t.dims) for t in model.graph.initializer})
    dq = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    fused = _ort_integer_nodes(model_path)
    total = int8 = ort_int8 = 0
    for n in model.graph.node:
        if n.op_type not in ("MatMul", "Gemm", "Conv") or n.output[0] not in shapes:
            continue
        out = shapes[n.output[0]]
        w = shapes.get(n.input[1], [])
        if n.op_type == "Conv":
            k = int(np.prod(w[1:])) if w else 0  # Cin/group * kh * kw
            f = 2 * int(np.prod(out)) * k
        else:
            a = shapes.get(n.input[0], [])
            f = 2 * int(np.prod(out)) * (a[-1] if a else 0)
        total += f
        if any(i in dq for i in n.input):
            int8 += f
            ort_int8 += f if n.name in fused else 0
    return {"total_gflop": total / 1e9, "int8_share": int8 / total if total else 0.0,
            "ort_int8_share": ort_int8 / total if total else 0.0}


# ONNX Runtime's integer kernels: a DQ -> MatMul/Gemm/Conv (-> Q) chain it fused keeps the node's name
ORT_INTEGER_OPS = ("MatMulIntegerToFloat", "QLinearMatMul", "MatMulInteger", "QLinearConv", "ConvInteger", "QGemm",
                   "DynamicQuantizeMatMul")  # fmt: skip


def _ort_integer_nodes(model_path: Path) -> set[str]:
    """Names of the nodes ONNX Runtime's CPU provider runs with an integer kernel (from the
    graph it optimises): a Q/DQ layer it did not fuse runs in float after dequantising."""
    import tempfile

    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        optimized = onnx.load(options.optimized_model_filepath, load_external_data=False)
    return {n.name for n in optimized.graph.node if n.op_type in ORT_INTEGER_OPS}


def _profile(model_path: Path, batch: int, threads: int, runs: int = 10) -> dict[str, float]:
    """Share of node time per op type in ONNX Runtime's profiler (``runs`` runs after one
    warm-up; the runner writes the profile to a temporary directory and removes it)."""
    from aft_export.verify.bench import bench_runner
    from aft_export.runners import OrtRunner

    runner = OrtRunner(str(model_path), threads=threads, profile=True)
    bench_runner(runner, batch, warmup=1, iters=runs)
    return {r["op_type"]: r["share"] for r in runner.op_profile(skip_runs=1)}


def cpu(args) -> dict:
    import torch

    from aft_export.verify.bench import bench_runner
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.options import QuantizeOptions
    from aft_export.quantization.stage import quantize_model
    from aft_export.runners import OrtRunner, TorchRunner

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    rows, profiles, flops = [], {}, {}
    for name in args.models:
        ckpt = _checkpoint(name, out)
        fp32 = out / f"{name}.onnx"
        export_checkpoint(ckpt, fp32, ExportOptions(images=0), **QUIET)
        files, last = {"fp32": fp32}, None
        for precision in args.precisions:  # each after the first takes the decoded calibration set on
            files[precision] = out / f"{name}.{precision}.onnx"
            last = quantize_model(fp32, files[precision], args.calib,
                                  QuantizeOptions(precision=precision, images=args.calib_count, batch_size=8),
                                  progress=False, calibration=last and last.calibration,
                                  fp32_logits=last and last.fp32_logits, **QUIET)  # fmt: skip
        runners = {"torch": TorchRunner(str(ckpt), threads=args.threads)}
        runners.update({f"ort_{p}": OrtRunner(str(f), threads=args.threads) for p, f in files.items()})
        for batch in args.batches:
            for r in runners.values():
                bench_runner(r, batch, warmup=3, iters=1)
            times = {k: [] for k in runners}
            for _ in range(args.rounds):
                for k, r in runners.items():
                    times[k].append(bench_runner(r, batch, warmup=0, iters=args.iters)["p50_ms"])
            p50 = {k: float(np.median(v)) for k, v in times.items()}
            row = {"model": name, "batch": batch, **{f"{k}_ms": v for k, v in p50.items()},
                   "ort_fp32_over_torch": p50["ort_fp32"] / p50["torch"]}  # fmt: skip
            for p in args.precisions:
                row[f"{p}_speedup"] = p50["ort_fp32"] / p50[f"ort_{p}"]
            rows.append(row)
        big = max(args.batches)
        profiles[name] = {p: _profile(f, big, args.threads) for p, f in files.items()}
        if "int8" in files:
            flops[name] = _flops(files["int8"], big)
        print(f"  {name}: done", file=sys.stderr)
    return {"device": "cpu", "threads": args.threads, "rows": rows, "profiles": profiles, "flops": flops}


def _cuda_time(fn, x, iters: int) -> float:
    import torch

    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def cuda(args) -> dict:
    import torch

    from aft_export import create_model

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    ort_cuda = _ort_cuda_available()
    # every model shares AFTClassifier.forward: a fresh dynamo cache per model, and room for
    # one graph per batch size and precision (past the limit dynamo silently runs eager)
    torch._dynamo.config.cache_size_limit = 64
    for name in args.models:
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = create_model(name).eval().cuda()
        compiled = torch.compile(model)
        variants = {
            "eager_fp32": lambda x: model(x),
            "compile_fp32": lambda x: compiled(x),
            "eager_fp16": lambda x: _autocast(model, x),
            "compile_fp16": lambda x: _autocast(compiled, x),
        }
        runner, ort_error = None, None
        if ort_cuda:
            try:
                runner = _ort_runner(name, args)
            except Exception as exc:  # noqa: BLE001 - reported in the JSON, the PyTorch rows still run
                ort_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        for batch in args.batches:
            x = torch.randn(batch, 3, 224, 224, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
            with torch.inference_mode():
                ref = model(x).float()
                ms = {k: _cuda_time(f, x, args.iters) for k, f in variants.items()}
                err = {k: float((f(x).float() - ref).abs().max()) for k, f in variants.items()}
            if runner is not None:
                xn = x.cpu().numpy()
                runner.run({"image": xn})
                t = []
                for _ in range(args.iters):
                    t0 = time.perf_counter()
                    runner.run({"image": xn})
                    t.append((time.perf_counter() - t0) * 1e3)
                ms["ort_cuda_fp32"] = float(np.median(t))
                err["ort_cuda_fp32"] = float(np.abs(runner.run({"image": xn})["logits"] - ref.cpu().numpy()).max())
            rows.append({"model": name, "batch": batch, "ort_cuda_error": ort_error,
                         **{f"{k}_ms": v for k, v in ms.items()},
                         **{f"{k}_max_abs": v for k, v in err.items()},
                         "compile_speedup_fp32": ms["eager_fp32"] / ms["compile_fp32"],
                         "compile_speedup_fp16": ms["eager_fp16"] / ms["compile_fp16"]})  # fmt: skip
        print(f"  {name}: done", file=sys.stderr)
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows,
            "ort_cuda": ort_cuda}  # fmt: skip


def _autocast(model, x):
    import torch

    with torch.autocast("cuda", dtype=torch.float16):
        return model(x)


def _ort_cuda_available() -> bool:
    try:
        import onnxruntime as ort

        return "CUDAExecutionProvider" in ort.get_available_providers()
    except ImportError:
        return False


def _ort_runner(name, args):
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.runners import OrtRunner

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / f"{name}.onnx"
    export_checkpoint(_checkpoint(name, out), onnx_path, ExportOptions(images=0), **QUIET)
    return OrtRunner(str(onnx_path), providers="cuda")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=MODELS)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batches", type=int, nargs="*")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (CPU)")
    parser.add_argument("--iters", type=int, default=5, help="runs per round (CPU) or timed runs (CUDA)")
    parser.add_argument("--precisions", nargs="*", default=["int8", "fp16"])
    parser.add_argument("--calib", default="cifar10:train", help="calibration images (resized to 224)")
    parser.add_argument("--calib-count", type=int, default=32)
    parser.add_argument("--out", default=str(REPO / "runs" / "bench_imagenet"))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    args.batches = args.batches or ([1, 8] if args.device == "cpu" else [1, 8, 64])
    if args.device == "cuda":
        args.iters = max(args.iters, 20)
    report = cpu(args) if args.device == "cpu" else cuda(args)
    report.update({"machine": platform.machine(), "batches": args.batches})
    _print(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def _print(report: dict) -> None:
    rows = report["rows"]
    if report["device"] == "cpu":
        print(f"CPU, {report['threads']} threads; p50 ms, median of alternating rounds; ratios from this run")
        print(f"{'model':20s} {'batch':>5s} {'torch':>8s} {'ORT fp32':>9s} {'ORT/torch':>9s} {'int8 x':>7s} {'fp16 x':>7s}")
        for r in rows:
            print(f"{r['model']:20s} {r['batch']:5d} {r['torch_ms']:8.2f} {r['ort_fp32_ms']:9.2f} "
                  f"{r['ort_fp32_over_torch']:9.2f} {r.get('int8_speedup', float('nan')):6.2f}x "
                  f"{r.get('fp16_speedup', float('nan')):6.2f}x")  # fmt: skip
        for name, f in report["flops"].items():
            print(f"{name}: {f['total_gflop']:.2f} GFLOP in MatMul/Gemm/Conv at batch {max(report['batches'])}, "
                  f"{100 * f['int8_share']:.1f}% of them in int8 (Q/DQ), {100 * f['ort_int8_share']:.1f}% "
                  f"on ONNX Runtime's integer kernels")  # fmt: skip
        for name, by_prec in report["profiles"].items():
            for p, shares in by_prec.items():
                top = ", ".join(f"{op} {100 * s:.0f}%" for op, s in list(shares.items())[:6])
                print(f"{name} {p} profile (batch {max(report['batches'])}): {top}")
    else:
        print(f"{report['device']}, torch {report['torch']}; median ms of CUDA-event timings")
        keys = list(dict.fromkeys(k[:-3] for r in rows for k in r if k.endswith("_ms")))
        print(f"{'model':20s} {'batch':>5s} " + " ".join(f"{k:>13s}" for k in keys) + "  compile x fp32/fp16")
        for r in rows:
            print(f"{r['model']:20s} {r['batch']:5d} " + " ".join(f"{r.get(k + '_ms', float('nan')):13.3f}" for k in keys)
                  + f"  {r['compile_speedup_fp32']:.2f}x / {r['compile_speedup_fp16']:.2f}x")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
