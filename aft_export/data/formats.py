"""What a model file takes: one table of input formats, each entry holding everything about its
format (its dtype, its layout, how decoded images feed it, how it is said), so that code asks the
entry rather than comparing names. What a file takes is read from its graph
(:mod:`aft_export.artifacts.ends`), and its ``input_format`` metadata names an entry of this table.

- ``normalized``: the float32 (N, 3, H, W) batch of ``(x / 255 - mean) / std`` every checkpoint takes.
- ``uint8-nhwc``: the decoded image's RGB pixels, uint8 (N, H, W, 3), for applications and Triton
  clients (a quarter of the bytes); the file's first nodes normalise them (fp32).
- ``float-nchw``: the same pixels as float32 (N, 3, H, W) in 0-255, what DeepStream's nvinfer feeds
  with ``net-scale-factor=1`` and zero offsets.

What a file gives is logits, or the probabilities of a Softmax over them (DeepStream's default
classifier parser reads probabilities): :data:`OUTPUT_FORMATS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NORMALIZED = "normalized"
UINT8_NHWC = "uint8-nhwc"
FLOAT_NCHW = "float-nchw"
LOGITS = "logits"
PROBABILITIES = "probabilities"


@dataclass(frozen=True)
class InputFormat:
    """One format a file's input may take: its ``name`` (the metadata's and the options' word),
    ``dtype`` (NumPy's name), ``layout`` (NCHW or NHWC) and whether it is raw ``pixels`` in 0-255
    that the graph normalises itself."""

    name: str
    dtype: str
    layout: str
    pixels: bool

    def __str__(self) -> str:
        return self.name

    @property
    def said(self) -> str:
        """The format in a sentence: what feeding it means."""
        if not self.pixels:
            return f"normalised {self.dtype} {self.layout} images"
        return f"raw {self.dtype} {self.layout} RGB pixels (0-255) that its first nodes normalise"

    def image(self, c: int, h: int, w: int) -> tuple[int, int, int]:
        """One image's dimensions in this layout, from (C, H, W)."""
        return (h, w, c) if self.layout == "NHWC" else (c, h, w)

    def chw(self, dims) -> tuple:
        """(C, H, W) from an image's or a batch's dimensions in this layout (the batch dropped)."""
        dims = tuple(dims)[-3:]
        return (dims[2], dims[0], dims[1]) if self.layout == "NHWC" else dims

    def feed(self, pixels: np.ndarray, mean, std) -> np.ndarray:
        """What this format is fed for decoded images (uint8 (N, H, W, 3) RGB pixels): the images
        normalised by ``mean`` and ``std`` (:func:`normalize_array`), or the pixels in this dtype and
        layout (``mean`` and ``std`` are then the graph's business)."""
        if not self.pixels:
            return normalize_array(pixels, mean, std)
        pixels = np.asarray(pixels, dtype=np.uint8)
        if self.layout == "NCHW":
            pixels = pixels.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(pixels).astype(self.dtype, copy=False)


FORMATS: dict[str, InputFormat] = {f.name: f for f in (
    InputFormat(NORMALIZED, "float32", "NCHW", pixels=False),
    InputFormat(UINT8_NHWC, "uint8", "NHWC", pixels=True),
    InputFormat(FLOAT_NCHW, "float32", "NCHW", pixels=True),
)}  # fmt: skip
INPUT_FORMATS = tuple(FORMATS)
PIXEL_FORMATS = tuple(name for name, f in FORMATS.items() if f.pixels)


@dataclass(frozen=True)
class OutputFormat:
    """One format a file's output may give: its ``name``, and whether a Softmax makes it (``softmax``:
    probabilities, which a comparison takes the floored log of, :func:`aft_export.runners.base.as_output`;
    else logits)."""

    name: str
    softmax: bool

    def __str__(self) -> str:
        return self.name


OUTPUTS: dict[str, OutputFormat] = {f.name: f for f in (OutputFormat(LOGITS, False), OutputFormat(PROBABILITIES, True))}
OUTPUT_FORMATS = tuple(OUTPUTS)


def takes_pixels(name) -> bool:
    """Whether the input format ``name`` is raw pixels the graph normalises (False: normalised images, or no
    format of the table)."""
    found = FORMATS.get(name)
    return found is not None and found.pixels


def gives_probabilities(name) -> bool:
    """Whether the output format ``name`` is a Softmax's probabilities (False: logits, or no format of the
    table)."""
    found = OUTPUTS.get(name)
    return found is not None and found.softmax


def input_format(name: str) -> InputFormat:
    """The entry of ``name`` (a KeyError for a name no entry has: callers check names at their door)."""
    return FORMATS[name]


def normalize_array(images: np.ndarray, mean, std) -> np.ndarray:
    """uint8 (N, H, W, 3) -> float32 NCHW ``(x / 255 - mean) / std`` in NumPy, bit for bit what
    :func:`aft_export.data.images.normalize` computes in torch (the same float32 operations in the same
    order), for processes that must not import torch (a Triton Python backend model)."""
    x = np.ascontiguousarray(np.asarray(images, dtype=np.uint8).transpose(0, 3, 1, 2)).astype(np.float32)
    x /= np.float32(255.0)
    x -= np.asarray(mean, dtype=np.float32).reshape(1, -1, 1, 1)
    x /= np.asarray(std, dtype=np.float32).reshape(1, -1, 1, 1)
    return x
