"""Accuracy of a model on a labelled image set."""

from __future__ import annotations

import time

import numpy as np
import torch

from aft_export.data import load_labelled, normalize
from aft_export.errors import AFTExportError


@torch.no_grad()
def evaluate_model(model, images: np.ndarray, labels: np.ndarray, mean, std, batch_size: int = 500):
    """Top-1 and top-5 accuracy (in %) of a torch model on uint8 (N, H, W, 3) images."""
    model.eval()
    top1 = top5 = 0
    for i in range(0, len(labels), batch_size):
        x = normalize(images[i : i + batch_size], mean, std)
        y = torch.as_tensor(labels[i : i + batch_size])
        logits = model(x)
        pred = logits.topk(min(5, logits.shape[1]), dim=1).indices
        top1 += (pred[:, 0] == y).sum().item()
        top5 += (pred == y[:, None]).any(dim=1).sum().item()
    n = max(len(labels), 1)
    return 100.0 * top1 / n, 100.0 * top5 / n


def evaluate_artifact(artifact, data: str, batch_size: int = 500, limit: int | None = None,
                      providers: list[str] | None = None) -> dict:  # fmt: skip
    """Top-1/top-5 of a checkpoint or ONNX file on a labelled ImageFolder directory or tar.

    Preprocessing comes from the artifact itself (checkpoint fields or ONNX metadata).
    """
    from aft_export.runners import load_runner

    runner = load_runner(str(artifact), providers)
    info = runner.info
    images = load_labelled(data, info.input_size[1], limit=limit)
    if images.classes != info.classes:
        raise AFTExportError(
            f"{data} has classes {images.classes[:5]}... but {artifact} predicts {info.classes[:5]}...; "
            f"evaluate on a set with the model's classes"
        )
    if len(images) == 0:
        raise AFTExportError(f"{data} holds no labelled images")
    t0 = time.perf_counter()
    top1 = top5 = 0
    for i in range(0, len(images), batch_size):
        x = normalize(images.images[i : i + batch_size], info.mean, info.std).numpy()
        y = images.labels[i : i + batch_size]
        logits = runner.logits(x, batch_size=min(batch_size, 64))
        pred = np.argsort(-logits, axis=1)[:, :5]
        top1 += int((pred[:, 0] == y).sum())
        top5 += int((pred == y[:, None]).any(axis=1).sum())
    n = len(images)
    return {
        "artifact": str(artifact),
        "backend": runner.backend,
        "precision": info.precision,
        "data": str(data),
        "images": n,
        "top1": round(100.0 * top1 / n, 2),
        "top5": round(100.0 * top5 / n, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def evaluate_checkpoint(path, data: str, batch_size: int = 500, limit: int | None = None) -> dict:
    """Top-1/top-5 of a checkpoint (see :func:`evaluate_artifact`)."""
    return evaluate_artifact(path, data, batch_size=batch_size, limit=limit)
