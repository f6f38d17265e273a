"""The runner contract: ``dict[str, np.ndarray]`` in and out, plus what feeding needs.

A runner carries the class names, input size and normalisation of its model, read
from the checkpoint, the ONNX file's metadata or the engine's manifest, so every
stage can feed it the same preprocessed images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aft_export.data.formats import FORMATS, InputFormat, gives_probabilities, takes_pixels
from aft_export.data.images import (INPUT_FORMATS, LOGITS, NORMALIZED, OUTPUT_FORMATS,
                                    model_input)  # fmt: skip
from aft_export.errors import AFTExportError, Named, said
from aft_export.verify.compare import judged_precision

INPUT = "image"
OUTPUT = "logits"
# working memory of a run per image, as a multiple of the graph's largest intermediate
# value: a node's input and output are alive together, with the residual stream and
# the branches beside them and ONNX Runtime's arena slack. Measured: ONNX Runtime's
# resident memory grows by about 13 MB per image on aft_full_small_224 (batches 8, 32
# and 64; largest value 1.2 MB, input 0.6 MB), about 10.4 largest values
LIVE_VALUES = 11


def available_memory() -> int | None:
    """Bytes the kernel can give without swapping (MemAvailable of /proc/meminfo), or
    None where it does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n / 2**10:.0f} kB"


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
    # where the preprocessing of a file without our metadata came from (another tool's ONNX
    # file: the options, its NAME.preprocess.json, the checkpoint it is compared with); ""
    # for an artifact that describes itself (a checkpoint, our metadata, an engine manifest)
    preprocessing_from: str = ""
    # what the model takes and gives (aft_export.data.images.INPUT_FORMATS, OUTPUT_FORMATS): a file
    # exported for raw pixels normalises them itself; one for DeepStream gives probabilities
    input_format: str = NORMALIZED
    output_format: str = LOGITS

    @classmethod
    def from_meta(cls, meta) -> ModelInfo:
        """What feeding a loaded model needs, from its :class:`~aft_export.models.checkpoint.ModelMeta`."""
        return cls(list(meta.classes), tuple(meta.input_size), tuple(meta.mean), tuple(meta.std),
                   source_sha256=meta.sha256)  # fmt: skip

    @property
    def takes(self) -> InputFormat:
        """The entry of :attr:`input_format` in the table of formats."""
        return FORMATS[self.input_format]

    def problem(self) -> str | None:
        """What makes this description unusable for feeding a model (None: nothing)."""
        size = tuple(self.input_size)
        if len(size) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in size):
            return f"input size {list(size)} is not three positive whole numbers (C, H, W)"
        for name in ("mean", "std"):
            values = tuple(getattr(self, name))
            if len(values) != size[0] or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
                return f"{name} {list(values)} is not {size[0]} finite numbers"
        if min(self.std) <= 0:
            return f"std {list(self.std)} is not positive"
        if self.input_format not in INPUT_FORMATS or self.output_format not in OUTPUT_FORMATS:
            return f"input format {self.input_format!r} or output format {self.output_format!r} is unknown"
        if not isinstance(self.classes, list) or not all(isinstance(c, str) for c in self.classes):
            return "class names are not a list of strings"
        return None


