"""The TensorRT versions the check knows, and what each one's ONNX parser does.

Every fact carries its source. ``ONNX_TRT`` is the onnx-tensorrt repository
(github.com/onnx/onnx-tensorrt); ``ops.json`` beside this file is its operator table
per version, made by ``tools/make_trt_op_table.py`` (which records, per version, the
exact document it was read from or how it was derived where that version's document
was not available).

Besides the standard versions, the check has a column for each *edition* of TensorRT whose
parser it can compare against: ``rtx-1.7`` is TensorRT for RTX 1.7 (``tensorrt_rtx``), whose
ONNX parser is built from the same onnx-tensorrt source. Its column is 10.13's rules (its
version-dependent rules see 10.13) plus the documented differences of that edition, each with
its source (:data:`EDITIONS`; the rules that exist only there test :attr:`Version.rtx`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

SUPPORTED = ("8.5", "8.6", "10.3", "10.13", "11.4")  # standard TensorRT


@dataclass(frozen=True)
class JetPack:
    """A JetPack release: the L4T it is, the TensorRT and DeepStream it ships, and the column of the rules
    that checks a file for that TensorRT (the newest supported one at or below it), each from ``source``."""

    name: str  # "5.1.2"
    l4t: str
    tensorrt: str  # the TensorRT JetPack installs
    column: str  # SUPPORTED's version whose rules hold for it
    deepstream: str  # the DeepStream release built for it
    source: str


_DOCKERS = "github.com/NVIDIA-AI-IOT/deepstream_dockers"
# The Jetson releases, oldest first (the DeepStream table of aft_export/serving/nvinfer.py takes its TensorRT
# from here). JetPack 6.1 and 6.2 share L4T 36.4's TensorRT 10.3; 6.2 is 6.1 with a faster power mode.
JETPACKS = (
    JetPack("5.1.2", "L4T 35.4.1", "8.5.2", "8.5", "6.3",
            f"{_DOCKERS} branch dev/ds/ds6.3 jetson/ubuntu_base_devel/Dockerfile (l4t-tensorrt:r8.5.2.2) and README "
            "('JetPack 5.1.2')"),
    JetPack("6.0", "L4T 36.3", "8.6.2", "8.6", "7.0",
            f"{_DOCKERS} tag ds7.0 jetson/ubuntu_base_runtime/Dockerfile (l4t-tensorrt:r8.6.2); "
            "docs.nvidia.com/metropolis/deepstream/7.0/text/DS_Installation.html ('JetPack 6.0 GA (corresponding to "
            "L4T 36.3 release)')"),
    JetPack("6.1/6.2", "L4T 36.4", "10.3.0", "10.3", "7.1",
            f"{_DOCKERS} tag ds7.1 docker/Dockerfile_Jetson_Run (l4t-tensorrt:r10.3.0); "
            "docs.nvidia.com/metropolis/deepstream/7.1/text/DS_Installation.html ('JetPack 6.1 GA (corresponding to "
            "L4T 36.4 release)')"),
    JetPack("7.0", "L4T 38.2", "10.13.2", "10.13", "8.0",
            "docs.nvidia.com/metropolis/deepstream/dev-guide/text/DS_Migration_guide.html ('DeepStream 8.0 now "
            f"supports TensorRT 10.9.0.34 for x86 and TensorRT 10.13.2.6 for Jetson'); {_DOCKERS} tag ds8.0 README "
            "('JetPack 7.0 GA') and jetson_dockerfiles/Dockerfile_Jetson_Run (r38.2)"),
    JetPack("7.1", "L4T 38.4", "10.13", "10.13", "9.0",
            "github.com/NVIDIA/DeepStream tag v9.0.0 README.md ('JetPack 7.1 GA (CUDA 13.0, TensorRT 10.13.x)'); "
            "docs.nvidia.com/metropolis/deepstream/9.0/text/DS_Release_notes.html ('JP 7.1 (r38.4 BSP)')"),
    JetPack("7.2", "L4T 39.2", "10.16", "10.13", "9.1",
            "github.com/NVIDIA/DeepStream tag v9.1.0 README.md ('JetPack 7.2 GA (CUDA 13.2, TensorRT 10.16.x)'); "
            "docs.nvidia.com/metropolis/deepstream/9.1/text/DS_Installation.html ('JetPack 7.2 GA (corresponding to "
            "L4T 39.2 release)'); 10.16 has no rules of its own: 10.13's, the newest below it, hold"),
)
# the JetPack of each TensorRT column the rules check (what `check` says beside a version)
JETPACK = {c: "JetPack " + "/".join(j.name for j in JETPACKS if j.column == c and j.tensorrt.startswith(c))
           for c in dict.fromkeys(j.column for j in JETPACKS)}  # fmt: skip

ONNX_TRT = "onnx-tensorrt"


RTX_DOCS = "docs.nvidia.com/deeplearning/tensorrt-rtx"
RTX_PARSE = "tests/trtcheck/test_rules_vs_parser.py (tensorrt_rtx 1.7.1.116's OnnxParser)"
RTX_BUILD = "tests/trtcheck/test_rules_vs_parser.py (tensorrt_rtx 1.7.1.116's builder, ahead of time on the CPU)"


@dataclass(frozen=True)
class Edition:
    """A TensorRT edition's column: the standard version whose rules it shares, and what differs."""

    title: str
    base: str  # the standard version whose rules and operator table it starts from
    ops: dict  # op type -> its operator-table row instead of the base's, or the version ("10.15") whose row it takes
    notes: tuple[str, ...]  # the documented differences, one line each with its source


