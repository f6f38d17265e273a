"""The files a hostile-input case starts from, and the bad files it adds.

A *world* is a small directory built once per session (a tiny ``aft_simple_test``
checkpoint, its ONNX export, a 20-image ImageFolder, its tar, calibration arrays, a
recipe); every case copies it and adds what it needs with the setup steps below. Only
APIs that exist since the base commit are used here, so the same cases run against it
(``benchmarks/hostile_inputs.py --base``).
"""

from __future__ import annotations

import json
import os
import struct
import tarfile
import zlib
from pathlib import Path

import numpy as np

CLASSES = [f"k{i}" for i in range(10)]
SIZE = 32  # the aft_*_test configs' input side


def _png(path: Path, w: int, h: int, seed: int = 0) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)


def build_world(root: Path) -> Path:
    """The shared starting files (a few hundred kB; built once per session)."""
    import torch

    from aft_export.models.checkpoint import save_checkpoint
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint
    from aft_export.models import create_model

    root.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = create_model("aft_simple_test")
    save_checkpoint(root / "m.pt", model, CLASSES, model_name="aft_simple_test")
    export_checkpoint(root / "m.pt", root / "m.onnx", ExportOptions(images=0), log=lambda *a: None)
    for i, name in enumerate(CLASSES):
        (root / "imgs" / name).mkdir(parents=True)
        for j in range(2):
            _png(root / "imgs" / name / f"{j}.png", 12, 10, seed=10 * i + j)
    with tarfile.open(root / "data.tar", "w") as tar:
        for f in sorted((root / "imgs").rglob("*.png")):
            tar.add(f, arcname=str(f.relative_to(root / "imgs")))
    np.save(root / "calib.npy", np.random.default_rng(1).integers(0, 256, (8, SIZE, SIZE, 3), dtype=np.uint8))
    (root / "recipe.json").write_text(json.dumps({"source": "imgs", "count": 8, "seed": 0}))
    (root / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(root / "w.safetensors"))
    (root / "out").mkdir()  # where outputs go: empty, and must stay so after a failed run
    return root


# ------------------------------------------------------------------ setup steps, by name


