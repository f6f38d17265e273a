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
import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from aft_export import __version__
from aft_export.errors import AFTExportError

OP_FORMS = ("custom", "decomposed")
# what the graph is made for: TensorRT 10.3+/11 (opset 18, com.aft model-local functions),
# or TensorRT 8.5+ (opset 17, functions inlined; see aft_export/export/trt8.py)
TARGETS = ("tensorrt", "tensorrt8")
TWO_GB = 2**31
MAX_BATCH = 65536


@dataclass(frozen=True)
class ExportOptions:
    opset: int = 18
    batch: str = "dynamic"  # "dynamic" or a fixed batch size such as "8"
    dynamic_hw: bool = False  # AFT-conv only: dynamic height and width too
    op_form: str = "custom"
    target: str = "tensorrt"
    simplify: bool = True
    allow_unsimplified: bool = False  # continue without onnxsim if it fails
    verify_images: int = 64
    verify_data: str | None = None
    verify_atol: float = 1e-4
    external_data_threshold: int = TWO_GB  # bytes of weights above which .data is used

    def __post_init__(self) -> None:
        import onnx

        from aft_export.export.functions import MIN_OPSET

        newest = onnx.defs.onnx_opset_version()
        if not isinstance(self.opset, int) or self.opset < MIN_OPSET:
            raise AFTExportError(
                f"opset {self.opset} is too old: the AFT graph needs opset {MIN_OPSET} or newer "
                f"(ReduceMax/ReduceSum with axes as an input); use --opset {MIN_OPSET}"
            )
        if self.opset > newest:
            raise AFTExportError(f"opset {self.opset} is newer than this onnx package knows ({newest})")
        if self.op_form not in OP_FORMS:
            raise AFTExportError(f"unknown op form {self.op_form!r}; choose one of {OP_FORMS}")
        if self.target not in TARGETS:
            raise AFTExportError(f"unknown export target {self.target!r}; choose one of {TARGETS}")
        if self.target == "tensorrt8" and self.opset != 18:
            raise AFTExportError("the TensorRT 8 form is always opset 17 (exported at 18, then converted); "
                                 "leave --opset out with --target tensorrt8")  # fmt: skip
        parse_batch(self.batch)
        if self.verify_images < 0:
            raise AFTExportError("verification image count must be >= 0")


def parse_batch(spec: str | int) -> int | None:
    """``"dynamic"`` -> None; ``"8"`` -> 8. Anything else is a clear error."""
    text = str(spec).strip().lower()
    if text == "dynamic":
        return None
    if re.fullmatch(r"[0-9]+", text) and 1 <= int(text) <= MAX_BATCH:
        return int(text)
    raise AFTExportError(
        f"bad batch specification {spec!r}: use 'dynamic' or a batch size from 1 to {MAX_BATCH}"
    )


@dataclass
class ExportResult:
    path: str
    sha256: str
    bytes: int
    external_data: str | None
    aft_nodes: int
    nodes_exported: int
    nodes_final: int
    seconds: dict[str, float] = field(default_factory=dict)
    simplify: dict | None = None
    parity: dict | None = None
    trt_check: dict | None = None  # TensorRT compatibility per version (aft_export.trtcheck)

    def to_dict(self) -> dict:
        return asdict(self)


def _set_custom_ops(model, enabled: bool) -> None:
    from aft_export.layers.aft import _AFTBase

    for module in model.modules():
        if isinstance(module, _AFTBase):
            module.use_custom_op = enabled


