"""Runtimes in one process: does ONNX Runtime's thread pool leave the cores alone after a run?

ONNX Runtime's intra-op threads spin between the nodes of a run, and by default go on spinning for
a while after it, waiting for the next. Where the next thing the process runs is another runtime
(the deploy table and the benchmarks time ONNX Runtime and OpenVINO rows in interleaved rounds, in
one process), those spinning threads hold the cores that runtime needs. aft-export's ONNX Runtime
runner sets ``session.force_spinning_stop`` (the threads stop spinning when a run returns, and spin
again in the next). This measures, on one file, in interleaved rounds:

- ONNX Runtime back to back, with the default pool and with ``force_spinning_stop``: the setting
  costs ONNX Runtime nothing (ratio near 1);
- OpenVINO run right after an ONNX Runtime run, after each kind of pool: the default pool's
  spinning slows OpenVINO (ratio above 1), the stopped one does not;
- ONNX Runtime (stopped pool) right after an OpenVINO run, against back to back: whether
  OpenVINO's own threads linger on the cores (ratio near 1: they do not).

    python benchmarks/runtime_quiet.py                               # aft_simple_tiny_224, batch 8, 2 threads
    python benchmarks/runtime_quiet.py --model aft_full_cifar --batch 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="aft_simple_tiny_224", help="a zoo name or a registry config")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--iters", type=int, default=5, help="runs per round and row")
    parser.add_argument("--json", help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    import onnxruntime as ort

    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.machine import cpu_features
    from aft_export.runners import OpenVinoRunner
    from bench_openvino import _checkpoint

    with tempfile.TemporaryDirectory(prefix="aft-quiet-") as tmp:
        path = Path(tmp) / f"{args.model}.onnx"
        export_checkpoint(_checkpoint(args.model, Path(tmp)), path, ExportOptions(images=0, target="portable"),
                          log=lambda *a: None)  # fmt: skip
        sessions = {}
        for pool in ("default", "force_spinning_stop"):
            options = ort.SessionOptions()
            options.intra_op_num_threads = args.threads
            options.log_severity_level = 3
            if pool != "default":
                options.add_session_config_entry("session.force_spinning_stop", "1")
            sessions[pool] = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        openvino = OpenVinoRunner(str(path), threads=args.threads, hint="latency")
        name = sessions["default"].get_inputs()[0].name
        x = openvino.random_input(args.batch, 0)
        times = ({f"ort {p}": [] for p in sessions} | {f"openvino after ort {p}": [] for p in sessions}
                 | {"ort force_spinning_stop after openvino": []})  # fmt: skip
        for s in sessions.values():
            s.run(None, {name: x})
        openvino.run({openvino.input_name: x})
        for _ in range(args.rounds):
            for pool, s in sessions.items():
                for _ in range(args.iters):  # back to back
                    t = time.perf_counter()
                    s.run(None, {name: x})
                    times[f"ort {pool}"].append(time.perf_counter() - t)
                for _ in range(args.iters):  # OpenVINO right after an ONNX Runtime run
                    s.run(None, {name: x})
                    t = time.perf_counter()
                    openvino.run({openvino.input_name: x})
                    times[f"openvino after ort {pool}"].append(time.perf_counter() - t)
            for _ in range(args.iters):  # ONNX Runtime right after an OpenVINO run: does OpenVINO's pool linger?
                openvino.run({openvino.input_name: x})
                t = time.perf_counter()
                sessions["force_spinning_stop"].run(None, {name: x})
                times["ort force_spinning_stop after openvino"].append(time.perf_counter() - t)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    ratios = {"ort: default / force_spinning_stop": ms["ort default"] / ms["ort force_spinning_stop"],
              "openvino: after default / after force_spinning_stop":
                  ms["openvino after ort default"] / ms["openvino after ort force_spinning_stop"],
              "ort: after openvino / back to back": ms["ort force_spinning_stop after openvino"]
                  / ms["ort force_spinning_stop"]}  # fmt: skip
    cpu = cpu_features()
    print(f"{args.model}, batch {args.batch}, {args.threads} threads, {args.rounds} interleaved rounds of "
          f"{args.iters}; {cpu.model or cpu.arch}, {cpu.describe()}")  # fmt: skip
    print("| timed | median ms |\n|---|---|")
    for k, v in ms.items():
        print(f"| {k} | {v:.2f} |")
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"ms": ms, "ratios": ratios, "cpu": cpu.to_dict()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
