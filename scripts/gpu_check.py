"""One command for users with an NVIDIA GPU or a Jetson: every check, one table, one JSON.

Exports a zoo model (or a checkpoint), quantises it to fp16 and int8, builds TensorRT
engines, writes the trtexec/polygraphy verification scripts and runs them, runs the
TensorRT/GPU tests, parity, eval and bench. Every step runs whatever failed before it
(a step whose input is missing is skipped, with the reason); the table is printed at
the end in every case and ``OUT/gpu_check.json`` (environment, and every step's command,
exit code, seconds and output tail) is written for a bug report. Without TensorRT or a
GPU the steps that need them are skipped with the reason. Exit code 1 if any step failed.

    python scripts/gpu_check.py [MODEL] [OUT_DIR]       # MODEL: zoo name or checkpoint
    bash scripts/gpu_check.sh [MODEL] [OUT_DIR]         # the same
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PACKAGES = ("aft-export", "torch", "numpy", "onnx", "onnxruntime", "onnxruntime-gpu", "onnxscript", "onnxsim",
            "tensorrt", "tensorrt-cu12", "tensorrt-cu13", "polygraphy", "cupy-cuda12x", "cupy-cuda13x")  # fmt: skip
TAIL_LINES = 40
PRECISIONS = ("fp32", "fp16", "int8")
BUILD_BATCH = "1,32,64"


@dataclass
class Step:
    name: str
    command: str = ""
    status: str = "skipped"  # ok | failed | skipped
    exit_code: int | None = None
    seconds: float = 0.0
    detail: str = ""  # skipped: why; failed: the first error line; ok: a summary
    tail: str = ""  # the last lines of its output
    log: str = ""


def first_error(text: str) -> str:
    """The line that says what went wrong: aft-export's one-line ``error:``, else the last
    line of a traceback, else a pytest FAILED line, else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (r"(?i)^error:", r"^[\w.]*(Error|Exception)\b", r"^FAILED\b"):
        found = [line for line in lines if re.match(pattern, line)]
        if found:
            return found[0] if pattern != r"^[\w.]*(Error|Exception)\b" else found[-1]
    return lines[-1] if lines else ""


def environment() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    env = {"python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine()}
    try:
        from aft_export.trt import environment as trt_environment

        env.update(trt_environment())
    except Exception as exc:  # noqa: BLE001 - a broken TensorRT/CUDA install is what this reports
        env["environment_error"] = f"{type(exc).__name__}: {exc}"
    env["driver"] = None
    if shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           check=False, capture_output=True, text=True, timeout=60)  # fmt: skip
        env["driver"] = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            continue
    env["packages"] = packages
    jetpack = Path("/usr/src/tensorrt/bin/trtexec")  # where JetPack puts it, off PATH
    env["trtexec"] = shutil.which("trtexec") or (str(jetpack) if jetpack.is_file() else None)
    return env


def tensorrt_missing(env: dict) -> str | None:
    """None when engines can be built here, else why not (one line)."""
    from aft_export.errors import AFTExportError
    from aft_export.trt import import_tensorrt, require_gpu

    try:
        import_tensorrt()
        require_gpu(env)
    except AFTExportError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - e.g. libnvinfer missing behind the Python module
        return f"TensorRT does not load here: {type(exc).__name__}: {exc}"
    return None