def _dynamic_shapes(cfg, batch: int | None, dynamic_hw: bool):
    import torch

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
    import torch

    from aft_export.export.functions import attach_functions, registered_schemas, translation_table
    from aft_export.graph import compact_node_metadata, name_nodes

    batch = parse_batch(opts.batch)
    example = torch.randn(batch or 2, cfg.in_chans, cfg.img_size, cfg.img_size,
                          generator=torch.Generator().manual_seed(0))  # fmt: skip
    custom = opts.op_form == "custom"
    _set_custom_ops(model, custom)
    try:
        with registered_schemas(), _quiet_exporter():
            program = torch.onnx.export(
                model, (example,), dynamo=True, opset_version=opts.opset,
                custom_translation_table=translation_table() if custom else None,
                dynamic_shapes=_dynamic_shapes(cfg, batch, opts.dynamic_hw),
                input_names=["image"], output_names=["logits"], optimize=True, verbose=False,
            )  # fmt: skip
    finally:
        _set_custom_ops(model, False)
    proto = program.model_proto
    attach_functions(proto)
    compact_node_metadata(proto)
    name_nodes(proto)
    return proto


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
    import torch

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
        "dynamic_batch": str(parse_batch(opts.batch) is None).lower(),
        "dynamic_hw": str(bool(opts.dynamic_hw)).lower(),
        "aft_op_form": opts.op_form,
        "export_target": opts.target,
        "source_checkpoint": Path(meta.path).name,
        "source_sha256": meta.sha256,
        "config": json.dumps(cfg.to_dict(), sort_keys=True),
        "tool": f"aft-export {__version__}",
        "torch_version": str(torch.__version__),
        "opset": str(17 if opts.target == "tensorrt8" else opts.opset),
    }


def set_metadata(model, props: dict[str, str]) -> None:
    del model.metadata_props[:]
    for key in sorted(props):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, props[key]


def read_metadata(model) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def check_graph(model) -> None:
    """Full ONNX check, strict shape inference, and a shape for every graph value."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise RuntimeError(f"exported graph is invalid: {exc}") from exc
    typed = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    missing = [
        out for node in inferred.graph.node for out in node.output
        if out and (out not in typed or not typed[out].type.tensor_type.HasField("shape"))
    ]  # fmt: skip
    if missing:
        raise RuntimeError(f"shape inference left {len(missing)} values without a shape: {missing[:5]}")


def _ort_session(model):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _weights_bytes(model) -> int:
    return sum(len(t.raw_data) for t in model.graph.initializer)


def save_onnx(model, path: Path, threshold: int = TWO_GB) -> str | None:
    """Write atomically; weights above ``threshold`` bytes go to ``<name>.data`` beside it.

    Returns the external data file name, or None for a single self-contained file.
    """
    import onnx

    path = Path(path)
    if not path.parent.is_dir():
        raise AFTExportError(f"output directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise AFTExportError(f"output directory {path.parent} is not writable")
    external = _weights_bytes(model) > threshold
    data_name = path.name + ".data" if external else None
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        tmp = tmpdir / path.name
        if external:
            onnx.save_model(model, tmp, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=data_name, size_threshold=1024)  # fmt: skip
            os.replace(tmpdir / data_name, path.parent / data_name)
        else:
            tmp.write_bytes(model.SerializeToString(deterministic=True))
        os.replace(tmp, path)
        stale = path.parent / (path.name + ".data")
        if not external and stale.exists():
            stale.unlink()  # an earlier export's weights must not sit beside a new file
    finally:
        for leftover in tmpdir.iterdir():
            leftover.unlink()
        tmpdir.rmdir()
    return data_name


def _verification_images(meta, opts: ExportOptions) -> tuple[np.ndarray, str]:
    """N real images in the model's preprocessing, and where they came from."""
    from aft_export import datasets
    from aft_export.data import load_labelled, normalize

    def usable(c) -> bool:
        return bool(c) and (datasets.is_named(c) or Path(c).exists())

    prov = meta.provenance
    candidates = [opts.verify_data] if opts.verify_data else [
        prov.get("metrics", {}).get("test_data"), prov.get("train_config", {}).get("test_data"), prov.get("data")]
    source = next((c for c in candidates if usable(c)), opts.verify_data)
    if not usable(source):
        env = os.environ.get("AFT_CIFAR10_DIR")
        source = str(Path(env) / "test.tar") if env and Path(env, "test.tar").exists() else source
    if not usable(source):
        raise AFTExportError(
            "verification needs real images: pass --verify-data DIR_OR_TAR (or --verify-images 0 to skip)"
        )
    data = load_labelled(source, meta.config.img_size, limit=opts.verify_images)
    return normalize(data.images, meta.mean, meta.std).numpy(), str(source)