class Runner:
    """One model on one backend. ``run`` takes and returns ``dict[str, np.ndarray]``;
    ``logits`` runs preprocessed NCHW images through it in batches."""

    backend = ""
    # the precision the runtime computes the file's fp32 parts in where it is not fp32 ("": as the file
    # says): bf16 on openvino-bf16 (aft_export.runtimes.Runtime.compute)
    compute = ""
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

    @property
    def judged_as(self) -> str:
        """The precision whose limits its outputs are held to: the file's own, or the runtime's
        compute precision where that is lossier (:func:`aft_export.verify.compare.judged_precision`)."""
        return judged_precision(self.info.precision, self.compute)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover

    def activation_bytes(self) -> tuple[int, int]:
        """(largest intermediate value, input + outputs) in bytes per image; (0, 0)
        where the backend cannot say. ONNX Runtime reads them from the graph."""
        return 0, 0

    def memory_estimate(self, batch: int) -> tuple[int, int]:
        """(bytes a run of ``batch`` images needs, of which per image): the input and
        outputs plus LIVE_VALUES times the largest intermediate value, per image."""
        largest, io = self.activation_bytes()
        c, h, w = self.info.input_size
        per_image = max(io, 4 * c * h * w) + LIVE_VALUES * largest
        return batch * per_image, per_image

    def check_batch(self, batch: int, option: str = "batch") -> None:
        """Refuse up front a batch that cannot fit in the memory available now, rather
        than be killed by the kernel halfway through."""
        need, per_image = self.memory_estimate(batch)
        available = available_memory()
        if available is not None and need > available:
            fits = max(1, available // max(per_image, 1))
            raise AFTExportError(
                said("batch {batch} of {name} needs about {value} ({value2} per image: input, output and "
                     "{LIVE_VALUES}x the largest intermediate value) but {value3} is available; use {option} or "
                     "less", None, option=Named(option, fits), batch=batch, name=self.name, value=_gb(need),
                     value2=_gb(per_image), LIVE_VALUES=LIVE_VALUES, value3=_gb(available))
            )

    def finite_logits(self, images: np.ndarray, batch_size: int = 64) -> np.ndarray:
        """:meth:`logits`, refused when any is NaN or infinite: a prediction, an accuracy or
        a reference made of them would mean nothing."""
        out = self.logits(images, batch_size)
        bad = int((~np.isfinite(out).all(axis=1)).sum())
        if bad:
            raise AFTExportError(f"{self.name} gives NaN or infinite logits for {bad} of {len(out)} images (its "
                                 f"weights are damaged or its computation overflows); re-export or retrain it")  # fmt: skip
        return out

    def feed(self, pixels: np.ndarray) -> np.ndarray:
        """What this model takes for decoded images (uint8 (N, H, W, 3) RGB pixels): normalised
        (N, 3, H, W) float32 for a checkpoint or a normal file, the pixels in the file's layout for
        a file that normalises them itself (:func:`~aft_export.data.images.model_input`)."""
        info = self.info
        return model_input(pixels, info.mean, info.std, info.input_format)

    def random_input(self, batch: int, seed: int = 0) -> np.ndarray:
        """A seeded batch of what the model takes, for timing: normal noise for a normalised input,
        random pixels for a file that takes them."""
        c, h, w = self.info.input_size
        rng = np.random.default_rng(seed)
        if not takes_pixels(self.info.input_format):
            return rng.standard_normal((batch, c, h, w), dtype=np.float32)
        return self.feed(rng.integers(0, 256, (batch, h, w, c), dtype=np.uint8))

    def pixel_logits(self, pixels: np.ndarray, batch_size: int = 64, finite: bool = False) -> np.ndarray:
        """:meth:`logits` (``finite``: :meth:`finite_logits`) of decoded images, each batch fed as
        this model takes it (:meth:`feed`): how every stage that holds images runs a model, so a
        file that takes raw pixels gets them, and a checkpoint our normalisation of them."""
        step = max(self.fixed_batch or batch_size, 1)
        run = self.finite_logits if finite else self.logits
        parts = [run(self.feed(pixels[i : i + step]), batch_size) for i in range(0, len(pixels), step)]
        return np.concatenate(parts) if parts else np.zeros((0, len(self.info.classes)), np.float32)

    def logits(self, images: np.ndarray, batch_size: int = 64) -> np.ndarray:
        """fp32 logits of the model's own input (NCHW float32 preprocessed images, or a pixel
        file's pixels: :meth:`feed`), in batches. A fixed-batch model gets whole batches: the
        last one is padded and the padding dropped. A file that gives probabilities gives
        their logarithms here (:func:`as_output`: logits whose softmax is the probabilities)."""
        step = self.fixed_batch or batch_size
        outs = []
        for i in range(0, len(images), step):
            x = images[i : i + step]
            n = len(x)
            if self.fixed_batch and n < step:
                x = np.concatenate([x, np.repeat(x[-1:], step - n, axis=0)])
            outs.append(self.run({self.input_name: x})[self.output_name][:n].astype(np.float32))
        out = np.concatenate(outs) if outs else np.zeros((0, len(self.info.classes)), np.float32)
        return np.log(np.maximum(out, PROBABILITY_FLOOR)) if gives_probabilities(self.info.output_format) else out


# the smallest probability a log is taken of (float32's smallest normal number): a Softmax in float32
# underflows to 0 below it, and both sides of a comparison are floored alike (as_output)
PROBABILITY_FLOOR = np.float32(np.finfo(np.float32).tiny)


def as_output(logits: np.ndarray, output_format: str) -> np.ndarray:
    """What :meth:`Runner.logits` gives for a model of ``output_format`` whose logits are ``logits``:
    the logits, or for a file that outputs probabilities the floored log of their softmax in
    float32 (the reference a probability file is compared with)."""
    if not gives_probabilities(output_format):
        return logits
    z = np.asarray(logits, np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return np.log(np.maximum(p.astype(np.float32), PROBABILITY_FLOOR))