# Ops whose onnx-tensorrt importer is a plugin from TensorRT's plugin library (createPlugin);
# TensorRT-RTX ships no plugin library, so its parser refuses them.
_PLUGIN_OPS = {
    "RoiAlign": "onnx-tensorrt 10.1-GA onnxOpImporters.cpp RoiAlign: createPlugin('ROIAlign_TRT'); tensorrt_rtx "
                "1.7: 'ROIAlign plugin was not found in the plugin registry!'",
    "DeformConv": "onnx-tensorrt 10.x onnxOpImporters.cpp DeformConv imports a plugin; tensorrt_rtx 1.7: 'Plugin "
                  "not found, are the plugin name, version, and namespace correct?'",
    "NonZero": "tensorrt_rtx 1.7's parser imports NonZero through a plugin: 'NonZero plugin creator version 1 was "
               "not found in plugin registry.' (onnx-tensorrt 10.1-GA used INetworkDefinition::addNonZero)",
}  # fmt: skip

# Ops its parser imports but its builder cannot build (ahead of time, on the CPU): no kernel
# implements the layer in TensorRT-RTX 1.7
_NOT_BUILT_OPS = {
    "NonMaxSuppression": "tensorrt_rtx 1.7.1.116's builder: 'nonmaxsuppression_0_0 has no runners that implement it' "
                         "(tacticSupply.cpp getSupportedFormats; the parser takes the graph, tests/trtcheck/"
                         "test_rules_vs_parser.py builds it); NVIDIA/TensorRT-RTX issue 32 reports the same for "
                         "NonZero (1.4)",
}  # fmt: skip

# Ops the parser code TensorRT-RTX 1.7 carries imports beyond 10.13's table: onnx-tensorrt
# Changelog 10.14 ('Added support for the `Attention` operator') and 10.15 ('Added support for
# `RotaryEmbedding`, `RMSNormalization` and `TensorScatter`'); rows as 10.15's operators.md has them.
_NEWER_PARSER_OPS = ("Attention", "RotaryEmbedding", "RMSNormalization", "TensorScatter")