def compare(reference: np.ndarray, candidate: np.ndarray) -> dict:
    """Max/mean abs difference, cosine similarity and top-1 agreement of two logit sets."""
    ref = reference.astype(np.float64)
    got = candidate.astype(np.float64)
    diff = np.abs(ref - got)
    cos = (ref * got).sum(1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1) + 1e-30)
    return {
        "images": int(ref.shape[0]),
        "max_abs": float(diff.max()) if diff.size else 0.0,
        "mean_abs": float(diff.mean()) if diff.size else 0.0,
        "cosine_min": float(cos.min()) if cos.size else 1.0,
        "top1_agreement": float((ref.argmax(1) == got.argmax(1)).mean()) if ref.size else 1.0,
    }


def _run_ort(session, images: np.ndarray, batch: int | None) -> np.ndarray:
    step = batch or 32
    outs = []
    for i in range(0, len(images), step):
        chunk = images[i : i + step]
        if batch is not None and len(chunk) != batch:
            break  # a fixed-batch graph takes whole batches only
        outs.append(session.run(["logits"], {"image": chunk})[0])
    return np.concatenate(outs) if outs else np.zeros((0, 0), np.float32)


def export_checkpoint(checkpoint, out, options: ExportOptions | None = None, config: str | None = None,
                      log=print) -> ExportResult:  # fmt: skip
    """Export a checkpoint to ONNX, check, simplify and verify it. Returns the report."""
    from aft_export.checkpoint import load_checkpoint

    opts = options or ExportOptions()
    out = Path(out)
    check_output_path(out)
    t = time.perf_counter()
    model, meta = load_checkpoint(checkpoint, config=config)
    if opts.dynamic_hw and meta.config.fixed_input_size:
        _dynamic_shapes(meta.config, None, True)  # raises the clear error
    return export_loaded(model, meta, out, opts, log, started=t)


