"""Accuracy of a model on a labelled image set."""

from __future__ import annotations

import copy
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export.data.images import LabelledImages, normalize
from aft_export.data.datasets import load_labelled
from aft_export.errors import AFTExportError, Judged, Named, RuntimeMissing, Verdict, said
from aft_export.options import EvalOptions
from aft_export.runtimes import DEFAULT_BACKEND
from aft_export.data.preprocess import ForeignPreprocessing, preprocessing_note
from aft_export.runners import load_runner


@dataclass
class EvalResult(Judged):
    """``evaluate``: top-1/top-5 of each artifact and its top-1 agreement with the first, one row
    each, and the verdict; ``to_dict()`` is what ``eval`` prints as JSON."""

    rows: list[dict]
    verdict: Verdict

    def to_dict(self) -> dict:
        return {"rows": copy.deepcopy(self.rows), "verdict": self.verdict.to_dict()}

    def lines(self) -> list[str]:
        """The table ``eval`` prints: a line per artifact."""
        lines = [f"{'artifact':40s} {'backend':13s} {'prec':5s} {'images':>6s} {'top1':>6s} {'top5':>6s} {'agree':>6s}"]
        for r in self.rows:
            if r["status"] == "skipped":
                lines.append(f"{r['artifact']:40s} SKIPPED: {r['reason']}")
            else:
                lines.append(f"{r['artifact']:40s} {r['backend']:13s} {r['precision']:5s} {r['images']:6d} "
                             f"{r['top1']:6.2f} {r['top5']:6.2f} {r['agreement']:6.2f}")  # fmt: skip
        return lines + [preprocessing_note(r["artifact"], r["preprocessing"]) for r in self.rows
                        if r.get("preprocessing")]  # fmt: skip


def evaluate(artifacts, data, batch_size: int = EvalOptions.batch_size, limit: int | None = None,
             backend: str = EvalOptions.backend, preprocessing: ForeignPreprocessing | None = None) -> EvalResult:
    """:func:`evaluate_artifacts`' rows, and their verdict (:func:`eval_verdict`): ``eval``'s result."""
    rows = evaluate_artifacts(artifacts, data, batch_size=batch_size, limit=limit, backend=backend,
                              preprocessing=preprocessing)  # fmt: skip
    return EvalResult(rows, eval_verdict(rows))


def evaluate_model(model, images: np.ndarray, labels: np.ndarray, mean, std,
                   batch_size: int = EvalOptions.batch_size):
    """Top-1 and top-5 accuracy (in %) of a torch model on uint8 (N, H, W, 3) images."""
    import torch  # here: evaluating ONNX files alone loads no torch

    model.eval()
    top1 = top5 = 0
    with torch.no_grad():
        for i in range(0, len(labels), batch_size):
            x = normalize(images[i : i + batch_size], mean, std)
            y = torch.as_tensor(labels[i : i + batch_size])
            logits = model(x)
            pred = logits.topk(min(5, logits.shape[1]), dim=1).indices
            top1 += (pred[:, 0] == y).sum().item()
            top5 += (pred == y[:, None]).any(dim=1).sum().item()
    n = max(len(labels), 1)
    return 100.0 * top1 / n, 100.0 * top5 / n


