"""The calibration ranges cache: one file of ranges (ONNX Runtime's calibration-cache
format) per key made of the model's sha256, the calibration set's sha256, the method and
the version of the range algorithm, so a second run with the same inputs skips
calibration and anything changed invalidates it. Entries are written only once a run's
output is (:func:`write_cache_entries`), each whole or not at all."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from aft_export.data.calibration import CalibrationSet
from aft_export.errors import AFTExportError, Named, said
from aft_export.fileio import atomic_write_bytes, cache_root, make_dirs
from aft_export.options import QuantizeOptions
from aft_export.quantization.placement import QUANTIZED_OP_TYPES, op_types
from aft_export.readers import parse_json, read_text

# what the cached ranges mean (aft_export.quantization.ranges); a change of algorithm changes it, so
# ranges computed the old way are never read as the new ones
RANGES_VERSION = "aft-ranges-1"


def default_cache_dir() -> Path:
    return cache_root("calibration")


def cache_path(opts: QuantizeOptions, model_sha: str, cset: CalibrationSet) -> Path | None:
    """Where the ranges for this model, calibration set and method are cached; None with the cache off."""
    if opts.cache_dir == "":
        return None
    key = hashlib.sha256(json.dumps({
        "model": model_sha, "calibration": cset.sha256, "method": opts.method,
        "percentile": opts.percentile if opts.method == "percentile" else None,
        "ops": op_types(opts), "bins": "trt-entropy-2048/128" if opts.method == "entropy" else None,
        "ranges": RANGES_VERSION, "aft_core": opts.quantize_aft_core,
    }, sort_keys=True).encode()).hexdigest()[:32]  # fmt: skip
    root = Path(opts.cache_dir) if opts.cache_dir else default_cache_dir()
    return root / f"{key}.json"  # the directory is made when an entry is written (quantize_model)


def cached_ranges_ok(path: Path, model, types: tuple[str, ...] = QUANTIZED_OP_TYPES) -> bool:
    """A cache file that parses and names a range for every activation the quantiser reads (every float
    input of every quantisable node: :func:`~aft_export.quantization.calibrators.calibration_tensors`, the
    second operand of an activation x activation MatMul included); anything else (a truncated or
    foreign file, or one made for another graph) is recomputed, not trusted."""
    try:  # bounded, UTF-8, nesting checked (readers): a crafted file is recomputed, never a traceback
        data = parse_json(read_text(path, "calibration cache file"), str(path))
    except AFTExportError:
        return False
    ranges = data.get("data") if isinstance(data, dict) else None  # ORT's save_tensors_data layout
    if not isinstance(ranges, dict) or not ranges:
        return False
    from aft_export.quantization.calibrators import calibration_tensors

    return set(calibration_tensors(model, types)) <= set(ranges)


def write_cache_entries(entries) -> None:
    """Write calibration cache entries ``(path, bytes)``: each appears whole or not at all."""
    for path, data in entries:
        make_dirs(Path(path).parent, "calibration cache", said("give {without} to do without, or another {cache_dir}",
                                                               "quantize", without=Named("no_cache", True)))
        atomic_write_bytes(path, data)
