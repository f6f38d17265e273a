"""Checkpoint -> ONNX: export, attach the AFT functions, check, simplify, verify, save.

Stages (each timed and reported):

1. ``torch.onnx.export`` (the torch.export-based exporter) with the AFT cores as
   ``aft::*`` custom ops translated to one ``com.aft`` node each (``op_form="custom"``)
   or left to the exporter's plain decomposition (``op_form="decomposed"``);
2. attach the model-local function bodies and the metadata;
3. ``onnx.checker`` full check and strict shape inference; every value in the
   graph must get a shape;
4. ``onnxsim`` (optional, on by default): node counts before and after; the
   simplified graph must reproduce the original's outputs on real images;
5. verification: PyTorch vs ONNX Runtime on N real images;
6. an atomic, deterministic write (same checkpoint and options, same bytes).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from aft_export.version import ReadAsDict, __version__
from aft_export.models.checkpoint import ModelMeta
from aft_export.verify.compare import SIMPLIFY_MAX_ABS, SwapAgreement, max_abs, metrics
from aft_export.data.formats import gives_probabilities, takes_pixels
from aft_export.data.images import normalize_array
from aft_export.data.datasets import DataNotFound, is_named, load_labelled, verification_data
from aft_export.errors import AFTExportError, CheckFailed, Judged, Named, Verdict, said
from aft_export.exporting.forms import to_target  # noqa: F401 (the API: the exporter's last step)
from aft_export.exporting.functions import attach_functions, registered_schemas, translation_table
from aft_export.exporting.pixels import with_pixel_input, with_probabilities
from aft_export.exporting.rewrite import optimize_for_runtime
from aft_export.fileio import claim_output, sha256_file
from aft_export.artifacts.graph import DOMAIN, compact_node_metadata, module_by_output, name_nodes, restore_node_metadata
from aft_export.layers.aft import AFTLayer
from aft_export.artifacts.onnxio import check_graph, protobuf_limit_problem, read_metadata, save_onnx, set_metadata
from aft_export.options import (DEFAULT_TARGET, MAX_BATCH, OP_FORMS, TARGET_OPSETS, TARGETS,  # noqa: F401 (the API)
                                ExportOptions)  # fmt: skip
from aft_export.runners import ModelInfo, OrtRunner, TorchRunner
from aft_export.runners.base import as_output
from aft_export.models.sources import open_source
from aft_export.trtcheck import check_model, enforce


# the offline rules' status of a version (aft_export.trtcheck), as a result's text says it
RULES_SAY = {"accepts": "pass", "refuses": "REFUSE", "warnings": "warn", "not targeted": "n/a"}


@dataclass(frozen=True)
class ExportParity(ReadAsDict):
    """The export's verification against PyTorch (:attr:`ExportResult.parity`): ONNX Runtime's logits
    on ``images`` real images from ``data``, against the model's. Its ``passed`` is the one rule of an
    export: within ``atol`` (the options' ``verify_atol``; not rendered) with every top-1 the same."""

    images: int
    max_abs: float
    mean_abs: float
    cosine_min: float
    top1_agreement: float
    data: str | None
    atol: float

    @classmethod
    def of(cls, m: dict, data: str | None, atol: float) -> ExportParity:
        """From the metrics of :func:`~aft_export.verify.compare.metrics`."""
        return cls(m["images"], m["max_abs"], m["mean_abs"], m["cosine_min"], m["top1_agreement"], data, atol)

    @property
    def passed(self) -> bool:
        return bool(self.max_abs <= self.atol and self.top1_agreement == 1.0)

    def to_dict(self) -> dict:
        return {"images": self.images, "max_abs": self.max_abs, "mean_abs": self.mean_abs,
                "cosine_min": self.cosine_min, "top1_agreement": self.top1_agreement, "data": self.data,
                "passed": self.passed}  # fmt: skip


@dataclass
class ExportResult(Judged):
    path: str
    sha256: str
    bytes: int
    external_data: str | None
    aft_nodes: int
    nodes_exported: int
    nodes_final: int
    seconds: dict[str, float] = field(default_factory=dict)
    simplify: dict | None = None
    parity: ExportParity | None = None
    trt_check: dict | None = None  # TensorRT compatibility per version (aft_export.trtcheck)
    rewrites: dict | None = None  # aft_export.exporting.rewrite: places each rewrite changed
    # what the model's source did first (ModelMeta.prepare; a model trained elsewhere: what
    # became of each AFT layer, and the swap check), and every warning the export gave
    layers: list[dict] | None = None
    swap_check: SwapAgreement | None = None
    warnings: list[str] = field(default_factory=list)
    # not verified: against PyTorch (images=0), or by the rules of a targeted TensorRT
    # that refuses or warns (when all of them refuse, the export fails instead)
    verdict: Verdict = field(default_factory=Verdict)
    # the TensorRT check's whole report (aft_export.trtcheck.CheckReport), for a caller that
    # hands it on (the pipeline); trt_check above is its summary. Not in to_dict
    check_report: object = field(default=None, repr=False, compare=False)
    # PyTorch's logits on the verification images (the reference parity compares with, where
    # it runs on the same images); not in to_dict
    reference_logits: np.ndarray | None = field(default=None, repr=False, compare=False)

    def lines(self) -> list[str]:
        """What ``export`` prints: the file, its nodes, onnxsim, the verification, the offline rules, the time."""
        lines = [f"wrote {self.path} ({self.bytes / 1e6:.2f} MB, sha256 {self.sha256[:16]}...)",
                 f"nodes: {self.nodes_exported} exported, {self.nodes_final} final, {self.aft_nodes} com.aft nodes"]
        if self.simplify:
            s = self.simplify
            lines.append(f"onnxsim: {s['nodes_before']} -> {s['nodes_after']} nodes" if s["applied"]
                         else f"onnxsim: not applied ({s['reason']})")  # fmt: skip
        if self.parity:
            p = self.parity
            lines.append(f"verify: {p.images} images from {p.data}: max abs {p.max_abs:.3g}, mean abs "
                         f"{p.mean_abs:.3g}, min cosine {p.cosine_min:.6f}, top-1 agreement "
                         f"{100 * p.top1_agreement:.1f}%")  # fmt: skip
        if self.trt_check:
            lines.append("offline TensorRT rules: " + ", ".join(f"{v} {RULES_SAY.get(s, s)}" for v, s in
                                                                self.trt_check["status"].items())
                         + f" (no TensorRT ran; `aft-export check {self.path}`)")  # fmt: skip
        lines.append("time: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.seconds.items()))
        return lines + self.verdict.lines()

    def to_dict(self) -> dict:
        handed_on = ("check_report", "reference_logits")
        rows = {"parity": self.parity, "swap_check": self.swap_check}  # typed rows: each renders itself
        # asdict would copy what is handed on, and render a row without its own `passed`
        plain = asdict(replace(self, **dict.fromkeys(handed_on + tuple(rows))))
        plain.update({k: None if row is None else row.to_dict() for k, row in rows.items()})  # in place
        return {k: v for k, v in plain.items() if k not in handed_on}


def parse_batch(spec: str) -> int | None:
    """A batch dimension ExportOptions took (its declaration checks it): ``"dynamic"`` -> None; ``"8"`` -> 8."""
    text = str(spec).strip().lower()
    return None if text == "dynamic" else int(text)


def _set_custom_ops(model, enabled: bool) -> None:
    for module in model.modules():
        if isinstance(module, AFTLayer):
            module.use_custom_op = enabled


def _dynamic_shapes(cfg, batch: int | None, dynamic_hw: bool):
    dims = {}
    if batch is None:
        dims[0] = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    if dynamic_hw:
        if cfg.fixed_input_size:
            raise AFTExportError(
                f"AFT-{cfg.variant} has a position embedding for {cfg.img_size}x{cfg.img_size} inputs; "
                f"only AFT-conv models take dynamic height and width"
            )
        p = cfg.patch_size
        dims[2] = p * torch.export.Dim("grid_h", min=1, max=512)
        dims[3] = p * torch.export.Dim("grid_w", min=1, max=512)
    return (dims,) if dims else None


def _torch_export(model, cfg, opts: ExportOptions):
    """Run torch.onnx.export and return the ModelProto (nothing written to disk)."""
    batch = parse_batch(opts.batch_dim)
    example = torch.randn(batch or 2, cfg.in_chans, cfg.img_size, cfg.img_size,
                          generator=torch.Generator().manual_seed(0))  # fmt: skip
    custom = opts.op_form == "custom"
    _set_custom_ops(model, custom)
    try:
        with _EXPORTING, registered_schemas(), _quiet_exporter(), _torchlib_built_once():
            program = torch.onnx.export(
                model, (example,), dynamo=True, opset_version=opts.opset,
                custom_translation_table=translation_table() if custom else None,
                dynamic_shapes=_dynamic_shapes(cfg, batch, opts.dynamic_hw),
                input_names=["image"], output_names=["logits"], optimize=True, verbose=False,
            )  # fmt: skip
    finally:
        _set_custom_ops(model, False)
    proto = program.model_proto
    compact_node_metadata(proto)  # first: each layer's function is named after its module
    attach_functions(proto)
    name_nodes(proto)
    return proto


_EXPORTING = threading.Lock()  # one torch.onnx.export at a time: _torchlib_built_once patches a class
_TORCHLIB: dict[str, object] = {}  # the registry from_torchlib built, by its arguments


@contextlib.contextmanager
def _torchlib_built_once():
    """torch.onnx.export builds its registry of ATen translations from torchlib on every call
    (``ONNXRegistry.from_torchlib``: about 0.25 s, a tenth of a small model's export). It
    depends only on its opset, so every export after the first in a process gets a copy of the
    first one's (a copy: each export registers its own custom translations into its registry).
    Where torch's exporter has another shape, it builds its own as before."""
    try:
        from torch.onnx._internal.exporter import _registration

        cls = _registration.ONNXRegistry
        built = cls.__dict__.get("from_torchlib")
    except (ImportError, AttributeError):
        built = None
    if not isinstance(built, classmethod):
        yield
        return
    build = built.__func__

    def from_torchlib(klass, *args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        if klass is not cls:
            return build(klass, *args, **kwargs)
        if key not in _TORCHLIB:
            _TORCHLIB[key] = build(klass, *args, **kwargs)
        registry = copy.copy(_TORCHLIB[key])
        registry.functions = {target: list(decomps) for target, decomps in registry.functions.items()}
        return registry

    cls.from_torchlib = classmethod(from_torchlib)
    try:
        yield
    finally:
        cls.from_torchlib = built  # torch's own again


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter logs optional-package notes (torchvision) and deprecation warnings
    that say nothing about the user's model; keep them off the user's terminal."""
    import logging
    import warnings

    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)


def _metadata(meta, opts: ExportOptions) -> dict[str, str]:
    cfg = meta.config
    size = [cfg.in_chans, cfg.img_size, cfg.img_size]
    return {
        "aft_export.format": "1",
        "model_name": meta.model_name or "",
        "variant": f"AFT-{cfg.variant}",
        "classes": json.dumps(meta.classes),
        "input_name": "image",
        "input_size": json.dumps(size),
        "input_layout": "NCHW",
        "input_color": "RGB",
        "preprocess": "resize shorter side to input height (bicubic), centre crop, x / 255, (x - mean) / std",
        "mean": json.dumps(list(meta.mean)),
        "std": json.dumps(list(meta.std)),
        "dynamic_batch": str(parse_batch(opts.batch_dim) is None).lower(),
        "dynamic_hw": str(bool(opts.dynamic_hw)).lower(),
        "aft_op_form": opts.op_form,
        "export_target": opts.target,
        "source_checkpoint": Path(meta.path).name,
        "source_sha256": meta.sha256,
        "config": json.dumps(cfg.to_dict(), sort_keys=True),
        "tool": f"aft-export {__version__}",
        "torch_version": str(torch.__version__),
        "opset": str(TARGET_OPSETS.get(opts.target, opts.opset)),
    }


def _verification_images(meta, opts: ExportOptions) -> tuple[np.ndarray, str, np.ndarray]:
    """N real images in the model's preprocessing, and where they came from: ``data``
    where given; else the test data the checkpoint names; else ``cifar10:test``
    (:func:`~aft_export.data.datasets.verification_data`, every command's rule). A named set is
    found as every command finds it (:mod:`aft_export.data.datasets`: $AFT_CIFAR10_DIR, ../shared
    beside a checkout, the one-time download)."""
    source, origin = verification_data(opts.data, meta)
    named_by = {"given": said("{data}", "export"), "checkpoint": "named by the checkpoint",
                "default": "the default"}[origin]  # fmt: skip
    if not is_named(source) and not Path(source).exists():
        raise AFTExportError(said("verification data {source} does not exist; check {data} (or give {none} to skip "
                                  "verification)", "export", source=source, none=Named("images", 0)))  # fmt: skip
    try:
        data = load_labelled(source, meta.config.img_size, limit=opts.images)
    except DataNotFound as exc:
        raise AFTExportError(said("verification needs real images and {source} ({origin}) was not found: {tried}; "
                                  "set AFT_CIFAR10_DIR to a folder holding test.tar, give {data} (a folder or tar of "
                                  "images), or {none} to skip verification", "export", source=source,
                                  origin=named_by, tried="; ".join(exc.tried),
                                  none=Named("images", 0))) from None  # fmt: skip
    return normalize_array(data.images, meta.mean, meta.std), str(source), data.images


def _check_finite_outputs(model, cfg, images: np.ndarray | None) -> None:
    """Refuse a model whose logits are not finite, before anything is exported: on a few
    of the verification images, or without them (``images=0``) on a zero image
    and a seeded random one; a NaN or infinite weight shows here too."""
    if images is not None and len(images):
        probe = torch.from_numpy(np.ascontiguousarray(images[:8]))
    else:
        shape = (cfg.in_chans, cfg.img_size, cfg.img_size)
        probe = torch.stack([torch.zeros(shape), torch.randn(shape, generator=torch.Generator().manual_seed(0))])
    with torch.inference_mode():
        out = model(probe)
    bad = int((~torch.isfinite(out).reshape(len(probe), -1).all(dim=1)).sum())
    if bad:
        raise AFTExportError(f"the model gives NaN or infinite logits on {bad} of {len(probe)} probe images (its "
                             f"weights are damaged or it overflows); nothing was exported: fix or retrain the model")


def refuse_over_protobuf_limit(model=None, source=None) -> None:
    """An ONNX graph is one protobuf message, at most 2 GiB, and torch.onnx, onnx.checker and
    onnxsim all hold the whole graph in memory: a model with more weights would fail there after
    minutes and many GB of memory. Refused first, from the tensors' sizes (no weight is read):
    of a loaded ``model``, or of a model ``source`` before it is loaded, where the source can tell
    (a checkpoint can; loading one of 2 GiB takes a minute)."""
    if model is not None:
        tensors = itertools.chain(model.parameters(), model.buffers())  # each shared tensor once
        nbytes, what = sum(t.numel() * t.element_size() for t in tensors), "the model"
    else:
        sized = getattr(source, "weight_bytes", None)
        nbytes, what = (sized() if sized else None), str(getattr(source, "path", "the model"))
    problem = protobuf_limit_problem(nbytes, what) if nbytes is not None else None
    if problem:
        raise AFTExportError(f"{problem}; nothing was exported: aft-export exports models up to 2 GiB of weights "
                             f"(docs/export.md), so export a smaller configuration")  # fmt: skip


@dataclass
class GraphExport:
    """An exported graph in memory, before anything is written."""

    model: object  # onnx.ModelProto
    nodes_exported: int
    seconds: dict[str, float] = field(default_factory=dict)
    simplify: dict | None = None
    parity: ExportParity | None = None
    trt_check: dict | None = None
    rewrites: dict | None = None
    prepared: dict = field(default_factory=dict)  # the report of meta.prepare
    check_report: object = None  # the TensorRT check's CheckReport
    reference_logits: np.ndarray | None = None  # PyTorch's logits on the verification images


def export_graph(model, meta: ModelMeta, opts: ExportOptions, images: np.ndarray | None = None,
                 source: str | None = None, log=print, name: str = "the export",
                 also_check: tuple[str, ...] = (), pixels: np.ndarray | None = None) -> GraphExport:  # fmt: skip
    """Export a model in memory: torch.onnx, the com.aft functions, checks, onnxsim, the
    target's form, the TensorRT check and, given ``images``, verification against
    PyTorch (``images`` normalised for PyTorch; a file that takes raw pixels is fed ``pixels``, the
    same images decoded). Writes nothing; raises AFTExportError when a check fails. ``also_check``: TensorRT
    columns the check also reports on (``check_model``'s ``also``). Where the model's
    source set ``meta.prepare`` it runs first (a model trained elsewhere has its public
    AFT layers swapped for ours there, and the swap verified)."""
    cfg = meta.config
    refuse_over_protobuf_limit(model)
    seconds: dict[str, float] = {}
    prepared: dict = {}
    if meta.prepare is not None:  # the source's own step, before anything is exported
        t = time.perf_counter()
        model, prepared = meta.prepare(model, meta, images, opts, log)
        seconds["swap"] = time.perf_counter() - t
    if opts.dynamic_hw and cfg.fixed_input_size:
        _dynamic_shapes(cfg, None, True)  # raises the clear error
    _check_finite_outputs(model, cfg, images)
    batch = parse_batch(opts.batch_dim)
    if batch is not None:  # the example input, and every verification run, hold a whole fixed batch
        TorchRunner(meta.path or "the model", loaded=(model, meta)).check_batch(batch, "batch")
    t = time.perf_counter()
    proto = _torch_export(model, cfg, opts)
    set_metadata(proto, _metadata(meta, opts))
    seconds["export"] = time.perf_counter() - t
    result = GraphExport(proto, len(proto.graph.node), seconds, prepared=prepared)

    t = time.perf_counter()
    check_graph(proto)
    seconds["check"] = time.perf_counter() - t
    info = ModelInfo.from_meta(meta)
    if opts.simplify:
        t = time.perf_counter()
        props, modules = read_metadata(proto), module_by_output(proto)
        proto, result.simplify = _simplify(proto, images, opts, info)
        set_metadata(proto, props)
        restore_node_metadata(proto, modules)  # onnxsim drops node metadata
        name_nodes(proto)
        seconds["simplify"] = time.perf_counter() - t
    t = time.perf_counter()
    result.rewrites = optimize_for_runtime(proto)
    check_graph(proto)
    seconds["rewrite"] = time.perf_counter() - t
    if takes_pixels(opts.input_format) or gives_probabilities(opts.output_format):  # the ends, before the form
        t = time.perf_counter()
        with_pixel_input(proto, opts.input_format, meta.mean, meta.std)
        if gives_probabilities(opts.output_format):
            with_probabilities(proto)
        seconds["pixels"] = time.perf_counter() - t
    if opts.target != DEFAULT_TARGET:
        t = time.perf_counter()
        proto = to_target(proto, opts.target)
        seconds[opts.target] = time.perf_counter() - t

    t = time.perf_counter()
    report = check_model(proto, also=also_check)
    report.path = name
    for column in report.columns.values():
        column.path = name
    enforce(report, log, what="the export")  # stops when every targeted TensorRT would refuse it
    result.trt_check = {"status": report.status, "findings": len(report.findings)}
    result.check_report = report
    seconds["trt_check"] = time.perf_counter() - t

    if images is not None:
        t = time.perf_counter()
        runner = OrtRunner(proto)  # fed as its metadata says: a pixel file the decoded images' pixels
        if not runner.info.takes.pixels:
            got = runner.logits(images)
        elif pixels is None:
            raise AFTExportError("a pixel file is verified on the decoded images' pixels; none were given")
        else:
            got = runner.pixel_logits(pixels)
        with torch.inference_mode():
            want = torch.cat([model(torch.from_numpy(images[i : i + 256])) for i in range(0, len(images), 256)])
        want = want.numpy()
        if meta.prepare is None:  # the model as given (a prepared one was swapped: not the caller's reference)
            result.reference_logits = want
        m = metrics(as_output(want, runner.info.output_format), got)
        parity = ExportParity.of(m, source, opts.verify_atol)
        result.parity = parity
        seconds["verify"] = time.perf_counter() - t
        if not parity.passed:
            raise CheckFailed(
                f"verification failed: ONNX Runtime differs from PyTorch by up to {parity.max_abs:.3g} "
                f"(limit {opts.verify_atol:g}) with {100 * parity.top1_agreement:.1f}% top-1 agreement on "
                f"{parity.images} images; nothing was written to {name}"
            )
    result.model = proto
    return result


def export_checkpoint(checkpoint, out, options: ExportOptions | None = None, config: str | None = None,
                      log=print, loaded=None, verification=None, also_check: tuple[str, ...] = ()) -> ExportResult:  # fmt: skip
    """Export a model to ONNX, check, simplify and verify it, then write it atomically.
    ``checkpoint``: a checkpoint path or any model source (:mod:`aft_export.models.sources`;
    None when ``loaded`` is an in-memory model); ``loaded``: the ``(model, meta)`` pair if
    the caller has already loaded it; ``verification``: ``(preprocessed images, where they
    came from, the same images decoded)`` if it has them (the decoded pixels feed a file that
    takes raw pixels); ``also_check``: TensorRT columns the check also reports on
    (the result's ``check_report`` holds the whole report, to hand on)."""
    opts = options or ExportOptions()
    model_source = open_source(checkpoint, config) if checkpoint is not None else None
    warnings: list[str] = []

    def logged(*args):
        if args and str(args[0]).startswith("warning: "):
            warnings.append(str(args[0])[len("warning: "):])
        log(*args)

    inputs = list(model_source.inputs) if model_source is not None else []
    with claim_output(out, inputs=[*inputs, opts.data]) as out:
        if loaded is None:
            refuse_over_protobuf_limit(source=model_source)  # before a minute of loading
        model, meta = loaded if loaded is not None else model_source.load(log)
        refuse_over_protobuf_limit(model)  # before the verification images are decoded
        images, source, pixels = (None, None, None)
        if opts.images:
            images, source, *rest = verification if verification is not None else _verification_images(meta, opts)
            pixels = rest[0] if rest else None
        graph = export_graph(model, meta, opts, images, source, log=logged, name=str(out), also_check=also_check,
                             pixels=pixels)  # fmt: skip
        t = time.perf_counter()
        external = save_onnx(graph.model, out, opts.external_data_threshold)
        graph.seconds["save"] = time.perf_counter() - t
    proto = graph.model
    return ExportResult(
        path=str(out), sha256=sha256_file(out), bytes=out.stat().st_size,
        external_data=external, aft_nodes=sum(n.domain == DOMAIN for n in proto.graph.node),
        nodes_exported=graph.nodes_exported, nodes_final=len(proto.graph.node),
        seconds={k: round(v, 3) for k, v in graph.seconds.items()}, simplify=graph.simplify, parity=graph.parity,
        trt_check=graph.trt_check, rewrites=graph.rewrites, layers=graph.prepared.get("layers"),
        swap_check=graph.prepared.get("swap_check"), warnings=warnings, check_report=graph.check_report,
        reference_logits=graph.reference_logits, verdict=export_verdict(graph),
    )  # fmt: skip


def export_verdict(graph: GraphExport) -> Verdict:
    """Not verified when nothing was compared with PyTorch, or when the offline rules of a
    targeted TensorRT version refuse (the others accept: it is still an export) or warn."""
    return Verdict.combine(
        Verdict.of(unverified=[] if graph.parity is not None else
                   [said("nothing was compared with PyTorch ({none})", "export", none=Named("images", 0))]),
        graph.check_report.verdict.at_most_unverified() if graph.check_report is not None else Verdict())


# onnxsim would fuse a Linear's MatMul + Add (a trained, non-zero bias) into Reshape ->
# Gemm -> Reshape. ONNX Runtime runs an int8 Gemm with a float bias in float (its QDQ
# Gemm fusion needs an INT32 bias DequantizeLinear, which TensorRT refuses), while it
# fuses DQ -> MatMul -> Add into one integer kernel; TensorRT fuses either form.
KEEP_MATMUL_ADD = ("fuse_matmul_add_bias_into_gemm", "fuse_matmul_add_bias_into_gemm_batched")


def _simplify(proto, images, opts: ExportOptions, info: ModelInfo):
    """onnxsim, checked against the unsimplified graph on the verification images."""
    before = len(proto.graph.node)
    try:
        import onnxsim
    except ImportError:
        if opts.allow_unsimplified:
            return proto, {"applied": False, "reason": "onnxsim is not installed"}
        raise AFTExportError(
            said("simplification needs onnxsim: pip install onnxsim (or give {simplify_set})", "export",
                 simplify_set=Named('simplify', False))
        ) from None
    try:
        simplified, ok = onnxsim.simplify(proto, skipped_optimizers=list(KEEP_MATMUL_ADD))
        if not ok:
            raise RuntimeError("onnxsim's own check failed")
        check_graph(simplified)
        if images is not None:
            diff = max_abs(OrtRunner(proto, info=info).logits(images), OrtRunner(simplified, info=info).logits(images))
            if diff > SIMPLIFY_MAX_ABS:
                raise RuntimeError(f"simplified graph changes outputs by up to {diff:.3g} (limit {SIMPLIFY_MAX_ABS:g})")
        else:
            diff = None
    except Exception as exc:  # onnxsim raises many types; any failure stops here
        if opts.allow_unsimplified:
            return proto, {"applied": False, "reason": str(exc).splitlines()[0][:200]}
        raise AFTExportError(
            said("onnxsim failed: {value}; rerun with {allow_unsimplified} to keep the unsimplified graph, or "
                 "{simplify_set}", "export", simplify_set=Named('simplify', False),
                 value=str(exc).splitlines()[0][:200])
        ) from None
    return simplified, {"applied": True, "nodes_before": before, "nodes_after": len(simplified.graph.node),
                        "max_abs_vs_unsimplified": diff}  # fmt: skip