def evaluate_artifacts(artifacts, data, batch_size: int = EvalOptions.batch_size, limit: int | None = None,
                       backend: str = EvalOptions.backend, runners: dict | None = None,
                       workers: int | None = None, preprocessing: ForeignPreprocessing | None = None) -> list[dict]:  # fmt: skip
    """Top-1/top-5 of checkpoints or ONNX files on one labelled set, decoded once, and each
    artifact's top-1 agreement with the first one (the reference, usually fp32).

    Preprocessing comes from each artifact itself (checkpoint fields or ONNX metadata); an
    ONNX file another tool wrote takes ``preprocessing``, or the JSON beside it.
    ``data``: a source, or images already decoded (:class:`~aft_export.data.images.LabelledImages`);
    ``runners``: runners already made, by artifact path (the pipeline makes each once);
    ``workers``: artifacts evaluated at the same time (give runners of one thread each:
    a small model runs more images per CPU second on one thread than on two); None: side by side
    where :func:`side_by_side` says so (several files on ONNX Runtime's CPU, no runners given),
    else one after the other. ``backend``: where ONNX files run (:data:`~aft_export.runtimes.BACKENDS`).
    """
    if workers is None:
        plan = side_by_side(artifacts, backend) if not runners and preprocessing is None else None
        runners, workers = plan or (runners, 1)
    runners_given = runners or {}
    if not artifacts:
        raise AFTExportError("nothing to evaluate; give one or more checkpoints or ONNX files")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise AFTExportError(said("{batch_size} must be >= 1, got {batch_size_got!r}; e.g. {batch_size_got2}",
                                  "eval", batch_size_got2=Named('batch_size', EvalOptions.batch_size),
                                  batch_size_got=batch_size))
    runners, skipped = [], {}
    for i, a in enumerate(artifacts):
        try:
            runners.append(runners_given.get(str(a)) or load_runner(str(a), backend, preprocessing=preprocessing))
        except RuntimeMissing as exc:  # reported as skipped with the reason, never as evaluated
            if i == 0:
                raise AFTExportError(f"the first artifact is the reference and cannot be skipped: {exc}") from None
            skipped[str(a)] = str(exc)
            runners.append(None)
    size = runners[0].info.input_size[1]
    for a, r in zip(artifacts, runners):
        if r is not None and r.info.input_size[1] != size:
            raise AFTExportError(f"{a} takes {r.info.input_size[1]}px images, {artifacts[0]} takes {size}px; "
                                 f"evaluate them separately")  # fmt: skip
    images = data if isinstance(data, LabelledImages) else load_labelled(data, size, limit=limit)
    if len(images) == 0:
        raise AFTExportError(f"{images.source} holds no labelled images; give an ImageFolder directory (<class>/<image>)")
    for artifact, runner in zip(artifacts, runners):
        if runner is not None:
            if images.classes != runner.info.classes:
                fix = (said("name its classes in the data set's order ({classes}, or classes in its preprocessing "
                            "file)", "eval") if runner.info.preprocessing_from else "evaluate on a set with the model's classes")
                raise AFTExportError(f"{images.source} has classes {images.classes[:5]}... but {artifact} predicts "
                                     f"{runner.info.classes[:5]}...; " + fix)  # fmt: skip
            runner.check_batch(min(batch_size, 64), "batch_size")

    def predict(runner):
        """Top-5 class indices of every image, and the seconds it took."""
        t0, preds = time.perf_counter(), []
        for i in range(0, len(images), batch_size):
            x = runner.feed(images.images[i : i + batch_size])  # normalised, or a pixel file's pixels
            preds.append(np.argsort(-runner.finite_logits(x, batch_size=min(batch_size, 64)), axis=1)[:, :5])
        return np.concatenate(preds), time.perf_counter() - t0

    live = [r for r in runners if r is not None]
    if workers > 1 and len(live) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:  # the runners release the GIL while they run
            done = dict(zip(map(id, live), pool.map(predict, live)))
    else:
        done = {id(r): predict(r) for r in live}
    rows, first_pred = [], None
    for artifact, runner in zip(artifacts, runners):
        if runner is None:
            rows.append({"artifact": str(artifact), "status": "skipped", "reason": skipped[str(artifact)]})
            continue
        info = runner.info
        pred, seconds = done[id(runner)]
        y = images.labels[: len(pred)]
        first_pred = pred if first_pred is None else first_pred
        n = len(pred)
        rows.append({
            "artifact": str(artifact), "backend": runner.backend, "precision": info.precision,
            "data": images.source, "images": n,
            "top1": round(100.0 * float((pred[:, 0] == y).mean()), 2),
            "top5": round(100.0 * float((pred == y[:, None]).any(axis=1).mean()), 2),
            "agreement": round(100.0 * float((pred[:, 0] == first_pred[:n, 0]).mean()), 2), "status": "ok",
            "seconds": round(seconds, 2),
            **({"preprocessing": info.preprocessing_from} if info.preprocessing_from else {}),
        })  # fmt: skip
    return rows


def side_by_side(artifacts, backend: str, loaded=None) -> tuple[dict, int] | None:
    """Runners of ``cores // n`` threads each (one, with as many artifacts as cores) and the number
    of workers that evaluate ``artifacts`` side by side; None where one after the other is the
    plan: one core, one artifact, a runtime other than ONNX Runtime's CPU, or anything but ONNX
    files and at most one checkpoint (PyTorch's thread count is one for the whole process). These
    small models run about 1.4x more images per CPU second on one thread than on two
    (aft_conv_cifar, 2 cores). ``loaded``: the first artifact is a model source already in
    memory, ``(model, meta)``."""
    from aft_export.artifacts.kinds import CHECKPOINT, is_onnx, kind_of
    from aft_export.runners import onnx_runner

    paths = [str(a) for a in artifacts]
    cores = os.cpu_count() or 1
    if cores < 2 or len(paths) < 2 or backend != DEFAULT_BACKEND:  # ONNX Runtime on the CPU
        return None
    torch_at = [i for i, p in enumerate(paths) if (i == 0 and loaded is not None)
                or kind_of(p) is CHECKPOINT]  # fmt: skip
    onnx = [p for i, p in enumerate(paths) if i not in torch_at]
    if len(torch_at) > 1 or not all(is_onnx(p) for p in onnx):
        return None
    if not all(Path(p).is_file() for i, p in enumerate(paths) if not (i == 0 and loaded is not None)):
        return None  # a missing file goes the usual way, to its usual error
    per = max(1, cores // min(cores, len(paths)))
    try:
        runners = {p: onnx_runner(p, backend, threads=per) for p in onnx}
        if torch_at:  # (imported here: ONNX files alone load no torch)
            from aft_export.runners.pytorch import TorchRunner

            runners.update({paths[i]: TorchRunner(paths[i], threads=per, loaded=loaded if i == 0 else None)
                            for i in torch_at})  # fmt: skip
    except AFTExportError:  # a file that does not load (or its runtime missing) is said the usual way
        return None
    return runners, min(cores, len(paths))


def eval_verdict(rows: list[dict]) -> Verdict:
    """ok when every artifact was evaluated; not verified when one was skipped (its runtime or a
    GPU is missing here), with why."""
    return Verdict.of(unverified=[f"{r['artifact']} not evaluated: {r['reason']}" for r in rows
                                  if r.get("status") == "skipped"])  # fmt: skip
