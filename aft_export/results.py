"""The typed results of the Python API (:mod:`aft_export.api`), in one place. Each is built by its
stage, on that stage's floor, and holds the paths, the figures and ``verdict`` (the one
:class:`~aft_export.errors.Verdict`); ``passed`` is :class:`~aft_export.errors.Judged`'s (its
verdict's), and ``to_dict()`` is exactly what the command prints as JSON (tests/test_api.py compares
them). :class:`Server` is the handle ``serve`` returns from Python.
"""

from __future__ import annotations

import threading

from aft_export.artifacts.info import InfoResult
from aft_export.errors import AFTExportError, Judged, Verdict
from aft_export.exporting.exporter import ExportResult
from aft_export.models.training import TrainResult
from aft_export.quantization.stage import QuantizeResult
from aft_export.serving.predict import InferResult
from aft_export.serving.deepstream import DeepStreamCheckResult, DeepStreamResult
from aft_export.serving.repository import RepoResult
from aft_export.tensorrt.build import BuildResult
from aft_export.tensorrt.checks import CheckResult
from aft_export.verify.bench import BenchResult
from aft_export.verify.evaluate import EvalResult
from aft_export.verify.parity import ParityResult
from aft_export.workflow.doctor import DoctorResult
from aft_export.workflow.steps import PipelineResult

# ``quantize``'s result, built by its stage (the name the Python API's docs give it)
Quantized = QuantizeResult

__all__ = ["BenchResult", "BuildResult", "CheckResult", "DeepStreamCheckResult", "DeepStreamResult", "DoctorResult", "EvalResult",
           "ExportResult", "InferResult", "InfoResult", "ParityResult", "PipelineResult", "QuantizeResult", "Quantized",
           "RepoResult", "Server", "TrainResult"]  # fmt: skip


class Server(Judged):
    """``serve`` from Python: NVIDIA Triton serving the artifacts in a thread of this process,
    ready when :func:`aft_export.serve` returns it; ``stop()`` (or leaving its ``with`` block)
    stops it as SIGINT stops the command: the requests in flight are answered, every process it
    started ends. ``http``, ``grpc`` and ``metrics`` say where it listens (127.0.0.1 unless
    ``host`` said otherwise), ``models`` what it serves."""

    def __init__(self, thread: threading.Thread, stop, outcome: dict) -> None:
        self._thread, self._stop, self._outcome = thread, stop, outcome

    @property
    def served(self):
        return self._stop.served

    @property
    def http(self) -> str:
        return self.served.http

    @property
    def grpc(self) -> str:
        return self.served.grpc

    @property
    def metrics(self) -> str:
        return self.served.metrics

    @property
    def models(self) -> list[str]:
        return [m for s in self.served.models for m in (s.name, s.image_model)]

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def verdict(self) -> Verdict:
        return Verdict()  # it serves: a server that could not start raised instead

    def to_dict(self) -> dict:
        return {"http": self.http, "grpc": self.grpc, "metrics": self.metrics, "models": self.models}

    def stop(self) -> None:
        """Stop the server and wait until every process it started has ended."""
        self._stop.event.set()
        self._thread.join()
        error = self._outcome.get("error")
        if error is not None and not isinstance(error, AFTExportError):
            raise error

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
