"""``aft-export serve``: a real NVIDIA Triton Inference Server for ONNX files and engines.

The ``tritonserver`` 2.51 binary and its Python backend come from the ``nvidia-pytriton``
wheel (the ``serve`` extra); PyTriton's own Python code is not used. ``serve`` writes a
model repository into a private working directory, one Python backend model per endpoint
of each artifact (:mod:`aft_export.serving.spec`'s names and tensors, as in the repository
``aft-export triton-repo`` writes for a container), and starts ``tritonserver`` on it. The
model runs where Triton hands it the batch, in the Python backend stub
(:mod:`aft_export.serving.tritonmodel`): one hop, HTTP or gRPC to Triton to the stub and back.

- **Threads that fit**: the CPUs this process may run on (``taskset``; its affinity) are
  shared out among the model instances, one ONNX Runtime intra-op thread or more each,
  pools that sleep when idle, or as many OpenVINO inference threads (``backend`` openvino)
  (:func:`thread_plan`); printed at start.
- **Ready means ready**: the models load (and run a warm-up request) before Triton opens
  its ports (model control mode ``none``), and ``/v2/health/ready`` is strict.
- **Nothing to steal**: model control is off (nothing can load or unload a model), and the
  endpoints that change the server (model repository, shared memory, trace, logging) are
  closed to every request: restricted behind a header name that contains a colon, which
  no HTTP or gRPC request can carry (:data:`aft_export.serving.spec.CLOSED`). No key, token
  or password exists, on a command line or in an environment.
- **Stopping**: SIGINT or SIGTERM, at any moment (start-up included): Triton stops taking
  requests and finishes those in flight (up to ``drain_seconds``; at start-up none can be
  in flight, so the bound is a few seconds), every process it started ends, the working
  directory and the Python backend's shared memory are removed. A second signal stops at
  once. :func:`serve` returns the signal; the command line exits 128 + its number.

What the stub needs outside NVIDIA's containers: the stub built for this interpreter's
Python version copied into the backend directory; this interpreter's ``libpython`` first
on ``LD_LIBRARY_PATH`` (the stub loads whichever ``libpython3.X.so.1.0`` the dynamic linker
finds first, and a pyenv/conda/uv interpreter's standard library fails with the system's:
``'_thread.RLock' object has no attribute '_recursion_count'``), the wheel's bundled
libraries after it; this environment's ``bin`` first on ``PATH`` (the stub's Python finds
its ``sys.prefix``, and so the environment's site-packages, from the ``python3`` there);
and the directory of the running ``aft_export`` first on the stub's ``sys.path``, put there
by the generated ``model.py`` (the stub's interpreter ignores ``PYTHONPATH``), so that the
stub runs this very code, also from a source tree.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from aft_export.artifacts.kinds import ENGINE
from aft_export.errors import AFTExportError, Named, RuntimeMissing, said
from aft_export.fileio import atomic_write_bytes, atomic_write_text, copy_file, make_dirs, private_directory
from aft_export.options import BACKENDS, ServeOptions
from aft_export.runners.openvino import import_openvino
from aft_export.serving.tritonmodel import ENDPOINT_FILE, Endpoint
from aft_export.serving.spec import (IMAGE, TENSOR, WARMUP_DIR, WARMUP_IMAGE, ServedModel, check_names,
                                   closed_flags, config_text, describe, endpoint_input, endpoint_name,
                                   endpoint_outputs, warmup_image_file)  # fmt: skip

INSTALL = "pip install 'aft-export[serve]' (nvidia-pytriton, which ships tritonserver, and tritonclient)"
START_BOUND = 2  # seconds Triton gets to stop at start-up (no request can be in flight yet), then SIGKILL
UNLOAD_BOUND = 15  # seconds beyond the drain for the models to unload


@dataclass(frozen=True)
class Bundle:
    """The Triton pieces of the nvidia-pytriton wheel."""

    tritonserver: Path
    backend: Path  # libtriton_python.so and triton_python_backend_utils.py
    stub: Path  # the Python backend stub for this interpreter's Python version
    libs: Path  # the wheel's bundled shared libraries


def find_bundle() -> Bundle:
    """The wheel's files, without importing PyTriton; one line saying how to install them."""
    try:
        found = importlib.util.find_spec("pytriton")
    except (ImportError, ValueError):  # a broken or blocked installation
        found = None
    if found is None or not found.submodule_search_locations:
        raise AFTExportError(f"serving needs the serve extra (nvidia-pytriton is not installed): {INSTALL}")
    root = Path(next(iter(found.submodule_search_locations)))
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bundle = Bundle(root / "tritonserver" / "bin" / "tritonserver", root / "tritonserver" / "backends" / "python",
                    root / "tritonserver" / "python_backend_stubs" / version / "triton_python_backend_stub",
                    root.parent / "nvidia_pytriton.libs")  # fmt: skip
    if not bundle.stub.is_file():
        have = sorted(p.name for p in bundle.stub.parents[1].glob("*")) if bundle.stub.parents[1].is_dir() else []
        raise AFTExportError(f"nvidia-pytriton in {root} has no Python backend stub for Python {version} (it has "
                             f"{', '.join(have) or 'none'}); run aft-export on one of those Python versions")  # fmt: skip
    for path in (bundle.tritonserver, bundle.backend / "libtriton_python.so"):
        if not path.is_file():
            raise AFTExportError(f"nvidia-pytriton in {root} lacks {path.name}; reinstall it: {INSTALL}")
    return bundle


