"""TensorRT-RTX's real ONNX parser, for tests that parse graphs live (no GPU needed).

Its parser is built from the same onnx-tensorrt source as TensorRT 10/11's, and it runs
on a CPU. CI installs it (the ``rtx`` extra), so there a missing library fails; elsewhere
the tests that need it are skipped with the install line, as tests/byo/publicpkgs.py does
for the public AFT packages.

Each :func:`parse` makes its own builder, network and parser (the library is imported
once) and records everything the parser logged. One caveat for tests about warnings: the
parser logs "A node named X already exists ..." once per name per *process* (a static set
in onnx-tensorrt's ``ImporterContext::addLayerOutputTensors``), so a test of names should
also look the tensors up by name (:meth:`Parsed.tensor`), which no earlier parse changes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field


from tests.conftest import need_module

INSTALL = "pip install tensorrt-rtx-cu12==1.7.1.116"
DUPLICATE_NAME = "already exists, the output tensors of this new instance will not be queryable"


def need_rtx():
    """The ``tensorrt_rtx`` module; where it is missing a skip with the install line, and
    under CI (which installs it) a failure."""
    return need_module("tensorrt_rtx", INSTALL)


@functools.lru_cache(maxsize=1)
def _logger_class():
    trt = need_rtx()

    class Recorder(trt.ILogger):
        """Keeps every message the builder and parser log, with its severity."""

        def __init__(self):
            trt.ILogger.__init__(self)
            self.messages: list[tuple[str, str]] = []

        def log(self, severity, msg):
            self.messages.append((severity.name, msg))

    return Recorder


@functools.lru_cache(maxsize=1)
def _logger():
    """The process's one recorder. TensorRT keeps the first logger a process registers and keeps
    calling it; a logger per parse would be freed while TensorRT still holds it (a segfault, seen
    when the RoiAlign importer looks up its plugin after a hundred parses), so every parse shares
    this one and takes the messages logged during it."""
    return _logger_class()()


@dataclass
class Parsed:
    ok: bool
    errors: list[str]  # one line per IParserError: code, description, node, operator
    messages: list[tuple[str, str]] = field(default_factory=list)  # (severity, text), all the parser logged
    network: object = None
    parser: object = None
    builder: object = None  # kept: the network and parser must not outlive it

    def warnings(self, containing: str = "") -> list[str]:
        return [m for s, m in self.messages if s == "WARNING" and containing in m]

    def tensor(self, node_name: str, index: int = 0):
        """The ITensor the parser made for output ``index`` of the ONNX node ``node_name``
        (inlined function bodies included), or None."""
        return self.parser.get_layer_output_tensor(node_name, index)


def parse(model) -> Parsed:
    """Parse an onnx.ModelProto (or its bytes) with TensorRT-RTX's ONNX parser, in memory."""
    trt = need_rtx()
    data = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
    logger = _logger()
    start = len(logger.messages)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # TensorRT-RTX networks are always strongly typed
    parser = trt.OnnxParser(network, logger)
    ok = bool(parser.parse(data))
    errors = []
    for i in range(parser.num_errors):
        e = parser.get_error(i)
        errors.append(f"[{int(e.code())}] {e.desc()} (node {e.node_name() or e.node()} [{e.node_operator()}])")
    return Parsed(ok, errors, logger.messages[start:], network, parser, builder)


@dataclass
class Built:
    ok: bool
    errors: list[str]  # what the builder logged as errors (its first lines say why)
    seconds: float
    engine_bytes: int | None = None


def build(parsed: Parsed, shapes: dict | None = None) -> Built:
    """Build a parsed network with TensorRT-RTX's builder, ahead of time on the CPU, in memory (the
    engine is thrown away). A dynamic input dimension is built for size 1 unless ``shapes`` gives
    the input's whole shape (one profile, min = opt = max); a shape tensor input gets ones."""
    import time

    need_rtx()
    network, builder = parsed.network, parsed.builder
    config = builder.create_builder_config()
    dynamic = [network.get_input(i) for i in range(network.num_inputs)
               if any(d < 0 for d in network.get_input(i).shape) or network.get_input(i).is_shape_tensor]  # fmt: skip
    if dynamic:
        profile = builder.create_optimization_profile()
        for t in dynamic:
            shape = tuple((shapes or {}).get(t.name) or (1 if d < 0 else d for d in t.shape))
            if t.is_shape_tensor:
                values = [1] * (shape[0] if shape else 1)
                profile.set_shape_input(t.name, values, values, values)
            else:
                profile.set_shape(t.name, shape, shape, shape)
        config.add_optimization_profile(profile)
    logger = _logger()
    start = len(logger.messages)
    t0 = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - t0
    errors = [m for s, m in logger.messages[start:] if s in ("ERROR", "INTERNAL_ERROR")]
    return Built(serialized is not None, errors, seconds, None if serialized is None else serialized.nbytes)
