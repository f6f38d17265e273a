"""Command lines that build and check an ONNX artifact with NVIDIA's own tools.

A user with TensorRT should not have to trust aft-export to trust an artifact: for
each ONNX file this writes the ``trtexec`` build and latency commands and a
``polygraphy run --trt --onnxrt`` comparison, one block per TensorRT generation,
as a commented shell script beside the artifact (``model.fp16.verify.sh``) and as
data for reports.

Shapes come from :func:`aft_export.tensorrt.library.input_profile` (the same profile ``aft-export
build`` uses), the precision from the graph (:func:`~aft_export.artifacts.onnxio.graph_precision`)
and the comparison tolerance from :data:`aft_export.verify.compare.TOLERANCES`.

Flag sources, all read in trtexec's own option parser, ``samples/common/sampleOptions.cpp``
of github.com/NVIDIA/TensorRT at tags 8.5.3, v8.6.1, v10.3.0, release/10.16 and v11.1, and
in the pages https://docs.nvidia.com/deeplearning/tensorrt/latest/reference/command-line-programs.html
(10.x, 11.x) and https://docs.nvidia.com/deeplearning/tensorrt/11.0.0/api/migration/tensorrt-10x-to-11x-trtexec.html:

- ``--onnx --saveEngine --loadEngine --timingCacheFile --minShapes/--optShapes/--maxShapes
  --shapes --percentile --noTF32``: 8.5 to 11.1. Shapes on a fully static input are an
  error ("Static model does not take explicit shapes"), so they are left out there.
- ``--memPoolSize=workspace:N``: 8.5 to 11.1; a bare number is MiB in all of them.
- ``--skipInference``: 8.6 to 11.1; 8.5 has ``--buildOnly`` (8.6 still takes it, deprecated).
- ``--stronglyTyped``: 10.x (opt-in). 11.x: "[Deprecated] ... now enabled by default. This flag
  is a no-op", so the 11.x block leaves it out.
- ``--fp16 --int8 --precisionConstraints --layerPrecisions --layerOutputTypes``: 8.5 to 10.x,
  removed in 11.x. ``*`` in the layer specs is the default for unnamed layers (8.5+).

TensorRT-RTX (block ``rtx``; RTX GPUs, engines built ahead of time on any CPU): aft-export's own
``build`` with ``library=tensorrt-rtx`` (TensorRT-RTX's Python builder, which the ``[rtx]`` extra
installs), and NVIDIA's ``tensorrt_rtx`` tool, which ships with the TensorRT-RTX SDK (not the pip
wheels). Its flags, from NVIDIA's TensorRT-RTX documentation (docs.nvidia.com/deeplearning/
tensorrt-rtx/latest: "Best Practices" / performance, "CPU-Only AOT and TensorRT-RTX Engines"):
``--onnx --saveEngine --skipInference --minShapes/--optShapes/--maxShapes`` (build only, no GPU),
``--loadEngine --shapes`` (run it: needs an RTX GPU), ``--computeCapabilities=75,86`` (targets).
No polygraphy line: polygraphy drives standard TensorRT.

polygraphy (``polygraphy/tools/args`` of the PyPI package, 0.49+; ``--strongly-typed`` since
0.48.0 per its CHANGELOG): ``--trt-min-shapes/--trt-opt-shapes/--trt-max-shapes``,
``--input-shapes``, ``--seed --val-range --iterations --data-loader-script``, ``--atol --rtol
--check-error-stat`` (passes when the statistic is within ``atol`` *or* ``rtol``, so ``--rtol 0``
makes ``atol`` the limit), ``--pool-limit``, ``--fp16 --int8 --precision-constraints
--layer-precisions`` (exact layer names, no wildcard). polygraphy leaves TF32 off unless ``--tf32``.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export import readers
from aft_export.version import __version__
from aft_export.verify.compare import TOLERANCES
from aft_export.errors import AFTExportError
from aft_export.fileio import atomic_write_text
from aft_export.artifacts.onnxio import ArtifactMeta, graph_precision, load_onnx
from aft_export.options import EXPORT_TARGETS, TARGETS
from aft_export.tensorrt.library import BuildOptions, input_profile

ITERATIONS = 4  # random-input batches polygraphy compares
SEED = 0
_SAFE_LAYER = re.compile(r"[A-Za-z0-9_./\-]+")  # names trtexec's name:value specs can carry


@dataclass(frozen=True)
class Generation:
    key: str
    title: str
    versions: str
    strongly_typed: bool  # trtexec --stronglyTyped / polygraphy --strongly-typed
    trtexec_typed_flag: bool  # 10.x needs --stronglyTyped; 11.x has it as a deprecated no-op
    build_only_flag: str


GENERATIONS = (
    Generation("trt11", "TensorRT 11.x", "11.0+ (x86-64 GPUs; Jetson Orin from JetPack 7.2.2)", True, False,
               "--skipInference"),
    Generation("trt10", "TensorRT 10.x", "10.3+ (x86-64 GPUs; JetPack 6.1/6.2)", True, True, "--skipInference"),
    Generation("trt8", "TensorRT 8.5/8.6", "8.5 (JetPack 5.1), 8.6 (JetPack 6.0)", False, False, "--buildOnly"),
)


def _dims(shape) -> str:
    return "x".join(str(d) for d in shape)


def _poly(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _value_types(model) -> dict[str, int]:
    g = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.input) + list(g.output)}
    types.update({t.name: t.data_type for t in g.initializer})
    return types


def fp16_layer_plan(model) -> dict:
    """Which layers TensorRT 8.x must be told to run in fp16 or fp32 for an fp16 graph.

    TensorRT 8.x has no strongly typed networks: with ``--fp16`` every layer may run in
    fp16, including the fp32 islands the graph keeps (LayerNorm, the AFT core). The ONNX
    parser names the layer that computes a node after the node (onnx-tensorrt
    ``ImporterContext::registerLayer``, 8.5-GA/8.6-GA), so the graph's own node names
    pin those. Helper layers the parser adds for a node (broadcast reshapes, the parts of
    a decomposed op) get generated names (a global counter) that cannot be known offline.
    """
    import onnx
    from onnx import TensorProto

    types = _value_types(onnx.shape_inference.infer_shapes(model))  # inlined bodies carry no value_info
    plan = {"fp16": [], "fp16_outputs": [], "fp32": [], "unpinnable": []}
    for node in model.graph.node:
        out = [types.get(o) for o in node.output if o]
        floats = [t for t in out if t in (TensorProto.FLOAT, TensorProto.FLOAT16)]
        if not floats:
            continue
        if not _SAFE_LAYER.fullmatch(node.name or ""):
            plan["unpinnable"].append(node.name)
            continue
        half = all(t == TensorProto.FLOAT16 for t in floats) and len(floats) == len(out)
        if half:
            plan["fp16_outputs"].append(node.name)
        if node.op_type == "Cast":
            continue  # a cast's precision follows its input; its output type is pinned above
        plan["fp16" if half else "fp32"].append(node.name)
    return plan


def fp32_rule_plan(model, where: str = "the model") -> list[str]:
    """The nodes of an int8 graph that an fp16 rest keeps in fp32 (the fixed rule,
    :data:`aft_export.artifacts.fp32_rule.FP32_RULE`: the AFT core, LayerNorm; and the nodes its
    recipe's ``keep_fp32`` patterns chose), by the names TensorRT gives their layers, for
    TensorRT 8's per-layer precision flags. ``where`` names the file: a recorded pattern RE2 does
    not take (a file from a release that compiled them with Python's ``re``) is its recipe
    malformed, said by the file's ``quantization`` metadata key, not by an option."""
    import onnx
    from onnx import TensorProto

    from aft_export.artifacts.graph import aft_core_nodes
    from aft_export.artifacts.fp32_rule import FP32_RULE, fp32_nodes
    from aft_export.readers import matching

    ops = {t for k in FP32_RULE for t in k.op_types}
    names = set(fp32_nodes(model, aft_core_nodes(model))) | {n.name for n in model.graph.node if n.op_type in ops}
    every = [n.name for n in model.graph.node]
    meta = ArtifactMeta.of(model, where)
    recipe = meta.json("quantization") if "quantization" in meta else {}  # bounded and parsed by readers
    kept = recipe.get("keep_fp32") if isinstance(recipe, dict) else None
    for pattern in kept if isinstance(kept, dict) else {}:
        try:
            names |= set(matching(every, pattern, "keep_fp32"))
        except AFTExportError as exc:  # the option's words (its name, then "pattern ...; give ...") are not this file's
            why = str(exc).split("; ")[0].split(" ", 1)[-1]
            raise readers.Malformed(f"{where}'s metadata", "quantization", f"records a keep_fp32 pattern this "
                                    f"release cannot use ({why})", "quantise the model again with this release "
                                    "(`aft-export quantize`)") from None  # fmt: skip
    types = _value_types(onnx.shape_inference.infer_shapes(model))
    # the layers that compute in float: not constants, not shape arithmetic (a precision on an int layer is refused)
    return [n.name for n in model.graph.node if n.name in names and n.op_type != "Constant"
            and _SAFE_LAYER.fullmatch(n.name or "") and n.output
            and all(types.get(o) == TensorProto.FLOAT for o in n.output if o)]  # fmt: skip


def int8_fp16_rest_flags(fp32: list[str]) -> dict:
    """TensorRT 8.5/8.6 flags that run an int8 graph (its rest fp32 in the graph) as the tensorrt
    target's int8 file runs on strongly typed TensorRT: int8 where the Q/DQ pairs are, fp32 for
    the fixed rule's layers (``fp32``, pinned and obeyed), fp16 allowed everywhere else."""
    precisions = ",".join(f"{x}:fp32" for x in fp32)
    return {"fp32": list(fp32),
            "trtexec_flags": ["--int8", "--fp16", "--precisionConstraints=obey"]
            + ([f"--layerPrecisions={precisions}", f"--layerOutputTypes={precisions}"] if fp32 else []),
            "polygraphy_flags": ["--int8", "--fp16", "--precision-constraints", "obey"]
            + (["--layer-precisions", *[f"{x}:float32" for x in fp32]] if fp32 else [])}  # fmt: skip


def _target(meta: ArtifactMeta) -> str:
    target = meta.export_target
    if target not in TARGETS:
        raise AFTExportError(f"unknown export_target {target!r} in the model's metadata; expected one of {TARGETS}")
    return target


def _input_range(meta: ArtifactMeta) -> tuple[float, float]:
    """The values preprocessed images take: (0 - mean) / std .. (1 - mean) / std."""
    try:
        mean, std = meta.mean, meta.std
    except (KeyError, ValueError):
        return (-3.0, 3.0)
    lo = min((0 - m) / s for m, s in zip(mean, std))
    hi = max((1 - m) / s for m, s in zip(mean, std))
    return (round(lo, 3), round(hi, 3))


def _images_in(npy: Path) -> int:
    try:
        return int(np.load(npy, mmap_mode="r").shape[0])
    except (ValueError, IndexError, OSError):
        return 0  # _check_inputs says what is wrong with it


def _check_inputs(npy: Path, shapes, loader_batch: int) -> None:
    if not npy.is_file():
        raise AFTExportError(f"input images {npy} do not exist; write them with numpy.save first")
    try:
        x = np.load(npy, mmap_mode="r")
    except ValueError as exc:
        raise AFTExportError(f"{npy} is not a .npy array: {exc}") from None
    want = tuple(shapes.opt[1:])
    if x.ndim != 4 or tuple(x.shape[1:]) != want:
        raise AFTExportError(f"{npy} holds {tuple(x.shape)} images; the profile's opt shape needs (N, {want})")
    if len(x) < loader_batch:
        raise AFTExportError(f"{npy} has {len(x)} images, fewer than one batch of {loader_batch}; give more")


LOADER = '''"""polygraphy data loader for {onnx}: preprocessed images from {npy}.

Written by aft-export {version}. Yields batches of {batch} (the profile's opt batch, or all the
images where they are fewer, down to its min).
Use: polygraphy run {onnx} ... --data-loader-script {name}
"""

from pathlib import Path

import numpy as np

BATCH = {batch}
IMAGES = Path(__file__).resolve().parent / {npy!r}


def load_data():
    x = np.load(IMAGES).astype(np.float32)
    for i in range(0, len(x) - BATCH + 1, BATCH):
        yield {{{input!r}: x[i : i + BATCH]}}
'''


def verification_commands(onnx_path, batch: str | None = None, hw: str | None = None, workspace_mb: int = 1024,
                          inputs=None, tolerance: float | None = None) -> dict:  # fmt: skip
    """The commands, as data: paths are relative to the artifact's directory (``directory``).

    ``batch`` is a profile as for ``aft-export build`` (default 1,8,32; a fixed-batch graph's
    own batch); ``hw`` the height/width profile of an AFT-conv graph exported with dynamic H/W.
    ``inputs``: a .npy of preprocessed NCHW images; polygraphy then feeds those through a
    loader script (see :func:`write_verification_commands`), otherwise seeded random inputs.
    """

    onnx_path = Path(onnx_path)
    model = load_onnx(onnx_path, external_data=False)
    meta = ArtifactMeta.of(model)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    fixed_batch = len(dims) == 4 and dims[0].HasField("dim_value")
    if batch is None and not fixed_batch:
        batch = BuildOptions().batch_profile
    shapes = input_profile(model, BuildOptions(batch_profile=batch, hw_profile=hw, workspace_mb=workspace_mb))
    dynamic = not all(d.HasField("dim_value") for d in dims)
    precision = graph_precision(model)
    target = _target(meta)
    atol = TOLERANCES[precision].max_abs if tolerance is None else float(tolerance)
    name, stem = onnx_path.name, onnx_path.name.removesuffix(".onnx")
    directory = onnx_path.resolve().parent

    if inputs is not None:
        npy = Path(inputs)
        # batches of the profile's opt size; of fewer images, down to its min, where the batch is dynamic
        loader_batch = shapes.opt[0] if not dynamic or not npy.is_file() else max(
            shapes.min[0], min(shapes.opt[0], _images_in(npy)))
        _check_inputs(npy, shapes, loader_batch)
        loader = re.sub(r"\W", "_", stem) + "_inputs.py"  # polygraphy imports it by name: no dots
        data_flags = ["--data-loader-script", loader]
        data = {"kind": "images", "npy": os.path.relpath(npy.resolve(), directory), "loader": loader,
                "batch": loader_batch, "images": _images_in(npy)}  # fmt: skip
    else:
        lo, hi = _input_range(meta)
        data_flags = (["--input-shapes", f"{shapes.name}:{_poly(shapes.opt)}"] if dynamic else []) + [
            "--seed", str(SEED), "--val-range", f"{shapes.name}:[{lo},{hi}]", "--iterations", str(ITERATIONS)]
        data = {"kind": "random", "seed": SEED, "range": [lo, hi], "iterations": ITERATIONS,
                "shape": list(shapes.opt)}  # fmt: skip
    compare = ["--atol", f"{atol:g}", "--rtol", "0", "--check-error-stat", "max"]
    fp16_plan = fp16_layer_plan(model) if precision == "fp16" else None
    rule = fp32_rule_plan(model, name) if precision == "int8" else None

    gens = {g.key: _block(g, name, stem, precision, target, shapes, dynamic, workspace_mb, data_flags, compare,
                          fp16_plan, rule) for g in GENERATIONS}  # fmt: skip
    source = f"aft_export.verify.compare.TOLERANCES[{precision!r}].max_abs" if tolerance is None else "given"
    onnxrt = shlex.join(["polygraphy", "run", name, "--onnxrt", *data_flags])
    rtx = _rtx_block(name, stem, shapes, dynamic, batch, hw)
    return {
        "artifact": name, "directory": str(directory), "precision": precision, "export_target": target,
        "input": {"name": shapes.name, "min": list(shapes.min), "opt": list(shapes.opt), "max": list(shapes.max),
                  "dynamic": dynamic},
        "tolerance": {"atol": atol, "statistic": "max", "source": source},
        "data": data, "onnxrt": onnxrt, "generations": gens, "rtx": rtx,
    }  # fmt: skip


def _rtx_block(name, stem, shapes, dynamic, batch, hw) -> dict:
    """TensorRT-RTX: aft-export's build through its Python builder, and NVIDIA's tensorrt_rtx tool."""
    n = shapes.name
    ours = ["aft-export", "build", name, "--library", "tensorrt-rtx"]
    if dynamic:
        ours += ["--batch-profile", f"{shapes.min[0]},{shapes.opt[0]},{shapes.max[0]}"]
        if shapes.min[2] != shapes.max[2] or hw:
            ours += ["--hw-profile", f"{shapes.min[2]},{shapes.opt[2]},{shapes.max[2]}"]
    engine, tool_engine = f"{stem}.rtx.engine", f"{stem}.tensorrt_rtx.engine"
    ours += ["--output", engine]
    tool = ["tensorrt_rtx", f"--onnx={name}"]
    if dynamic:
        tool += [f"--minShapes={n}:{_dims(shapes.min)}", f"--optShapes={n}:{_dims(shapes.opt)}",
                 f"--maxShapes={n}:{_dims(shapes.max)}"]  # fmt: skip
    tool += [f"--saveEngine={tool_engine}", "--skipInference"]
    latency = ["tensorrt_rtx", f"--loadEngine={tool_engine}"] + ([f"--shapes={n}:{_dims(shapes.opt)}"] if dynamic else [])
    return {"title": "TensorRT-RTX", "versions": "1.7+ (RTX GPUs: compute capability 8.6+ by default, 7.5 on request; "
            "not Hopper or Jetson)", "engine": engine, "aft_export_build": shlex.join(ours),
            "tensorrt_rtx_build": shlex.join(tool), "tensorrt_rtx_latency": shlex.join(latency),
            "notes": ["strongly typed always: fp32, fp16 and Q/DQ int8 come from the graph",
                      "both builds run on a CPU (ahead of time, no GPU); running an engine needs an RTX GPU",
                      "tensorrt_rtx ships with the TensorRT-RTX SDK, not with the pip wheels"]}  # fmt: skip


def _block(gen: Generation, name, stem, precision, target, shapes, dynamic, workspace_mb, data_flags, compare,
           fp16_plan, fp32_rule_plan=None) -> dict:  # fmt: skip
    block = {"title": gen.title, "versions": gen.versions, "applies": True, "why_not": "", "notes": []}
    if gen.key == "trt8" and EXPORT_TARGETS[target].oldest_tensorrt >= (10, 0):
        form = ("the portable target (opset 19)" if target == "portable" else
                "TensorRT 10.3+/11 (model-local functions, opset 18)")
        block.update(applies=False, why_not=f"this file is exported for {form}, which TensorRT 8.x's ONNX parser "
                     f"cannot import; export it for the tensorrt8 target")
        return block  # fmt: skip
    engine, cache = f"{stem}.{gen.key}.engine", f"{stem}.{gen.key}.timing.cache"
    n = shapes.name
    tx = ["trtexec", f"--onnx={name}"]
    if dynamic:
        tx += [f"--minShapes={n}:{_dims(shapes.min)}", f"--optShapes={n}:{_dims(shapes.opt)}",
               f"--maxShapes={n}:{_dims(shapes.max)}"]  # fmt: skip
    pg = ["polygraphy", "run", name, "--trt", "--onnxrt"]
    if dynamic:
        pg += ["--trt-min-shapes", f"{n}:{_poly(shapes.min)}", "--trt-opt-shapes", f"{n}:{_poly(shapes.opt)}",
               "--trt-max-shapes", f"{n}:{_poly(shapes.max)}"]  # fmt: skip
    if gen.strongly_typed:
        tx += ["--stronglyTyped"] if gen.trtexec_typed_flag else []
        pg += ["--strongly-typed"]
        block["notes"].append("strongly typed: no precision flags; fp32, fp16 tensors and Q/DQ int8 come from the "
                              "graph")
    elif precision == "int8":
        rest = int8_fp16_rest_flags(fp32_rule_plan)
        block.update(fp16_rest=rest)
        tx += ["--int8"]
        pg += ["--int8"]
        block["notes"] += [
            ("no strongly typed networks before 9.x: --int8 lets the Q/DQ pairs run in int8 (explicit "
             "quantization; no calibration runs); no --fp16: the float parts stay fp32, as the graph says"),
            (f"the precisions of the tensorrt target's int8 file (the rest in fp16, the AFT core and LayerNorm in "
             f"fp32) come from builder flags here: trt8_fp16_rest builds with {' '.join(rest['trtexec_flags'][:3])} "
             f"and the graph's {len(rest['fp32'])} fp32-rule layers pinned to fp32"),
        ]  # fmt: skip
    elif precision == "fp16":
        p = fp16_plan
        prec = ",".join(["*:fp32"] + [f"{x}:fp16" for x in p["fp16"]])
        outs = ",".join(["*:fp32"] + [f"{x}:fp16" for x in p["fp16_outputs"]])
        tx += ["--fp16", "--precisionConstraints=obey", f"--layerPrecisions={prec}", f"--layerOutputTypes={outs}"]
        pg += ["--fp16", "--precision-constraints", "obey", "--layer-precisions",
               *[f"{x}:float16" for x in p["fp16"]], *[f"{x}:float32" for x in p["fp32"]]]  # fmt: skip
        block["notes"] += [
            (f"no strongly typed networks before 9.x: --fp16 with the graph's {len(p['fp16'])} fp16 layers named "
             f"and every other layer fp32 ('*:fp32'), obeyed"),
            ("the layer computing each ONNX node carries the node's name; helper layers TensorRT adds for a node "
             "(broadcast reshapes, parts of a decomposed op) get generated names that cannot be known offline and "
             "fall to '*:fp32' in trtexec; polygraphy has no '*', so there they are TensorRT's choice"),
            "if the build fails for want of an implementation that obeys, try --precisionConstraints=prefer",
        ]  # fmt: skip
        if p["unpinnable"]:
            block["notes"].append(f"not pinned (names trtexec's specs cannot carry): {', '.join(p['unpinnable'])}")
    tail = ["--noTF32", f"--memPoolSize=workspace:{workspace_mb}"]
    if "fp16_rest" in block:  # the same build with the rest in fp16, for the script's trt8_fp16_rest
        rest = block["fp16_rest"]
        rest["engine"] = f"{stem}.{gen.key}.fp16-rest.engine"
        rest["trtexec_build"] = shlex.join(tx[:-1] + rest["trtexec_flags"] + tail + [
            f"--timingCacheFile={stem}.{gen.key}.fp16-rest.timing.cache", f"--saveEngine={rest['engine']}",
            gen.build_only_flag])  # fmt: skip
        rest["trtexec_latency"] = shlex.join(["trtexec", f"--loadEngine={rest['engine']}"] + (
            [f"--shapes={shapes.name}:{_dims(shapes.opt)}"] if dynamic else []) + ["--percentile=50,90,99"])  # fmt: skip
        rest["polygraphy"] = shlex.join(pg[:-1] + rest["polygraphy_flags"] + [
            *data_flags, *compare, "--pool-limit", f"workspace:{workspace_mb}M"])  # fmt: skip
    tx += tail + [f"--timingCacheFile={cache}", f"--saveEngine={engine}", gen.build_only_flag]
    latency = ["trtexec", f"--loadEngine={engine}"] + ([f"--shapes={n}:{_dims(shapes.opt)}"] if dynamic else [])
    latency += ["--percentile=50,90,99"]
    pg += [*data_flags, *compare, "--pool-limit", f"workspace:{workspace_mb}M"]
    block.update(trtexec_build=shlex.join(tx), trtexec_latency=shlex.join(latency), polygraphy=shlex.join(pg),
                 engine=engine)  # fmt: skip
    return block


def _script(cmds: dict) -> str:
    i = cmds["input"]
    shape = f"min {_dims(i['min'])}, opt {_dims(i['opt'])}, max {_dims(i['max'])}"
    d = cmds["data"]
    data = (f"{d['images']} preprocessed images from {d['npy']} through {d['loader']}, batches of {d['batch']}"
            if d["kind"] == "images" else
            f"random, seed {d['seed']}, uniform in {d['range']} (the range preprocessed images take), "
            f"{d['iterations']} batches of {_dims(d['shape'])}")  # fmt: skip
    t = cmds["tolerance"]
    keys = [*cmds["generations"]] + [f"{k}_fp16_rest" for k, b in cmds["generations"].items() if "fp16_rest" in b]
    lines = [
        "#!/usr/bin/env bash",
        f"# Build and check {cmds['artifact']} with NVIDIA's own tools, independently of aft-export.",
        f"# Written by aft-export {__version__} on {time.strftime('%Y-%m-%d', time.gmtime())}.",
        f"# Precision (from the graph): {cmds['precision']}. Export target: {cmds['export_target']}.",
        f"# Input {i['name']} (NCHW): {shape}.",
        f"# polygraphy inputs: {data}.",
        "# polygraphy compares TensorRT with ONNX Runtime on this same graph and passes when the largest",
        f"# |difference| is <= {t['atol']:g} ({t['source']}).",
        "#",
        "# Usage: bash THIS_SCRIPT GENERATION    with GENERATION one of "
        + ", ".join(keys) + ", rtx (TensorRT-RTX), or onnxrt",
        "# trtexec is found on PATH, else at /usr/src/tensorrt/bin/trtexec (JetPack); set TRTEXEC to override.",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        'TRTEXEC="${TRTEXEC:-$(command -v trtexec || echo /usr/src/tensorrt/bin/trtexec)}"',
        'POLYGRAPHY="${POLYGRAPHY:-polygraphy}"',
        'AFT_EXPORT="${AFT_EXPORT:-aft-export}"',
        'TENSORRT_RTX="${TENSORRT_RTX:-tensorrt_rtx}"',
        "",
        "# ONNX Runtime only, no TensorRT needed: the inputs load and the graph runs on them.",
        "onnxrt() {",
        "  " + _shell(cmds["onnxrt"]),
        "}",
    ]
    for key, b in cmds["generations"].items():
        lines += ["", f"# ---- {b['title']}: {b['versions']}"]
        if not b["applies"]:
            lines += [f"# Not for this file: {b['why_not']}.", f"{key}() {{",
                      f"  echo {shlex.quote(b['title'] + ' cannot build this file: ' + b['why_not'])} >&2", "  exit 2",
                      "}"]  # fmt: skip
            continue
        lines += [f"# {note}." for note in b["notes"]]
        lines += _tool_function(key, b, "; the timing cache makes a rebuild fast")
        if "fp16_rest" in b:
            lines += ["# The same int8 layers with the rest in fp16 and the AFT core and LayerNorm in fp32: the precisions",
                      "# of the tensorrt target's int8 file, which TensorRT 8 takes from these builder flags, not the graph.",
                      *_tool_function(f"{key}_fp16_rest", b["fp16_rest"])]  # fmt: skip
    r = cmds["rtx"]
    lines += ["", f"# ---- {r['title']}: {r['versions']}", *[f"# {note}." for note in r["notes"]], "rtx() {",
              "  # 1. aft-export's build with TensorRT-RTX's Python builder (pip install 'aft-export[rtx]'), with its "
              "manifest",
              "  " + _shell(r["aft_export_build"]),
              '  if ! command -v "$TENSORRT_RTX" >/dev/null; then',
              '    echo "tensorrt_rtx (TensorRT-RTX SDK) not found; set TENSORRT_RTX to run NVIDIA\'s own build" >&2',
              "    return 0", "  fi",
              "  # 2. NVIDIA's tensorrt_rtx tool builds its own engine, ahead of time (no GPU needed)",
              "  " + _shell(r["tensorrt_rtx_build"]),
              "  # 3. latency of that engine at the opt shape: needs an RTX GPU",
              "  " + _shell(r["tensorrt_rtx_latency"]), "}"]  # fmt: skip
    keys = "|".join([*keys, "rtx", "onnxrt"])
    lines += ["", 'case "${1:-}" in', f"  {keys}) \"$1\" ;;",
              f'  *) echo "usage: $0 {keys}" >&2; exit 2 ;;', "esac", ""]  # fmt: skip
    return "\n".join(lines)


def _tool_function(name: str, b: dict, build_note: str = "") -> list[str]:
    """A script's shell function: trtexec builds the engine and times it, polygraphy builds its own
    with the same flags and compares it with ONNX Runtime."""
    return [
        f"{name}() {{",
        f"  # 1. build the engine ({b['engine']}){build_note}",
        "  " + _shell(b["trtexec_build"]),
        "  # 2. latency percentiles of that engine at the opt shape",
        "  " + _shell(b["trtexec_latency"]),
        "  # 3. polygraphy builds its own engine with the same flags and compares it with ONNX Runtime",
        "  " + _shell(b["polygraphy"]),
        "}",
    ]


def _shell(command: str) -> str:
    """A command line for the script: the tool from its variable, one option per line."""
    argv = shlex.split(command)
    tool = {"trtexec": '"$TRTEXEC"', "polygraphy": '"$POLYGRAPHY"', "aft-export": '"$AFT_EXPORT"',
            "tensorrt_rtx": '"$TENSORRT_RTX"'}[argv[0]]
    parts, cur = [tool], []
    for arg in argv[1:]:
        if arg.startswith("--") and cur:
            parts.append(" ".join(cur))
            cur = []
        cur.append(shlex.quote(arg))
    if cur:
        parts.append(" ".join(cur))
    return " \\\n    ".join(parts)


def write_verification_commands(onnx_path, out_path=None, batch: str | None = None, hw: str | None = None,
                                workspace_mb: int = 1024, inputs=None,
                                tolerance: float | None = None) -> Path:  # fmt: skip
    """Write ``<artifact stem>.verify.sh`` beside the artifact (or at ``out_path``): an executable,
    commented script with one block per TensorRT generation. With ``inputs`` (a .npy of
    preprocessed images) a polygraphy loader is written beside the artifact too
    (``model_fp16_inputs.py``: polygraphy imports it as a module, so no dots). Both are
    written atomically and honour the umask. Returns the script's path.
    """
    onnx_path = Path(onnx_path)
    cmds = verification_commands(onnx_path, batch, hw, workspace_mb, inputs, tolerance)
    out = Path(out_path) if out_path else onnx_path.with_name(onnx_path.name.removesuffix(".onnx") + ".verify.sh")
    if not out.parent.is_dir():
        raise AFTExportError(f"output directory {out.parent} does not exist")
    if out.resolve().parent != onnx_path.resolve().parent:
        raise AFTExportError(f"write the script beside {onnx_path.name} (its commands name files relative to it)")
    d = cmds["data"]
    if d["kind"] == "images":
        loader = LOADER.format(onnx=cmds["artifact"], npy=d["npy"], version=__version__, batch=d["batch"],
                               name=d["loader"], input=cmds["input"]["name"])  # fmt: skip
        atomic_write_text(out.parent / d["loader"], loader)
    atomic_write_text(out, _script(cmds), executable=True)
    return out