def _bomb_png(path: Path, w: int = 20000, h: int = 20000) -> None:
    """A valid PNG header that claims ``w x h`` pixels, with almost no pixel data (69 bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 8))
                     + chunk(b"IEND", b""))  # fmt: skip


def _onnx_edit(d: Path, name: str, edit) -> None:
    import onnx

    model = onnx.load(str(d / "m.onnx"))
    edit(model)
    onnx.save(model, str(d / name))


def _set_meta(model, key: str, value: str) -> None:
    for p in model.metadata_props:
        if p.key == key:
            p.value = value
            return
    model.metadata_props.add(key=key, value=value)


def _second_input(model) -> None:
    from onnx import TensorProto, helper

    model.graph.input.append(helper.make_tensor_value_info("extra", TensorProto.FLOAT, [1]))
    out = model.graph.output[0].name
    model.graph.node.append(helper.make_node("Add", [out + "_pre", "extra"], [out]))
    for n in model.graph.node[:-1]:
        n.output[:] = [o + "_pre" if o == out else o for o in n.output]


def _nan_initializer(model, value: float = np.nan) -> None:
    """An exported graph whose weights hold a NaN (made elsewhere, or by an older release)."""
    from onnx import numpy_helper

    init = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    arr = numpy_helper.to_array(init).copy()
    arr.reshape(-1)[0] = value
    init.CopyFrom(numpy_helper.from_array(arr, init.name))


def _weights(d: Path, name: str, change) -> None:
    import torch

    from aft_export.models.checkpoint import load_checkpoint, save_checkpoint

    model, meta = load_checkpoint(d / "m.pt")
    with torch.no_grad():
        change(model)
    save_checkpoint(d / name, model, meta.classes, meta.mean, meta.std, model_name=meta.model_name)


def _nan(model) -> None:
    next(model.parameters()).view(-1)[0] = float("nan")


def _inf(model) -> None:
    next(model.parameters()).view(-1)[0] = float("inf")


def _int32_safetensors(d: Path) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(str(d / "w.safetensors"))
    save_file({k: (v * 100).to("cpu").int() for k, v in state.items()}, str(d / "int32.safetensors"))


def _truncated_tar(d: Path) -> None:
    data = (d / "data.tar").read_bytes()
    (d / "trunc.tar").write_bytes(data[: len(data) // 2])


def _bad_config_ckpt(d: Path) -> None:
    import torch

    payload = torch.load(d / "m.pt", weights_only=True)
    payload["config"]["variant"] = "nope"
    torch.save(payload, d / "badcfg.pt")


def _short_classes_ckpt(d: Path) -> None:
    import torch

    payload = torch.load(d / "m.pt", weights_only=True)
    payload["classes"] = payload["classes"][:3]
    torch.save(payload, d / "fewclasses.pt")


def _huge_input_ckpt(d: Path) -> None:
    """A tiny AFT-simple model at 512x512 (4096 tokens): a few kB of weights, but a batch
    of 65536 images needs hundreds of GB."""
    from aft_export.models.checkpoint import save_checkpoint
    from aft_export.models import create_model

    save_checkpoint(d / "big.pt", create_model("aft_simple_test", img_size=512), CLASSES, model_name="big")


def _bomb_in_imgs(d: Path) -> None:
    _bomb_png(d / "imgs" / "k0" / "bomb.png")


def _bomb_tar(d: Path) -> None:
    _bomb_png(d / "bomb.png")
    with tarfile.open(d / "bomb.tar", "w") as tar:
        tar.add(d / "imgs" / "k1" / "0.png", arcname="k1/0.png")
        tar.add(d / "bomb.png", arcname="k0/bomb.png")


def _garbage_in_imgs(d: Path) -> None:
    (d / "imgs" / "k3" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(64))


def _png16(d: Path) -> None:
    from PIL import Image

    Image.fromarray(np.full((8, 8), 40000, np.uint16)).save(d / "i16.png")


def _float_npy(d: Path, name: str, value: float) -> None:
    arr = np.zeros((8, 3, SIZE, SIZE), np.float32)
    arr[0, 0, 0, 0] = value
    np.save(d / name, arr)


def _recipe(d: Path, name: str, data) -> None:
    (d / name).write_text(json.dumps(data))


def _chardev(d: Path) -> None:
    """A character device equivalent to /dev/null, inside the case directory (root only):
    a command that replaces it harms nothing outside."""
    import stat

    os.mknod(d / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))


def _fixed_batch_onnx(d: Path) -> None:
    from aft_export.exporting.exporter import ExportOptions, export_checkpoint

    export_checkpoint(d / "m.pt", d / "b2.onnx", ExportOptions(images=0, batch_dim="2", simplify=False),
                      log=lambda *a: None)  # fmt: skip


def _byo(d: Path) -> None:
    (d / "mdl.py").write_text(
        "from aft_export.models import create_model\n\n\ndef build():\n    return create_model('aft_simple_test')\n"
    )


# ------------------------------------------------------------------ issue 35: what users hand us

PRE = {"input_size": SIZE, "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "classes": CLASSES}
DEEP = "[" * 5000 + "]" * 5000  # nested far beyond Python's recursion limit
NO_CLASSES = {k: v for k, v in PRE.items() if k != "classes"}
LATIN1 = json.dumps({**PRE, "classes": ["caf\u00e9", *CLASSES[1:]]}, ensure_ascii=False).encode("latin-1")


def _theirs(d: Path, name: str = "theirs.onnx", edit=None) -> None:
    """Another tool's ONNX file: our export with our metadata stripped (and ``edit`` applied)."""

    def strip(model) -> None:
        model.ClearField("metadata_props")
        if edit is not None:
            edit(model)

    _onnx_edit(d, name, strip)


def _pre(d: Path, name: str, text: str | bytes | None = None, **values) -> None:
    """A preprocessing file: ``text`` as written (bytes: as they are), else PRE with ``values``."""
    data = text if text is not None else json.dumps({**PRE, **values})
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def _beside(d: Path, stem: str, name: str | None = None, **kw) -> None:
    """``stem.onnx`` (another tool's) with ``stem.preprocess.json`` beside it (see :func:`_pre`)."""
    _theirs(d, f"{stem}.onnx")
    _pre(d, name or f"{stem}.preprocess.json", **kw)


def _int64_input(model) -> None:
    from onnx import TensorProto

    model.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64


