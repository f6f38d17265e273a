"""A graph that takes raw pixels, or gives probabilities: the ends a consumer outside aft-export
would otherwise write by hand (a C++ application, DeepStream's ``nvinfer``, a Triton client).

- :func:`with_pixel_input`: the graph's input becomes the decoded image's RGB pixels, and the
  normalisation every checkpoint was trained with, ``(x / 255 - mean) / std``, its first nodes, in
  float32, as :func:`~aft_export.data.images.normalize_array` computes it (the same operations in
  the same order). Two layouts (:data:`~aft_export.data.images.PIXEL_FORMATS`):

  - ``uint8-nhwc``: uint8 (N, H, W, 3), a quarter of the bytes of a float input. The Cast comes
    first: TensorRT 8.6 and 10.x refuse a UINT8 tensor anywhere but at the graph's inputs and
    outputs, and every TensorRT casts UINT8 only to float or half (``trtcheck``'s
    ``type.uint8-intermediate`` and ``type.uint8-cast``).
  - ``float-nchw``: float32 (N, 3, H, W) in 0-255, what ``nvinfer`` feeds with
    ``net-scale-factor=1`` and zero offsets (it has one scalar scale, so it cannot divide by a
    per-channel std itself).

  The nodes stay explicit: folding them into the first convolution is not exact, because every zoo
  stem pads with zeros (a padded zero is a normalised zero, not a black pixel).
- :func:`with_probabilities`: a Softmax after the logits, the output DeepStream's default classifier
  parser reads (it compares probabilities with ``classifier-threshold``).

Both mark their nodes as a module (``aft.module``), so the fp32 rule keeps them in float32 in fp16
and int8 graphs (:data:`aft_export.artifacts.fp32_rule.FP32_RULE`), and write what the file takes and
gives into its metadata (``input_format``, ``output_format``), from which every runner feeds it.
"""

from __future__ import annotations

import copy

import numpy as np

from aft_export.artifacts.ends import PIXEL_MODULE, PROBABILITY_MODULE, graph_ends
from aft_export.artifacts.graph import MODULE_KEY, MODULE_TYPE_KEY, set_props
from aft_export.artifacts.onnxio import check_graph, read_metadata, set_metadata
from aft_export.data.formats import FORMATS, PIXEL_FORMATS, PROBABILITIES, gives_probabilities, takes_pixels
from aft_export.errors import AFTExportError

NORMALIZED_NAME = "image_normalized"  # the prologue's output: what the graph took before
PROBABILITY_OUTPUT = "probabilities"


def _marked(node, module: tuple[str, str]):
    set_props(node, {MODULE_KEY: module[0], MODULE_TYPE_KEY: module[1]})
    return node


def with_pixel_input(model, input_format: str, mean, std):
    """``model`` (a classifier of one normalised float (N, 3, H, W) input, changed in place and
    returned) taking ``input_format``'s pixels under the input's name, normalising them first."""
    from onnx import TensorProto, helper, numpy_helper

    if input_format not in FORMATS:
        raise AFTExportError(f"unknown pixel input format {input_format!r}; one of {', '.join(PIXEL_FORMATS)}")
    if not takes_pixels(input_format):
        return model
    props = read_metadata(model)
    already = graph_ends(model).takes
    if already.pixels:
        raise AFTExportError(f"the graph takes {already.name} pixels already; export from the checkpoint")
    takes = FORMATS[input_format]
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in inits]
    if len(inputs) != 1 or inputs[0].type.tensor_type.elem_type != TensorProto.FLOAT:
        raise AFTExportError("a pixel input is added to a classifier of one float image input")
    image = inputs[0]
    name, dims = image.name, list(image.type.tensor_type.shape.dim)
    for node in graph.node:  # the graph now reads the normalised images under their own name
        node.input[:] = [NORMALIZED_NAME if i == name else i for i in node.input]
    normalised = copy.deepcopy(image)
    normalised.name = NORMALIZED_NAME
    graph.value_info.append(normalised)
    nodes, x = [], name
    if takes.layout == "NHWC":
        nodes.append(helper.make_node("Cast", [x], ["pixels_float"], name="pixels_cast", to=TensorProto.FLOAT))
        nodes.append(helper.make_node("Transpose", ["pixels_float"], ["pixels_nchw"], name="pixels_nchw",
                                      perm=[0, 3, 1, 2]))  # fmt: skip
        x = "pixels_nchw"
        new_dims = [dims[0], dims[2], dims[3], dims[1]]
    else:
        new_dims = dims
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(takes.dtype))
    channels = len(mean)
    graph.initializer.extend([
        numpy_helper.from_array(np.array(255.0, np.float32), "pixels_scale"),
        numpy_helper.from_array(np.asarray(mean, np.float32).reshape(1, channels, 1, 1), "pixels_mean"),
        numpy_helper.from_array(np.asarray(std, np.float32).reshape(1, channels, 1, 1), "pixels_std"),
    ])  # fmt: skip
    nodes += [
        helper.make_node("Div", [x, "pixels_scale"], ["pixels_unit"], name="pixels_unit"),  # x / 255
        helper.make_node("Sub", ["pixels_unit", "pixels_mean"], ["pixels_centred"], name="pixels_centred"),
        helper.make_node("Div", ["pixels_centred", "pixels_std"], [NORMALIZED_NAME], name="pixels_normalized"),
    ]
    for node in reversed(nodes):
        graph.node.insert(0, _marked(node, PIXEL_MODULE))
    pixels = helper.make_tensor_value_info(name, elem, None)
    pixels.type.tensor_type.shape.dim.extend(copy.deepcopy(d) for d in new_dims)
    index = list(graph.input).index(image)
    graph.input.remove(image)
    graph.input.insert(index, pixels)
    layout = takes.layout
    props.update({"input_format": input_format, "input_layout": layout, "input_dtype": takes.dtype,
                  "preprocess": "resize shorter side to input height (bicubic), centre crop; RGB pixels in 0-255 "
                                f"({layout}) in; the graph computes x / 255, (x - mean) / std"})  # fmt: skip
    set_metadata(model, props)
    check_graph(model)  # every new value typed and shaped, as the exporter's own graphs are
    return model


def with_probabilities(model):
    """``model`` (changed in place and returned) giving the softmax of its logits as its output."""
    from onnx import helper

    props = read_metadata(model)
    if gives_probabilities(graph_ends(model).gives):
        return model
    graph = model.graph
    logits = graph.output[0]
    name = logits.name
    out = copy.deepcopy(logits)
    out.name = PROBABILITY_OUTPUT
    graph.value_info.append(copy.deepcopy(logits))
    graph.node.append(_marked(helper.make_node("Softmax", [name], [PROBABILITY_OUTPUT], name="probabilities",
                                               axis=1), PROBABILITY_MODULE))  # fmt: skip
    graph.output.remove(logits)
    graph.output.insert(0, out)
    props["output_format"] = PROBABILITIES
    set_metadata(model, props)
    check_graph(model)
    return model


__all__ = ["PIXEL_MODULE", "PROBABILITY_MODULE", "with_pixel_input", "with_probabilities"]
