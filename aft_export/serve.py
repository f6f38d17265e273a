"""``aft-export serve``: a real NVIDIA Triton Inference Server for ONNX files and engines.

PyTriton (``nvidia-pytriton``, the ``serve`` extra) ships the ``tritonserver`` binary with
its Python backend and binds Python functions to it: Triton answers HTTP and gRPC (the
KServe v2 protocol) and Prometheus metrics, batches requests dynamically and hands each
batch to a function here, which runs it through the project's runners (ONNX Runtime on
the CPU, CUDA or TensorRT provider; engines through TensorRT). The models, their tensors
and names are those of :mod:`aft_export.tritonspec`, as in the repository
``aft-export triton-repo`` writes for a Triton container.

- ``<name>`` (the normalised tensor) is batched dynamically up to ``max_batch``.
- ``<name>_image`` (encoded images) decodes each request on its own, without dynamic
  batching: PyTriton answers the requests Triton merges into one batch with one result,
  so an undecodable image would fail every request merged with it; alone, it fails only
  its own. A request still carries up to ``max_batch`` images.
- Everything listens on ``host`` (default 127.0.0.1), the metrics too: Triton's own
  default is every interface. Endpoints that change the server (model loading,
  shared memory, tracing, logging) need PyTriton's access token, which is never shown.
- SIGINT and SIGTERM stop it: Triton stops taking requests, finishes those in flight
  (up to ``drain_seconds``), then every process it started ends.

The one trap of PyTriton outside NVIDIA's containers: its Python backend stub is linked
against ``libpython3.X.so.1.0`` and loads whichever the dynamic linker finds first, the
system's when the running interpreter is another build (pyenv, conda, uv), and then
fails at model load (``'_thread.RLock' object has no attribute '_recursion_count'``).
:func:`python_backend_env` puts this interpreter's own library directory first on
``LD_LIBRARY_PATH`` for the server and everything it starts.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import sys
import sysconfig
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export.data import load_image, normalize
from aft_export.errors import AFTExportError
from aft_export.options import ServeOptions
from aft_export.runners import load_runner
from aft_export.tritonspec import IMAGE_INPUT, TOPK_INDEX, TOPK_LABEL, ServedModel, check_names, describe, topk

INSTALL = "pip install 'aft-export[serve]' (nvidia-pytriton and tritonclient)"
# endpoints that change the server: only PyTriton itself, with its token, may use them.
# Health, metadata, inference and statistics stay open.
RESTRICTED = ("shared-memory", "model-repository", "trace", "logging")


def import_pytriton():
    """PyTriton's entry points, or one line saying how to install them."""
    try:
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig
    except ImportError as exc:
        raise AFTExportError(f"serving needs the serve extra ({exc}): {INSTALL}") from None
    return Triton, TritonConfig, TritonSecurityConfig, ModelConfig, Tensor, DynamicBatcher


def python_backend_env(environ: dict | None = None) -> dict:
    """``environ`` (default ``os.environ``) with this interpreter's libpython directory
    first on ``LD_LIBRARY_PATH``, so that the Triton Python backend stub loads the
    ``libpython3.X.so.1.0`` of the interpreter whose standard library it runs (see the
    module doc). Unchanged where the interpreter has no shared library there."""
    env = dict(os.environ if environ is None else environ)
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if not libdir or not soname or not (Path(libdir) / soname).is_file():
        return env
    rest = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and p != libdir]
    env["LD_LIBRARY_PATH"] = os.pathsep.join([libdir, *rest])
    return env


def check_ports(opts: ServeOptions) -> None:
    """Refuse, before anything starts, a port another process holds on ``opts.host``."""
    host = opts.host
    for option in ("http_port", "grpc_port", "metrics_port"):
        port, what = getattr(opts, option), option.removesuffix("_port")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise AFTExportError(f"port {port} on {host} ({what}) is in use; choose another with "
                                         f"`{option}`") from None  # fmt: skip
                raise AFTExportError(f"cannot listen on {host}:{port} ({what}): {exc.strerror}") from None


@dataclass
class Served:
    """What runs: the models, and where they answer."""

    models: list[ServedModel]
    http: str
    grpc: str
    metrics: str


def _outputs(spec: ServedModel, logits: np.ndarray, k: int) -> dict[str, np.ndarray]:
    idx = topk(logits, k)
    labels = np.array([[spec.classes[i].encode() for i in row] for row in idx], dtype=object).reshape(idx.shape)
    return {spec.output_name: logits.astype(np.float32), TOPK_INDEX: idx, TOPK_LABEL: labels}


def tensor_function(spec: ServedModel, runner, k: int):
    """Triton's batch of requests of normalised images -> one run of the runner, split back."""

    def infer(requests):
        xs = [np.ascontiguousarray(r[spec.input_name], dtype=np.float32) for r in requests]
        sizes = [len(x) for x in xs]
        x = np.concatenate(xs) if len(xs) > 1 else xs[0]
        out = _outputs(spec, runner.logits(x, batch_size=max(len(x), 1)), k)
        bounds = np.cumsum([0, *sizes])
        return [{n: v[a:b] for n, v in out.items()} for a, b in zip(bounds[:-1], bounds[1:])]

    return infer


