"""``aft-export doctor``: every check a user with an NVIDIA GPU or a Jetson can make in one
command, one line per check, and ``doctor.json`` to attach to a bug report.

Exports a zoo model (or a checkpoint), quantises it to fp16 and int8, builds standard
TensorRT engines of all three, writes each ONNX file's trtexec/polygraphy verification
script and runs it, then parity, eval and bench on the CPU and on CUDA (the checkpoint in
PyTorch on the GPU, the ONNX files in ONNX Runtime's CUDA provider).

Each check is an ``aft-export`` command run in a child process, in the run directory (its
command line, exit status, seconds and last output lines go into ``doctor.json``, its
whole output into ``logs/``), or a library call recorded the same way. Every check runs
whatever failed before it: one whose input an earlier check did not produce, or whose
hardware or software is missing here (no GPU, no TensorRT, no trtexec), is *skipped* with
the reason, never passed. The run directory is built under a temporary name and renamed
when complete, like the pipeline's; ``doctor.json`` is rewritten (atomically) after every
check.

Exit status (:data:`aft_export.errors.EXIT_TABLE`): 0 every check passed; 1 one failed;
3 none failed but one was skipped, so not everything was verified (any machine without a
GPU and TensorRT); 2 bad input.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from pathlib import Path

from aft_export.environment import JETPACK_TRTEXEC, distributions, nvidia_tools, platform_facts, tensorrt_environment
from aft_export.errors import EXIT_CHECK_FAILED, EXIT_FOR, EXIT_OK, AFTExportError, Judged, Verdict, said
from aft_export.fileio import atomic_directory, atomic_write_text, claim_output
from aft_export.options import DoctorOptions
from aft_export.models.resources import default_calibration, zoo_dir

FORMAT = "aft-export.doctor.v1"
REPORT = "doctor.json"
PACKAGES = ("aft-export", "torch", "numpy", "onnx", "onnxruntime", "onnxruntime-gpu", "onnxscript", "onnxsim",
            "tensorrt", "tensorrt-cu12", "tensorrt-cu13", "tensorrt-rtx-cu12", "polygraphy", "cupy-cuda12x",
            "cupy-cuda13x")  # fmt: skip
TAIL_LINES = 40
BUILD_PROFILE = "1,32,64"  # the engines' batch profile MIN,OPT,MAX
CUDA_BATCHES = (1, 32, 256)
# every artifact precision, in the order the pipeline makes them: the export is fp32, the others come from
# quantize (precision lives in the graph: shared/docs/DEPLOY.md)
ARTIFACT_PRECISIONS = ("fp32", "fp16", "int8")
NAME_WIDTH = 24  # the longest check name, "verification script fp16"


@dataclass
class Check:
    name: str
    command: str = ""
    status: str = "skipped"  # ok | failed | skipped
    exit_code: int | None = None
    seconds: float = 0.0
    detail: str = ""  # skipped: why; failed: the line that says what went wrong
    tail: str = ""  # the last lines of its output
    log: str = ""  # its whole output, relative to the run directory


@dataclass
class DoctorResult(Judged):
    run_dir: str
    environment: dict
    checks: list[Check] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)  # the verification scripts, relative to run_dir

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "failed"]

    @property
    def skipped(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "skipped"]

    @property
    def verdict(self) -> Verdict:
        """failed when a check failed; not verified when one was skipped (no GPU, TensorRT or
        trtexec here); else ok."""
        return Verdict.of([f"{c.name} failed: {c.detail}" for c in self.checks if c.status == "failed"],
                          [f"{c.name} skipped: {c.detail}" for c in self.checks if c.status == "skipped"])

    @property
    def exit_code(self) -> int:
        return EXIT_FOR[self.verdict.status]

    def lines(self) -> list[str]:
        """What ``doctor`` prints at the end (:func:`summary`)."""
        return summary(self)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "run_dir": self.run_dir, "environment": self.environment,
                "checks": [asdict(c) for c in self.checks], "failed": self.failed, "skipped": self.skipped,
                "exit_code": self.exit_code, "verdict": self.verdict.to_dict(), "verification_scripts": self.scripts}  # fmt: skip


# ---------------------------------------------------------------- what this machine has


def environment() -> dict:
    """Python, platform, TensorRT/CUDA/GPU, the NVIDIA driver, the versions of the packages that
    matter, and NVIDIA's tools (:mod:`aft_export.environment`)."""
    facts = platform_facts()
    env = {k: facts[k] for k in ("python", "platform", "machine")}
    try:
        env.update(tensorrt_environment())
    except Exception as exc:  # noqa: BLE001 - a broken TensorRT/CUDA install is what this reports
        env["environment_error"] = f"{type(exc).__name__}: {exc}"
    tools = nvidia_tools()
    env.update(driver=tools["driver"], packages=distributions(PACKAGES), trtexec=tools["trtexec"],
               polygraphy=tools["polygraphy"])  # fmt: skip
    return env