def _qdq(model) -> None:
    """A QuantizeLinear/DequantizeLinear pair on the graph's input, as a QDQ quantiser leaves them."""
    from onnx import TensorProto, helper

    x = model.graph.input[0].name
    model.graph.initializer.extend([helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]),
                                    helper.make_tensor("z", TensorProto.INT8, [], [0])])  # fmt: skip
    for n in model.graph.node:
        n.input[:] = ["x_dq" if i == x else i for i in n.input]
    model.graph.node.insert(0, helper.make_node("DequantizeLinear", ["x_q", "s", "z"], ["x_dq"]))
    model.graph.node.insert(0, helper.make_node("QuantizeLinear", [x, "s", "z"], ["x_q"]))


def _ort_dynamic(d: Path) -> None:
    """ONNX Runtime's dynamic quantiser (QOperator form: DynamicQuantizeLinear, MatMulInteger,
    ConvInteger) on another tool's fp32 file, with the JSON beside it: its precision is not
    in Q/DQ pairs."""
    import contextlib
    import io
    import logging

    from onnxruntime.quantization import quantize_dynamic

    _theirs(d, "fp32_theirs.onnx")
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process, at WARNING
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            quantize_dynamic(str(d / "fp32_theirs.onnx"), str(d / "ortq.onnx"))
    finally:
        logging.getLogger().setLevel(level)
    (d / "fp32_theirs.onnx").unlink()
    _pre(d, "ortq.preprocess.json")


def _manifest(d: Path, name: str, text: str | None = None, **entries) -> None:
    """An engine (bytes that are no engine: nothing here loads it) and its manifest, whose
    engine_sha256 matches, with ``entries`` replaced (or the manifest's ``text`` as written)."""
    import hashlib

    engine = d / name
    engine.write_bytes(b"engine bytes")
    sha = hashlib.sha256(engine.read_bytes()).hexdigest()
    model = {"classes": json.dumps(CLASSES), "input_size": json.dumps([3, SIZE, SIZE]), "mean": "[0.5, 0.5, 0.5]",
             "std": "[0.5, 0.5, 0.5]", "model_name": "aft_simple_test"}  # fmt: skip
    manifest = {"format": "aft-export.engine.v1", "tool": "aft-export", "created_utc": "2026-01-01T00:00:00Z",
                "library": "tensorrt", "library_version": "10.3.0", "tensorrt": "10.3.0", "precision": "fp32",
                "input": {"name": "image", "min": [1, 3, SIZE, SIZE], "opt": [1, 3, SIZE, SIZE],
                          "max": [8, 3, SIZE, SIZE]}, "onnx": "m.onnx", "engine_sha256": sha,
                "network": {"outputs": {"fp32": 3}, "num_layers": 3}, "model": model, **entries}  # fmt: skip
    (d / f"{name}.json").write_text(text.replace("SHA", sha) if text is not None else json.dumps(manifest))


def _sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no disk blocks (zeros: its size alone is the test)."""
    with open(path, "wb") as f:
        f.truncate(size)


def _yaml_bomb(d: Path) -> None:
    """Nine levels of YAML aliases, each naming the one before ten times: 10^9 values as a walk sees them."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    _pre(d, "bomb.yaml", "\n".join(lines) + "\n")


LONG_NAME = "a" * 250 + ".onnx"  # a file name Linux takes (255 bytes), and a model name too long for its directories


def _plain_state_dict(d: Path) -> None:
    """m.pt's weights as a plain state_dict: no architecture recorded."""
    import torch

    from aft_export.models.checkpoint import load_checkpoint

    model, _ = load_checkpoint(d / "m.pt")
    torch.save(model.state_dict(), d / "plain.pt")


def _other_checkpoint(d: Path) -> None:
    """Another checkpoint of the same architecture and classes (other weights): m.onnx was not made from it."""
    import torch

    from aft_export.models import create_model
    from aft_export.models.checkpoint import save_checkpoint

    torch.manual_seed(1)
    save_checkpoint(d / "other.pt", create_model("aft_simple_test"), CLASSES, model_name="aft_simple_test")


def _wrong_matmul_weight(model) -> None:
    """The first MatMul's weight one row too many: ONNX Runtime and OpenVINO refuse the graph, OpenVINO
    with its reason under lines that name its own source files."""
    from onnx import numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    node = next(n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in inits)
    t = inits[node.input[1]]
    a = numpy_helper.to_array(t)
    t.CopyFrom(numpy_helper.from_array(np.ones((a.shape[0] + 1, *a.shape[1:]), a.dtype), t.name))


# ------------------------------------------------------------------ files that point elsewhere