def check_output_path(out: Path) -> None:
    if not out.parent.is_dir():
        raise AFTExportError(f"output directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK):
        raise AFTExportError(f"output directory {out.parent} is not writable")


def export_loaded(model, meta, out: Path, opts: ExportOptions, log=print, started: float | None = None) -> ExportResult:
    """The export stages for a model already in memory, with its metadata (a checkpoint's
    :class:`~aft_export.checkpoint.CheckpointMeta`, or a model trained elsewhere:
    :mod:`aft_export.byo`, whose ``meta.prepare_export`` swaps in our AFT layers first)."""
    import torch

    from aft_export.export.functions import DOMAIN
    from aft_export.graph import module_by_output, restore_node_metadata, name_nodes

    out = Path(out)
    check_output_path(out)
    seconds: dict[str, float] = {}
    t = time.perf_counter() if started is None else started
    cfg = meta.config
    images, source = (None, None)
    if opts.verify_images:
        images, source = _verification_images(meta, opts)
    prepare = getattr(meta, "prepare_export", None)  # models trained elsewhere (aft_export/byo)
    if prepare is not None:
        model = prepare(model, images, log)

    proto = _torch_export(model, cfg, opts)
    set_metadata(proto, _metadata(meta, opts))
    seconds["export"] = time.perf_counter() - t
    nodes_exported = len(proto.graph.node)

    t = time.perf_counter()
    check_graph(proto)
    seconds["check"] = time.perf_counter() - t

    simplify_report = None
    if opts.simplify:
        t = time.perf_counter()
        props, modules = read_metadata(proto), module_by_output(proto)
        proto, simplify_report = _simplify(proto, images, opts)
        set_metadata(proto, props)
        restore_node_metadata(proto, modules)  # onnxsim drops node metadata
        name_nodes(proto)
        seconds["simplify"] = time.perf_counter() - t

    if opts.target == "tensorrt8":
        from aft_export.export.trt8 import to_tensorrt8

        t = time.perf_counter()
        proto = to_tensorrt8(proto)
        check_graph(proto)
        seconds["tensorrt8"] = time.perf_counter() - t

    t = time.perf_counter()
    trt_check = _trt_check(proto, out, log)
    seconds["trt_check"] = time.perf_counter() - t

    parity = None
    if images is not None:
        t = time.perf_counter()
        batch = parse_batch(opts.batch)
        ort_out = _run_ort(_ort_session(proto), images, batch)
        with torch.no_grad():
            ref = torch.cat([model(torch.from_numpy(images[i : i + 256])) for i in range(0, len(images), 256)])
        parity = compare(ref.numpy()[: len(ort_out)], ort_out)
        parity["data"] = source
        parity["passed"] = bool(parity["max_abs"] <= opts.verify_atol and parity["top1_agreement"] == 1.0)
        seconds["verify"] = time.perf_counter() - t

    if parity is not None and not parity["passed"]:
        raise AFTExportError(
            f"verification failed: ONNX Runtime differs from PyTorch by up to {parity['max_abs']:.3g} "
            f"(limit {opts.verify_atol:g}) with {100 * parity['top1_agreement']:.1f}% top-1 agreement on "
            f"{parity['images']} images; nothing was written to {out}"
        )
    t = time.perf_counter()
    external = save_onnx(proto, out, opts.external_data_threshold)
    seconds["save"] = time.perf_counter() - t
    result = ExportResult(
        path=str(out), sha256=hashlib.sha256(out.read_bytes()).hexdigest(), bytes=out.stat().st_size,
        external_data=external, aft_nodes=sum(n.domain == DOMAIN for n in proto.graph.node),
        nodes_exported=nodes_exported, nodes_final=len(proto.graph.node),
        seconds={k: round(v, 3) for k, v in seconds.items()}, simplify=simplify_report, parity=parity,
        trt_check=trt_check,
    )  # fmt: skip
    return result


def _trt_check(proto, out: Path, log) -> dict:
    """TensorRT's rules for the versions the graph is made for: stop when every one of
    them would refuse it, warn when some would."""
    from aft_export.trtcheck import check_model, enforce

    report = check_model(proto)
    report.path = str(out)
    enforce(report, log, what="the export")
    return {"status": report.status, "findings": len(report.findings)}


def _simplify(proto, images, opts: ExportOptions):
    """onnxsim, checked against the unsimplified graph on the verification images."""
    before = len(proto.graph.node)
    try:
        import onnxsim
    except ImportError:
        if opts.allow_unsimplified:
            return proto, {"applied": False, "reason": "onnxsim is not installed"}
        raise AFTExportError(
            "simplification needs onnxsim: pip install onnxsim (or pass --no-simplify)"
        ) from None
    try:
        simplified, ok = onnxsim.simplify(proto)
        if not ok:
            raise RuntimeError("onnxsim's own check failed")
        check_graph(simplified)
        if images is not None:
            batch = parse_batch(opts.batch)
            a = _run_ort(_ort_session(proto), images, batch)
            b = _run_ort(_ort_session(simplified), images, batch)
            diff = float(np.abs(a - b).max()) if a.size else 0.0
            if diff > 1e-5:
                raise RuntimeError(f"simplified graph changes outputs by up to {diff:.3g} (limit 1e-5)")
        else:
            diff = None
    except Exception as exc:  # onnxsim raises many types; any failure stops here
        if opts.allow_unsimplified:
            return proto, {"applied": False, "reason": str(exc).splitlines()[0][:200]}
        raise AFTExportError(
            f"onnxsim failed: {str(exc).splitlines()[0][:200]}; rerun with --allow-unsimplified "
            f"to keep the unsimplified graph, or --no-simplify"
        ) from None
    return simplified, {"applied": True, "nodes_before": before, "nodes_after": len(simplified.graph.node),
                        "max_abs_vs_unsimplified": diff}  # fmt: skip