EDITIONS: dict[str, Edition] = {
    "rtx-1.7": Edition(
        title="TensorRT-RTX 1.7",
        base="10.13",
        ops={**{op: {"supported": False, "types": [], "restrictions": "", "edition": why}
                for op, why in {**_PLUGIN_OPS, **_NOT_BUILT_OPS}.items()},
             **{op: "10.15" for op in _NEWER_PARSER_OPS}},
        notes=(
            "networks are strongly typed only: the typed.* rules apply (the tensorrt_rtx 1.7 bindings have "
            "NetworkDefinitionCreationFlag.STRONGLY_TYPED and no BuilderFlag.FP16/INT8, tests/data/trt_api.json; "
            f"{RTX_DOCS} 'Working with Quantized Types' points FP32 models to its 'Strongly Typed Networks and "
            "Explicit Quantization' section)",
            "lower precision only through explicit Q/DQ in the graph, no precision builder flags "
            f"({RTX_DOCS} 'Working with Quantized Types': 'You must explicitly select reduced precision ... "
            "insert IQuantizeLayer and IDequantizerLayer (Q/DQ) nodes')",
            "opset range: 10.13's; its parser does not check the opset (opset 8 and 25 parse), a documented "
            "difference (tests/data/rtx_differences.json)",
            "asymmetric Q/DQ (a non-zero zero point) and INT32 DequantizeLinear are refused (qdq.zero-point, "
            "qdq.dequantize-input); shown by the parser: 'Non-zero zero point is not supported', "
            "'input has type Int32 but must have type FP8, FP4, Int4, Int8, or UInt8'",
            "no plugin library: ops whose importer is a plugin (RoiAlign, DeformConv, NonZero) and ops of other "
            f"domains are refused (op.unsupported); shown by the parser ({RTX_PARSE})",
            "its parser code is newer than 10.13's: it imports Attention, RMSNormalization and RotaryEmbedding "
            f"(onnx-tensorrt Changelog 10.14/10.15), shown by the parser ({RTX_PARSE}); TensorScatter, added by "
            "the same 10.15 Changelog line (opset 24, beyond the column's opset range), is taken with them",
            "its builder has no implementation of NonMaxSuppression (op.unsupported): the parser takes it, the "
            f"build fails ('has no runners that implement it'), shown by building ({RTX_BUILD})",
            "its builder refuses a DequantizeLinear of a scalar (0-d) quantised constant (qdq.scalar-weights), "
            f"shown by building ({RTX_BUILD})",
            "Squeeze/Unsqueeze axes must be constant (input.must-be-constant), as before TensorRT 10.7: its "
            "shape analysis refuses a computed axes input ('squeeze axis is not a constant', makeAxesMask), "
            f"shown by the parser ({RTX_PARSE})",
        ),
    ),
}
COLUMNS = SUPPORTED + tuple(EDITIONS)  # every column the check has rules for


def parse_version(text: str) -> tuple[int, int]:
    parts = str(text).strip().split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ValueError(f"not a TensorRT version: {text!r}") from None


@dataclass(frozen=True)
class Version:
    """One TensorRT version, as the rules ask about it."""

    name: str  # "10.3", or an edition's column ("rtx-1.7")

    @property
    def edition(self) -> Edition | None:
        return EDITIONS.get(self.name)

    @property
    def rtx(self) -> bool:
        """TensorRT for RTX: strongly typed only, explicit Q/DQ only, no plugin library."""
        return self.name.startswith("rtx-")

    @property
    def v(self) -> tuple[int, int]:
        """The version the version-dependent rules see: an edition's base version."""
        return parse_version(self.edition.base if self.edition else self.name)

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
        # (aft_export/tensorrt/library.py); TensorRT 11 networks are always strongly typed (DEPLOY.md).
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
        if self.edition:
            return self.edition.base
        same = [s for s in SUPPORTED if parse_version(s)[0] == self.v[0] and parse_version(s) <= self.v]
        return same[-1] if same else None

    @property
    def ops(self) -> dict:
        return _edition_table(self.name) if self.edition else op_table()["versions"][self.table_version]

    @property
    def opset_range(self) -> tuple[int | None, int]:
        o = self.ops["opset"]
        return o.get("min"), o["max"]

    def op(self, op_type: str) -> dict | None:
        return self.ops["operators"].get(op_type)

    @property
    def table_source(self) -> str:
        if self.edition:
            return (f"{Version(self.edition.base).table_source}, with {self.edition.title}'s differences "
                    f"(aft_export/trtcheck/versions.py EDITIONS)")
        s = self.ops["source"]
        if isinstance(s, dict):
            where = f"{s.get('repo', ONNX_TRT)} {s.get('ref', '')} {s.get('file', '')}".strip()
        else:
            where = str(s)
        return f"{where} ({self.ops.get('derivation', '')})" if self.ops.get("kind") != "exact" else where


@functools.lru_cache(maxsize=1)
def op_table() -> dict:
    return json.loads((Path(__file__).with_name("ops.json")).read_text())


@functools.lru_cache(maxsize=None)
def _edition_table(name: str) -> dict:
    """An edition's operator table: its base version's, with the edition's rows in place (a row
    given as a version name is that version's row of the same op, e.g. 10.15's via 11.4's table,
    which keeps 10.15's operators.md rows)."""
    e = EDITIONS[name]
    base = op_table()["versions"][e.base]
    ops = dict(base["operators"])
    for op, row in e.ops.items():
        if isinstance(row, str):  # "10.15": the row of 10.15's operators.md (kept in 11.4's derived table)
            row = {**op_table()["versions"]["11.4"]["operators"][op], "edition": f"onnx-tensorrt {row} operators.md"}
        ops[op] = row
    return {**base, "operators": ops, "edition": name}


def versions(names=None) -> list[Version]:
    return [Version(n) for n in (names or SUPPORTED)]
