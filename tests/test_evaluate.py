"""Top-1/top-5 against numbers counted by hand.

The model is a lookup table: image ``i`` is a solid gray square of value ``i``, and the
model returns row ``i`` of ``LOGITS`` whatever else it is given, so every prediction, and
so every metric, is fixed by the table below and can be counted on paper.
"""

import json

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from aft_export.verify.evaluate import evaluate_artifacts, evaluate_model

CLASSES = [f"c{k}" for k in range(7)]
LABELS = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2]  # true class of image i
# Each row is a permutation of 0..6; the true class's logit is 7 - rank.
LOGITS = [
    [6, 5, 4, 3, 2, 1, 0],  # image 0, class 0: rank 1
    [5, 6, 4, 3, 2, 1, 0],  # image 1, class 1: rank 1
    [6, 4, 5, 3, 2, 1, 0],  # image 2, class 2: rank 2
    [6, 5, 4, 2, 3, 1, 0],  # image 3, class 3: rank 5
    [6, 5, 4, 3, 1, 2, 0],  # image 4, class 4: rank 6
    [5, 4, 3, 2, 1, 6, 0],  # image 5, class 5: rank 1
    [6, 5, 4, 3, 2, 1, 0],  # image 6, class 6: rank 7
    [4, 6, 5, 3, 2, 1, 0],  # image 7, class 0: rank 3
    [0, 6, 5, 4, 3, 2, 1],  # image 8, class 1: rank 1
    [6, 5, 3, 4, 2, 1, 0],  # image 9, class 2: rank 4
]
RANKS = [1, 1, 2, 5, 6, 1, 7, 3, 1, 4]
# By hand: rank 1 for images 0, 1, 5, 8 -> top-1 4/10; rank <= 5 for all but images 4
# and 6 -> top-5 8/10.
TOP1, TOP5 = 40.0, 80.0
# The second model negates rows 0-4 (rank r becomes 8 - r there: 7, 7, 6, 3, 2) and keeps
# rows 5-9 (ranks 1, 7, 3, 1, 4). Top-1: images 5 and 8 -> 2/10. Top-5: images 3, 4, 5, 7,
# 8, 9 -> 6/10. Its top-1 agrees with the first model's on images 5-9 only -> 5/10.
FLIPPED = [[-v for v in row] for row in LOGITS[:5]] + LOGITS[5:]
TOP1_FLIPPED, TOP5_FLIPPED, AGREEMENT_FLIPPED = 20.0, 60.0, 50.0
SIZE = 8


def test_the_hand_counts_match_the_table():
    """The table says what the comments above say (a typo there would make the other
    tests check the wrong numbers)."""
    def ranks(table):
        return [1 + sum(v > row[y] for v in row) for row, y in zip(table, LABELS)]

    assert all(sorted(row) == list(range(7)) for row in LOGITS)  # no ties
    assert ranks(LOGITS) == RANKS
    assert ranks(FLIPPED) == [7, 7, 6, 3, 2, 1, 7, 3, 1, 4]


def lookup_onnx(path, table):
    """image -> mean pixel * 255 (the image's index, with mean 0 and std 1) -> row of ``table``."""
    inits = [numpy_helper.from_array(np.array(table, np.float32), "table"),
             numpy_helper.from_array(np.array(255.0, np.float32), "scale")]  # fmt: skip
    nodes = [helper.make_node("ReduceMean", ["image"], ["mean"], axes=[1, 2, 3], keepdims=0),
             helper.make_node("Mul", ["mean", "scale"], ["value"]),
             helper.make_node("Round", ["value"], ["rounded"]),
             helper.make_node("Cast", ["rounded"], ["index"], to=TensorProto.INT64),
             helper.make_node("Gather", ["table", "index"], ["logits"], axis=0)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "lookup", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", len(table[0])])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for key, value in (("classes", json.dumps(CLASSES)), ("input_size", json.dumps([3, SIZE, SIZE])),
                       ("mean", "[0.0, 0.0, 0.0]"), ("std", "[1.0, 1.0, 1.0]")):  # fmt: skip
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def gray_image_folder(root):
    """ImageFolder: image i, a solid square of gray value i, in the folder of its class."""
    from PIL import Image

    for i, y in enumerate(LABELS):
        (root / CLASSES[y]).mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (SIZE, SIZE), (i, i, i)).save(root / CLASSES[y] / f"img{i}.png")
    return root