# a file of the case's outside its directory, which the harness plants for every case and checks after
# (size, mtime, bytes): tests/hostile/harness.py; a case directory's location relative to it
VICTIM = Path("outside") / "victim.bin"  # under the case's work directory, beside (not in) the case directory


def plant_victim(work: Path) -> Path:
    victim = work / VICTIM
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_bytes(b"a file outside the output: 28")
    return victim


def _external(d: Path, model: str, location: str, data: str | None = None, constant: bool = False,
              fifo: bool = False) -> None:
    """``model`` (a path under the case directory): m.onnx with its largest weight in external data at
    ``location`` (as the file writes it), the bytes written at ``data`` (under the case directory; a FIFO
    with ``fifo``). ``constant``: the weight held by a Constant node instead of an initializer."""
    import onnx
    from onnx import TensorProto, helper

    m = onnx.load(str(d / "m.onnx"))
    init = max(m.graph.initializer, key=lambda t: len(t.raw_data))
    raw = init.raw_data
    init.ClearField("raw_data")
    init.data_location = TensorProto.EXTERNAL
    init.external_data.add(key="location", value=location)
    if constant:
        tensor = TensorProto()
        tensor.CopyFrom(init)
        m.graph.initializer.remove(init)
        m.graph.node.insert(0, helper.make_node("Constant", [], [tensor.name], value=tensor))
    (d / model).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(d / model))
    if data is not None:
        (d / data).parent.mkdir(parents=True, exist_ok=True)
        if fifo:
            os.mkfifo(d / data)
        else:
            (d / data).write_bytes(raw)


# The overwrite as it was (before issue 43): triton-repo read each location beside the model and wrote it
# under the same name in REPO/NAME_net/1 (4 levels below the case directory, REPO being out/repo while it is
# written). From a model 5 levels down, 5 ".." read the case's own outside/victim.bin and write the
# planted victim one level above the case directory.
DEEP_MODEL = "p1/p2/p3/p4/p5/trav.onnx"
UP5 = "../" * 5 + str(VICTIM)


