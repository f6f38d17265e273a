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


def evaluate_checkpoint(path, data: str, batch_size: int = 500, limit: int | None = None) -> dict:
    """Load a checkpoint and measure top-1/top-5 on an ImageFolder directory or tar."""
    from aft_export.checkpoint import load_checkpoint

    model, meta = load_checkpoint(path)
    images = load_labelled(data, meta.config.img_size, limit=limit)
    if images.classes != meta.classes:
        raise AFTExportError(
            f"{data} has classes {images.classes[:5]}... but {path} predicts {meta.classes[:5]}...; "
            f"evaluate on a set with the model's classes"
        )
    t0 = time.perf_counter()
    top1, top5 = evaluate_model(model, images.images, images.labels, meta.mean, meta.std, batch_size)
    return {
        "artifact": str(path),
        "backend": "torch",
        "precision": "fp32",
        "data": str(data),
        "images": len(images),
        "top1": round(top1, 2),
        "top5": round(top5, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }
