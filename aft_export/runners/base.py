"""The runner contract: ``dict[str, np.ndarray]`` in and out, plus what feeding needs.

A runner carries the class names, input size and normalisation of its model, read
from the checkpoint, the ONNX file's metadata or the engine's manifest, so every
stage can feed it the same preprocessed images.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

INPUT = "image"
OUTPUT = "logits"


@dataclass
class ModelInfo:
    """What a runner needs from its source to be fed and compared."""

    classes: list[str]
    input_size: tuple[int, int, int]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    source_sha256: str = ""  # the checkpoint the artifact was made from
    precision: str = "fp32"
    extra: dict = field(default_factory=dict)


class Runner:
    """One model on one backend. ``run`` takes and returns ``dict[str, np.ndarray]``;
    ``logits`` runs preprocessed NCHW images through it in batches."""

    backend = ""
    fixed_batch: int | None = None
    threads: int = 0
    input_name = INPUT
    output_name = OUTPUT

    def __init__(self, path: str, info: ModelInfo) -> None:
        self.path = path
        self.info = info

    @property
    def name(self) -> str:
        return Path(self.path).name

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover

    def logits(self, images: np.ndarray, batch_size: int = 64) -> np.ndarray:
        """fp32 logits of preprocessed NCHW float32 images, in batches. A fixed-batch
        model gets whole batches: the last one is padded and the padding dropped."""
        step = self.fixed_batch or batch_size
        outs = []
        for i in range(0, len(images), step):
            x = images[i : i + step]
            n = len(x)
            if self.fixed_batch and n < step:
                x = np.concatenate([x, np.repeat(x[-1:], step - n, axis=0)])
            outs.append(self.run({self.input_name: x})[self.output_name][:n].astype(np.float32))
        return np.concatenate(outs) if outs else np.zeros((0, len(self.info.classes)), np.float32)
