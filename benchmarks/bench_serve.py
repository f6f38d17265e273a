"""Served by Triton (aft-export serve) vs the artifact called directly in one process, on the
same CPUs with the same thread budget: throughput, p50/p99 latency and CPU time per image at
1, 4 and 16 concurrent clients, requests of 1 and 8 images, as ratios from one run.

Exports a zoo model (default aft_conv_cifar) to ONNX, starts ``aft-export serve`` pinned to
``--cpus`` (default: the second half of the CPUs this process may use) with ``--threads``
equal to their number, and sends requests (CIFAR-10 test images: the normalised tensor to
NAME, or the JPEGs to NAME_image) from client threads pinned to ``--client-cpus`` (default:
the first half), each with its own connection. The direct loop runs the same requests through
aft-export's ONNX Runtime runner (for JPEGs, eval's decoding first) from as many threads, in
this process pinned to ``--cpus``, with as many ONNX Runtime threads. Each served level runs
right after its direct level, so that the two see the same load on a shared machine.

- throughput: images per second of wall time; latency: per request;
- CPU per image: user + system time from /proc of every process of the server (aft-export
  serve, tritonserver, its Python backend stubs), or of this process for the direct loop,
  divided by the images answered (the served clients' own CPU is not counted);
- where the time goes: for one-image requests from one client, Triton's own statistics
  (queue, compute input/infer/output: the Python backend's execute, ONNX Runtime included)
  against the client's latency and the direct run.

    python benchmarks/bench_serve.py
    python benchmarks/bench_serve.py --requests 200 --json runs/bench_serve.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LEVELS = (1, 4, 16)
BATCHES = (1, 8)
TICK = os.sysconf("SC_CLK_TCK")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _tree(pid: int) -> list[int]:
    """``pid`` and every descendant alive now."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [pid], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` (their threads included), from /proc."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def _run(level: int, requests: list, call, cpu) -> dict:
    """``call(state, item)`` for every item, split over ``level`` threads (each with its own
    state: a connection); wall time, latencies, errors and CPU seconds (``cpu()`` before and after)."""
    latencies, errors, lock = [], [], threading.Lock()
    shards = [requests[i::level] for i in range(level)]

    def client(shard):
        state, mine = {}, []
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
    cpu0, start = cpu(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    wall, cpu1 = time.perf_counter() - start, cpu()
    images = sum(len(x) for x in requests)
    lat = np.array(latencies) * 1e3
    return {"requests": len(latencies), "images": images, "errors": len(errors), "first_error": errors[:1],
            "images_per_s": images / wall, "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)),
            "cpu_ms_per_image": (cpu1 - cpu0) * 1e3 / images}  # fmt: skip


def _stats(url: str, model: str) -> dict:
    with urllib.request.urlopen(f"http://{url}/v2/models/{model}/stats", timeout=10) as r:
        s = json.loads(r.read())["model_stats"][0]
    return {k: (int(v["count"]), int(v["ns"])) for k, v in s["inference_stats"].items()} | {
        "executions": (int(s["execution_count"]), 0)}


def _where(before: dict, after: dict) -> dict:
    """Mean ms per request of each of Triton's stages between two snapshots."""
    out = {}
    for key in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        n = after[key][0] - before[key][0]
        out[key] = (after[key][1] - before[key][1]) / max(n, 1) / 1e6
    out["executions"] = after["executions"][0] - before["executions"][0]
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


def _cpus(arg: str | None, default: list[int]) -> list[int]:
    if not arg:
        return default
    out = set()
    for part in arg.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="aft_conv_cifar", help="zoo name or checkpoint path")
    parser.add_argument("--requests", type=int, default=400, help="requests per run (one client level, one batch)")
    parser.add_argument("--cpus", help="CPUs of the server and of the direct loop, e.g. 1 or 2-3 (default: the "
                                       "second half of this process's CPUs)")  # fmt: skip
    parser.add_argument("--client-cpus", help="CPUs of the served clients (default: the first half)")
    parser.add_argument("--queue-delay-us", type=int, help="passed to aft-export serve (default: its own)")
    parser.add_argument("--inputs", default="tensor,image", help="tensor, image or both")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    ckpt = Path(args.model)
    if not ckpt.is_file():
        ckpt = REPO / "models" / f"{args.model}.pt"
    if not ckpt.is_file():
        parser.error(f"--model {args.model}: neither a checkpoint nor a zoo name")
    mine = sorted(os.sched_getaffinity(0))
    try:
        return _bench(args, ckpt, mine)
    finally:
        os.sched_setaffinity(0, mine)  # this thread's CPUs as they were (the benchmark moves it between sets)


