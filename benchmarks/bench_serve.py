"""Served by Triton (aft-export serve) vs the artifact called directly in one process:
throughput and p50/p99 latency at 1, 4 and 16 concurrent clients, as ratios from one run.

Exports a zoo model (default aft_conv_cifar) to ONNX, starts ``aft-export serve`` on free
127.0.0.1 ports, and for each concurrency level sends the same requests (one CIFAR-10
test image each: the normalised tensor to NAME, or the JPEG to NAME_image) from that many
client threads, each with its own connection; then runs the same work directly (ONNX
Runtime through aft-export's runner; for images, eval's decoding first) from as many
threads in this process. Throughput counts images per second of wall time; latency is per
request. Bounded: --requests per level (default 400), each client waits at most 60 s.

    python benchmarks/bench_serve.py
    python benchmarks/bench_serve.py --model aft_full_cifar --protocol grpc --json runs/bench_serve.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LEVELS = (1, 4, 16)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _run_clients(levels, requests: int, work, call) -> dict:
    """``call(client_state, item)`` for ``requests`` items split over ``level`` threads;
    wall time and per-request latencies per level."""
    out = {}
    for level in levels:
        latencies, errors = [], []
        lock = threading.Lock()
        items = [work[i % len(work)] for i in range(requests)]
        shards = [items[i::level] for i in range(level)]

        def client(shard):
            state = {}
            mine = []
            for item in shard:
                t0 = time.perf_counter()
                try:
                    call(state, item)
                except Exception as exc:  # noqa: BLE001 - counted and printed
                    with lock:
                        errors.append(repr(exc)[:200])
                mine.append(time.perf_counter() - t0)
            with lock:
                latencies.extend(mine)
            if "close" in state:
                state["close"]()

        threads = [threading.Thread(target=client, args=(s,)) for s in shards]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        wall = time.perf_counter() - start
        lat = np.array(latencies) * 1e3
        out[level] = {"requests": len(latencies), "errors": len(errors), "first_error": errors[:1],
                      "images_per_s": len(latencies) / wall, "p50_ms": float(np.percentile(lat, 50)),
                      "p99_ms": float(np.percentile(lat, 99))}  # fmt: skip
    return out


def _test_jpegs(source, iter_tar, n: int = 256) -> list[bytes]:
    """The first ``n`` CIFAR-10 test JPEGs (from the tar; from the binary release, encoded)."""
    if isinstance(source, str):
        return [raw for _, (_, _, raw) in zip(range(n), iter_tar(Path(source)))]
    import io

    from PIL import Image

    out = []
    for img in source.images[:n]:
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=95)
        out.append(buf.getvalue())
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="aft_conv_cifar", help="zoo name or checkpoint path")
    parser.add_argument("--requests", type=int, default=400, help="requests per concurrency level")
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    ckpt = Path(args.model)
    if not ckpt.is_file():
        ckpt = REPO / "models" / f"{args.model}.pt"
    if not ckpt.is_file():
        parser.error(f"--model {args.model}: neither a checkpoint nor a zoo name")

    from aft_export.data import iter_tar, load_image, normalize
    from aft_export.datasets import resolve
    from aft_export.export.exporter import ExportOptions, export_checkpoint
    from aft_export.runners import OrtRunner

    if args.protocol == "grpc":
        import tritonclient.grpc as tc
    else:
        import tritonclient.http as tc

    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    onnx_path = tmp / f"{ckpt.stem}.onnx"
    export_checkpoint(ckpt, onnx_path, ExportOptions(verify_images=0), log=lambda *a: None)
    runner = OrtRunner(str(onnx_path))
    info = runner.info
    jpegs = _test_jpegs(resolve("cifar10:test"), iter_tar)
    tensors = [normalize(np.stack([load_image(raw, info.input_size[1])]), info.mean, info.std).numpy() for raw in jpegs]
    name = onnx_path.stem.replace(".", "_")

    http, grpc, metrics = _free_ports(3)
    log = open(tmp / "serve.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "aft_export.cli", "serve", str(onnx_path), "--http-port",
                               str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)],
                              stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)  # fmt: skip
    url = f"127.0.0.1:{http if args.protocol == 'http' else grpc}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with tc.InferenceServerClient(url) as c:
                    if c.is_model_ready(name) and c.is_model_ready(name + "_image"):
                        break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"aft-export serve did not come up; see {tmp / 'serve.log'}")
            time.sleep(0.5)

        def served_tensor(state, x):
            if "c" not in state:
                state["c"] = tc.InferenceServerClient(url)
                state["close"] = state["c"].close
            inp = tc.InferInput("image", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            state["c"].infer(name, [inp])

        def served_image(state, raw):
            if "c" not in state:
                state["c"] = tc.InferenceServerClient(url)
                state["close"] = state["c"].close
            arr = np.array([[raw]], dtype=object)
            inp = tc.InferInput("image_bytes", list(arr.shape), "BYTES")
            inp.set_data_from_numpy(arr)
            state["c"].infer(name + "_image", [inp])

        def direct_tensor(state, x):
            runner.logits(x, batch_size=1)

        def direct_image(state, raw):
            x = normalize(np.stack([load_image(raw, info.input_size[1])]), info.mean, info.std).numpy()
            runner.logits(x, batch_size=1)

        for fn, work in ((direct_tensor, tensors), (served_tensor, tensors)):  # warm both paths
            _run_clients((4,), min(64, args.requests), work, fn)
        results = {
            "tensor": {"served": _run_clients(LEVELS, args.requests, tensors, served_tensor),
                       "direct": _run_clients(LEVELS, args.requests, tensors, direct_tensor)},
            "image": {"served": _run_clients(LEVELS, args.requests, jpegs, served_image),
                      "direct": _run_clients(LEVELS, args.requests, jpegs, direct_image)},
        }  # fmt: skip
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()

    print(f"{ckpt.stem}, ONNX Runtime on {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
          f"{args.requests} requests of one image per level, tritonclient {args.protocol}; direct: the runner "
          f"called from as many threads in one process")  # fmt: skip
    print("| input | clients | served img/s | direct img/s | served/direct | served p50 ms | direct p50 ms | "
          "served p99 ms | direct p99 ms | p99 served/direct | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, r in results.items():
        for level in LEVELS:
            s, d = r["served"][level], r["direct"][level]
            print(f"| {kind} | {level} | {s['images_per_s']:.0f} | {d['images_per_s']:.0f} | "
                  f"{s['images_per_s'] / d['images_per_s']:.2f} | {s['p50_ms']:.2f} | {d['p50_ms']:.2f} | "
                  f"{s['p99_ms']:.2f} | {d['p99_ms']:.2f} | {s['p99_ms'] / d['p99_ms']:.1f} | "
                  f"{s['errors'] + d['errors']} |")  # fmt: skip
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"model": ckpt.stem, "protocol": args.protocol,
                                               "requests": args.requests, "results": results}, indent=2))
    failed = sum(r[w][lv]["errors"] for r in results.values() for w in r for lv in LEVELS)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
