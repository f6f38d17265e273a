"""OpenVINO: an ONNX file, or a graph in memory, on OpenVINO's CPU plugin.

- **Every file we write**: OpenVINO's ONNX front end does not inline model-local functions of
  a custom domain, so the runner inlines the ``com.aft`` functions of the default export in
  memory first (:func:`aft_export.artifacts.graph.inline_functions`, the way TensorRT's parser does);
  the file on disk is not touched.
- **fp32 means fp32**: the CPU plugin's default inference precision is bf16 on CPUs with bf16
  units (AMX, AVX512-BF16), which would put an fp32 file outside the fp32 parity limit, so
  the ``openvino`` runtime asks for f32; fp16 and int8 graphs compute in the precision their
  Q/DQ and casts define (OpenVINO's low-precision transformations run the Q/DQ regions in int8).
- **bf16 where asked**: the ``openvino-bf16`` runtime asks for bf16 (``compute="bf16"``), what
  the CPU plugin picks by itself on such CPUs: the fp32 parts of any file (all of an fp32
  file, what lies outside the Q/DQ regions of an int8 one) run in bf16, and parity holds the
  outputs to the bf16 limits (:func:`aft_export.verify.compare.judged_precision`). Where
  OpenVINO says the CPU cannot compute in bf16 (its ``OPTIMIZATION_CAPABILITIES`` lack BF16:
  it would run fp32 and call it bf16), the runner refuses to be made
  (:class:`~aft_export.errors.NotForThisCPU`: the stages report it as skipped).
- **Two hints**: a batch of up to :data:`OPENVINO_LATENCY_MAX_BATCH`
  images runs on a model compiled with the LATENCY hint (one request, every thread on it); a
  larger one on a model compiled with the THROUGHPUT hint, split over OpenVINO's optimal
  number of infer requests that run in parallel streams, as its ``benchmark_app`` does. Each
  is compiled on first use. The split changes no number: each image's logits are those of
  the unsplit batch (``tests/runners/test_openvino.py``).
- **Not for this CPU**: on an x86 CPU without VNNI, OpenVINO's int8 kernels add pairs of
  u8 x s8 products in saturating 16 bits, which full-range (8-bit) int8 weights overflow:
  such a file is refused before it runs (:class:`~aft_export.errors.NotForThisCPU`, which
  the stages report as skipped), naming the file that is safe there (7-bit weights, the
  portable target's int8). The weights are judged from the graph
  (:func:`aft_export.artifacts.graph.int8_weight_bits`), so other tools' files are judged too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from aft_export.errors import AFTExportError, NotForThisCPU, RuntimeMissing
from aft_export.artifacts.graph import inline_functions, int8_weight_bits
from aft_export.machine import CpuFeatures, cpu_features
from aft_export.artifacts.onnxio import load_onnx
from aft_export.runners.base import ModelInfo, Runner
from aft_export.runners.ort import GraphSignature, check_signature, open_graph
from aft_export.options.commands import command_line
from aft_export.runtimes import computing

DEVICES = ("CPU",)
AFTER_FAILURE = "run it in ONNX Runtime, or export it again with `aft-export export`"
INSTALL = "pip install 'aft-export[openvino]'"
# the performance hint: "auto" is LATENCY (one request, every thread on it) for batches up to
# OPENVINO_LATENCY_MAX_BATCH and THROUGHPUT above (the batch split over OpenVINO's optimal number of requests,
# run in parallel streams, as its benchmark_app does)
OPENVINO_HINTS = ("auto", "latency", "throughput")
OPENVINO_LATENCY_MAX_BATCH = 1
# what the runner computes a file's fp32 parts in (Runtime.compute; "": fp32) -> OpenVINO's INFERENCE_PRECISION_HINT
# and the OPTIMIZATION_CAPABILITIES entry that says the CPU has units for it (None: every CPU)
COMPUTE = {"": ("f32", None), "bf16": ("bf16", "BF16")}  # fmt: skip


def import_openvino():
    try:
        import openvino
    except ImportError:
        raise RuntimeMissing(f"OpenVINO is not installed: {INSTALL}") from None
    return openvino


def openvino_version() -> str:
    return import_openvino().get_version()


def cpu_problem(weight_bits: int | None, cpu: CpuFeatures) -> str | None:
    """Why OpenVINO computes a graph whose int8 weights take ``weight_bits`` (None: it has none)
    wrongly on ``cpu``, or None where it does not: 8-bit weights on an x86 CPU known to lack VNNI
    (an unknown CPU is not refused: nothing says it lacks VNNI)."""
    if weight_bits != 8 or not cpu.x86 or cpu.vnni is not False:
        return None
    return (f"OpenVINO computes int8 with 8-bit weights wrongly on x86 CPUs without VNNI (this one: "
            f"{cpu.describe()}; its int8 dot products add pairs of products in saturating 16 bits)")  # fmt: skip


def capabilities(core, device: str = "CPU") -> list[str]:
    """What OpenVINO says ``device`` computes (its OPTIMIZATION_CAPABILITIES: FP32, INT8, BF16 where the
    CPU has bf16 units, ...)."""
    return list(core.get_property(device, "OPTIMIZATION_CAPABILITIES"))


def hint_for(batch: int, hint: str = "auto") -> str:
    """OpenVINO's PERFORMANCE_HINT for a run of ``batch`` images: ``hint`` as given, or for
    ``auto`` LATENCY up to :data:`OPENVINO_LATENCY_MAX_BATCH` images and THROUGHPUT above."""
    if hint == "auto":
        return "LATENCY" if batch <= OPENVINO_LATENCY_MAX_BATCH else "THROUGHPUT"
    return hint.upper()


class OpenVinoRunner(Runner):
    backend = "openvino"

    def __init__(self, source, threads: int = 0, info: ModelInfo | None = None, device: str = "CPU",
                 preprocessing=None, hint: str = "auto", compute: str = "", profile: bool = False) -> None:  # fmt: skip
        """``source``: a path or a ModelProto; ``info``: what to feed a graph a stage made
        itself; ``preprocessing``: how to feed a file another tool wrote
        (:func:`~aft_export.runners.ort.onnx_info`); ``threads``: CPU inference threads in
        all (0: OpenVINO's default, all cores); ``hint``: auto, latency or throughput; ``compute``:
        "" (fp32) or bf16, what the file's fp32 parts are computed in (see the module doc);
        ``profile``: count each node's time (OpenVINO's PERF_COUNT), read with :meth:`op_profile`."""
        import onnx

        ov = import_openvino()
        if device not in DEVICES:
            raise AFTExportError(f"unknown OpenVINO device {device!r}; choose one of {DEVICES}")
        if hint not in OPENVINO_HINTS:
            raise AFTExportError(f"unknown OpenVINO hint {hint!r}; choose one of {', '.join(OPENVINO_HINTS)}")
        if not isinstance(compute, str) or compute not in COMPUTE:
            raise AFTExportError(f"unknown OpenVINO compute precision {compute!r}; choose one of "
                                 f"{', '.join(repr(c) for c in COMPUTE)}")  # fmt: skip
        graph = open_graph(source, info, preprocessing=preprocessing)
        model, in_memory, where, info = graph.model, graph.in_memory, graph.where, graph.info
        super().__init__(graph.name, info)
        signature = GraphSignature(model)
        check_signature(signature, info, where, metadata=graph.from_metadata)
        base_dir = None if in_memory else str(Path(source).resolve().parent)
        problem = cpu_problem(int8_weight_bits(model, base_dir), cpu_features())
        if problem:
            raise NotForThisCPU(f"{where} is not for this CPU: {problem}; run it in ONNX Runtime, or use the "
                                f"portable int8 (7-bit weights, safe here): "
                                f"{command_line('quantize', 'MODEL.onnx', target='portable')} makes it, and the "
                                f"pipeline writes it as model.portable.int8.onnx")  # fmt: skip
        self.threads = threads or (os.cpu_count() or 1)
        self.hint = hint
        self._device = device
        self._core = ov.Core()
        hinted, needs = COMPUTE[compute]
        if needs and needs not in capabilities(self._core, device):
            raise NotForThisCPU(f"OpenVINO cannot compute in {compute} on this CPU ({cpu_features().describe()}; "
                                f"it has no bf16 units, AVX512_BF16 or AMX-BF16): run {where} in openvino, which "
                                f"computes it as the file says")  # fmt: skip
        self.compute = compute
        # its runtime's name (openvino, openvino-bf16): the runtime of this family that computes so
        self.backend = computing("openvino", compute).name
        self._config = {"INFERENCE_PRECISION_HINT": hinted}
        self._profile: list | None = None
        if profile:  # the node times of every run on the LATENCY model (one request: each run whole)
            self._config["PERF_COUNT"] = True
            self.hint, self._profile = "latency", []
        if threads:
            self._config["INFERENCE_NUM_THREADS"] = int(threads)
        self._ov = ov
        local = {(f.domain, f.name) for f in model.functions}
        inlined = any((n.domain, n.op_type) in local for n in model.graph.node)
        try:
            if inlined:  # the default export: its com.aft functions (any model-local ones) inlined here, in memory
                if not in_memory and any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
                    model = load_onnx(source, whole=("OpenVINO", f"export it with {command_line('export', target='portable')}"))
                model = inline_functions(model)
            if inlined or in_memory:
                self._model = self._core.read_model(model.SerializeToString(), b"")
            else:  # read from the path: external data is found beside it
                self._model = self._core.read_model(str(source))
        except AFTExportError:
            raise
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError/OpConversionFailure for a graph it cannot take
            raise AFTExportError(f"OpenVINO cannot load {where}: {_reason(exc)}; {AFTER_FAILURE}") from None
        self._compiled: dict[str, object] = {}
        self._queue = None  # the THROUGHPUT model's requests, made on first use
        self._where = where
        compiled = self.compiled_for("LATENCY")  # compiled now: a graph OpenVINO cannot compile fails here
        # OpenVINO gives a tensor every name it had (the graph's, and those of casts folded into it):
        # the graph's own name is the one callers know
        self.input_name = _named(compiled.inputs[0], [v.name for v in signature.get_inputs()])
        self._output_names = [_named(out, [v.name for v in signature.get_outputs()]) for out in compiled.outputs]
        self.output_name = self._output_names[0]
        first = compiled.inputs[0].get_partial_shape()[0]
        self.fixed_batch = first.get_length() if first.is_static else None
        self._request = compiled.create_infer_request()

    def compiled_for(self, hint: str):
        """The model compiled with PERFORMANCE_HINT ``hint`` (LATENCY or THROUGHPUT), on first use."""
        if hint not in self._compiled:
            try:
                self._compiled[hint] = self._core.compile_model(self._model, self._device,
                                                                {**self._config, "PERFORMANCE_HINT": hint})  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - as read_model: a graph the CPU plugin cannot compile
                raise AFTExportError(f"OpenVINO cannot compile {self._where}: {_reason(exc)}; {AFTER_FAILURE}") from None
        return self._compiled[hint]

    def requests(self) -> int:
        """The number of infer requests a batch is split over in THROUGHPUT mode: OpenVINO's
        OPTIMAL_NUMBER_OF_INFER_REQUESTS for this model on this CPU and thread count."""
        return int(self.compiled_for("THROUGHPUT").get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))

    def run(self, feeds):
        feeds = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
        first = next(iter(feeds.values()))
        batch = int(first.shape[0]) if first.ndim else 1
        # a fixed-batch graph takes its whole batch in one request: nothing to split
        if self.fixed_batch is not None or hint_for(batch, self.hint) == "LATENCY":
            result = self._request.infer(feeds)
            if self._profile is not None:
                self._count()
            return {name: np.array(result[out]) for name, out in zip(self._output_names, self._request.model_outputs)}
        return self._run_split(feeds, batch)

    def _count(self) -> None:
        """Keep the last run's node times: (node type, kernel, node name, ms) of each node it executed."""
        self._profile.append([(n.node_type, n.exec_type, n.node_name, n.real_time.total_seconds() * 1e3)
                              for n in self._request.profiling_info if n.status == n.Status.EXECUTED])  # fmt: skip

    def op_profile(self, skip_runs: int = 0) -> list[dict]:
        """Node time by OpenVINO's node type and the kernel it ran (``op_type``: ``Gather [ref_any_f32]``;
        ``reference``: a kernel named ``ref*``, OpenVINO's reference implementation rather than an
        optimised one), largest first, as :meth:`OrtRunner.op_profile` gives ONNX Runtime's: ``ms``
        (summed over the runs after the first ``skip_runs``), ``share`` of the node time, ``nodes``."""
        if self._profile is None:
            raise AFTExportError("this runner was not made with profile=True")
        ms: dict[tuple[str, str], float] = {}
        names: dict[tuple[str, str], set] = {}
        for run in self._profile[skip_runs:]:
            for kind, kernel, name, took in run:
                ms[kind, kernel] = ms.get((kind, kernel), 0.0) + took
                names.setdefault((kind, kernel), set()).add(name)
        total = sum(ms.values())
        return [{"op_type": f"{kind} [{kernel}]", "ms": t, "share": t / total if total else 0.0,
                 "nodes": len(names[kind, kernel]), "reference": kernel.startswith("ref")}
                for (kind, kernel), t in sorted(ms.items(), key=lambda kv: -kv[1])]  # fmt: skip

    def _run_split(self, feeds: dict, batch: int) -> dict:
        """One batch split over the THROUGHPUT model's requests, run at once, joined in order."""
        if self._queue is None:
            self._queue = self._ov.AsyncInferQueue(self.compiled_for("THROUGHPUT"), self.requests())
        queue = self._queue
        parts = min(len(queue), batch)
        bounds = np.linspace(0, batch, parts + 1).astype(int)
        results: list = [None] * parts

        def done(request, index):
            results[index] = {name: np.array(request.get_tensor(out).data)
                              for name, out in zip(self._output_names, request.model_outputs)}  # fmt: skip

        queue.set_callback(done)
        for i in range(parts):
            lo, hi = bounds[i], bounds[i + 1]
            queue.start_async({k: np.ascontiguousarray(v[lo:hi]) for k, v in feeds.items()}, i)
        queue.wait_all()
        return {name: np.concatenate([r[name] for r in results]) for name in results[0]}


