"""Each AFT layer vs a same-width multi-head attention layer as the token count grows.

For T in 64, 256, 1024, 4096 tokens (a square grid, batch 1, width 128, 8 heads for
attention and AFT-conv, AFT-local window 7, AFT-conv kernel 7), prints the median
forward time and the peak memory a forward pass adds, and the ratio of each to
multi-head attention at the same T, all measured in this run.

Peak memory is measured in a fresh subprocess per (layer, T): the highest resident
set size a sampling thread sees during a forward pass, minus the resident size just
before it (after construction, a warm-up and malloc_trim; large buffers are mmapped
so that freed memory leaves the process). It is the memory the forward adds. AFT-full keeps a T x T bias
(its memory grows like T^2, never like T^2 d); attention keeps heads x T x T scores.

    python benchmarks/bench_aft_vs_mha.py                 # all sizes
    python benchmarks/bench_aft_vs_mha.py --tokens 64 256 --json /tmp/aft_vs_mha.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("mha", "aft_full", "aft_local", "aft_simple", "aft_conv")


def _rss_bytes() -> int:
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_during(fn) -> int:
    """Peak resident bytes above the current level while ``fn`` runs (sampled)."""
    import ctypes
    import threading

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    base = _rss_bytes()
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes())

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        fn()
    finally:
        stop.set()
        t.join()
    return max(peak[0] - base, 0)


def _measure(layer: str, tokens: int, dim: int, iters: int, threads: int) -> dict:
    """Runs in the child: build the layer, time it, report the peak memory a forward adds."""
    import time

    import torch

    torch.set_num_threads(threads)
    side = int(round(tokens**0.5))
    from aft_export.layers import AFTConv, AFTFull, AFTLocal, AFTSimple

    def build(t):
        if layer == "mha":
            mha = torch.nn.MultiheadAttention(dim, 8, batch_first=True)
            return lambda x: mha(x, x, x, need_weights=False)[0]
        mod = {"aft_full": lambda: AFTFull(dim, t), "aft_local": lambda: AFTLocal(dim, t, 7, (int(t**0.5),) * 2),
               "aft_simple": lambda: AFTSimple(dim), "aft_conv": lambda: AFTConv(dim, 8, 7)}[layer]()  # fmt: skip
        g = (int(round(t**0.5)),) * 2
        return lambda x: mod(x, g)

    with torch.no_grad():
        small = build(16)
        small(torch.randn(1, 16, dim))  # initialise kernels and allocator at a tiny size
        f = build(tokens)
        x = torch.randn(1, side * side, dim)
        f(x)  # first call at full size: allocator and kernel choices settle
        added = _peak_during(lambda: f(x))
        times = []
        for _ in range(iters):
            t = time.perf_counter()
            f(x)
            times.append(time.perf_counter() - t)
    times.sort()
    return {"layer": layer, "tokens": tokens, "ms": 1e3 * times[len(times) // 2], "peak_mb": added / 2**20}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, nargs="*", default=[64, 256, 1024, 4096])
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.child[0], int(args.child[1]), args.dim, args.iters, args.threads)))
        return 0
    for t in args.tokens:
        if int(round(t**0.5)) ** 2 != t:
            parser.error(f"--tokens must be square numbers (a grid); {t} is not")
    rows = []
    for t in args.tokens:
        for layer in LAYERS:
            env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}  # big buffers mmapped, freed for real
            out = subprocess.run([sys.executable, __file__, "--child", layer, str(t), "--dim", str(args.dim),
                                  "--iters", str(args.iters), "--threads", str(args.threads)],
                                 capture_output=True, text=True, cwd=REPO, env=env)  # fmt: skip
            if out.returncode:
                rows.append({"layer": layer, "tokens": t, "error": out.stderr.strip().splitlines()[-1]})
            else:
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  {layer} T={t}: done", file=sys.stderr)
    print(f"batch 1, width {args.dim}, {args.threads} thread(s); time = median of {args.iters} forwards; "
          f"memory = peak RSS a forward adds (MB); ratios vs multi-head attention at the same T")
    print(f"{'T':>5s} {'layer':11s} {'ms':>9s} {'x MHA':>7s} {'peak MB':>9s} {'x MHA':>7s}")
    for t in args.tokens:
        mha = next(r for r in rows if r["tokens"] == t and r["layer"] == "mha")
        for r in (r for r in rows if r["tokens"] == t):
            if "error" in r:
                print(f"{t:5d} {r['layer']:11s} failed: {r['error']}")
                continue
            mem_ratio = r["peak_mb"] / mha["peak_mb"] if mha.get("peak_mb", 0) > 0.5 else float("nan")
            print(f"{t:5d} {r['layer']:11s} {r['ms']:9.2f} {r['ms'] / mha['ms']:7.2f} {r['peak_mb']:9.1f} "
                  f"{mem_ratio:7.2f}")  # fmt: skip
    full = [r for r in rows if r["layer"] == "aft_full" and "error" not in r]
    if len(full) >= 2:
        a, b = full[-2], full[-1]
        print(f"AFT-full peak memory T={a['tokens']} -> {b['tokens']}: x{b['peak_mb'] / max(a['peak_mb'], 1e-9):.1f} "
              f"(T^2 grows x{(b['tokens'] / a['tokens']) ** 2:.0f}); {b['peak_mb']:.0f} MB at T={b['tokens']}, where "
              f"one (T, T, d) tensor would be {b['tokens'] ** 2 * args.dim * 4 / 2**20:.0f} MB")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"dim": args.dim, "threads": args.threads, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