def decode_images(spec: ServedModel, encoded: np.ndarray) -> np.ndarray:
    """Encoded images -> the normalised float32 NCHW batch, exactly as ``eval`` does it
    (:func:`~aft_export.data.load_image`, :func:`~aft_export.data.normalize`)."""
    flat = encoded.reshape(-1)
    images = [load_image(bytes(b), spec.input_size[1], name=f"{i} of this request") for i, b in enumerate(flat)]
    return normalize(np.stack(images), spec.mean, spec.std).numpy()


def image_function(spec: ServedModel, runner, k: int):
    """One request of encoded images (never merged with others: see the module doc)."""

    def infer(requests):
        results = []
        for r in requests:
            x = decode_images(spec, r[IMAGE_INPUT])
            results.append(_outputs(spec, runner.logits(x, batch_size=max(len(x), 1)), k))
        return results

    return infer


def _runners(spec: ServedModel, opts: ServeOptions) -> list:
    threads = opts.threads or (0 if opts.instances == 1 else max(1, (os.cpu_count() or 1) // opts.instances))
    runners = [load_runner(str(spec.path), providers=opts.provider, threads=threads, preprocessing=spec.preprocessing)
               for _ in range(opts.instances)]  # fmt: skip
    runners[0].check_batch(spec.fixed_batch or spec.max_batch, "max_batch")
    return runners


def serve(artifacts: list[str], opts: ServeOptions | None = None, log=print,
          stop: threading.Event | None = None) -> Served:
    """Serve ``artifacts`` until SIGINT or SIGTERM (or ``stop`` is set); returns once every
    process it started has ended. Raises :class:`AFTExportError` for bad input, before
    anything listens."""
    opts = opts or ServeOptions()
    if not artifacts:
        raise AFTExportError("give one or more ONNX files or engines to serve")
    Triton, TritonConfig, TritonSecurityConfig, ModelConfig, Tensor, DynamicBatcher = import_pytriton()
    specs = [describe(a, opts.max_batch, preprocessing=opts.preprocessing) for a in artifacts]
    check_names(specs)
    check_ports(opts)
    runners = {s.name: (_runners(s, opts), _runners(s, opts)) for s in specs}

    os.environ.update(python_backend_env())  # PyTriton copies os.environ for tritonserver
    logging.getLogger("pytriton").setLevel(logging.WARNING)
    config = TritonConfig(http_address=opts.host, http_port=opts.http_port, grpc_address=opts.host,
                          grpc_port=opts.grpc_port, metrics_address=opts.host, metrics_port=opts.metrics_port,
                          exit_timeout_secs=opts.drain_seconds, log_verbose=0)  # fmt: skip
    security = TritonSecurityConfig(restricted_endpoints=list(RESTRICTED))
    stop = stop or threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    triton = Triton(config=config, security_config=security)
    try:
        for spec in specs:
            tensors, images = runners[spec.name]
            k = spec.k(opts.top_k)
            batching = dict(batching=spec.fixed_batch is None, max_batch_size=spec.max_batch)
            outputs = [Tensor(name=spec.output_name, dtype=np.float32, shape=tuple(spec.batched(len(spec.classes)))),
                       Tensor(name=TOPK_INDEX, dtype=np.int64, shape=tuple(spec.batched(k))),
                       Tensor(name=TOPK_LABEL, dtype=bytes, shape=tuple(spec.batched(k)))]  # fmt: skip
            batcher = None if spec.fixed_batch else DynamicBatcher(max_queue_delay_microseconds=opts.queue_delay_us)
            triton.bind(model_name=spec.name, infer_func=[tensor_function(spec, r, k) for r in tensors],
                        inputs=[Tensor(name=spec.input_name, dtype=np.float32, shape=tuple(spec.dims))],
                        outputs=outputs, config=ModelConfig(batcher=batcher, **batching))  # fmt: skip
            triton.bind(model_name=spec.image_model, infer_func=[image_function(spec, r, k) for r in images],
                        inputs=[Tensor(name=IMAGE_INPUT, dtype=bytes, shape=tuple(spec.batched(1)))],
                        outputs=outputs, config=ModelConfig(batcher=None, **batching))  # fmt: skip
        triton.run()
        host = f"[{opts.host}]" if ":" in opts.host else opts.host
        served = Served(specs, f"http://{host}:{opts.http_port}", f"{host}:{opts.grpc_port}",
                        f"http://{host}:{opts.metrics_port}/metrics")  # fmt: skip
        names = ", ".join(f"{s.name} and {s.image_model} ("
                          + (f"fixed batch {s.fixed_batch}" if s.fixed_batch else f"batches up to {s.max_batch}") + ")"
                          for s in specs)  # fmt: skip
        log(f"serving {names}: HTTP {served.http}, gRPC {served.grpc}, metrics {served.metrics} "
            f"(Ctrl+C or SIGTERM stops)")  # fmt: skip
        sys.stdout.flush()
        while not stop.wait(0.5):
            if not triton.is_alive():
                raise RuntimeError("the Triton server stopped by itself; its log is above")
        log("stopping: finishing the requests in flight")
        return served
    finally:
        triton.stop()  # SIGINT to tritonserver, which drains; then PyTriton's handlers and workspace
        for sig, handler in previous.items():
            signal.signal(sig, handler)
