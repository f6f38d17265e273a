"""The TensorRT versions the check knows, and what each one's ONNX parser does.

Every fact carries its source. ``ONNX_TRT`` is the onnx-tensorrt repository
(github.com/onnx/onnx-tensorrt); ``ops.json`` beside this file is its operator table
per version, made by ``scripts/make_trt_op_table.py`` (which records, per version, the
exact document it was read from or how it was derived where that version's document
was not available).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

SUPPORTED = ("8.5", "8.6", "10.3", "10.13", "11.4")
JETPACK = {"8.5": "JetPack 5.1", "8.6": "JetPack 6.0", "10.3": "JetPack 6.1/6.2"}

ONNX_TRT = "onnx-tensorrt"


def parse_version(text: str) -> tuple[int, int]:
    parts = str(text).strip().split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ValueError(f"not a TensorRT version: {text!r}") from None


@dataclass(frozen=True)
class Version:
    """One TensorRT version, as the rules ask about it."""

    name: str  # "10.3"

    @property
    def v(self) -> tuple[int, int]:
        return parse_version(self.name)

    def __lt__(self, other) -> bool:
        return self.v < other.v

    # -- what the parser does (each property names its source)

    @property
    def imports_local_functions(self) -> bool:
        # ONNX_TRT docs/Changelog.md, 9.0 EA: "Added support for ONNX local functions".
        return self.v >= (9, 0)

    @property
    def strongly_typed(self) -> bool:
        # aft-export builds 10.x networks with NetworkDefinitionCreationFlag.STRONGLY_TYPED
        # (aft_export/trt.py); TensorRT 11 networks are always strongly typed (DEPLOY.md).
        # 8.x has no strongly typed networks.
        return self.v >= (10, 0)

    @property
    def conv_reads_kernel_shape_attribute(self) -> bool:
        # ONNX_TRT importerUtils.cpp convMultiInput (10.1-GA): filter dims come only from
        # getKernelParams(kernel_shape); docs/Changelog.md 10.4: "Fixed kernel shape
        # inference in multi-input convolutions".
        return self.v < (10, 4)

    @property
    def reduce_axes_input(self) -> bool:
        """Whether ReduceMax/Min/Mean/Prod/L1/L2/LogSum/LogSumExp/SumSquare read an
        ``axes`` *input* (opset 18). Before 10.0 the importers read the attribute only
        (ONNX_TRT 8.6-GA and 9.3 builtin_op_importers.cpp ReduceMax/ReduceMean/... call
        reduceTensor without the axes input; 10.0-GA onnxOpImporters.cpp passes
        ``inputs.at(1)``), so an opset-18 axes input is ignored and the reduction runs
        over every axis."""
        return self.v >= (10, 0)

    @property
    def table_version(self) -> str | None:
        """The supported version whose operator table stands for this one: itself, or the
        newest supported one of the same major that is not newer (None: no such one)."""
        if self.name in SUPPORTED:
            return self.name
        same = [s for s in SUPPORTED if parse_version(s)[0] == self.v[0] and parse_version(s) <= self.v]
        return same[-1] if same else None

    @property
    def ops(self) -> dict:
        return op_table()["versions"][self.table_version]

    @property
    def opset_range(self) -> tuple[int | None, int]:
        o = self.ops["opset"]
        return o.get("min"), o["max"]

    def op(self, op_type: str) -> dict | None:
        return self.ops["operators"].get(op_type)

    @property
    def table_source(self) -> str:
        s = self.ops["source"]
        if isinstance(s, dict):
            where = f"{s.get('repo', ONNX_TRT)} {s.get('ref', '')} {s.get('file', '')}".strip()
        else:
            where = str(s)
        return f"{where} ({self.ops.get('derivation', '')})" if self.ops.get("kind") != "exact" else where


@functools.lru_cache(maxsize=1)
def op_table() -> dict:
    return json.loads((Path(__file__).with_name("ops.json")).read_text())


def versions(names=None) -> list[Version]:
    return [Version(n) for n in (names or SUPPORTED)]