def tensorrt_missing(env: dict) -> str | None:
    """None when standard TensorRT engines can be built here, else why not (one line)."""
    from aft_export.tensorrt.library import import_tensorrt, require_gpu

    try:
        import_tensorrt()
        require_gpu(env)
    except AFTExportError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - e.g. libnvinfer missing behind the Python module
        return f"TensorRT does not load here: {type(exc).__name__}: {exc}"
    return None


def generation(version: str | None) -> str | None:
    """The block of a verification script for this TensorRT version (``trt8``, ``trt10``, ``trt11``)."""
    major = int(version.split(".")[0]) if version and version.split(".")[0].isdigit() else None
    return {8: "trt8", 10: "trt10", 11: "trt11"}.get(major)


def first_error(text: str) -> str:
    """The line that says what went wrong: aft-export's one-line ``error:``, else the last
    line of a traceback, else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern, pick in ((r"(?i)^error:", 0), (r"^[\w.]*(Error|Exception)\b", -1)):
        found = [line for line in lines if re.match(pattern, line)]
        if found:
            return found[pick]
    return lines[-1] if lines else ""


# ---------------------------------------------------------------- the checks


def resolve_model(model: str) -> Path:
    """A checkpoint (or model spec) file, or the name of a zoo model."""
    path = Path(model)
    if path.is_file():
        return path.resolve()
    if "/" not in model and (zoo_dir() / f"{model}.pt").is_file():
        return zoo_dir() / f"{model}.pt"
    zoo = ", ".join(sorted(p.stem for p in zoo_dir().glob("*.pt")))
    raise AFTExportError(f"{model} is neither a checkpoint file nor a zoo model ({zoo}); give one of those")


def _absolute(value: str) -> str:
    """A path the user gave, made absolute (the checks run in the run directory); a named
    data set such as ``cifar10:test`` stays as it is."""
    return str(Path(value).resolve()) if os.path.lexists(value) else value


class _Runner:
    """Runs and records the checks in ``work``, one line each through ``log``."""

    def __init__(self, work: Path, result: DoctorResult, timeout: float, log: Callable[[str], None]) -> None:
        self.work, self.result, self.timeout, self.log = work, result, timeout, log
        (work / "logs").mkdir()

    def skip(self, name: str, why: str, command: list[str] | None = None) -> Check:
        return self._record(Check(name, shlex.join(command) if command else "", "skipped", detail=why))

    def run(self, name: str, command: list[str], needs=(), ok_codes=(EXIT_OK,)) -> Check:
        missing = [p for p in needs if not (self.work / p).is_file()]
        if missing:
            return self.skip(name, f"needs {', '.join(missing)}, which an earlier check did not produce", command)
        log = Path("logs") / f"{len(self.result.checks) + 1:02d}-{re.sub(r'[^A-Za-z0-9]+', '-', name)}.log"
        check = Check(name, shlex.join(command), log=str(log))
        t0 = time.perf_counter()
        try:
            r = subprocess.run(command, check=False, cwd=self.work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, text=True, errors="replace", timeout=self.timeout,
                               env=_child_env())  # fmt: skip
            output, check.exit_code = r.stdout, r.returncode
            check.status = "ok" if r.returncode in ok_codes else "failed"
        except subprocess.TimeoutExpired as exc:
            output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            output += said("\ntimed out after {timeout_got:.0f} s ({timeout})", "doctor", timeout_got=self.timeout)
            check.status = "failed"
        except OSError as exc:  # the program itself is missing or not executable
            output, check.status = f"error: cannot run {command[0]}: {exc}", "failed"
        check.seconds = round(time.perf_counter() - t0, 2)
        atomic_write_text(self.work / log, output)
        check.tail = "\n".join(output.splitlines()[-TAIL_LINES:])
        check.detail = first_error(output) if check.status == "failed" else ""
        return self._record(check)

    def call(self, name: str, fn: Callable[[], str], command: str) -> Check:
        """A check made in this process (a library call), timed and recorded like the others."""
        check = Check(name, command)
        t0 = time.perf_counter()
        try:
            check.detail, check.status, check.exit_code = fn() or "", "ok", EXIT_OK
        except Exception as exc:  # noqa: BLE001 - recorded as the check's failure
            check.status, check.exit_code, check.detail = "failed", EXIT_CHECK_FAILED, f"{type(exc).__name__}: {exc}"
        check.seconds = round(time.perf_counter() - t0, 2)
        return self._record(check)

    def _record(self, check: Check) -> Check:
        self.result.checks.append(check)
        self.log(format_check(check))
        write_report(self.work, self.result)
        return check


def format_check(check: Check) -> str:
    """One line: status, name, seconds, and the reason or what went wrong."""
    mark = {"ok": "ok", "failed": "FAILED", "skipped": "skipped"}[check.status]
    detail = " ".join(check.detail.split())
    detail = detail if len(detail) <= 160 else detail[:157] + "..."
    return f"{mark:7s}  {check.name:{NAME_WIDTH}s}  {check.seconds:6.1f} s" + (f"  {detail}" if detail else "")


def write_report(run_dir: Path, result: DoctorResult) -> Path:
    return atomic_write_text(run_dir / REPORT, json.dumps(result.to_dict(), indent=2) + "\n")


def _aft(*args) -> list[str]:
    return [sys.executable, "-m", "aft_export.cli", *map(str, args)]


def _child_env() -> dict:
    """The checks run in the run directory: the children import this very aft_export (a
    source checkout used without installing included)."""
    here = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here + (os.pathsep + path if path else "")}


def default_run_dir(model: Path) -> Path:
    return Path("runs") / f"doctor-{model.stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def run_doctor(model: str, opts: DoctorOptions, log: Callable[[str], None] = print) -> DoctorResult:
    """Every check, in a run directory built under a temporary name (see the module doc)."""
    ckpt = resolve_model(model)
    final = Path(opts.output) if opts.output else default_run_dir(ckpt)
    # no data given: each check takes the checkpoint's test data, else cifar10:test, by every command's rule
    data = _absolute(opts.data) if opts.data else None
    calib = _absolute(opts.calib) if opts.calib else str(default_calibration())
    env = environment()
    no_trt = tensorrt_missing(env)
    env["tensorrt_missing"] = no_trt
    log(f"TensorRT {env.get('tensorrt')}, TensorRT-RTX {env.get('tensorrt_rtx')}, CUDA {env.get('cuda')}, "
        f"GPU {env.get('gpu')} (compute capability {env.get('compute_capability')}), driver {env.get('driver')}")
    with claim_output(final, directory=True), atomic_directory(final) as work:
        result = DoctorResult(str(final), env)
        c = _Runner(work, result, opts.timeout, log)
        _checks(c, ckpt, data, calib, opts, env, no_trt)
        write_report(work, result)
    return result


def _checks(c: _Runner, ckpt: Path, data: str | None, calib: str, opts: DoctorOptions, env: dict,
            no_trt: str | None) -> None:  # fmt: skip
    name = ckpt.stem
    onnx = {p: f"{name}.onnx" if p == "fp32" else f"{name}.{p}.onnx" for p in ARTIFACT_PRECISIONS}
    engine = {p: f"{name}.engine" if p == "fp32" else f"{name}.{p}.engine" for p in ARTIFACT_PRECISIONS}

    given = ["--data", data] if data else []
    c.run("export", _aft("export", ckpt, "-o", onnx["fp32"], *given))
    count = ["--images", opts.calib_images] if opts.calib_images else []
    for p in ("fp16", "int8"):
        c.run(f"quantize {p}", _aft("quantize", onnx["fp32"], "--precision", p, "--calib", calib, *count, "-o",
                                    onnx[p]), needs=[onnx["fp32"]])  # fmt: skip
    for p in ARTIFACT_PRECISIONS:
        cmd = _aft("build", onnx[p], "-o", engine[p], "--library", "tensorrt", "--batch-profile", BUILD_PROFILE,
                   "--timing-cache", "timing.cache")  # fmt: skip
        if no_trt:
            c.skip(f"build {p}", no_trt, cmd)
        else:
            c.run(f"build {p}", cmd, needs=[onnx[p]])
    _verification(c, onnx, env, no_trt)

    def made(names) -> list[str]:
        return [n for n in names if (c.work / n).is_file()]

    artifacts = made([*onnx.values(), *engine.values()])
    parity = [*given, "--images", opts.parity_images]
    images = ["--images", opts.eval_images] if opts.eval_images else []
    iters = ["--iters", opts.bench_iters]
    if not artifacts:
        c.skip("parity", "no artifact was produced")
    else:
        c.run("parity", _aft("parity", ckpt, *artifacts, *parity))
    c.run("eval", _aft("eval", ckpt, *artifacts, *given, *images))
    if not artifacts:
        c.skip("bench", "no artifact was produced")
    else:
        c.run("bench", _aft("bench", *artifacts, *iters))

    # the CUDA paths that need no TensorRT: the checkpoint in PyTorch on the GPU and the ONNX
    # files in ONNX Runtime's CUDA provider, against the CPU PyTorch reference; 3 (an artifact
    # skipped: ONNX Runtime without CUDA) is recorded, not failed, as the command says it
    onnx_files = made(onnx.values())
    cuda = ["--backend", "onnxruntime-cuda"]
    if env.get("gpu") is None:
        for check in ("parity CUDA", "eval CUDA", "bench CUDA"):
            c.skip(check, "no CUDA GPU is visible to PyTorch here")
        return
    c.run("parity CUDA", _aft("parity", ckpt, ckpt, *onnx_files, *parity, *cuda), ok_codes=(0, 3))
    c.run("eval CUDA", _aft("eval", ckpt, *onnx_files, *given, *images, *cuda), ok_codes=(0, 3))
    batches = [a for b in CUDA_BATCHES for a in ("--batch-size", b)]
    c.run("bench CUDA", _aft("bench", ckpt, *onnx_files, *iters, *batches, *cuda), ok_codes=(0, 3))


def _verification(c: _Runner, onnx: dict, env: dict, no_trt: str | None) -> None:
    """Write each artifact's trtexec/polygraphy script, then run the block for this
    machine's TensorRT: NVIDIA's tools build and check the file, independently of us."""
    from aft_export.tensorrt.nvtools import write_verification_commands

    scripts = {}
    for p, file in onnx.items():
        if not (c.work / file).is_file():
            c.skip(f"verification script {p}", f"needs {file}, which an earlier check did not produce")
            continue

        def write(p=p, file=file) -> str:
            scripts[p] = write_verification_commands(c.work / file, batch=BUILD_PROFILE).name
            return scripts[p]

        call = f"aft_export.tensorrt.nvtools.write_verification_commands({file!r}, batch={BUILD_PROFILE!r})"
        c.call(f"verification script {p}", write, call)
    c.result.scripts = list(scripts.values())
    gen = generation(env.get("tensorrt"))
    for p, script in scripts.items():
        cmd = ["bash", script, gen or "trt10"]
        name = f"trtexec+polygraphy {p}"
        if no_trt:
            c.skip(name, no_trt, cmd)
        elif gen is None:
            c.skip(name, f"no verification block for TensorRT {env.get('tensorrt')}", cmd)
        elif env.get("trtexec") is None:
            c.skip(name, f"trtexec is neither on PATH nor at {JETPACK_TRTEXEC}", cmd)
        elif env.get("polygraphy") is None:
            c.skip(name, "polygraphy is not installed (pip install polygraphy)", cmd)
        else:
            c.run(name, cmd)


def summary(result: DoctorResult) -> list[str]:
    """The closing lines: counts, where the report is, and NVIDIA's own commands."""
    checks = result.checks
    lines = [(f"{len(checks)} checks: {sum(c.status == 'ok' for c in checks)} ok, {len(result.failed)} failed, "
              f"{len(result.skipped)} skipped; attach {Path(result.run_dir) / REPORT} to a bug report")]  # fmt: skip
    if result.scripts:
        gen = generation(result.environment.get("tensorrt"))
        lines.append("check the artifacts with NVIDIA's own tools (trtexec, polygraphy), independently of aft-export:")
        lines += [f"  bash {Path(result.run_dir) / s} {gen or 'trt11|trt10|trt8'}" for s in result.scripts]
    return lines

