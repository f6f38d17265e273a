"""ONNX Runtime: an ONNX file, or a graph in memory, on the CPU, CUDA or TensorRT provider."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from aft_export.errors import AFTExportError, RuntimeMissing, said
from aft_export.fileio import cache_root
from aft_export.artifacts.graph import activation_bytes_per_image
from aft_export.artifacts.ends import Claim, ends_of
from aft_export.artifacts.onnxio import ArtifactMeta, foreign_kind, graph_precision, load_onnx, unfeedable
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.runtimes import PROVIDER_BACKENDS
from aft_export.readers import reason
from aft_export.runners.base import ModelInfo, Runner

PROVIDER_KINDS = tuple(PROVIDER_BACKENDS)  # cpu, cuda, tensorrt: the providers a backend names
ORT_TYPES = {"float32": "tensor(float)", "uint8": "tensor(uint8)"}  # a format's dtype as ONNX Runtime says it
def import_onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise AFTExportError("ONNX Runtime is not installed: pip install 'aft-export[cpu]' (CPU) or "
                             "'aft-export[gpu]' (onnxruntime-gpu; Jetson: the wheel JetPack's vendor provides)") from None
    return onnxruntime


def ort_providers(kind: str, cache_dir: str | None = None) -> list:
    """ONNX Runtime provider list for ``kind`` (cpu, cuda or tensorrt), falling back to
    CUDA then CPU for what the preferred provider cannot run. The TensorRT provider keeps
    its engine and timing caches in ``cache_dir`` (default the cache root's ort-tensorrt).
    Its ``trt_fp16_enable``/``trt_int8_enable`` stay off: with them ONNX Runtime builds a
    weakly typed network, without them a strongly typed one, which takes the precision
    from the graph (fp16 tensors, Q/DQ) as TensorRT 11 requires."""
    if kind not in PROVIDER_KINDS:
        raise AFTExportError(f"unknown provider {kind!r}; choose one of {PROVIDER_KINDS}")
    if kind == "cpu":
        return ["CPUExecutionProvider"]
    # use_tf32 0: fp32 means fp32 (ORT's CUDA provider computes fp32 products in TF32 by
    # default, ~1e-3 off: measured on an H100, outside the fp32 parity limit)
    cuda = [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
    if kind == "cuda":
        return cuda
    cache = Path(cache_dir) if cache_dir else cache_root("ort-tensorrt")
    cache.mkdir(parents=True, exist_ok=True)
    options = {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(cache),
               "trt_timing_cache_enable": True, "trt_timing_cache_path": str(cache)}  # fmt: skip
    return [("TensorrtExecutionProvider", options)] + cuda


def _provider_name(p) -> str:
    return p[0] if isinstance(p, tuple) else p


def info_from_metadata(model, where: str) -> ModelInfo:
    """Classes, input size and normalisation from aft-export's ONNX metadata; what the file takes and
    gives from its graph (:func:`~aft_export.artifacts.ends.ends_of`: metadata the graph contradicts is an
    error)."""
    meta = ArtifactMeta.of(model, where)
    ends = ends_of(model, where)
    try:
        info = ModelInfo(meta.classes, meta.input_size, meta.mean, meta.std, source_sha256=meta.source_sha256,
                         precision=graph_precision(model), extra=meta.values, input_format=ends.takes.name,
                         output_format=ends.gives)  # fmt: skip
    except KeyError as exc:
        raise AFTExportError(f"{where} has no aft-export metadata (classes, input size, mean/std: {exc} is "
                             f"missing); export it with `aft-export export`") from None  # fmt: skip
    except (ValueError, TypeError) as exc:
        raise AFTExportError(f"{where} has malformed aft-export metadata ({reason(exc)}); export it again with "
                             f"`aft-export export`") from None  # fmt: skip
    problem = info.problem()
    if problem:
        raise AFTExportError(f"{where} has malformed aft-export metadata: {problem}; export it again with "
                             f"`aft-export export`")  # fmt: skip
    return info


def onnx_info(model, where: str, path=None, preprocessing: ForeignPreprocessing | None = None) -> ModelInfo:
    """What feeding an ONNX file needs: from our metadata where it has them; for a file another
    tool wrote (no such metadata), from ``preprocessing`` or the JSON beside ``path``
    (:class:`~aft_export.data.preprocess.ForeignPreprocessing`), its class count from its output."""
    meta = ArtifactMeta.of(model, where)
    if meta.ours:
        return info_from_metadata(model, where)
    # what the file is, said first: a graph no preprocessing can feed is said so, before any advice
    foreign = preprocessing or ForeignPreprocessing()
    problem = unfeedable(model, where)
    if problem:
        raise AFTExportError(problem)
    pre, origin = foreign.for_artifact(path, where, foreign_kind(model))
    fix = (said("leave {input_format} out, or give the format its graph takes", None)
           if foreign.input_format is not None else said("correct input_format in {origin}", None, origin=origin))
    ends = ends_of(model, where, Claim(said("its preprocessing ({origin})", None, origin=origin), fix,
                                       input_format=pre.stated_format))  # fmt: skip
    channels, width = ends.chw[0], ends.width
    if pre.classes is None and width is None:
        ask = said("give {classes}", None) if "classes" in foreign.takes else "name them in its preprocessing file (classes)"
        raise AFTExportError(f"{where}'s output has no fixed number of classes and its preprocessing ({origin}) names "
                             f"none; {ask}")  # fmt: skip
    classes = pre.class_names(width, origin) if width is not None else list(pre.classes)
    info = ModelInfo(classes, (channels or 3, pre.size, pre.size), pre.mean, pre.std,
                     precision=graph_precision(model), extra=meta.values, preprocessing_from=origin,
                     input_format=ends.takes.name, output_format=ends.gives)  # fmt: skip
    problem = info.problem()
    if problem:
        raise AFTExportError(f"the preprocessing of {where} ({origin}) does not fit it: {problem}")
    return info


@dataclass
class OnnxGraph:
    """An ONNX runner's graph: the model, whether it was handed over in memory, how messages
    name it, and what to feed it (``info`` as given, else from its metadata, with the graph's
    own precision); ``from_metadata``: whether ``info`` came from the metadata."""

    model: object
    in_memory: bool
    where: str
    info: ModelInfo
    from_metadata: bool

    @property
    def name(self) -> str:
        return "<in memory>" if self.in_memory else self.where


def open_graph(source, info: ModelInfo | None, external_data: bool = False,
               preprocessing: ForeignPreprocessing | None = None) -> OnnxGraph:  # fmt: skip
    """``source`` (a path or a ModelProto) for a runner that feeds it ``info`` (None: what the
    file says, :func:`onnx_info`; ``preprocessing`` for a file another tool wrote)."""
    import onnx

    in_memory = isinstance(source, onnx.ModelProto)
    model = source if in_memory else load_onnx(source, external_data=external_data)
    where = "the graph" if in_memory else str(source)
    described = info or onnx_info(model, where, None if in_memory else source, preprocessing)
    full = replace(described, precision=graph_precision(model))
    return OnnxGraph(model, in_memory, where, full, info is None)


def check_signature(session, info: ModelInfo, where: str, metadata: bool = True) -> None:
    """The graph takes one input; an artifact (``metadata``: described by its own metadata)
    takes one float (N, C, H, W) image batch of the size its metadata says and gives
    (N, classes) logits: anything else would be fed wrongly, or fail mid-run. (A stage
    running a graph of its own, with its own ModelInfo, is held to one input only.)"""
    inputs, outputs = session.get_inputs(), session.get_outputs()
    fix = graph_fix = "export it again with `aft-export export`"
    says = "its metadata says"
    if info.preprocessing_from:  # a file another tool wrote, described by what the user said
        fix = f"correct its preprocessing ({info.preprocessing_from}) to what it was made for"
        says = f"its preprocessing ({info.preprocessing_from}) says"
        # what no preprocessing changes: the inputs and outputs of the graph
        graph_fix = "give an image classifier: one float (N, 3, H, W) input, (N, classes) logits out"
    if len(inputs) != 1:
        raise AFTExportError(f"{where} takes {len(inputs)} inputs ({', '.join(i.name for i in inputs)}); an image "
                             f"classifier takes one, (N, 3, H, W): {graph_fix}")  # fmt: skip
    if not metadata:
        return
    first = inputs[0]
    fmt = info.takes
    takes = f"a {fmt.dtype} ({', '.join('N' + fmt.layout[1:])}) batch"
    if first.type != ORT_TYPES[fmt.dtype] or len(first.shape) != 4:
        raise AFTExportError(f"{where} takes {first.type} of shape {first.shape} as input {first.name!r}, not "
                             f"{takes}; {graph_fix}")  # fmt: skip
    got = list(fmt.chw(first.shape))  # as (C, H, W)
    if any(isinstance(g, int) and g != w for g, w in zip(got, info.input_size)):
        raise AFTExportError(f"{where}'s graph takes {'x'.join(map(str, got))} inputs but {says} "
                             f"input_size {list(info.input_size)}; " + fix)  # fmt: skip
    out = outputs[0].shape if outputs else []
    if len(out) != 2:
        raise AFTExportError(f"{where} gives output of shape {out}, not (N, classes) logits; {graph_fix}")
    if info.classes and isinstance(out[1], int) and out[1] != len(info.classes):
        raise AFTExportError(f"{where}'s graph gives {out[1]} logits but {says.removesuffix(' says')} names "
                             f"{len(info.classes)} classes; " + fix)  # fmt: skip


@dataclass(frozen=True)
class ValueSignature:
    """A graph input or output as an ONNX Runtime session reports it (``name``, ``type``
    such as ``tensor(float)``, ``shape`` with ints for fixed and names or None for free
    dimensions), read from the graph itself, for runners that have no ONNX Runtime session."""

    name: str
    type: str
    shape: list


class GraphSignature:
    """The ``get_inputs``/``get_outputs`` of :func:`check_signature`, read from a ModelProto."""

    def __init__(self, model) -> None:
        import onnx

        inits = {t.name for t in model.graph.initializer}

        def sig(v) -> ValueSignature:
            t = v.type.tensor_type
            elem = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "undefined"
            elem = {"float32": "float", "float64": "double", "float16": "float16"}.get(elem, elem)
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]
            return ValueSignature(v.name, f"tensor({elem})", shape)

        self._inputs = [sig(v) for v in model.graph.input if v.name not in inits]
        self._outputs = [sig(v) for v in model.graph.output]

    def get_inputs(self) -> list[ValueSignature]:
        return self._inputs

    def get_outputs(self) -> list[ValueSignature]:
        return self._outputs


class OrtRunner(Runner):
    backend = "onnxruntime"

    def __init__(self, source, providers: list | str | None = None, threads: int = 0,
                 info: ModelInfo | None = None, optimize: bool = True, profile: bool = False,
                 preprocessing: ForeignPreprocessing | None = None, spinning: bool = True) -> None:  # fmt: skip
        """``source``: a path or a ModelProto (stages that run a graph they hold in memory);
        ``info``: what to feed a graph a stage made itself (held to one input only);
        ``preprocessing``: how to feed a file another tool wrote (see :func:`onnx_info`); ``optimize``
        False runs the graph as written (no fusions: calibration measures the values the
        graph defines, as ONNX Runtime's own calibrators do); ``profile``: record ONNX
        Runtime's per-node profile (read it with :meth:`op_profile`); ``spinning`` False: the
        intra-op pool's threads sleep when out of work instead of spinning for more (ONNX
        Runtime's default), for a server whose idle pools must not take the CPU its other
        processes need."""
        ort = import_onnxruntime()
        graph = open_graph(source, info, preprocessing=preprocessing)
        model, in_memory, where, info, from_metadata = (graph.model, graph.in_memory, graph.where, graph.info,
                                                        graph.from_metadata)  # fmt: skip
        super().__init__(graph.name, info)
        available = ort.get_available_providers()
        if isinstance(providers, str):  # a kind: cpu, cuda, tensorrt
            providers = ort_providers(providers)
        wanted = providers or ["CPUExecutionProvider"]
        missing = [_provider_name(p) for p in wanted if _provider_name(p) not in available]
        if missing:
            raise RuntimeMissing(f"ONNX Runtime here lacks {missing} (available: {available}); "
                                 f"install onnxruntime-gpu with CUDA/TensorRT to use them")  # fmt: skip
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if not optimize:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = threads  # 0: ONNX Runtime's default (all cores)
        # the pool's threads spin between the nodes of a run, never after it: a pool left spinning
        # after its run took the cores of whatever ran next in the process (OpenVINO's int8 measured
        # 45% slower right after an ONNX Runtime run on 2 cores); ONNX Runtime's own back-to-back runs
        # are as fast (benchmarks/runtime_quiet.py measures both)
        options.add_session_config_entry("session.force_spinning_stop", "1")
        if not spinning:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self.threads = threads or (os.cpu_count() or 1)
        self._profile_dir = None
        if profile:
            self._profile_dir = tempfile.mkdtemp(prefix="aft-ort-profile-")
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(self._profile_dir) / "ort")
        self._activation_bytes = activation_bytes_per_image(model, info.input_size)  # for memory estimates
        payload = source.SerializeToString() if in_memory else str(source)
        try:
            self.session = ort.InferenceSession(payload, options, providers=wanted)
        except Exception as exc:  # noqa: BLE001 - ORT's own error types: an invalid or unsupported graph
            self._remove_profile_dir()
            raise AFTExportError(f"ONNX Runtime cannot load {where}: {str(exc).splitlines()[0][:300]}") from None
        try:
            check_signature(self.session, info, where, metadata=from_metadata)
        except AFTExportError:
            self._remove_profile_dir()
            raise
        first_input = self.session.get_inputs()[0]
        self.input_name = first_input.name
        self.output_name = self.session.get_outputs()[0].name
        self.fixed_batch = first_input.shape[0] if isinstance(first_input.shape[0], int) else None
        self.providers = self.session.get_providers()
        first = _provider_name(wanted[0])
        if first not in self.providers:  # ORT falls back to the CPU with a log line only
            raise RuntimeMissing(f"ONNX Runtime could not start {first} here (its CUDA/cuDNN/TensorRT libraries "
                                 f"did not load); it would have run on {self.providers}")  # fmt: skip
        if first != "CPUExecutionProvider":
            self.backend = f"onnxruntime-{first.replace('ExecutionProvider', '').lower()}"

    def activation_bytes(self) -> tuple[int, int]:
        return self._activation_bytes

    def run(self, feeds):
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, feeds)))

    def op_profile(self, skip_runs: int = 0) -> list[dict]:
        """Stop profiling and return node time by op type, largest first, from ONNX
        Runtime's profiler (the op types it ran: fused ops such as ``Gelu`` or
        ``MatMulIntegerToFloat`` under their own names): ``op_type``, ``ms`` (summed over
        the profiled runs), ``share`` of the node time, ``nodes`` (distinct nodes). The
        first ``skip_runs`` runs (warm-up) are left out. The profile's JSON file is read
        and removed; the runner cannot profile again."""
        if self._profile_dir is None:
            raise AFTExportError("this runner was not made with profile=True (or its profile was already read)")
        try:
            events = json.loads(Path(self.session.end_profiling()).read_text())
        finally:
            self._remove_profile_dir()
        return op_shares(events, skip_runs)

    def _remove_profile_dir(self) -> None:
        if getattr(self, "_profile_dir", None) is not None:
            shutil.rmtree(self._profile_dir, ignore_errors=True)
            self._profile_dir = None

    def __del__(self):
        self._remove_profile_dir()


def op_shares(events: list[dict], skip_runs: int = 0) -> list[dict]:
    """ONNX Runtime profiler events -> time per op type (see :meth:`OrtRunner.op_profile`)."""
    runs = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")  # fmt: skip
    start = runs[skip_runs][0] if 0 < skip_runs < len(runs) else None
    micros: dict[str, float] = {}
    nodes: dict[str, set] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        if start is not None and e.get("ts", 0) < start:
            continue
        op = e.get("args", {}).get("op_name", "?")
        micros[op] = micros.get(op, 0.0) + float(e.get("dur", 0))
        nodes.setdefault(op, set()).add(e["name"][: -len("_kernel_time")])
    total = sum(micros.values())
    rows = [{"op_type": op, "ms": us / 1e3, "share": us / total if total else 0.0, "nodes": len(nodes[op])}
            for op, us in micros.items()]  # fmt: skip
    return sorted(rows, key=lambda r: (-r["ms"], r["op_type"]))