class Checker:
    def __init__(self, out: Path, timeout: float, json_path: Path, env: dict) -> None:
        self.out, self.timeout, self.json_path, self.env = out, timeout, json_path, env
        self.steps: list[Step] = []
        (out / "logs").mkdir(parents=True, exist_ok=True)

    def skip(self, name: str, why: str, command: list[str] | None = None, status: str = "skipped") -> Step:
        return self._record(Step(name, shlex.join(command) if command else "", status, detail=why))

    def run(self, name: str, command: list[str], needs: list[Path] = (), ok_codes=(0,)) -> Step:
        missing = [p.name for p in needs if not p.is_file()]
        if missing:
            return self.skip(name, f"needs {', '.join(missing)}, which an earlier step did not produce", command)
        log = self.out / "logs" / f"{len(self.steps) + 1:02d}-{re.sub(r'[^A-Za-z0-9]+', '-', name)}.log"
        step = Step(name, shlex.join(command), log=str(log))
        print(f"[{len(self.steps) + 1}] {name}: {step.command}", flush=True)
        t0 = time.perf_counter()
        try:
            r = subprocess.run(command, check=False, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=self.timeout, errors="replace")  # fmt: skip
            output, step.exit_code = r.stdout, r.returncode
            step.status = "ok" if r.returncode in ok_codes else "failed"
        except subprocess.TimeoutExpired as exc:
            output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            step.status, step.exit_code = "failed", None
            output += f"\ntimed out after {self.timeout:.0f} s"
        except OSError as exc:  # the program itself is missing or not executable
            output, step.status = f"error: cannot run {command[0]}: {exc}", "failed"
        step.seconds = round(time.perf_counter() - t0, 2)
        log.write_text(output)
        step.tail = "\n".join(output.splitlines()[-TAIL_LINES:])
        step.detail = first_error(output) if step.status == "failed" else ""
        return self._record(step)

    def call(self, name: str, fn, command: str) -> Step:
        """A step done in this process (a library call), timed and recorded like the others."""
        step = Step(name, command)
        t0 = time.perf_counter()
        try:
            step.detail, step.status, step.exit_code = fn() or "", "ok", 0
        except Exception as exc:  # noqa: BLE001 - recorded as the step's failure
            step.status, step.exit_code, step.detail = "failed", 1, f"{type(exc).__name__}: {exc}"
        step.seconds = round(time.perf_counter() - t0, 2)
        return self._record(step)

    def _record(self, step: Step) -> Step:
        self.steps.append(step)
        mark = {"ok": "ok", "failed": "FAILED", "skipped": "skipped"}[step.status]
        print(f"    {mark} ({step.seconds:.1f} s)" + (f": {step.detail}" if step.detail else ""), flush=True)
        self.write_json()
        return step

    def write_json(self) -> None:
        data = {"format": "aft-export.gpu_check.v1", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "environment": self.env, "steps": [asdict(s) for s in self.steps],
                "failed": [s.name for s in self.steps if s.status == "failed"]}  # fmt: skip
        tmp = self.json_path.with_name(f".{self.json_path.name}.tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.json_path)


def _aft(*args) -> list[str]:
    return [sys.executable, "-m", "aft_export.cli", *map(str, args)]


def _generation(version: str | None) -> str | None:
    major = int(version.split(".")[0]) if version and version.split(".")[0].isdigit() else None
    return {8: "trt8", 10: "trt10", 11: "trt11"}.get(major)


def check(args) -> int:
    ckpt = Path(args.model) if Path(args.model).is_file() else REPO / "models" / f"{args.model}.pt"
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    c = Checker(out, args.timeout, Path(args.json).resolve() if args.json else out / "gpu_check.json", env)
    print(f"TensorRT {env.get('tensorrt')}, CUDA {env.get('cuda')}, GPU {env.get('gpu')} "
          f"(compute capability {env.get('compute_capability')}), driver {env.get('driver')}", flush=True)  # fmt: skip
    no_trt = tensorrt_missing(env)
    env["tensorrt_missing"] = no_trt
    name = ckpt.stem
    onnx = {p: out / (f"{name}.onnx" if p == "fp32" else f"{name}.{p}.onnx") for p in PRECISIONS}
    engine = {p: out / (f"{name}.engine" if p == "fp32" else f"{name}.{p}.engine") for p in PRECISIONS}
    for path in [*onnx.values(), *engine.values()]:  # a stale artifact must not stand in for a failed step
        path.unlink(missing_ok=True)

    if not ckpt.is_file():
        zoo = ", ".join(sorted(p.stem for p in (REPO / "models").glob("*.pt")))
        c.skip("export", f"{args.model} is neither a checkpoint file nor a zoo name ({zoo})", status="failed")
    else:
        c.run("export", _aft("export", ckpt, "-o", onnx["fp32"], "--verify-data", args.data))
    calib = ["--calib", args.calib] + (["--count", args.calib_count] if args.calib_count else [])
    for p in ("fp16", "int8"):
        c.run(f"quantize {p}", _aft("quantize", onnx["fp32"], "--precision", p, *calib, "-o", onnx[p]),
              needs=[onnx["fp32"]])  # fmt: skip
    for p in PRECISIONS:
        cmd = _aft("build", onnx[p], "-o", engine[p], "--batch", BUILD_BATCH, "--timing-cache", out / "timing.cache")
        if no_trt:
            c.skip(f"build {p}", no_trt, cmd)
        else:
            c.run(f"build {p}", cmd, needs=[onnx[p]])

    scripts = _verification_steps(c, onnx, no_trt)

    tests = [sys.executable, "-m", "pytest", "-q", "-m", "trt or gpu", "-rs", "tests/"]
    if no_trt:
        c.skip("TensorRT/GPU tests", no_trt, tests)
    elif not (REPO / "tests").is_dir():
        c.skip("TensorRT/GPU tests", f"no tests/ directory in {REPO} (run from a source checkout)", tests)
    else:
        c.run("TensorRT/GPU tests", tests)

    artifacts = [p for p in [*onnx.values(), *engine.values()] if p.is_file()]
    if not artifacts:
        c.skip("parity", "no artifact was produced")
    else:
        c.run("parity", _aft("parity", ckpt, *artifacts, "--data", args.data, "--images", args.parity_images),
              needs=[ckpt])  # fmt: skip
    limit = ["--limit", args.eval_limit] if args.eval_limit else []
    c.run("eval", _aft("eval", ckpt, *artifacts, "--data", args.data, *limit), needs=[ckpt])
    c.run("bench", _aft("bench", *artifacts, "--iters", args.bench_iters), needs=artifacts[:1] or [onnx["fp32"]])

    # the CUDA paths that need no TensorRT: the checkpoint in PyTorch on the GPU and the ONNX
    # files in ONNX Runtime's CUDA provider (onnxruntime-gpu), against the CPU PyTorch reference
    onnx_files = [p for p in onnx.values() if p.is_file()]
    cuda = ["--provider", "cuda"]
    if env.get("gpu") is None:
        for step in ("parity CUDA", "eval CUDA", "bench CUDA"):
            c.skip(step, "no CUDA GPU is visible to PyTorch here")
    else:
        c.run("parity CUDA", _aft("parity", ckpt, ckpt, *onnx_files, "--data", args.data, "--images",
                                  args.parity_images, *cuda), needs=[ckpt], ok_codes=(0, 3))  # fmt: skip
        # eval and bench exit 3, as parity does, when an artifact was skipped (ONNX Runtime without CUDA)
        c.run("eval CUDA", _aft("eval", ckpt, *onnx_files, "--data", args.data, *limit, *cuda), needs=[ckpt],
              ok_codes=(0, 3))  # fmt: skip
        c.run("bench CUDA", _aft("bench", ckpt, *onnx_files, "--iters", args.bench_iters, "--batch", "1", "--batch",
                                 "32", "--batch", "256", *cuda), needs=[ckpt], ok_codes=(0, 3))  # fmt: skip

    _print_table(c.steps, c.json_path)
    _print_commands(scripts, env)
    return 1 if any(s.status == "failed" for s in c.steps) else 0


def _verification_steps(c: Checker, onnx: dict, no_trt: str | None) -> dict:
    """Write each artifact's trtexec/polygraphy script, then run the block for this
    machine's TensorRT: NVIDIA's tools build and check the file, independently of us."""
    from aft_export.nvtools import write_verification_commands

    scripts = {}
    for p, path in onnx.items():
        if not path.is_file():
            c.skip(f"verification script {p}", f"needs {path.name}, which an earlier step did not produce")
            continue

        def write(p=p, path=path) -> str:
            scripts[p] = write_verification_commands(path, batch=BUILD_BATCH)
            return str(scripts[p])

        call = f"aft_export.nvtools.write_verification_commands({str(path)!r}, batch={BUILD_BATCH!r})"
        c.call(f"verification script {p}", write, call)
    gen = _generation(c.env.get("tensorrt"))
    for p, script in scripts.items():
        cmd = ["bash", str(script), gen or "trt10"]
        if no_trt:
            c.skip(f"trtexec+polygraphy {p}", no_trt, cmd)
        elif gen is None:
            c.skip(f"trtexec+polygraphy {p}", f"no verification block for TensorRT {c.env.get('tensorrt')}", cmd)
        elif c.env.get("trtexec") is None:
            c.skip(f"trtexec+polygraphy {p}", "trtexec is neither on PATH nor at /usr/src/tensorrt/bin/trtexec", cmd)
        elif shutil.which("polygraphy") is None:
            c.skip(f"trtexec+polygraphy {p}", "polygraphy is not installed (pip install polygraphy)", cmd)
        else:
            c.run(f"trtexec+polygraphy {p}", cmd)
    return scripts


def _print_table(steps: list[Step], json_path: Path) -> None:
    width = max(len(s.name) for s in steps)
    print(f"\n{'step':{width}s}  {'status':7s}  {'exit':>4s}  {'s':>7s}  detail")
    for s in steps:
        code = "-" if s.exit_code is None else str(s.exit_code)
        detail = s.detail if len(s.detail) <= 150 else s.detail[:147] + "..."
        print(f"{s.name:{width}s}  {s.status:7s}  {code:>4s}  {s.seconds:7.1f}  {detail}")
    failed = [s.name for s in steps if s.status == "failed"]
    print(f"\n{len(steps)} steps: {sum(s.status == 'ok' for s in steps)} ok, {len(failed)} failed, "
          f"{sum(s.status == 'skipped' for s in steps)} skipped. Attach {json_path} to a bug report.")  # fmt: skip


def _print_commands(scripts: dict, env: dict) -> None:
    if not scripts:
        return
    gen = _generation(env.get("tensorrt"))
    print("\nCheck the artifacts with NVIDIA's own tools (trtexec, polygraphy), independently of aft-export:")
    for script in scripts.values():
        print(f"  bash {script} {gen or 'trt11|trt10|trt8'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="aft_conv_cifar", help="zoo name or checkpoint path")
    parser.add_argument("out", nargs="?", default=str(REPO / "runs" / "gpu_check"), help="output directory")
    parser.add_argument("--data", default="cifar10:test", help="labelled images for export check, parity, eval")
    parser.add_argument("--calib", default=str(REPO / "calibration" / "cifar10.json"))
    parser.add_argument("--calib-count", type=int, help="calibration images [default: the recipe's]")
    parser.add_argument("--parity-images", type=int, default=64)
    parser.add_argument("--eval-limit", type=int, help="evaluate N images [default: all]")
    parser.add_argument("--bench-iters", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one step may take")
    parser.add_argument("--json", help="where to write the report [default: OUT/gpu_check.json]")
    return check(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
