"""The model ``aft-export serve`` runs inside Triton's Python backend: one hop.

Triton hands a dynamically batched list of requests to :class:`TritonPythonModel`, in the
Python backend stub process; the artifact runs right there through aft-export's runner
(ONNX Runtime or OpenVINO, as ``serve``'s ``backend`` says, or TensorRT for an engine), and
the answers go back to Triton through the
stub's shared memory. Nothing else sits between Triton and the model: no proxy process, no
ensemble. For an ONNX file no torch is imported (the runners load PyTorch on first use only);
the TensorRT runner of an engine keeps its CUDA buffers in PyTorch tensors, so it does.

One model per endpoint of an artifact (:data:`~aft_export.serving.spec.TENSOR`: the
normalised tensor; :data:`~aft_export.serving.spec.IMAGE`: encoded images, decoded as
``eval`` decodes them), described by :class:`Endpoint`, which ``serve`` writes beside the
model (:data:`ENDPOINT_FILE`).

Every request is answered on its own, even when Triton merged it with others into one run:
an image that cannot be decoded, a tensor holding NaN or infinity, or logits that come out
NaN or infinite fail that request only, with a 400 (``INVALID_ARG``) and one line. A bug
fails the batch with a 500 that says the server's log has the details; the traceback goes
to that log, never into a response.
"""

from __future__ import annotations

import json
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export.data.formats import FORMATS
from aft_export.data.images import decode_pixels, model_input
from aft_export.errors import AFTExportError
from aft_export.fileio import atomic_write_text
from aft_export.runners import load_runner
from aft_export.serving.spec import IMAGE, IMAGE_INPUT, TOPK_INDEX, TOPK_LABEL, ServedModel, endpoint_name, topk

ENDPOINT_FILE = "endpoint.json"


@dataclass(frozen=True)
class Endpoint:
    """What one served model is: the artifact's description, which endpoint, the top-k, the
    runner's backend (:data:`aft_export.options.BACKENDS`) and threads, and the file where a
    load error is left for ``serve``."""

    spec: ServedModel
    endpoint: str  # tritonspec.TENSOR | tritonspec.IMAGE
    k: int
    backend: str
    threads: int
    status: str

    @property
    def name(self) -> str:
        return endpoint_name(self.spec, self.endpoint)

    @property
    def input_name(self) -> str:
        return IMAGE_INPUT if self.endpoint == IMAGE else self.spec.input_name

    def to_json(self) -> str:
        return json.dumps({"spec": json.loads(self.spec.to_json()), "endpoint": self.endpoint, "k": self.k,
                           "backend": self.backend, "threads": self.threads, "status": self.status})  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> Endpoint:
        d = json.loads(text)
        return cls(ServedModel.from_json(json.dumps(d.pop("spec"))), **d)


class RequestError(Exception):
    """What was wrong with one request, in one line (Triton answers it with a 400)."""


def load(endpoint: Endpoint):
    """The runner of ``endpoint``: ONNX Runtime (pools that sleep when idle: the server shares
    its cores) or OpenVINO, with the threads it was given, or TensorRT for an engine."""
    spec = endpoint.spec
    runner = load_runner(str(spec.path), endpoint.backend, threads=endpoint.threads,
                         preprocessing=spec.preprocessing, spinning=False)  # fmt: skip
    runner.check_batch(spec.fixed_batch or spec.max_batch, "max_batch")
    return runner


def decode(spec: ServedModel, encoded: np.ndarray) -> np.ndarray:
    """One request's encoded images -> the batch the artifact takes, exactly as ``eval`` makes it
    (:func:`~aft_export.data.images.load_image`, then ``(x / 255 - mean) / std`` in float32 (n, C, H, W),
    or for a pixel file the pixels in its layout: :func:`~aft_export.data.images.model_input`)."""
    flat = encoded.reshape(-1)
    pixels = decode_pixels(((f"{i} of this request", bytes(b)) for i, b in enumerate(flat)), spec.input_size[1])
    return model_input(pixels, spec.mean, spec.std, spec.input_format)


