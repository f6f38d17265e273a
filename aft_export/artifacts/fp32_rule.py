"""What stays fp32 in an fp16 graph and in an int8 graph's fp16 rest: one fixed rule per layer kind
(:data:`FP32_RULE`), decided once from a measurement (``benchmarks/fp32_rule.py``, figures in
docs/quantize.md), not searched on each run:

- the AFT core (the ``com.aft`` nodes, or in the decomposed form every node an AFT module
  owns besides its projections): its exps, its sums over every position and the division of
  one sum by the other;
- LayerNorm (``LayerNormalization``, or the nodes of a decomposed ``LayerNorm`` module): its
  mean and variance over the channels.

A fact about graphs, on the floor below the stages: the quantiser writes it into the graph
(:mod:`aft_export.quantization.fp16`), and TensorRT 8's per-layer precision flags, which take the
rest's precisions from the builder rather than from the graph, are written from it
(:mod:`aft_export.tensorrt.nvtools`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aft_export.artifacts.graph import AFT_LAYER_TYPES, node_module


@dataclass(frozen=True)
class Fp32Kind:
    """A layer kind kept in fp32 in fp16 graphs and in int8 graphs' fp16 rest."""

    name: str
    op_types: tuple[str, ...]  # its op types, where the graph has the layer as one node
    modules: tuple[str, ...]  # its PyTorch module classes, where the layer is decomposed (no core)
    why: str
    # a kind only some files have (a pixel file's first nodes): a graph's record names it where it has it
    only_where_present: bool = False


FP32_RULE = (
    Fp32Kind("aft_core", AFT_LAYER_TYPES, (),
             "exps, sums over every position and their quotient: 0.38-0.95% of its values on the zoo lie "
             "below fp16's smallest normal number (every kind but GELU: 0.015% or less), its sums grow with "
             "the positions, and a com.aft function's body is fp32; in fp16 the zoo's logits moved no "
             "further, so keeping it costs no accuracy (benchmarks/fp32_rule.py)"),
    Fp32Kind("layernorm", ("LayerNormalization",), ("LayerNorm",),
             "mean and variance over the channels: a row's sum of x^2 reaches 5.1e3 on the zoo, 13x below "
             "fp16's largest number, after growing 6-10x over 4 blocks; TensorRT-RTX's normalization layer "
             "has no compute-precision setting, so fp32 in the graph is what keeps its statistics fp32 "
             "(benchmarks/fp32_rule.py)"),
    Fp32Kind("pixel_input", (), ("PixelInput",),
             "a pixel file's first nodes, x / 255 and (x - mean) / std (aft_export/exporting/pixels.py): pixels reach "
             "255 and fp16 keeps 11 significant bits, so the normalised image would differ from the one "
             "PyTorch is fed before the model has computed anything; the issue that made them asks for fp32", True),
    Fp32Kind("probabilities", (), ("Probabilities",),
             "the Softmax a file for DeepStream ends with: its probabilities are what the file gives, and fp16 "
             "would round the small ones to zero", True),
)  # fmt: skip
FP32_KINDS = tuple(k.name for k in FP32_RULE)


def fp32_nodes(model, core: list[str], kinds: tuple[str, ...] = FP32_KINDS) -> list[str]:
    """The nodes :data:`FP32_RULE` keeps in fp32 by name: the AFT core, and the nodes of
    decomposed LayerNorm modules (a ``LayerNormalization`` node is kept by its op type)."""
    modules = {m for k in FP32_RULE if k.name in kinds for m in k.modules}
    names = list(core) if "aft_core" in kinds else []
    names += [n.name for n in model.graph.node if (node_module(n) or ("", ""))[1] in modules]
    return list(dict.fromkeys(names))
