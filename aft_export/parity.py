"""Parity: every artifact against the fp32 PyTorch reference, with tolerances per precision.

One fixed tolerance fails every fp16 and int8 build, so people stop checking; here
each precision has its own limits (:data:`TOLERANCES`, the one place they live),
and every limit can be overridden. Real images are compared, plus stress inputs:
scaled-up images (large activations) and constant images.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from aft_export.errors import AFTExportError, RuntimeMissing


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


TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(max_abs=1e-4, min_cosine=0.99999, min_top1_agreement=1.0, stress_min_cosine=0.99999),
    "fp16": Tolerance(max_abs=5e-2, min_cosine=0.999, min_top1_agreement=0.99, stress_min_cosine=0.999,
                      tie_margin=1e-1),
    "int8": Tolerance(max_abs=1.0, min_cosine=0.98, min_top1_agreement=0.95, stress_min_cosine=0.0),
}


def tolerances_with(overrides: list[str] | None = None) -> dict[str, Tolerance]:
    """Apply ``PRECISION.FIELD=VALUE`` overrides, e.g. ``fp16.max_abs=0.1``."""
    tols = dict(TOLERANCES)
    for item in overrides or []:
        key, sep, value = item.partition("=")
        prec, dot, name = key.partition(".")
        fields = {f.name for f in dataclasses.fields(Tolerance)}
        if not sep or not dot or prec not in tols or name not in fields:
            raise AFTExportError(
                f"bad tolerance {item!r}: use PRECISION.FIELD=VALUE with PRECISION in {sorted(tols)} "
                f"and FIELD in {sorted(fields)}"
            )
        try:
            tols[prec] = dataclasses.replace(tols[prec], **{name: float(value)})
        except ValueError:
            raise AFTExportError(f"bad tolerance {item!r}: {value!r} is not a number") from None
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


def stress_inputs(images: np.ndarray, mean, std) -> dict[str, np.ndarray]:
    """Scaled-up real images, and constant black, white and mid-grey images (NCHW, normalised)."""
    n = min(8, len(images))
    _, c, h, w = images.shape
    m = np.asarray(mean, np.float32).reshape(1, c, 1, 1)
    s = np.asarray(std, np.float32).reshape(1, c, 1, 1)
    consts = np.stack([np.full((c, h, w), v, np.float32) for v in (0.0, 1.0, 0.5)])
    return {"scaled_x4": images[:n] * 4.0, "constant": (consts - m) / s}


def check_compatible(reference, runner) -> None:
    """Refuse artifacts made from another model, or with other classes or input shapes."""
    ref, art = reference.info, runner.info
    if art.source_sha256 and ref.source_sha256 and art.source_sha256 != ref.source_sha256:
        raise AFTExportError(
            f"{runner.path} was exported from another checkpoint (sha256 {art.source_sha256[:12]}..., "
            f"reference {ref.source_sha256[:12]}...); compare artifacts of the same model"
        )
    if len(art.classes) != len(ref.classes) or art.classes != ref.classes:
        raise AFTExportError(f"{runner.path} has {len(art.classes)} classes, the reference {len(ref.classes)}")
    if tuple(art.input_size) != tuple(ref.input_size):
        raise AFTExportError(f"{runner.path} takes input {art.input_size}, the reference {ref.input_size}")


def _divergence(checkpoint, artifact, artifacts, runner, images) -> dict:
    """Localise a failing ONNX artifact against an fp32 graph of the same model: an fp32
    ONNX among the artifacts if one was exported with the same options, else a fresh
    export of the checkpoint with the options recorded in the artifact's metadata."""
    import tempfile
    from pathlib import Path

    from aft_export.localize import localize
    from aft_export.runners import OrtRunner

    meta = runner.info.extra
    reference = None
    for other in artifacts:
        if other == artifact or not str(other).endswith(".onnx"):
            continue
        try:
            cand = OrtRunner(str(other))
        except AFTExportError:
            continue
        same = {k: cand.info.extra.get(k) == meta.get(k) for k in ("source_sha256", "aft_op_form", "opset")}
        if cand.info.precision == "fp32" and all(same.values()):
            reference = str(other)
            break
    try:
        if reference is not None:
            return {"reference": reference, **localize(reference, artifact, images, runner.info.precision)}
        from aft_export.export.exporter import ExportOptions, export_checkpoint

        with tempfile.TemporaryDirectory(prefix="aft-localize-") as tmp:
            ref_path = Path(tmp) / "reference.onnx"
            export_checkpoint(checkpoint, ref_path, ExportOptions(
                op_form=meta.get("aft_op_form", "custom"), opset=int(meta.get("opset", 18)), verify_images=0),
                log=lambda *a: None)  # fmt: skip
            return {"reference": "fresh fp32 export of the checkpoint",
                    **localize(ref_path, artifact, images, runner.info.precision)}
    except AFTExportError as exc:
        return {"error": str(exc)}


def run_parity(checkpoint: str, artifacts: list[str], data: str, images: int = 64,
               overrides: list[str] | None = None, providers: list[str] | None = None) -> dict:  # fmt: skip
    """Compare every artifact with the fp32 PyTorch model; returns the JSON-able report."""
    from aft_export.data import load_labelled, normalize
    from aft_export.runners import TorchRunner, load_runner

    tols = tolerances_with(overrides)
    reference = TorchRunner(checkpoint)
    info = reference.info
    data_set = load_labelled(data, info.input_size[1], limit=images)
    x = normalize(data_set.images, info.mean, info.std).numpy()
    sets = {"real": x, **stress_inputs(x, info.mean, info.std)}
    want = {name: reference.logits(arr) for name, arr in sets.items()}

    rows = []
    for artifact in artifacts:
        try:
            runner = load_runner(artifact, providers)
        except RuntimeMissing as exc:  # reported as skipped, never as passed
            rows.append({"artifact": str(artifact), "status": "skipped", "reason": str(exc), "passed": None})
            continue
        check_compatible(reference, runner)
        prec = runner.info.precision
        tol = tols[prec]
        row = {"artifact": str(artifact), "backend": runner.backend, "precision": prec,
               "tolerance": dataclasses.asdict(tol), "inputs": {}, "failures": []}  # fmt: skip
        for name, arr in sets.items():
            m = metrics(want[name], runner.logits(arr))
            fails = judge(m, tol, stress=name != "real")
            row["inputs"][name] = {**m, "passed": not fails}
            row["failures"] += [f"{name}: {f}" for f in fails]
        row["passed"] = not row["failures"]
        row["status"] = "pass" if row["passed"] else "fail"
        if not row["passed"] and str(artifact).endswith(".onnx"):
            row["divergence"] = _divergence(checkpoint, artifact, artifacts, runner, x)
        rows.append(row)
    return {"reference": str(checkpoint), "data": str(data), "images": len(x), "artifacts": rows,
            "passed": all(r["passed"] is True for r in rows),
            "skipped": sum(r["status"] == "skipped" for r in rows)}  # fmt: skip