def python_backend_env(environ: dict | None = None) -> dict:
    """``environ`` (default ``os.environ``) with this interpreter's libpython directory
    first on ``LD_LIBRARY_PATH`` (see the module doc). Unchanged where the interpreter has
    no shared library there."""
    env = dict(os.environ if environ is None else environ)
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and soname and (Path(libdir) / soname).is_file():
        _first_on(env, "LD_LIBRARY_PATH", libdir)
    return env


def _first_on(env: dict, name: str, path: str) -> None:
    rest = [p for p in env.get(name, "").split(os.pathsep) if p and p != path]
    env[name] = os.pathsep.join([path, *rest])


def server_env(bundle: Bundle) -> dict:
    """The environment of ``tritonserver`` and its stubs (see the module doc): this
    process's, with the paths the stub needs first; nothing else added."""
    env = python_backend_env()
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (env.get("LD_LIBRARY_PATH"), str(bundle.libs)) if p)
    _first_on(env, "PATH", os.path.dirname(sys.executable))
    return env


def install_backend(bundle: Bundle, directory: Path) -> Path:
    """``directory`` as ``tritonserver --backend-directory`` takes it: the Python backend's
    library and utilities and the stub for this interpreter, copied into ``python/``."""
    backend = make_dirs(directory / "python")
    copy_file(bundle.backend / "libtriton_python.so", backend / "libtriton_python.so")
    copy_file(bundle.backend / "triton_python_backend_utils.py", backend / "triton_python_backend_utils.py")
    copy_file(bundle.stub, backend / "triton_python_backend_stub", executable=True)
    return directory


def model_source() -> str:
    """Every served model's ``model.py``: this very aft_export's model class."""
    root = str(Path(__file__).resolve().parents[2])
    return (f'"""aft-export serve: the model is aft_export.serving.tritonmodel.TritonPythonModel (generated)."""\n\n'
            f"import sys\n\nif {root!r} not in sys.path:\n    sys.path.insert(0, {root!r})\n\n"
            f"from aft_export.serving.tritonmodel import TritonPythonModel  # noqa: E402,F401\n")


def check_ports(opts: ServeOptions) -> None:
    """Refuse, before anything starts, a port another process holds on ``opts.host``."""
    host = opts.host
    for option in ("http_port", "grpc_port", "metrics_port"):
        port, what = getattr(opts, option), option.removesuffix("_port")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            # as Triton binds: a port whose last connections linger in TIME_WAIT is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise AFTExportError(said("port {port} on {host_got} ({what}) is in use; choose another with "
                                              "{option}", "serve", option=Named(option), port=port, host_got=host,
                                              what=what)) from None  # fmt: skip
                raise AFTExportError(f"cannot listen on {host}:{port} ({what}): {exc.strerror}") from None


