"""Precision in the graph: int8 with explicit Q/DQ, and fp16 mixed precision.

TensorRT 11 takes reduced precision only from the graph (strongly typed networks),
TensorRT 10 on Jetson accepts the same graphs, ONNX Runtime runs them anywhere. So
the precision decision is made here, once, in ONNX.

**int8** uses ONNX Runtime's static quantiser in QDQ format with the settings
TensorRT's explicit quantisation needs: symmetric int8, zero-point 0, weights
per output channel, activations per tensor. Only the projections (the fused q/k/v
one included), the MLP, the patch embedding and the head (``MatMul``/``Gemm``/``Conv``)
are quantised; the AFT core (exps, the products or convolutions on them, reductions,
division) stays in floating point: the custom ``com.aft`` nodes, or in the decomposed
form every other node owned directly by an AFT module (see
:func:`aft_export.artifacts.graph.aft_core_nodes`). ``quantize_aft_core``
inlines the ``com.aft`` functions and quantises the core's MatMuls/Convs too: their
operands ``exp(w - max)`` and ``exp(K - max)`` lie in (0, 1], so int8 keeps only 7 bits
of them and rounds small weights to 0; it is measured, not the default.

Placement is for the runtime as well as for TensorRT: every layer that reads a
quantised activation gets its own Q -> DQ pair (:func:`.placement.qdq_per_consumer`),
which is what ONNX Runtime needs to fuse ``DQ -> MatMul`` into ``MatMulIntegerToFloat``.

Calibration ranges are computed here (:mod:`.calibrators`, one class per method), batch
by batch in memory that does not grow with the number of images (:mod:`aft_export.quantization.ranges`:
running min/max, fixed-size histograms of |x|, TensorRT's KL-divergence entropy), and
handed to ONNX Runtime's QDQ quantiser in its calibration-cache format. They are cached under a key made of
the model's sha256, the calibration set's sha256, the method and the version of the
range algorithm, so a second run with the same inputs skips calibration and
anything changed invalidates it.

What is not int8, the *rest*, is fp16 for the ``tensorrt`` target (strongly typed TensorRT runs
the graph's types) and fp32 for ``tensorrt8`` and ``portable`` (``rest_precision`` chooses): an
fp16 rest is written at opset 19, fp16 into QuantizeLinear and out of DequantizeLinear through
fp16 scales. Which nodes are int8 can be chosen by name, by regular expression over node names,
by op type (``exclude``, ``exclude_regex``, ``exclude_op_types``, ``quantize_op_types``).

**fp16** converts the graph to fp16 except what the fixed fp32 rule keeps
(:data:`aft_export.artifacts.fp32_rule.FP32_RULE`: the AFT core and LayerNorm; ``keep_fp32`` adds nodes), the same rule
as an int8 graph's fp16 rest; keeps fp32 inputs and outputs, and reports any NaN or Inf an
fp16 value takes on the calibration set (counted inside the graph, per batch), for fp16
graphs and fp16 rests alike.

The package, one room a concern:

- :mod:`.stage`: :func:`quantize_model` (the whole job, from an fp32 file to the
  written artifact and its result) and :func:`apply_recipe` (calibration recipes);
- :mod:`.calibrators`: one :class:`~.calibrators.Calibrator` per calibration method;
- :mod:`.runs`: the graph run on the calibration images, fed by a
  :class:`aft_export.data.calibration.CalibrationReader` in memory that does not grow with them;
- :mod:`.placement`: ONNX Runtime's QDQ quantiser, one Q -> DQ pair per consumer, which
  nodes are int8 (:func:`.placement.select`);
- :mod:`.cache`: where ranges are cached, which entries are trusted, writing them;
- :mod:`.sensitivity`: the nodes that cost accuracy, excluded to meet a budget;
- :mod:`.fp16`: the fixed fp32 rule, the fp16 conversion (of a graph, or of an int8 graph's
  rest) and its NaN/Inf count.
"""