def _named(port, names: list[str]) -> str:
    """The first of ``names`` (the ONNX graph's) that OpenVINO's ``port`` answers to, else its own."""
    have = port.get_names()
    return next((n for n in names if n in have), port.get_any_name())


# OpenVINO's lines that say where in its own sources an error was raised, or head its report: not the reason
_WHERE = re.compile(r"(Exception from |Check '.*?' failed at )\S+:\d+:?")
_HEADINGS = ("FrontEnd API failed with", "Loading input model", "Summary:", "Model wasn't fully converted",
             "-- Conversion is failed for")  # fmt: skip


_NODE = re.compile(r"While validating ONNX node '<Node\((\w+)\): ([^>]*)>'")


def _reason(exc: Exception) -> str:
    """The reason OpenVINO gives, in one line: its "No conversion rule" line where it has one, else
    its first line that says something (with the ONNX node it was validating, where it names one):
    the lines above it name OpenVINO's own source files or are headings ("Loading input model"),
    and what follows it is often what that first failure made fail."""
    lines = [_WHERE.sub("", line).strip() for line in str(exc).splitlines()]
    said = [line for line in lines if line and not line.startswith(_HEADINGS)]
    rule = next((line for line in said if "No conversion rule" in line), None)
    if rule:
        return rule.removeprefix("-- ")[:300]
    node = None
    for line in said:
        found = _NODE.search(line)
        if found:
            node = f"{found.group(1)} node {found.group(2)}"
        elif not line.endswith(":"):
            return (f"{node}: {line}" if node else line.removeprefix("-- "))[:300]
    return (said[0] if said else "no reason given")[:300]