def cpu_set() -> list[int]:
    """The CPUs this process may run on (what ``taskset`` gave it)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _ranges(cpus: list[int]) -> str:
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(f"{start}" if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)


@dataclass(frozen=True)
class ThreadPlan:
    """How the server's CPUs are shared out: ``models`` x ``instances`` model instances,
    each with ``threads`` of its ``runtime`` (an ONNX Runtime pool whose threads sleep when
    idle, or OpenVINO's inference threads)."""

    cpus: tuple[int, ...]
    models: int
    instances: int
    threads: int
    runtime: str = "ONNX Runtime"

    def describe(self) -> str:
        return (f"{len(self.cpus)} CPUs ({_ranges(list(self.cpus))}) for {self.models} models x {self.instances} "
                f"instance{'s' if self.instances > 1 else ''} x {self.threads} {self.runtime} "
                f"thread{'s' if self.threads > 1 else ''}")  # fmt: skip


def thread_plan(opts: ServeOptions, models: int, cpus: list[int] | None = None) -> ThreadPlan:
    """Each model instance gets an equal share of the CPUs (at least one thread), so that
    the instances together do not run more threads than there are CPUs; ``opts.threads``
    overrides the share."""
    cpus = cpus or cpu_set()
    share = max(1, len(cpus) // max(1, models * opts.instances))
    runtime = BACKENDS[opts.backend].title
    return ThreadPlan(tuple(cpus), models, opts.instances, opts.threads or share, runtime)


@dataclass
class Served:
    """What ran: the models, where they answered, the thread plan, and the signal that
    stopped it."""

    models: list[ServedModel]
    http: str
    grpc: str
    metrics: str
    plan: ThreadPlan
    signal: int | None = None


def server_args(bundle_dir: Path, repo: Path, opts: ServeOptions, shm_prefix: str, gpu: bool) -> list[str]:
    """``tritonserver``'s command line (public: nothing secret is on it)."""
    return [f"--model-repository={repo}", f"--backend-directory={bundle_dir}",
            "--model-control-mode=none", "--strict-readiness=true", "--exit-on-error=true",
            "--disable-auto-complete-config", f"--exit-timeout-secs={opts.drain_seconds}",
            f"--http-address={opts.host}", f"--http-port={opts.http_port}",
            f"--grpc-address={opts.host}", f"--grpc-port={opts.grpc_port}",
            f"--metrics-address={opts.host}", f"--metrics-port={opts.metrics_port}",
            f"--allow-gpu-metrics={'true' if gpu else 'false'}",
            *([] if gpu else ["--pinned-memory-pool-byte-size=0", "--cuda-memory-pool-byte-size=0:0"]),
            *closed_flags(),
            f"--backend-config=python,shm-region-prefix-name={shm_prefix}",
            "--log-verbose=0", "--log-info=false"]  # fmt: skip


def write_models(repo: Path, specs: list[ServedModel], opts: ServeOptions, plan: ThreadPlan, status: Path) -> None:
    """The model repository Triton loads: per artifact and endpoint, ``config.pbtxt``,
    ``1/model.py`` (which takes :class:`aft_export.serving.tritonmodel.TritonPythonModel`),
    ``1/endpoint.json`` and, for encoded images, the warm-up image."""
    for spec in specs:
        k = spec.k(opts.top_k)
        spec = replace(spec, path=spec.path.resolve())  # the stubs run in the working directory
        for endpoint in (TENSOR, IMAGE):
            name = endpoint_name(spec, endpoint)
            model = make_dirs(repo / name / "1")
            config = config_text(name, 'backend: "python"', spec, [endpoint_input(spec, endpoint)],
                                 endpoint_outputs(spec, k), queue_delay_us=opts.queue_delay_us,
                                 instances=(plan.instances, "KIND_CPU"), warmup=True)  # fmt: skip
            atomic_write_text(repo / name / "config.pbtxt", config)
            atomic_write_text(model / "model.py", model_source())
            described = Endpoint(spec, endpoint, k, opts.backend, plan.threads, str(status / name))
            atomic_write_text(model / ENDPOINT_FILE, described.to_json())
            if endpoint == IMAGE:
                atomic_write_bytes(make_dirs(repo / name / WARMUP_DIR) / WARMUP_IMAGE, warmup_image_file(spec))


def _pdeathsig() -> None:
    """In the child before exec: SIGINT to it when this process dies, even by SIGKILL, so
    Triton drains and stops instead of running on alone."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Relay(threading.Thread):
    """Triton's output: kept while it starts (shown only if it fails for a reason of its
    own), then passed on to this process's stderr."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream, self.lines, self.passing = stream, deque(maxlen=200), threading.Event()

    def run(self) -> None:
        for raw in iter(self.stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith("Signal (") and line.endswith(") received."):  # serve says it, with the name
                continue
            if self.passing.is_set():
                print(line, file=sys.stderr, flush=True)
            else:
                self.lines.append(line)

    def start_passing(self, show_kept: bool = False) -> None:
        """From now on pass every line on; the lines kept so far are shown (``show_kept``)
        or dropped (start-up chatter: pinned memory and CUDA on a machine without a GPU)."""
        for line in self.lines if show_kept else ():
            print(line, file=sys.stderr)
        self.lines.clear()
        self.passing.set()


def _bracketed(host: str) -> str:
    """An IPv6 address in brackets, as URLs write it."""
    return f"[{host}]" if ":" in host else host


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # Triton itself, never an http_proxy


def _ready(url: str) -> bool:
    try:
        with _DIRECT.open(f"{url}/v2/health/ready", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _group_running(pgid: int) -> bool:
    """Whether a process of the group ``pgid`` (Triton's: it and its stubs) still runs (a
    zombie waiting for its parent to collect it runs nothing), from /proc."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _remove_shared_memory(prefix: str) -> None:
    """The Python backend's regions (``/dev/shm/<prefix>...``) that a killed server left."""
    for path in Path("/dev/shm").glob(f"{prefix}*"):
        try:
            path.unlink()
        except OSError:
            pass


@dataclass
class _Stop:
    """The signals received (SIGINT, SIGTERM): the first asks for a drain, a second for now."""

    signals: list[int] = field(default_factory=list)
    event: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)  # set once every model is ready
    served: Served | None = None  # what serve() serves, once it knows

    def __call__(self, signum, _frame) -> None:
        self.signals.append(signum)
        self.event.set()

    @property
    def now(self) -> bool:
        return len(self.signals) > 1


def _shutdown(proc: subprocess.Popen, stop: _Stop, bound: float, log, starting: bool) -> None:
    """SIGINT to Triton (it stops taking requests, finishes those in flight, unloads the
    models); after ``bound`` seconds, or at a second signal, SIGKILL to its whole process
    group. Returns once every process of the group has ended."""
    deadline = time.monotonic() + bound
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass
    killed = False
    while proc.poll() is None or _group_running(proc.pid):
        if not killed and (stop.now or time.monotonic() > deadline):
            why = "a second signal" if stop.now else f"Triton still running after {bound:.0f} s"
            log(f"stopping now ({why}): " + ("it was still starting" if starting else "the requests in flight are "
                                             "dropped"))  # fmt: skip
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            killed = True
        time.sleep(0.05)


def serve(artifacts: list[str], opts: ServeOptions | None = None, log=print, stop: _Stop | None = None) -> Served:
    """Serve ``artifacts`` until SIGINT or SIGTERM (main thread only); returns once
    every process it started has ended, with the signal that stopped it. Raises
    :class:`AFTExportError` for bad input, before anything listens (an artifact the runner
    cannot load: once the server has reported it, with nothing left running). ``stop``: a
    :class:`_Stop` the caller sets instead of a signal (the Python API's handle, which runs this
    in a thread of its own: then no signal handler is installed)."""
    opts = opts or ServeOptions()
    if not artifacts:
        raise AFTExportError("give one or more ONNX files or engines to serve")
    # the files first: one that cannot be served is said so before anything is asked of this machine
    specs = [describe(a, opts.max_batch, preprocessing=opts.preprocessing) for a in artifacts]
    bundle = find_bundle()
    runtime = BACKENDS[opts.backend]
    if runtime.checked_before_serving:  # missing, or a CPU without its units: said here, not by a model that fails to load
        import_openvino()
        why = runtime.missing(gpu=True)
        if why:
            raise RuntimeMissing(said("{backend_got} cannot serve here: {why}; serve with {backend_set}", "serve",
                                      backend_got=Named("backend", opts.backend), why=why,
                                      backend_set=Named("backend", "openvino")))  # fmt: skip
    check_names(specs)
    check_ports(opts)
    plan = thread_plan(opts, 2 * len(specs))
    host = _bracketed(opts.host)
    served = Served(specs, f"http://{host}:{opts.http_port}", f"{host}:{opts.grpc_port}",
                    f"http://{host}:{opts.metrics_port}/metrics", plan)  # fmt: skip
    handed = stop is not None
    stop = stop if handed else _Stop()
    stop.served = served
    previous = {} if handed else {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    shm_prefix = f"aft-export-serve-{os.getpid()}-{id(stop):x}-"  # one per server, also in one process
    try:
        log(said("threads: {value} ({instances}, {threads}); queue delay {queue_delay_us_got} us ({queue_delay_us})",
                 "serve", value=plan.describe(), queue_delay_us_got=opts.queue_delay_us))  # fmt: skip
        with private_directory("aft-export-serve-") as work:
            _run(bundle, specs, opts, served, work, shm_prefix, stop, log)
    finally:
        _remove_shared_memory(shm_prefix)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    served.signal = stop.signals[0] if stop.signals else None
    log("stopped: every process it started has ended")
    return served


def _run(bundle: Bundle, specs, opts: ServeOptions, served: Served, work: Path, shm_prefix: str, stop: _Stop,
         log) -> None:
    """Write the repository in ``work``, start Triton, wait for it to be ready, then for a
    stop; Triton is stopped (and waited for) whatever happens."""
    backends = install_backend(bundle, work / "backends")
    status = make_dirs(work / "status")
    write_models(make_dirs(work / "repo"), specs, opts, served.plan, status)
    if stop.event.is_set():
        return
    gpu = BACKENDS[opts.backend].gpu or any(s.kind is ENGINE for s in specs)
    args = [str(bundle.tritonserver), *server_args(backends, work / "repo", opts, shm_prefix, gpu)]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=server_env(bundle), cwd=work, start_new_session=True, preexec_fn=_pdeathsig)  # fmt: skip
    relay = _Relay(proc.stdout)
    relay.start()
    ready = False
    host = _bracketed(opts.host)
    local = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "[::]": "[::1]"}.get(host, host)  # where to ask if it is ready
    try:
        while not _ready(f"http://{local}:{opts.http_port}"):
            if proc.poll() is not None:
                relay.join(timeout=5)
                _failed_start(proc.returncode, status, relay)
            if stop.event.wait(0.1):
                log("stopping during start-up: no request was taken")
                return
        relay.start_passing()
        names = ", ".join(f"{s.name} and {s.image_model} ("
                          + (f"fixed batch {s.fixed_batch}" if s.fixed_batch else f"batches up to {s.max_batch}") + ")"
                          for s in specs)  # fmt: skip
        log(f"serving {names}: HTTP {served.http}, gRPC {served.grpc}, metrics {served.metrics}; every model is "
            f"ready (Ctrl+C or SIGTERM stops)")  # fmt: skip
        sys.stdout.flush()
        ready = True
        stop.ready.set()
        while not stop.event.wait(0.2):
            if proc.poll() is not None:
                raise RuntimeError(f"tritonserver stopped by itself (exit status {proc.returncode}); its log is above")
        name = f" ({signal.Signals(stop.signals[0]).name})" if stop.signals else ""
        log(f"stopping{name}: Triton finishes the requests in flight (at most {opts.drain_seconds} s)")
    finally:
        _shutdown(proc, stop, opts.drain_seconds + UNLOAD_BOUND if ready else START_BOUND, log, starting=not ready)
        relay.join(timeout=2)
        proc.stdout.close()


def _failed_start(code: int, status: Path, relay: _Relay) -> None:
    """Triton ended while starting: a model could not load the artifact (a user error, one
    line), or something else went wrong (its log, and a traceback)."""
    reports = sorted(status.glob("*"))
    if reports:
        first = json.loads(reports[0].read_text())
        raise AFTExportError(first["error"])
    relay.start_passing(show_kept=True)
    raise RuntimeError(f"tritonserver stopped while starting (exit status {code}); its log is above")
