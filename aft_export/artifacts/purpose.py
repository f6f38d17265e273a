"""What a file is for: the runtimes an ONNX file is made for, from its export target and what its
compute runs in (:func:`made_for`, which ``info`` and the pipeline's report show), and the file a
CPU would run faster than a TensorRT int8 (:func:`cpu_advice`, the note the commands that run
files on a CPU print).

The int8 graph made for TensorRT keeps its rest in fp16 (strongly typed TensorRT runs the graph's
types, and fp16 is fast there); ONNX Runtime computes that fp16 slowly on a CPU, so there it runs
slower than the fp32 file (OpenVINO computes it in fp32, as fast as the CPU's int8, where its 8-bit
weights may run: a CPU with VNNI). The CPU's int8 is the portable target's: the rest in fp32, 7-bit weights
(``aft-export quantize model.onnx target=portable``). Both are read from the graph itself
(:func:`aft_export.artifacts.onnxio.compute_precisions`), so other tools' files are judged alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from aft_export.artifacts.kinds import ONNX, is_onnx
from aft_export.artifacts.onnxio import ArtifactMeta, compute_precisions, graph_precision, load_onnx
from aft_export.options import DEFAULT_TARGET, EXPORT_TARGETS
from aft_export.runtimes import DEFAULT_BACKEND, title_of

SLOW_ON_CPUS = "slow in ONNX Runtime on CPUs: use the portable int8"
CPU_INT8 = EXPORT_TARGETS["portable"]  # the target whose int8 is the CPU's (fp32 rest, 7-bit weights)


def made_for(target: str | None, precision: str, compute: dict[str, int], weight_bits: int | None = None) -> str:
    """The runtimes a file is for, in words: from its export target (None or unknown: another tool's
    file, which records none), its precision (``graph_precision``) and its compute nodes per
    precision (``compute_precisions``). A file that computes in fp16 (an fp16 graph, an int8 graph's
    fp16 rest) is for the runtimes where fp16 is fast, and said to be slow in ONNX Runtime on CPUs
    (OpenVINO computes such a graph's fp16 in fp32, as fast as the portable int8 where it may run it). ``weight_bits``:
    an int8 recipe's; the CPU's int8 asked for with full-range weights (``weight_bits=8``) is wrong
    in OpenVINO on CPUs without VNNI (QuantizeOptions.weight_bits), and says so."""
    fp16 = compute.get("fp16", 0) > 0
    t = EXPORT_TARGETS.get(target or "")
    if t is None:
        if fp16:
            return f"GPUs: {EXPORT_TARGETS[DEFAULT_TARGET].fp16_runtimes} (it computes in fp16: {SLOW_ON_CPUS})"
        return "not recorded (another tool's file)"
    if fp16 and precision != "fp32":
        return f"{t.fp16_runtimes} ({SLOW_ON_CPUS}" + (")" if precision == "int8" else " or the fp32 file)")
    if precision == "int8" and t is CPU_INT8 and weight_bits == 8:
        return "CPUs: ONNX Runtime; OpenVINO on CPUs with VNNI only (8-bit weights)"
    return t.int8_runtimes if precision == "int8" else t.runtimes


def target_device(target: str | None) -> str:
    """The device class a file of export target ``target`` is made for: ``cpu`` for the portable target
    (the CPU's int8), ``gpu`` for the TensorRT targets, "" where the file records none."""
    if target == CPU_INT8.name:
        return "cpu"
    return "gpu" if target in EXPORT_TARGETS else ""


def file_purpose(model) -> dict:
    """``{"for": made_for(...), "compute": compute_precisions(model)}`` of a ModelProto."""
    compute = compute_precisions(model)
    meta = ArtifactMeta.of(model)
    target = meta.get("export_target") or (DEFAULT_TARGET if meta.ours else None)
    precision = graph_precision(model)
    return {"for": made_for(target, precision, compute, _weight_bits(meta) if precision == "int8" else None),
            "compute": compute}


def _weight_bits(meta: ArtifactMeta) -> int | None:
    """The int8 weight bits the file's recipe records (8 where it names none), None without a readable recipe."""
    try:
        recipe = meta.json("quantization")
    except (KeyError, ValueError):
        return None
    return recipe.get("weight_bits", 8) if isinstance(recipe, dict) else None


def engine_made_for(record: dict) -> str:
    """What an engine is for, from its manifest (or the pipeline's record of it): its library and
    version, and the GPUs it targets where the manifest names them (TensorRT-RTX). A part of a
    hand-edited manifest that is not what it should be (a library that is not text, targets that
    are not a list of texts) is said as malformed, not shown; the rest is shown."""
    library = record.get("library") or "tensorrt"
    title = title_of(library) if isinstance(library, str) else "an engine (library malformed, not shown)"
    version = record.get("library_version") or ""
    cc = record.get("compute_capabilities") or []
    if not isinstance(cc, list) or not all(isinstance(c, str) for c in cc):
        targets = " (compute capabilities malformed, not shown)"
    else:
        targets = f" on GPUs of compute capability {', '.join(cc)}" if cc else ""
    return f"{title} {version if isinstance(version, str) else ''}".rstrip() + targets


@dataclass(frozen=True)
class CpuAdvice:
    """A TensorRT int8 (rest fp16) about to run on a CPU, and the faster file there: ``better``, the
    CPU's int8 beside it, or where there is none the command that makes it from ``fp32`` (the fp32
    file beside it, or None: the user's)."""

    path: str
    compute: dict
    better: str | None
    fp32: str | None
    made: str  # the CPU int8's name, beside the file

    @property
    def text(self) -> str:
        """One line, with the command line that makes the CPU's int8 (in flags: it is typed in a shell)."""
        counts = ", ".join(f"{v} {k}" for k, v in self.compute.items())
        head = (f"{Path(self.path).name} is int8 with its rest in fp16 ({counts} compute nodes), made for TensorRT: "
                f"slow in ONNX Runtime on a CPU")  # fmt: skip
        if self.better:
            return f"{head}; the CPU's int8 beside it, {self.better}, is faster here"
        from aft_export.options.commands import command_line

        line = command_line("quantize", self.fp32 or "MODEL.onnx", precision="int8", target="portable", calib="IMAGES",
                            output=self.made)  # fmt: skip
        return f"{head}; the CPU's int8 is faster here: {line}"


def cpu_advice(path) -> CpuAdvice | None:
    """For an ONNX file about to run on ONNX Runtime's CPU provider (OpenVINO computes the fp16 rest in fp32): the
    advice when it is an int8 graph with fp16 compute (the TensorRT target's int8, or another
    tool's file of that kind such as ModelOpt's), else None. Beside ``NAME.int8.onnx`` it looks for
    ``NAME.portable.int8.onnx`` (the pipeline's name for the CPU int8) and the fp32 ``NAME.onnx``.
    Reads the file's graph, not its weights; a file it cannot read gets no advice (the command
    that runs it says what is wrong)."""
    path = Path(path)
    if not is_onnx(path) or not path.is_file():
        return None
    try:
        model = load_onnx(path, external_data=False)
    except Exception:  # noqa: BLE001 - said by the command that runs the file
        return None
    if graph_precision(model) != "int8":
        return None
    compute = compute_precisions(model)
    if not compute.get("fp16"):
        return None
    stem = ONNX.stem(path.name).removesuffix(".int8")
    made = f"{stem}.{CPU_INT8.name}.int8.onnx"
    source = ArtifactMeta.of(model).source_sha256
    better = path.with_name(made)
    if better.is_file() and _is_cpu_int8(better, source):
        return CpuAdvice(str(path), compute, better.name, None, made)
    fp32 = path.with_name(f"{stem}.onnx")
    return CpuAdvice(str(path), compute, None, str(fp32) if fp32.is_file() and fp32 != path else None, made)


def _is_cpu_int8(path: Path, source: str) -> bool:
    """``path`` is the portable target's int8 (of the same model, where both files say which)."""
    try:
        model = load_onnx(path, external_data=False)
    except Exception:  # noqa: BLE001 - not a file to point anyone at
        return False
    meta = ArtifactMeta.of(model)
    same = not (source and meta.source_sha256) or source == meta.source_sha256
    return meta.get("export_target") == CPU_INT8.name and graph_precision(model) == "int8" and same


def cpu_notes(paths, backend: str | None, logger) -> None:
    """On ONNX Runtime's CPU (``backend`` None is it), a note per ONNX file of ``paths`` (each file once)
    where a faster file exists there or can be made for it (:func:`cpu_advice`), as a warning of ``logger``
    (the ``aft_export`` one), before the file runs: for Python callers as for the command line, which shows
    the library's warnings on stderr. OpenVINO computes an int8 file's fp16 rest in fp32, as fast as the
    CPU's own int8: no note there."""
    if backend not in (None, DEFAULT_BACKEND):
        return
    once: dict[str, str] = {}
    for path in (str(p) for p in paths if isinstance(p, (str, os.PathLike))):
        if is_onnx(path) and os.path.isfile(path):
            once.setdefault(os.path.realpath(path), path)  # each file once, as first given
    for path in once.values():
        advice = cpu_advice(path)
        if advice is not None:
            logger.warning(f"note: {advice.text}")