def test_eval_counts_top1_top5_and_agreement_exactly(tmp_path):
    data = gray_image_folder(tmp_path / "data")
    first, flipped = lookup_onnx(tmp_path / "a.onnx", LOGITS), lookup_onnx(tmp_path / "b.onnx", FLIPPED)
    # batch size 3 does not divide 10: the last, short batch counts too
    expected = [(10, TOP1, TOP5, 100.0), (10, TOP1_FLIPPED, TOP5_FLIPPED, AGREEMENT_FLIPPED)]
    rows = evaluate_artifacts([first, flipped], str(data), batch_size=3)
    assert [(r["images"], r["top1"], r["top5"], r["agreement"]) for r in rows] == expected
    # side by side (the pipeline's eval): the same rows in the same order, the reference first
    rows = evaluate_artifacts([first, flipped, first], str(data), batch_size=3, workers=2)
    assert [(r["images"], r["top1"], r["top5"], r["agreement"]) for r in rows] == expected + [(10, TOP1, TOP5, 100.0)]
    # one after the other: the same rows
    rows = evaluate_artifacts([first, flipped], str(data), batch_size=3, workers=1)
    assert [(r["images"], r["top1"], r["top5"], r["agreement"]) for r in rows] == expected


def test_side_by_side_only_where_it_runs_more_images_per_cpu_second(tmp_path, monkeypatch):
    """Several ONNX files (and at most one checkpoint) on ONNX Runtime's CPU, on a CPU of several
    cores: a runner of cores // n threads each, as many workers as files; otherwise one after the
    other, the runners left to the usual path (and its errors)."""
    import aft_export.verify.evaluate as evaluate
    from aft_export.verify.evaluate import side_by_side

    a, b = lookup_onnx(tmp_path / "a.onnx", LOGITS), lookup_onnx(tmp_path / "b.onnx", FLIPPED)
    monkeypatch.setattr(evaluate.os, "cpu_count", lambda: 2)
    runners, workers = side_by_side([a, b], "onnxruntime")
    assert workers == 2 and sorted(runners) == sorted([str(a), str(b)]) and {r.threads for r in runners.values()} == {1}
    runners, workers = side_by_side([a, b, a, b], "onnxruntime")  # more files than cores: still one thread each
    assert workers == 2 and {r.threads for r in runners.values()} == {1}
    missing, ckpt = str(tmp_path / "gone.onnx"), tmp_path / "m.pt"
    ckpt.write_bytes(b"")
    assert side_by_side([a], "onnxruntime") is None  # one file
    assert side_by_side([a, b], "openvino") is None  # another runtime
    assert side_by_side([a, missing], "onnxruntime") is None  # its error comes from the usual path
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    assert side_by_side([a, junk], "onnxruntime") is None  # so does a file that does not load
    assert side_by_side([ckpt, a, ckpt], "onnxruntime") is None  # two PyTorch models share one thread count
    monkeypatch.setattr(evaluate.os, "cpu_count", lambda: 1)
    assert side_by_side([a, b], "onnxruntime") is None  # one core
    monkeypatch.setattr(evaluate.os, "cpu_count", lambda: 4)
    runners, workers = side_by_side([a, b], "onnxruntime")
    assert workers == 2 and {r.threads for r in runners.values()} == {2}


class TorchLookup(torch.nn.Module):
    def __init__(self, table):
        super().__init__()
        self.table = torch.tensor(table, dtype=torch.float32)

    def forward(self, x):  # (N, 3, H, W), mean 0 and std 1: pixels / 255
        return self.table[(x.mean(dim=(1, 2, 3)) * 255).round().long()]


def test_evaluate_model_counts_top1_top5_exactly():
    """The torch path training reports with: the same table, the same hand counts."""
    images = np.stack([np.full((SIZE, SIZE, 3), i, np.uint8) for i in range(len(LABELS))])
    labels = np.array(LABELS)
    for table, want in ((LOGITS, (TOP1, TOP5)), (FLIPPED, (TOP1_FLIPPED, TOP5_FLIPPED))):
        zero, one = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
        assert evaluate_model(TorchLookup(table), images, labels, zero, one, batch_size=3) == want
