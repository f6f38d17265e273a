"""OpenVINO: an ONNX file, or a graph in memory, on OpenVINO's CPU plugin.

OpenVINO reads ONNX through its ONNX front end. It does not inline model-local
functions of a custom domain, so the default export (``com.aft`` nodes) does not load:
export with ``target=portable`` (or ``tensorrt8``) for OpenVINO. fp32 means fp32:
the CPU plugin's default inference precision is bf16 on CPUs with bf16 units (AMX,
AVX512-BF16), which would put an fp32 file outside the fp32 parity limit, so the
runner asks for f32; fp16 and int8 graphs compute in the precision their Q/DQ and
casts define (OpenVINO's low-precision transformations run the Q/DQ regions in int8).
"""

from __future__ import annotations

import os

import numpy as np

from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.graph import DOMAIN
from aft_export.runners.base import ModelInfo, Runner
from aft_export.runners.ort import GraphSignature, check_signature, open_graph

DEVICES = ("CPU",)


def import_openvino():
    try:
        import openvino
    except ImportError:
        raise RuntimeMissing("OpenVINO is not installed: pip install 'aft-export[openvino]'") from None
    return openvino


def openvino_version() -> str:
    return import_openvino().get_version()


class OpenVinoRunner(Runner):
    backend = "openvino"

    def __init__(self, source, threads: int = 0, info: ModelInfo | None = None, device: str = "CPU",
                 preprocessing=None) -> None:  # fmt: skip
        """``source``: a path or a ModelProto; ``info``: what to feed a graph a stage made
        itself; ``preprocessing``: how to feed a file another tool wrote
        (:func:`~aft_export.runners.ort.onnx_info`); ``threads``: CPU inference threads (0:
        OpenVINO's default, all cores)."""
        ov = import_openvino()
        if device not in DEVICES:
            raise AFTExportError(f"unknown OpenVINO device {device!r}; choose one of {DEVICES}")
        graph = open_graph(source, info, preprocessing=preprocessing)
        model, in_memory, where, info, from_metadata = (graph.model, graph.in_memory, graph.where, graph.info,
                                                        graph.from_metadata)  # fmt: skip
        super().__init__(graph.name, info)
        check_signature(GraphSignature(model), info, where, metadata=from_metadata)
        core = ov.Core()
        config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = int(threads)
        self.threads = threads or (os.cpu_count() or 1)
        try:
            read = core.read_model(source.SerializeToString(), b"") if in_memory else core.read_model(str(source))
            self.compiled = core.compile_model(read, device, config)
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError/OpConversionFailure for a graph it cannot take
            first = str(exc).strip().splitlines()
            detail = next((line.strip() for line in first if "No conversion rule" in line), first[0] if first else "")
            hint = ""
            if any(n.domain == DOMAIN for n in model.graph.node):
                hint = (f"; OpenVINO does not inline the model-local {DOMAIN} functions of the default export: "
                        f"export with `aft-export export target=portable`")  # fmt: skip
            raise AFTExportError(f"OpenVINO cannot load {where}: {detail[:300]}{hint}") from None
        self.input_name = self.compiled.inputs[0].get_any_name()
        self.output_name = self.compiled.outputs[0].get_any_name()
        first = self.compiled.inputs[0].get_partial_shape()[0]
        self.fixed_batch = first.get_length() if first.is_static else None
        self._request = self.compiled.create_infer_request()

    def run(self, feeds):
        result = self._request.infer({k: np.ascontiguousarray(v) for k, v in feeds.items()})
        return {out.get_any_name(): np.array(result[out]) for out in self.compiled.outputs}