def _bench(args, ckpt: Path, mine: list[int]) -> int:
    half = max(1, len(mine) // 2)
    server_cpus = _cpus(args.cpus, mine[half:] if len(mine) > 1 else mine)
    client_cpus = _cpus(args.client_cpus, mine[:half] if len(mine) > 1 else mine)
    budget = len(server_cpus)
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))  # removed at the end, unless the server failed (its log)
    try:
        code = _measure(args, ckpt, tmp, server_cpus, client_cpus, budget)
    except BaseException:
        if (tmp / "serve.log").is_file():
            print(f"aft-export serve's log: {tmp / 'serve.log'}", file=sys.stderr)
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    return code


def _measure(args, ckpt: Path, tmp: Path, server_cpus: list[int], client_cpus: list[int], budget: int) -> int:
    from aft_export.data.images import iter_tar, load_image, normalize_array
    from aft_export.data.datasets import resolve
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.runners import OrtRunner
    from aft_export.serving.spec import model_name

    import tritonclient.http as tc

    onnx_path = tmp / f"{ckpt.stem}.onnx"
    export_checkpoint(ckpt, onnx_path, ExportOptions(images=0), log=lambda *a: None)
    os.sched_setaffinity(0, server_cpus)  # the direct runner's threads are made (and run) on the server's CPUs
    runner = OrtRunner(str(onnx_path), threads=budget, spinning=False)
    info = runner.info
    jpegs = _test_jpegs(resolve("cifar10:test"), iter_tar)
    images = normalize_array(np.stack([load_image(raw, info.input_size[1]) for raw in jpegs]), info.mean, info.std)
    name = model_name(onnx_path)

    http, grpc, metrics = _free_ports(3)
    url = f"127.0.0.1:{http}"
    serve_args = [sys.executable, "-m", "aft_export.cli", "serve", str(onnx_path), "--http-port", str(http),
                  "--grpc-port", str(grpc), "--metrics-port", str(metrics), "--threads", str(budget),
                  "--max-batch", str(max(LEVELS) * max(BATCHES))]  # fmt: skip
    if args.queue_delay_us is not None:
        serve_args += ["--queue-delay-us", str(args.queue_delay_us)]
    log = open(tmp / "serve.log", "w")
    server = subprocess.Popen(serve_args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, server_cpus))  # fmt: skip
    results: dict = {}
    where: dict = {}
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with tc.InferenceServerClient(url) as c:
                    if c.is_server_ready():
                        break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"aft-export serve did not come up; see {tmp / 'serve.log'}")
            time.sleep(0.5)
        os.sched_setaffinity(0, client_cpus)
        with tc.InferenceServerClient(url) as c:  # an HTTP round trip that runs no model: GET /v2/health/live
            for _ in range(20):
                c.is_server_live()
            live = []
            for _ in range(200):
                t0 = time.perf_counter()
                c.is_server_live()
                live.append(time.perf_counter() - t0)
        round_trip_ms = float(np.percentile(live, 50)) * 1e3
        served_cpu = lambda: _cpu_seconds(_tree(server.pid))  # noqa: E731
        direct_cpu = lambda: _cpu_seconds([os.getpid()])  # noqa: E731

        def served(model, input_name, dtype):
            def call(state, x):
                if "c" not in state:
                    state["c"] = tc.InferenceServerClient(url)
                    state["close"] = state["c"].close
                inp = tc.InferInput(input_name, list(x.shape), dtype)
                inp.set_data_from_numpy(x)
                state["c"].infer(model, [inp])
            return call

        def direct_tensor(state, x):
            runner.logits(x, batch_size=len(x))

        def direct_image(state, raw):
            x = normalize_array(np.stack([load_image(bytes(b), info.input_size[1]) for b in raw.reshape(-1)]),
                                info.mean, info.std)  # fmt: skip
            runner.logits(x, batch_size=len(x))

        kinds = {"tensor": (name, "image", "FP32", direct_tensor, lambda i, b: images[i : i + b]),
                 "image": (name + "_image", "image_bytes", "BYTES", direct_image,
                           lambda i, b: np.array([[j] for j in jpegs[i : i + b]], dtype=object))}  # fmt: skip
        for kind in [k for k in args.inputs.split(",") if k]:
            model, input_name, dtype, direct, make = kinds[kind]
            call = served(model, input_name, dtype)
            for batch in BATCHES:
                work = [make((i * batch) % (len(jpegs) - batch), batch) for i in range(args.requests)]
                os.sched_setaffinity(0, server_cpus)
                _run(2, work[:32], direct, direct_cpu)  # warm both paths
                os.sched_setaffinity(0, client_cpus)
                _run(2, work[:32], call, served_cpu)
                for level in LEVELS:
                    os.sched_setaffinity(0, server_cpus)
                    d = _run(level, work, direct, direct_cpu)
                    os.sched_setaffinity(0, client_cpus)
                    before = _stats(url, model)
                    s = _run(level, work, call, served_cpu)
                    if level == 1 and batch == 1:
                        where[kind] = _where(before, _stats(url, model)) | {"client_p50_ms": s["p50_ms"],
                                                                            "direct_p50_ms": d["p50_ms"],
                                                                            "round_trip_ms": round_trip_ms}  # fmt: skip
                    results[(kind, batch, level)] = {"served": s, "direct": d}
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()

    load = os.getloadavg()
    print(f"{ckpt.stem}, ONNX Runtime {budget} thread(s); server and direct loop on CPUs "
          f"{','.join(map(str, server_cpus))}, served clients on {','.join(map(str, client_cpus))} "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average {load[0]:.1f} at the "
          f"end: {'shared with other work' if load[0] > 1.5 else 'quiet'}); {args.requests} requests per row, "
          f"tritonclient HTTP; direct: aft-export's ONNX Runtime runner from as many threads in one process")  # fmt: skip
    print("| input | batch | clients | served img/s | direct img/s | served/direct | served p50 ms | direct p50 ms | "
          "p50 served-direct ms | served p99 ms | direct p99 ms | served CPU ms/img | direct CPU ms/img | "
          "CPU served/direct | errors |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (kind, batch, level), r in results.items():
        s, d = r["served"], r["direct"]
        print(f"| {kind} | {batch} | {level} | {s['images_per_s']:.0f} | {d['images_per_s']:.0f} | "
              f"{s['images_per_s'] / d['images_per_s']:.2f} | {s['p50_ms']:.2f} | {d['p50_ms']:.2f} | "
              f"{s['p50_ms'] - d['p50_ms']:+.2f} | {s['p99_ms']:.2f} | {d['p99_ms']:.2f} | "
              f"{s['cpu_ms_per_image']:.2f} | {d['cpu_ms_per_image']:.2f} | "
              f"{s['cpu_ms_per_image'] / max(d['cpu_ms_per_image'], 1e-9):.2f} | {s['errors'] + d['errors']} |")  # fmt: skip
    for kind, w in where.items():
        print(f"\nwhere the time of a one-image {kind} request goes (one client, means over the run, ms): client "
              f"p50 {w['client_p50_ms']:.2f}; in Triton {w['success']:.2f} (queue {w['queue']:.2f}, compute input "
              f"{w['compute_input']:.2f}, compute infer {w['compute_infer']:.2f}: the Python backend's execute with "
              f"ONNX Runtime, compute output {w['compute_output']:.2f}); ONNX Runtime alone (direct p50) "
              f"{w['direct_p50_ms']:.2f}; so HTTP and the client about {w['client_p50_ms'] - w['success']:.2f} (an HTTP "
              f"round trip that runs no model, GET /v2/health/live, p50 {w['round_trip_ms']:.2f}), the stub's hop and "
              f"Python about {w['compute_infer'] - w['direct_p50_ms']:.2f}")  # fmt: skip
    goals = []
    for kind in {k for k, _, _ in results}:
        for batch in BATCHES:
            hi, lo = results[(kind, batch, max(LEVELS))], results[(kind, batch, 1)]
            ratio = hi["served"]["images_per_s"] / hi["direct"]["images_per_s"]
            cpu = hi["served"]["cpu_ms_per_image"] / max(hi["direct"]["cpu_ms_per_image"], 1e-9)
            p50 = lo["served"]["p50_ms"] - lo["direct"]["p50_ms"]
            goals.append(f"{kind} batch {batch}: 16 clients throughput {ratio:.2f}x direct (goal >= 0.8) "
                         f"{'met' if ratio >= 0.8 else 'NOT met'}, CPU {cpu:.2f}x (goal <= 1.5) "
                         f"{'met' if cpu <= 1.5 else 'NOT met'}; 1 client p50 {p50:+.2f} ms (goal <= 1) "
                         f"{'met' if p50 <= 1.0 else 'NOT met'}")  # fmt: skip
    print("\n" + "\n".join(sorted(goals)))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"model": ckpt.stem, "requests": args.requests, "cpus": server_cpus,
                                               "client_cpus": client_cpus, "where": where,
                                               "results": [{"input": k, "batch": b, "clients": lv, **r}
                                                           for (k, b, lv), r in results.items()]}, indent=2))  # fmt: skip
    failed = sum(r[w]["errors"] for r in results.values() for w in r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
