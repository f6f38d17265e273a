"""Classify images with any artifact: the top-k classes and their probabilities."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aft_export.data.images import IMAGE_EXTENSIONS, decode_pixels
from aft_export.errors import AFTExportError, Judged, Named, Verdict, said
from aft_export.data.preprocess import BESIDE_ONLY
from aft_export.runners import load_runner
from aft_export.runtimes import DEFAULT_BACKEND


@dataclass
class InferResult(Judged):
    """``infer``: the top classes of each image (``results``)."""

    artifact: str
    backend: str
    precision: str
    results: list[dict]
    verdict: Verdict = field(default_factory=Verdict)  # classifying checks nothing that can fail

    def to_dict(self) -> dict:
        return {"artifact": self.artifact, "backend": self.backend, "precision": self.precision,
                "results": copy.deepcopy(self.results)}  # fmt: skip

    def lines(self) -> list[str]:
        """Each image's top classes, one line each."""
        return [f"{r['image']}: " + ", ".join(f"{t['class']} {100 * t['probability']:.1f}%" for t in r["top"])
                for r in self.results]  # fmt: skip


def find_images(items) -> list[Path]:
    """Image files named directly, or found (recursively, sorted) in named folders."""
    files = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix.lower() in IMAGE_EXTENSIONS and f.is_file())
        elif p.is_file():
            files.append(p)
        elif p.exists():
            raise AFTExportError(f"image {p} is not a regular file; give image files or folders of them")
        else:
            raise AFTExportError(f"image {p} does not exist; check the path")
    if not files:
        raise AFTExportError(f"no images found in {', '.join(map(str, items))}; give image files "
                             f"({', '.join(IMAGE_EXTENSIONS)}) or folders of them")  # fmt: skip
    return files


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def classify(artifact, images, top_k: int = 5, backend: str = DEFAULT_BACKEND) -> InferResult:
    """The ``top_k`` classes of each image (files or folders), with the artifact's own
    preprocessing (checkpoint fields, ONNX metadata or engine manifest); ``backend``: where an
    ONNX file runs (:data:`~aft_export.runtimes.BACKENDS`)."""
    if top_k < 1:
        raise AFTExportError(said("{top_k} must be >= 1, got {top_k_got}; e.g. {top_k_set}", "infer",
                                  top_k_set=Named('top_k', 5), top_k_got=top_k))
    # another tool's ONNX file is described by the JSON beside it (this function takes no preprocessing)
    runner = load_runner(str(artifact), backend, preprocessing=BESIDE_ONLY)
    info = runner.info
    files = find_images(images)
    x = runner.feed(decode_pixels((("", str(f)) for f in files), info.input_size[1]))  # as the file takes them
    probs = softmax(runner.finite_logits(x))
    k = min(top_k, len(info.classes))
    results = []
    for f, p in zip(files, probs):
        order = np.argsort(-p)[:k]
        results.append({"image": str(f), "top": [{"class": info.classes[i], "index": int(i),
                                                   "probability": round(float(p[i]), 5)} for i in order]})  # fmt: skip
    return InferResult(str(artifact), runner.backend, info.precision, results)
