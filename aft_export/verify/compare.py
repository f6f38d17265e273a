"""Comparing outputs: every metric and every tolerance, in one place.

One fixed tolerance fails every fp16 and int8 build, so people stop checking; here each
precision has its own limits (:data:`TOLERANCES`, one row per precision, each limit with
its reason), every limit can be overridden, and every comparison in aft-export (export
verification, the simplifier check, quantisation agreement, parity, localisation) uses
the metrics below.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from aft_export.errors import AFTExportError
from aft_export.version import ReadAsDict

# An exported graph against PyTorch, and onnxsim's graph against the unsimplified one:
# both are fp32 computations of the same function.
EXPORT_MAX_ABS = 1e-4
SIMPLIFY_MAX_ABS = 1e-5
# A model trained elsewhere, with its public AFT layers swapped for ours (aft_export/byo),
# against the unmodified original: fp32 logits, the bound, the same as fp32 parity.
SWAP_MAX_ABS = 1e-4
# Largest relative error of an intermediate value (max abs difference over the
# reference's max abs) before localisation calls it diverged.
# bf16: 2.5x the worst intermediate value of the zoo's fp32 files on openvino-bf16 (0.083, an Erf of a GELU)
INTERMEDIATE_REL = {"fp32": 1e-4, "fp16": 2e-2, "bf16": 0.25, "int8": 0.25}


@dataclass(frozen=True)
class Tolerance:
    max_abs: float  # largest absolute logit difference
    min_cosine: float  # smallest per-image cosine similarity of the logits
    min_top1_agreement: float  # share of images whose top-1 class matches the reference
    # Stress inputs (scaled-up and constant images) only need finite outputs and this
    # cosine. int8 saturates outside its calibrated ranges by design, so it is held to
    # finiteness there; fp32 and fp16 have no such excuse.
    stress_min_cosine: float = 0.0
    # A top-1 flip on an image whose reference top-1/top-2 logit margin is at most this
    # is a tie within the precision's error, not a disagreement: fp16's max abs error
    # can swap two classes that are that close. 0 counts every flip.
    tie_margin: float = 0.0

    def __post_init__(self) -> None:
        for name, (ok, says) in LIMITS.items():
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and ok(value)):
                raise AFTExportError(f"{name} must be {says}, got {value!r}")


# what each limit may be: a NaN or an infinite limit would turn its check off, and a
# cosine above 1 or an agreement above 1 would fail every artifact
LIMITS = {
    "max_abs": (lambda v: v >= 0, "a finite number >= 0"),
    "min_cosine": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "min_top1_agreement": (lambda v: 0 <= v <= 1, "in [0, 1] (a share, not a percentage)"),
    "stress_min_cosine": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "tie_margin": (lambda v: v >= 0, "a finite number >= 0"),
}


TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(max_abs=1e-4, min_cosine=0.99999, min_top1_agreement=1.0, stress_min_cosine=0.99999),
    "fp16": Tolerance(max_abs=5e-2, min_cosine=0.999, min_top1_agreement=0.99, stress_min_cosine=0.999,
                      tie_margin=1e-1),
    # an fp32 file computed in bf16 (openvino-bf16): 2.5x the worst each metric reached on the zoo's 10,000
    # CIFAR-10 test images (four models), rounded outward; `python benchmarks/bf16_zoo.py` measures it again
    "bf16": Tolerance(max_abs=0.4, min_cosine=0.985, min_top1_agreement=0.99, stress_min_cosine=0.9992,
                      tie_margin=0.25),
    "int8": Tolerance(max_abs=1.0, min_cosine=0.98, min_top1_agreement=0.95, stress_min_cosine=0.0),
}
# how the bf16 row was derived from measurement (benchmarks/bf16_zoo.py applies it and checks the row)
BF16_HEADROOM = 2.5


# the precisions, from the least lossy to the most: a file computed in a runtime's lossier precision
# (fp32 on openvino-bf16) is held to that precision's limits, never looser ones than its own
LOSS = ("fp32", "fp16", "bf16", "int8")


def judged_precision(precision: str, compute: str = "") -> str:
    """The row of :data:`TOLERANCES` a file of ``precision`` is judged by when its runtime computes its
    fp32 parts in ``compute`` ("": as the file says): the lossier of the two."""
    if not compute or precision not in LOSS or compute not in LOSS:
        return precision
    return max(precision, compute, key=LOSS.index)


def tolerances_with(overrides: list[str] | None = None) -> dict[str, Tolerance]:
    """Apply ``PRECISION.FIELD=VALUE`` overrides, e.g. ``fp16.max_abs=0.1``."""
    tols = dict(TOLERANCES)
    for item in overrides or []:
        key, sep, value = item.partition("=")
        prec, dot, name = key.partition(".")
        fields = {f.name for f in dataclasses.fields(Tolerance)}
        if not sep or not dot or prec not in tols or name not in fields:
            raise AFTExportError(
                f"bad tolerance {item!r}; use PRECISION.FIELD=VALUE with PRECISION in {sorted(tols)} "
                f"and FIELD in {sorted(fields)}"
            )
        try:
            number = float(value)
        except ValueError:
            raise AFTExportError(f"bad tolerance {item!r}: {value!r} is not a number; give e.g. "
                                 f"{prec}.{name}={getattr(TOLERANCES[prec], name)}") from None  # fmt: skip
        try:
            tols[prec] = dataclasses.replace(tols[prec], **{name: number})
        except AFTExportError as exc:
            raise AFTExportError(f"bad tolerance {item!r}: {exc}; the default is "
                                 f"{prec}.{name}={getattr(TOLERANCES[prec], name)}") from None  # fmt: skip
    return tols


def metrics(reference: np.ndarray, candidate: np.ndarray) -> dict:
    """Differences between two (N, classes) logit arrays."""
    ref = reference.astype(np.float64)
    got = candidate.astype(np.float64)
    nonfinite = int((~np.isfinite(got)).sum())
    got_f = np.where(np.isfinite(got), got, 0.0)
    diff = np.abs(ref - got_f)
    noise = float((diff**2).sum())
    signal = float((ref**2).sum())
    cos = (ref * got_f).sum(1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got_f, axis=1) + 1e-30)
    k = min(5, ref.shape[1])
    top_ref = np.argsort(-ref, axis=1)[:, :k]
    top_got = np.argsort(-got_f, axis=1)[:, :k]
    overlap = np.mean([len(set(a) & set(b)) / k for a, b in zip(top_ref, top_got)])
    return {
        "images": int(ref.shape[0]),
        "max_abs": float(diff.max()),
        "mean_abs": float(diff.mean()),
        "max_rel": float(diff.max() / (np.abs(ref).max() + 1e-30)),
        "cosine_min": float(cos.min()),
        "sqnr_db": float("inf") if noise == 0 else float(10 * np.log10(signal / noise)),
        "top1_agreement": float((top_ref[:, 0] == top_got[:, 0]).mean()),
        # the reference's top-1/top-2 margin on each image whose top-1 changed
        "flip_margins": [round(float(v), 6) for v in _margins(ref)[top_ref[:, 0] != top_got[:, 0]]],
        "top5_overlap": float(overlap),
        "nonfinite": nonfinite,
    }


def _margins(logits: np.ndarray) -> np.ndarray:
    if logits.shape[1] < 2:
        return np.full(len(logits), np.inf)
    top2 = np.sort(logits, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def judge(m: dict, tol: Tolerance, stress: bool = False) -> list[str]:
    """The limits an artifact broke (empty: it passes). Stress inputs have no labels
    and extreme ranges: only finiteness and direction (``stress_min_cosine``) are
    required there."""
    failures = []
    if m["nonfinite"]:
        failures.append(f"{m['nonfinite']} NaN/Inf outputs")
    limit = tol.stress_min_cosine if stress else tol.min_cosine
    if m["cosine_min"] < limit:
        failures.append(f"cosine {m['cosine_min']:.6f} < {limit}")
    if not stress:
        if m["max_abs"] > tol.max_abs:
            failures.append(f"max abs {m['max_abs']:.3g} > {tol.max_abs:g}")
        counted = sum(v > tol.tie_margin for v in m.get("flip_margins", [])) if "flip_margins" in m else None
        agreement = m["top1_agreement"] if counted is None else 1.0 - counted / max(m["images"], 1)
        if agreement < tol.min_top1_agreement:
            ties = "" if counted is None else f" ({counted} decisive flips, ties within {tol.tie_margin:g} not counted)"
            failures.append(f"top-1 agreement {agreement:.4f} < {tol.min_top1_agreement}{ties}")
    return failures


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference of two arrays of one shape (0 for empty ones)."""
    d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    return float(d.max()) if d.size else 0.0