def prepare(endpoint: Endpoint, array: np.ndarray) -> np.ndarray:
    """One request's input -> the float32 batch the runner takes, or :class:`RequestError`."""
    if endpoint.endpoint == IMAGE:
        try:
            return decode(endpoint.spec, array)
        except AFTExportError as exc:
            raise RequestError(str(exc)) from None
    if FORMATS[endpoint.spec.input_format].dtype == "uint8":  # raw pixels: every uint8 is one
        x = np.ascontiguousarray(array, dtype=np.uint8)
        return x.reshape((-1, *x.shape[-3:])) if endpoint.spec.fixed_batch is None else x
    x = np.ascontiguousarray(array, dtype=np.float32)
    finite = np.isfinite(x)
    if not finite.all():
        bad = int(x.size - np.count_nonzero(finite))
        raise RequestError(f"input {endpoint.input_name} holds {bad} NaN or infinite values of {x.size}; send "
                           f"finite, normalised images")  # fmt: skip
    return x.reshape((-1, *x.shape[-3:])) if endpoint.spec.fixed_batch is None else x


def answer(endpoint: Endpoint, runner, arrays: list[np.ndarray], labels: np.ndarray) -> list:
    """One answer per request (its outputs by name, or its :class:`RequestError`), the good
    requests run through the runner together (a fixed-batch artifact: one at a time)."""
    spec = endpoint.spec
    results: list = [None] * len(arrays)
    batches = []
    for i, a in enumerate(arrays):
        try:
            batches.append((i, prepare(endpoint, a)))
        except RequestError as exc:
            results[i] = exc
    groups = [batches] if spec.fixed_batch is None else [[b] for b in batches]
    for group in groups:
        if not group:
            continue
        x = group[0][1] if len(group) == 1 else np.concatenate([b for _, b in group])
        logits = runner.logits(x, batch_size=max(len(x), 1))
        start = 0
        for i, b in group:
            z = logits[start : start + len(b)]
            start += len(b)
            finite = np.isfinite(z).all(axis=1)
            if not finite.all():
                results[i] = RequestError(f"the model gives NaN or infinite logits for {int((~finite).sum())} of "
                                          f"{len(z)} images of this request; their values are outside what it "
                                          f"computes in float32")  # fmt: skip
                continue
            idx = topk(z, endpoint.k)
            lead = tuple(arrays[i].shape[:-3]) if endpoint.endpoint != IMAGE else tuple(arrays[i].shape[:-1])
            results[i] = {spec.output_name: z.reshape(lead + z.shape[1:]), TOPK_INDEX: idx.reshape(lead + idx.shape[1:]),
                          TOPK_LABEL: labels[idx].reshape(lead + idx.shape[1:])}  # fmt: skip
    return results


def report_load_error(endpoint: Endpoint, message: str) -> None:
    """Leave the one line for ``serve``, which reports it instead of Triton's log."""
    atomic_write_text(endpoint.status, json.dumps({"model": endpoint.name, "error": message}))


class TritonPythonModel:
    """Triton's Python backend interface (``initialize``, ``execute``, ``finalize``)."""

    def initialize(self, args: dict) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        here = Path(args["model_repository"]) / args["model_version"]
        self.endpoint = Endpoint.from_json((here / ENDPOINT_FILE).read_text())
        self.labels = np.array([c.encode() for c in self.endpoint.spec.classes], dtype=object)
        try:
            self.runner = load(self.endpoint)
        except AFTExportError as exc:
            report_load_error(self.endpoint, str(exc))
            raise

    def execute(self, requests: list) -> list:
        pb = self.pb
        name = self.endpoint.input_name
        try:
            arrays = [pb.get_input_tensor_by_name(r, name).as_numpy() for r in requests]
            results = answer(self.endpoint, self.runner, arrays, self.labels)
        except Exception:  # noqa: BLE001 - a bug: its traceback to the server's log, never to a client
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            error = pb.TritonError(f"internal error in {self.endpoint.name}; the server's log has the details",
                                   pb.TritonError.INTERNAL)  # fmt: skip
            return [pb.InferenceResponse(error=error) for _ in requests]
        responses = []
        for result in results:
            if isinstance(result, RequestError):
                responses.append(pb.InferenceResponse(error=pb.TritonError(str(result), pb.TritonError.INVALID_ARG)))
            else:
                responses.append(pb.InferenceResponse(output_tensors=[pb.Tensor(n, v) for n, v in result.items()]))
        return responses

    def finalize(self) -> None:
        self.runner = None