SETUPS = {
    "trav.onnx": lambda d: _external(d, DEEP_MODEL, UP5, data=str(VICTIM)),
    # three levels down, 3 ".." read the case's trav_data.bin and wrote out/trav_data.bin beside the repository
    "trav_beside.onnx": lambda d: _external(d, "q1/q2/q3/trav.onnx", "../../../trav_data.bin", data="trav_data.bin"),
    "trav_constant.onnx": lambda d: _external(d, DEEP_MODEL, UP5, data=str(VICTIM), constant=True),
    "abs_data.onnx": lambda d: _external(d, "abs_data.onnx", str((d.parent / VICTIM).resolve())),
    "fifo_data.onnx": lambda d: _external(d, "fifo_data.onnx", "fifo_data.bin", data="fifo_data.bin", fifo=True),
    "dir_data.onnx": lambda d: (_external(d, "dir_data.onnx", "dir_data.bin"), (d / "dir_data.bin").mkdir()),
    "missing_data.onnx": lambda d: _external(d, "missing_data.onnx", "missing_data.bin"),
    "model_onnx_data.onnx": lambda d: _external(d, "model_onnx_data.onnx", "model.onnx", data="model.onnx"),
    "link_data.onnx": lambda d: (_external(d, "link_data.onnx", "link_data.bin"),
                                 os.symlink(f"../{VICTIM}", d / "link_data.bin")),
    "sub_data.onnx": lambda d: _external(d, "sub_data.onnx", "weights/../weights/w.bin", data="weights/w.bin"),
    "plain.pt": lambda d: _plain_state_dict(d),
    "other.pt": lambda d: _other_checkpoint(d),
    "portable.onnx": lambda d: _onnx_edit(d, "portable.onnx", lambda m: _set_meta(m, "export_target", "portable")),
    "long_name.onnx": lambda d: (d / LONG_NAME).write_bytes((d / "m.onnx").read_bytes()),
    "ov_bad.onnx": lambda d: _onnx_edit(d, "ov_bad.onnx", _wrong_matmul_weight),
    "bomb.png": lambda d: _bomb_png(d / "bomb.png"),
    "wide.png": lambda d: _png(d / "wide.png", 100000, 1),
    "tall.png": lambda d: _png(d / "tall.png", 1, 100000),
    "i16.png": _png16,
    "bomb_in_imgs": _bomb_in_imgs,
    "bomb.tar": _bomb_tar,
    "garbage_in_imgs": _garbage_in_imgs,
    "empty": lambda d: (d / "empty").write_bytes(b""),
    "empty.pt": lambda d: (d / "empty.pt").write_bytes(b""),
    "empty.onnx": lambda d: (d / "empty.onnx").write_bytes(b""),
    "empty.tar": lambda d: (d / "empty.tar").write_bytes(b""),
    "empty.npy": lambda d: (d / "empty.npy").write_bytes(b""),
    "empty.json": lambda d: (d / "empty.json").write_bytes(b""),
    "junk.pt": lambda d: (d / "junk.pt").write_bytes(b"\x80\x02junk" * 40),
    "junk.onnx": lambda d: (d / "junk.onnx").write_bytes(b"\x08\x07\x12\x04junk" + bytes(range(256))),
    "junk.tar": lambda d: (d / "junk.tar").write_bytes(b"not a tar at all" * 64),
    "junk.npy": lambda d: (d / "junk.npy").write_bytes(b"\x93NUMPY junk" * 8),
    "junk.png": lambda d: (d / "junk.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(64)),
    "junk.json": lambda d: (d / "junk.json").write_bytes(b"{not json"),
    "junk.engine": lambda d: (d / "junk.engine").write_bytes(b"engine?"),
    "emptydir": lambda d: (d / "emptydir").mkdir(),
    "dir.pt": lambda d: (d / "dir.pt").mkdir(),
    "dir.onnx": lambda d: (d / "dir.onnx").mkdir(),
    "txt.txt": lambda d: (d / "txt.txt").write_text("hello"),
    "zero.onnx": lambda d: (d / "zero.onnx").write_bytes(b""),
    "two_inputs.onnx": lambda d: _onnx_edit(d, "two_inputs.onnx", _second_input),
    "meta_size.onnx": lambda d: _onnx_edit(
        d, "meta_size.onnx", lambda m: _set_meta(m, "input_size", "[3, 64, 64]")
    ),
    "meta_classes.onnx": lambda d: _onnx_edit(
        d, "meta_classes.onnx", lambda m: _set_meta(m, "classes", json.dumps(CLASSES[:5]))
    ),
    "meta_junk.onnx": lambda d: _onnx_edit(d, "meta_junk.onnx", lambda m: _set_meta(m, "mean", "[oops")),
    "meta_nan.onnx": lambda d: _onnx_edit(d, "meta_nan.onnx", lambda m: _set_meta(m, "std", "[NaN, 1, 1]")),
    "meta_zero_size.onnx": lambda d: _onnx_edit(
        d, "meta_zero_size.onnx", lambda m: _set_meta(m, "input_size", "[3, 0, 0]")
    ),
    "no_meta.onnx": lambda d: _onnx_edit(d, "no_meta.onnx", lambda m: m.ClearField("metadata_props")),
    "nan.pt": lambda d: _weights(d, "nan.pt", _nan),
    "nan.onnx": lambda d: _onnx_edit(d, "nan.onnx", _nan_initializer),
    "inf.onnx": lambda d: _onnx_edit(d, "inf.onnx", lambda m: _nan_initializer(m, -np.inf)),
    "inf.pt": lambda d: _weights(d, "inf.pt", _inf),
    "int32.safetensors": _int32_safetensors,
    "trunc.tar": _truncated_tar,
    "badcfg.pt": _bad_config_ckpt,
    "fewclasses.pt": _short_classes_ckpt,
    "big.pt": _huge_input_ckpt,
    "i16": _png16,
    "nan.npy": lambda d: _float_npy(d, "nan.npy", float("nan")),
    "inf.npy": lambda d: _float_npy(d, "inf.npy", float("inf")),
    "recipe_num.json": lambda d: _recipe(d, "recipe_num.json", {"source": 42}),
    "recipe_list.json": lambda d: _recipe(d, "recipe_list.json", [1, 2, 3]),
    "recipe_nosource.json": lambda d: _recipe(d, "recipe_nosource.json", {"count": 8}),
    "recipe_negcount.json": lambda d: _recipe(d, "recipe_negcount.json", {"source": "imgs", "count": -5}),
    "recipe_strcount.json": lambda d: _recipe(d, "recipe_strcount.json", {"source": "imgs", "count": "many"}),
    "recipe_badseed.json": lambda d: _recipe(
        d, "recipe_badseed.json", {"source": "imgs", "count": 8, "seed": -1}
    ),
    "recipe_missing.json": lambda d: _recipe(d, "recipe_missing.json", {"source": "nowhere", "count": 8}),
    "fifo": lambda d: os.mkfifo(d / "fifo"),
    "fifo.onnx": lambda d: os.mkfifo(d / "fifo.onnx"),
    "null": _chardev,
    "link.pt": lambda d: os.symlink(d / "m.pt", d / "link.pt"),
    "link.onnx": lambda d: os.symlink(d / "m.onnx", d / "link.onnx"),
    "hard.pt": lambda d: os.link(d / "m.pt", d / "hard.pt"),
    "hard.onnx": lambda d: os.link(d / "m.onnx", d / "hard.onnx"),
    "hard.tar": lambda d: os.link(d / "data.tar", d / "hard.tar"),
    "b2.onnx": _fixed_batch_onnx,
    "mdl.py": _byo,
    "afile": lambda d: (d / "afile").write_text("x"),
    # issue 35
    "theirs.onnx": _theirs,
    "pre_inf.json": lambda d: _pre(d, "pre_inf.json", '{"input_size": 1e400, "mean": [0.5, 0.5, 0.5], '
                                                      '"std": [0.5, 0.5, 0.5]}'),
    "pre_null.json": lambda d: _pre(d, "pre_null.json", input_size=None),
    "pre_deep.json": lambda d: _pre(d, "pre_deep.json", json.dumps(PRE)[:-1] + ', "classes_file": ' + DEEP + "}"),
    "pre_cfnum.json": lambda d: _pre(d, "pre_cfnum.json", json.dumps({**NO_CLASSES, "classes_file": 5})),
    "pre_cfdir.json": lambda d: ((d / "names").mkdir(),
                                 _pre(d, "pre_cfdir.json", json.dumps({**NO_CLASSES, "classes_file": "names"}))),
    "pre_latin1.json": lambda d: _pre(d, "pre_latin1.json", LATIN1),
    "pre_size0.json": lambda d: _pre(d, "pre_size0.json", input_size=0),
    "pre_std.json": lambda d: _pre(d, "pre_std.json", std=[0.5, -1, 0.5]),
    "pre_yes.yaml": lambda d: _pre(d, "pre_yes.yaml", "input_size: 32\nmean: [0.5, 0.5, 0.5]\nstd: [0.5, 0.5, 0.5]\n"
                                                      "classes: [yes, no]\n"),
    "bomb.yaml": _yaml_bomb,
    "pre_huge.json": lambda d: _sparse(d / "pre_huge.json", 9 * 2**20),  # over readers.MAX_BYTES
    "theirs_latin1": lambda d: _beside(d, "theirs_latin1", text=LATIN1),
    "theirs_fifo": lambda d: (_theirs(d, "theirs_fifo.onnx"), os.mkfifo(d / "theirs_fifo.preprocess.json")),
    "theirs_dir": lambda d: (_theirs(d, "theirs_dir.onnx"), (d / "theirs_dir.preprocess.json").mkdir()),
    "theirs_ok": lambda d: _beside(d, "theirs_ok"),
    "theirs_two": lambda d: (_theirs(d, "theirs_two.onnx", _second_input), _pre(d, "theirs_two.preprocess.json")),
    "theirs_int64": lambda d: (_theirs(d, "theirs_int64.onnx", _int64_input),
                               _pre(d, "theirs_int64.preprocess.json")),
    "theirs_qdq": lambda d: (_theirs(d, "theirs_qdq.onnx", _qdq), _pre(d, "theirs_qdq.preprocess.json")),
    "ortq.onnx": _ort_dynamic,
    "meta_inf.onnx": lambda d: _onnx_edit(d, "meta_inf.onnx", lambda m: _set_meta(m, "input_size", "[3, 1e400, 1e400]")),
    "meta_deep.onnx": lambda d: _onnx_edit(d, "meta_deep.onnx", lambda m: _set_meta(m, "mean", DEEP)),
    "meta_deep_recipe.onnx": lambda d: _onnx_edit(d, "meta_deep_recipe.onnx",
                                                  lambda m: _set_meta(m, "quantization", DEEP)),
    "e_model_list.engine": lambda d: _manifest(d, "e_model_list.engine", model=[1, 2]),
    "e_network_text.engine": lambda d: _manifest(d, "e_network_text.engine", network="x"),
    "e_compute_list.engine": lambda d: _manifest(d, "e_compute_list.engine",
                                                 network={"outputs": {"fp32": 3}, "num_layers": 3, "compute": [3]}),
    "e_input_min5.engine": lambda d: _manifest(d, "e_input_min5.engine", input={"name": "image", "min": 5}),
    "e_library_list.engine": lambda d: _manifest(d, "e_library_list.engine", library=["x"],
                                                 compute_capabilities=[8.6]),
    "e_deep.engine": lambda d: _manifest(d, "e_deep.engine", '{"engine_sha256": "SHA", "x": ' + DEEP + "}"),
    "fifo_model.onnx": lambda d: os.mkfifo(d / "fifo_model.onnx"),
    "fifo_model.engine": lambda d: os.mkfifo(d / "fifo_model.engine"),
    "fifo_model.pt": lambda d: os.mkfifo(d / "fifo_model.pt"),
}


# ---------------------------------------------------------------- files whose metadata lies about their graph (issue 52)


def _pixels(model, form: str = "uint8-nhwc", probabilities: bool = False) -> None:
    """m.onnx as the export makes a pixel file: the prologue that normalises ``form``'s pixels (and a Softmax)."""
    from aft_export.exporting.pixels import with_pixel_input, with_probabilities

    with_pixel_input(model, form, PRE["mean"], PRE["std"])
    if probabilities:
        with_probabilities(model)


def _claims(**values):
    """An edit that sets metadata ``values`` (the graph unchanged): a file whose metadata lies."""
    return lambda model: [_set_meta(model, k, v) for k, v in values.items()]


LIARS = {
    "liar_u8.onnx": _claims(input_format="uint8-nhwc", input_layout="NHWC", input_dtype="uint8"),
    "liar_fl.onnx": _claims(input_format="float-nchw"),
    "liar_ds.onnx": _claims(input_format="float-nchw", output_format="probabilities"),
    "liar_rgb565.onnx": _claims(input_format="rgb565"),
}
SETUPS.update({name: (lambda d, n=name, e=edit: _onnx_edit(d, n, e)) for name, edit in LIARS.items()})
SETUPS.update({
    "u8.onnx": lambda d: _onnx_edit(d, "u8.onnx", _pixels),
    "ds.onnx": lambda d: _onnx_edit(d, "ds.onnx", lambda m: _pixels(m, "float-nchw", probabilities=True)),
    # another tool's file that takes uint8 pixels: our uint8 file, its metadata stripped, its preprocessing beside it
    "theirs_u8": lambda d: (_theirs(d, "theirs_u8.onnx", _pixels), _pre(d, "theirs_u8.preprocess.json")),
    "zero_dim.npy": lambda d: np.save(d / "zero_dim.npy", np.zeros((8, 0, SIZE, 3), np.uint8)),
    # a preprocessing file whose classes_file holds a NUL (ValueError: embedded null byte at the base), whose names
    # hold a line break (a labels file's line each)
    "theirs_nul": lambda d: _beside(d, "theirs_nul", text=json.dumps({**NO_CLASSES, "classes_file": "a\u0000b"})),
    "theirs_break": lambda d: _beside(d, "theirs_break", classes=["a\nb", *CLASSES[1:]]),
})


# ---------------------------------------------------------------- DeepStream files (issue 53)


def _ds(model) -> None:
    _pixels(model, "float-nchw", probabilities=True)


def _twins(d: Path) -> None:
    """The DeepStream file under one name in two folders: their configs would share a name."""
    for sub in ("x", "y"):
        (d / sub).mkdir()
        _onnx_edit(d, f"{sub}/ds.onnx", _ds)


SETUPS.update({
    "ds_break": lambda d: _onnx_edit(d, "a\nbatch-size=9.deepstream.onnx", _ds),
    "ds_twins": _twins,
    "ds_3classes.onnx": lambda d: _onnx_edit(d, "ds_3classes.onnx",
                                             lambda m: (_ds(m), _set_meta(m, "classes", json.dumps(CLASSES[:3])))),
    "ds_portable_int8.onnx": lambda d: _onnx_edit(d, "ds_portable_int8.onnx",
                                                  lambda m: (_ds(m), _qdq(m), _set_meta(m, "export_target", "portable"))),
})


def setup(d: Path, steps) -> None:
    for step in steps:
        SETUPS[step](d)