def relative_error(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Max abs difference over the reference's max abs (non-finite candidates count as 0)."""
    r = np.asarray(reference, np.float64)
    c = np.asarray(candidate, np.float64)
    diff = np.abs(np.where(np.isfinite(c), c, 0.0) - r)
    return float(diff.max() / (np.abs(r).max() + 1e-12)) if diff.size else 0.0


def agreement(reference: np.ndarray, candidate: np.ndarray) -> dict:
    """Top-1 agreement in percent (and disagreement), max abs and MSE of two logit sets:
    the summary quantisation reports against its fp32 source."""
    if not len(reference):
        return {"images": 0, "top1_agreement": 100.0, "disagreement": 0.0, "max_abs": 0.0, "mse": 0.0}
    m = metrics(reference, candidate)
    agree = m["top1_agreement"]
    diff = np.asarray(reference, np.float64) - np.asarray(candidate, np.float64)
    return {"images": m["images"], "top1_agreement": round(100 * agree, 3), "disagreement": round(100 * (1 - agree), 3),
            "max_abs": m["max_abs"], "mse": float((diff**2).mean())}  # fmt: skip


@dataclass(frozen=True)
class SwapAgreement(ReadAsDict):
    """A swapped model (or one layer) against its original, per input (:func:`swap_agreement`). Its
    ``passed`` is the one verdict of a swap: within ``atol`` on every input whose original output is
    finite, and finite everywhere; ``error``: the swapped one could not run the original's inputs (its
    first line; nothing was compared, never a pass). ``real_inputs``: of the inputs, the real images
    (said by the export's check only)."""

    inputs: int
    max_abs: float
    original_nonfinite_images: int
    swapped_nonfinite_values: int
    atol: float
    real_inputs: int | None = None
    error: str | None = None

    @classmethod
    def failed(cls, error: str, atol: float = SWAP_MAX_ABS) -> SwapAgreement:
        """A swap that could not be compared: ``error`` says why."""
        return cls(0, float("inf"), 0, 0, atol, error=error)

    @property
    def passed(self) -> bool:
        return bool(self.error is None and self.max_abs <= self.atol and self.swapped_nonfinite_values == 0)

    def to_dict(self) -> dict:
        out = {"inputs": self.inputs, "max_abs": self.max_abs,
               "original_nonfinite_images": self.original_nonfinite_images,
               "swapped_nonfinite_values": self.swapped_nonfinite_values, "atol": self.atol,
               "passed": self.passed}  # fmt: skip
        if self.real_inputs is not None:
            out["real_inputs"] = self.real_inputs
        if self.error is not None:
            out["error"] = self.error
        return out


def swap_agreement(reference: np.ndarray, candidate: np.ndarray, atol: float = SWAP_MAX_ABS) -> SwapAgreement:
    """A swapped model against its original, per input (first axis): within ``atol`` on
    every input whose original output is finite, and finite everywhere, including where
    the original overflows (aft-pytorch's raw ``exp``): a :class:`SwapAgreement`."""
    ref = np.asarray(reference, np.float64).reshape(len(reference), -1)
    got = np.asarray(candidate, np.float64).reshape(len(candidate), -1)
    if ref.shape != got.shape:
        raise AFTExportError(f"the swapped model returns {got.shape}, the original {ref.shape}")
    finite_rows = np.isfinite(ref).all(axis=1)
    diff = np.abs(ref[finite_rows] - got[finite_rows])
    return SwapAgreement(inputs=len(ref), max_abs=float(diff.max()) if diff.size else 0.0,
                         original_nonfinite_images=int((~finite_rows).sum()),
                         swapped_nonfinite_values=int((~np.isfinite(got)).sum()), atol=atol)  # fmt: skip
