"""The quantisation stage: an fp32 ONNX file in, an int8 (Q/DQ) or fp16 file out, with
the recipe that made it, its agreement with fp32 on the calibration images and the
offline TensorRT check; the steps live in the package's other modules (see
:mod:`aft_export.quantization`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from aft_export.version import __version__
from aft_export.data.calibration import CalibrationSet, load_calibration
from aft_export.data.formats import FORMATS
from aft_export.data.images import Preprocessing
from aft_export.verify.compare import agreement as _agreement
from aft_export.data.datasets import data_label
from aft_export.errors import AFTExportError, Judged, Named, Verdict, listed, said
from aft_export.exporting.forms import conversion_problem, to_target
from aft_export.fileio import claim_output, sha256_file
from aft_export.artifacts.graph import DOMAIN, aft_core_nodes, inline_functions, name_nodes, node_module, toposort
from aft_export.options import CALIB_COUNT, CALIB_SEED, DEFAULT_TARGET, EXPORT_TARGETS, QuantizeOptions
from aft_export.options.params import Refused, params_of
from aft_export.artifacts.ends import Claim, ends_of
from aft_export.artifacts.onnxio import (ArtifactMeta, check_graph, foreign_kind, graph_precision, load_onnx,
                               nonfinite_weights, quantized_form, read_metadata, save_onnx, set_metadata,
                               unfeedable)  # fmt: skip
from aft_export.data.preprocess import ForeignPreprocessing
from aft_export.quantization import cache, calibrators, fp16, placement, runs
from aft_export.quantization.sensitivity import sensitivity
from aft_export.readers import Malformed, read_document, shown
from aft_export.trtcheck import check_model, enforce
from aft_export.options.commands import command_line

# recipe entries that describe this run, not the artifact: in the result, not in the file
RUN_ONLY = ("calibration_cache",)


@dataclass
class QuantizeResult(Judged):
    path: str
    precision: str
    sha256: str
    recipe: dict
    seconds: dict
    agreement: dict | None = None  # vs the fp32 model on the calibration images
    nonfinite: list = field(default_factory=list)  # fp16 values that took NaN/Inf
    sensitivity: list = field(default_factory=list)
    trt_check: dict | None = None  # TensorRT compatibility per version (aft_export.trtcheck)
    # not verified: fp16 values that took NaN/Inf, or the rules of a targeted TensorRT that refuse or warn
    verdict: Verdict = field(default_factory=Verdict)
    # what this run has in memory, for a caller to hand on to the next quantisation of the same
    # fp32 model (quantize_model's calibration, fp32_logits and the check's CheckReport); not in to_dict
    calibration: CalibrationSet | None = field(default=None, repr=False, compare=False)
    fp32_logits: np.ndarray | None = field(default=None, repr=False, compare=False)
    check_report: object = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name not in HANDED_ON}
        return {**out, "verdict": self.verdict.to_dict()}

    def lines(self) -> list[str]:
        """What ``quantize`` prints: the file, what its precision's strategy says it covers or keeps, the
        agreement with fp32, the time."""
        lines = [f"wrote {self.path} ({self.precision}, sha256 {self.sha256[:16]}...)"]
        lines += PRECISION_STRATEGIES[self.precision].lines(self)
        if self.agreement:
            a = self.agreement
            lines.append(f"vs fp32 on {a['images']} calibration images: top-1 agreement {a['top1_agreement']:.2f}%, "
                         f"max abs {a['max_abs']:.3g}")  # fmt: skip
        lines.append("time: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.seconds.items()))
        return lines + self.verdict.lines()


def _fp16_lines(result: QuantizeResult) -> list[str]:
    """What an fp16 graph, or an int8 graph's fp16 rest, keeps in fp32, and any fp16 value that took NaN/Inf."""
    recipe = result.recipe
    rest = recipe.get("rest_precision")
    head = "rest fp16" if rest == "fp16" else "fp16"
    lines = [f"{head}: fp32 kept for {', '.join(recipe['fp32_rule'])} ({len(recipe['fp32_nodes'])} nodes by name, op "
             f"types {', '.join(recipe['fp32_op_types'])}); input and output fp32"
             + (f"; opset {recipe['opset']}, {recipe['scales']} scales" if rest == "fp16" else "")]  # fmt: skip
    lines += [f"fp16 NaN/Inf: {b['count']} values in {b['value']} (node {b['node']}, module {b['module'] or '?'})"
              for b in result.nonfinite]  # fmt: skip
    if not result.nonfinite and result.agreement:
        lines.append(f"{head}: no NaN or Inf in any fp16 value on the calibration images")
    return lines


HANDED_ON = ("calibration", "fp32_logits", "check_report")


def quantize_model(model_path, out, calib: str | None, options: QuantizeOptions | None = None,
                   log=print, progress: bool = True, cache_writes: list | None = None,
                   calibration: CalibrationSet | None = None, fp32_logits: np.ndarray | None = None,
                   also_check: tuple[str, ...] = ()) -> QuantizeResult:  # fmt: skip
    """Quantise an fp32 ONNX file to int8 (Q/DQ) or fp16; writes ``out`` atomically.
    ``progress`` shows a progress bar (stderr) while calibration images are decoded.
    ``out`` is claimed before any work (:func:`aft_export.fileio.claim_output`): never
    the model, the recipe or the calibration source, and one run at a time. Fresh
    calibration ranges enter the cache only once ``out`` is written, so that a run
    stopped anywhere leaves the cache as it was; ``cache_writes``: a list to hand the
    entry to instead (``(path, bytes)``, for :func:`~aft_export.quantization.cache.write_cache_entries`), for a caller
    whose own run is not complete yet (the pipeline).

    What an earlier quantisation already has in memory can be handed on (None: computed here,
    as always): ``calibration``, the decoded set (a result's ``calibration``; used when it is
    the same sample, in this model's preprocessing, else decoded again); ``fp32_logits``, the
    fp32 model's logits on that set (a result's ``fp32_logits``; only for the same fp32 file);
    ``also_check``: TensorRT columns the check also reports on (the result's ``check_report``
    holds the whole report)."""
    source, opts = apply_recipe(calib, options or QuantizeOptions())
    with claim_output(out, inputs=[model_path, calib, source]) as out:
        pending: list = []
        result = _quantize(model_path, out, source, opts, log, progress, pending, calibration, fp32_logits,
                           also_check)  # fmt: skip
        if cache_writes is None:
            cache.write_cache_entries(pending)
        else:
            cache_writes.extend(pending)
        return result


def _quantize(model_path, out: Path, calib, opts: QuantizeOptions, log, progress: bool, cache_writes: list,
              calibration: CalibrationSet | None = None, fp32_logits: np.ndarray | None = None,
              also_check: tuple[str, ...] = ()) -> QuantizeResult:  # fmt: skip
    model = load_onnx(model_path, whole=("quantize", "build, check, parity and eval take the file as it is "
                                         "(fp32), or quantise a smaller model"))  # fmt: skip
    current = graph_precision(model)
    if current != "fp32":
        form = quantized_form(model)
        what = f"quantised to int8 ({form[0]} form: {', '.join(form[1][:4])})" if form else current
        raise AFTExportError(
            f"{model_path} is already {what}; quantise the fp32 export instead "
            f"(precision is decided once, from fp32)"
        )
    how = PRECISION_STRATEGIES[opts.precision]  # the one place the precision is asked
    _refuse_nonfinite(model, model_path, how.name)
    name_nodes(model)
    meta = read_metadata(model)
    prep = _preprocessing(model, meta, model_path, opts, log)
    model, meta, converted = _in_target_form(model, meta, opts.target, model_path)
    target = EXPORT_TARGETS.get(meta.get("export_target", DEFAULT_TARGET), EXPORT_TARGETS[DEFAULT_TARGET])
    opts = how.settle(opts, target)
    _check_input_size(model, prep, model_path)
    how.check_choices(model, opts)  # names, patterns and op types against the graph, before any image is decoded
    model_sha = sha256_file(model_path)
    seconds: dict[str, float] = {}

    cset = None
    if calib is None:
        how.without_calibration()
    elif calibration is not None and (calibration.source, calibration.requested, calibration.seed,
                                      calibration.preprocess) == (str(calib), opts.images, opts.seed,
                                                                  prep):  # fmt: skip
        cset = calibration  # decoded by an earlier quantisation: the same sample, the same preprocessing
    else:
        t = time.perf_counter()
        cset = load_calibration(calib, prep, opts.images, opts.seed, opts.allow_fewer, progress=progress)
        seconds["load_calibration"] = time.perf_counter() - t
        if cset.requested > len(cset):
            log(said("calibration: {calib_got} has only {value} images; using them ({allow_fewer})", "quantize",
                     calib_got=calib, value=len(cset)))
    if cset is not calibration or converted:
        fp32_logits = None  # logits on another set than this one, or of the graph before its conversion

    inlined = how.graph(model, opts)
    if inlined is not model:
        model, fp32_logits = inlined, None  # the inlined graph's own logits are the reference here
    core = aft_core_nodes(model)
    recipe: dict = {"precision": how.name, "tool": f"aft-export {__version__}",
                    "source_onnx_sha256": model_sha, **({"converted_from": converted} if converted else {}),
                    "calibration": _calibration_record(cset, out)}  # fmt: skip
    t = time.perf_counter()
    # the ranges cache is keyed by the file's sha256; a graph converted from it is another graph, keyed by its
    # own bytes (what the conversion makes can change between releases: its ranges must not be reused then)
    graph_key = model_sha if not converted else hashlib.sha256(model.SerializeToString()).hexdigest()
    qmodel, made, result_extra = how.quantize(model, cset, opts, core, graph_key, prep, log)
    recipe.update(made)
    seconds["quantize"] = time.perf_counter() - t

    placement.restore_functions_and_metadata(qmodel, model)
    props = dict(meta)
    props["precision"] = how.name
    if "opset" in recipe:  # an fp16 rest is written at opset 19
        props["opset"] = str(recipe["opset"])
    # the recipe, less how this run got its ranges (computed, or read from the cache): the same
    # model, images and options give the same bytes, whatever the cache held
    props["quantization"] = json.dumps({k: v for k, v in recipe.items() if k not in RUN_ONLY}, sort_keys=True)
    set_metadata(qmodel, props)
    toposort(qmodel)
    try:
        check_graph(qmodel)
    except Exception as exc:  # noqa: BLE001 - the checker's errors
        raise AFTExportError(f"the {how.name} graph is not valid ONNX ({exc}); nothing was written") from None

    agreement, nonfinite = None, []
    if cset is not None:
        t = time.perf_counter()
        if fp32_logits is None:
            fp32_logits = runs.logits(model, prep, cset.tensors)
        agreement = _agreement(fp32_logits, runs.logits(qmodel, prep, cset.tensors))
        if how.computes_fp16(opts):
            nonfinite = fp16.nonfinite(qmodel, prep, cset.tensors)
        seconds["check"] = time.perf_counter() - t

    report = check_model(qmodel, also=also_check)
    report.path = str(out)
    for column in report.columns.values():
        column.path = str(out)
    enforce(report, log, what=f"the {how.name} quantisation")
    save_onnx(qmodel, out)
    if "cache" in result_extra:
        cache_writes.append(result_extra.pop("cache"))
    return QuantizeResult(
        path=str(out), precision=how.name, sha256=sha256_file(out),
        recipe=recipe, seconds={k: round(v, 3) for k, v in seconds.items()}, agreement=agreement,
        nonfinite=nonfinite, sensitivity=result_extra.get("sensitivity", []),
        trt_check={"status": report.status, "findings": len(report.findings)},
        calibration=cset, fp32_logits=fp32_logits, check_report=report,
        verdict=Verdict.combine(Verdict.of(unverified=[f"{out.name}: {sum(b['count'] for b in nonfinite)} fp16 values "
                                                       f"took NaN or Inf on the calibration images"] if nonfinite else []),
                                report.verdict.at_most_unverified()),
    )  # fmt: skip


def _in_target_form(model, meta: dict, wanted: str | None, path):
    """``model`` in the form of the ``wanted`` export target (None: the file's own), as the exporter
    makes that form from the default one (:func:`aft_export.exporting.forms.to_target`: its metadata
    then name the target and its opset); with its metadata and the target it was converted from
    (None: not converted). A conversion that is not made is an error saying to export for that target."""
    source = meta.get("export_target", DEFAULT_TARGET)
    source = source if source in EXPORT_TARGETS else DEFAULT_TARGET  # as the target's defaults are read below
    if wanted is None or wanted == source:
        return model, meta, None
    problem = conversion_problem(model, source, wanted)
    if problem:
        raise AFTExportError(said("{path} is an {precision} file of the {source} target, which cannot be put in the "
                                  "{wanted} form here: {problem}; export the model with {line} and quantise that "
                                  "file, or leave {target} out to quantise this one for {source}", "quantize",
                                  path=path, precision=graph_precision(model), source=source, wanted=wanted,
                                  problem=problem, line=command_line("export", target=wanted)))  # fmt: skip
    try:
        model = to_target(model, wanted)
    except (AFTExportError, RuntimeError, ValueError) as exc:  # a graph the form cannot hold
        raise AFTExportError(f"{path} cannot be put in the {wanted} form ({str(exc).splitlines()[0][:200]}); export "
                             f"the model with {command_line('export', target=wanted)} and quantise that file") from None
    name_nodes(model)
    return model, read_metadata(model), source


def _preprocessing(model, meta: dict, model_path, opts: QuantizeOptions, log) -> Preprocessing:
    """How calibration images are decoded and fed: from our metadata (``input_size``, ``mean``, ``std``
    override it); for a file another tool wrote, from those options or the JSON beside it
    (``NAME.preprocess.json``, as every command reads it), after what the file is. What the file takes
    is its graph's (:func:`~aft_export.artifacts.ends.ends_of`): a file that normalises its own pixels
    refuses ``mean``, ``std`` and ``input_size``, which could change nothing."""
    if ArtifactMeta(meta).ours:
        takes = ends_of(model, str(model_path)).takes
        given = [k for k in ("input_size", "mean", "std") if getattr(opts, k) is not None]
        if takes.pixels and given:
            raise AFTExportError(said("{given} {say} how to normalise images, and {path} takes {format} pixels that "
                                      "its first nodes normalise with the values it was exported with; leave {them} "
                                      "out", "quantize", given=listed(given, "quantize"), path=model_path,
                                      say="says" if len(given) == 1 else "say", format=takes.name,
                                      them="it" if len(given) == 1 else "them"))  # fmt: skip
        pre = Preprocessing.from_metadata(meta, opts.input_size, opts.mean, opts.std, path=str(model_path))
        return replace(pre, input_format=takes.name)
    problem = unfeedable(model, str(model_path))  # what the file is, before any advice
    if problem:
        raise AFTExportError(problem)
    given = ForeignPreprocessing(input_size=opts.input_size, mean=opts.mean, std=opts.std,
                                 takes=("input_size", "mean", "std"))  # what QuantizeOptions has
    pre, origin = given.for_artifact(model_path, str(model_path), foreign_kind(model))
    takes = ends_of(model, str(model_path), Claim(f"its preprocessing ({origin})")).takes
    log(f"preprocessing: {model_path} has no aft-export metadata; input {pre.size}, mean {list(pre.mean)}, std "
        f"{list(pre.std)} from {origin}")  # fmt: skip
    return replace(pre, classes=None, input_format=takes.name)  # calibration needs no class names


def _check_input_size(model, prep: Preprocessing, path) -> None:
    """The graph takes the (N, 3, size, size) images its metadata (or ``input_size``) says:
    calibration images of another size would fail inside ONNX Runtime halfway."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise AFTExportError(f"{path} takes {len(inputs)} inputs ({', '.join(i.name for i in inputs)}); an image "
                             f"classifier takes one, (N, 3, H, W): export it again with `aft-export export`")  # fmt: skip
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inputs[0].type.tensor_type.shape.dim]
    if len(dims) == 4:  # compared as (N, C, H, W), whatever the layout of its format
        dims = [dims[0], *FORMATS[prep.input_format].chw(dims)]
    want = (3, prep.size, prep.size)
    if len(dims) != 4 or any(d is not None and d != w for d, w in zip(dims[1:], want)):
        shown = "x".join("?" if d is None else str(d) for d in dims[1:])
        raise AFTExportError(said("{path}'s graph takes {shown} inputs but its metadata (or {input_size}) says "
                                  "{value}; export it again, or give the right {input_size}", "quantize",
                                  path=path, shown=shown, value='x'.join(map(str, want))))  # fmt: skip


def _refuse_nonfinite(model, model_path, precision: str) -> None:
    """Weights holding NaN or infinities have no int8 scale (ONNX Runtime's quantiser stops in an
    assertion) and no fp16 value worth keeping: refused before any work, naming the tensor."""
    bad = nonfinite_weights(model)
    if bad:
        name, nans, infs = bad[0]
        held = " and ".join(f"{n} {what}" for n, what in ((nans, "NaN"), (infs, "infinite")) if n)
        more = f" (and {len(bad) - 1} more tensors)" if len(bad) > 1 else ""
        raise AFTExportError(f"{model_path}: weight {name!r} holds {held} value{'s' if nans + infs > 1 else ''}"
                             f"{more}; nothing was quantised to {precision}: export the fp32 graph again from a "
                             f"model whose weights are finite")  # fmt: skip


def _calibration_record(cset: CalibrationSet | None, out: Path) -> dict | None:
    """The calibration set as the artifact records it: its source by name (``cifar10:train``)
    or relative to the artifact, never an absolute path of this machine; its sha256 says
    which images they were wherever the source lies."""
    return None if cset is None else {**cset.record(), "source": data_label(cset.source, Path(out).parent)}


def apply_recipe(calib, opts: QuantizeOptions):
    """A calibration recipe (a JSON file such as ``calibration/cifar10.json``) names the
    source and the count and seed to sample; options given explicitly win."""
    from dataclasses import replace

    recipe = {}
    if calib is not None and str(calib).endswith(".json"):
        path = Path(calib)
        give = "give a recipe such as calibration/cifar10.json, or the images themselves"
        if not (path.exists() or path.is_symlink()):
            raise AFTExportError(f"calibration recipe {path} does not exist; {give}")
        try:  # a regular file (not a directory or a FIFO), bounded, UTF-8, JSON
            recipe = read_document(path, "calibration recipe", give, yaml_ok=False)
        except Malformed as exc:
            why = exc.reason.removeprefix("is ")
            raise AFTExportError(f"calibration recipe {path} is malformed ({why}); {RECIPE_HELP}") from None
        source = recipe.get("source") if isinstance(recipe, dict) else None
        if not isinstance(source, str) or not source:
            raise AFTExportError(f"calibration recipe {path} is malformed (it needs a 'source' naming the images); "
                                 f"{RECIPE_HELP}")  # fmt: skip
        for key, param in zip(("count", "seed"), params_of(QuantizeOptions, "images", "seed")):  # their kinds
            try:
                if key in recipe:
                    param.kind.accept(recipe[key])
            except Refused:
                raise AFTExportError(f"calibration recipe {path}: {key} must be {param.kind.takes}, got "
                                     f"{shown(recipe[key])}; {RECIPE_HELP}") from None  # fmt: skip
        calib = source if ":" in source or Path(source).is_absolute() else str(path.parent / source)
    opts = replace(opts, images=opts.images or recipe.get("count", CALIB_COUNT),
                   seed=opts.seed if opts.seed is not None else recipe.get("seed", CALIB_SEED))  # fmt: skip
    return calib, opts


RECIPE_HELP = ('a recipe is {"source": IMAGES, "count": N, "seed": S}, IMAGES relative to the recipe or cifar10:train '
               '(see calibration/cifar10.json)')


def _rest_precision(opts: QuantizeOptions, target) -> str:
    """What an int8 graph computes outside its int8 layers: ``rest_precision``, else the export
    target's. TensorRT 8 is not strongly typed: it takes the rest's precision from builder flags
    (aft_export.tensorrt.nvtools writes them), not from the graph, so a tensorrt8 graph's rest stays fp32."""
    rest = opts.rest_precision or target.int8_rest
    if rest == "fp16" and target.name == "tensorrt8":
        raise AFTExportError(said("{rest_precision_set} puts fp16 in the graph, which TensorRT 8.5/8.6 does not "
                                  "take its precisions from (they come from its builder flags: see the file's "
                                  "verify script); leave {rest_precision} out for a tensorrt8 file", "quantize",
                                  rest_precision_set=Named('rest_precision', 'fp16')))  # fmt: skip
    return rest


# ----------------------------------------------------------------------------
# The two precisions, chosen once: what differs between an int8 and an fp16 run
# ----------------------------------------------------------------------------


class Int8:
    """Q/DQ int8 from calibrated activation ranges; the rest in ``rest_precision``."""

    name = "int8"

    def settle(self, opts: QuantizeOptions, target) -> QuantizeOptions:
        """The options with what the export target decides filled in: the weights' bits
        (QuantizeOptions.weight_bits), the stem (ExportTarget.int8_stem_fp32), the rest's precision."""
        return replace(opts, rest_precision=_rest_precision(opts, target),
                       weight_bits=target.int8_weight_bits if opts.weight_bits is None else opts.weight_bits,
                       stem_fp32=target.int8_stem_fp32 if opts.stem_fp32 is None else opts.stem_fp32)  # fmt: skip

    def check_choices(self, model, opts: QuantizeOptions) -> None:
        """Names, patterns and op types chosen against the graph, before any image is decoded
        (with ``quantize_aft_core``, inlining names other nodes: checked then)."""
        if not opts.quantize_aft_core:
            placement.select(model, opts, aft_core_nodes(model))

    def without_calibration(self) -> None:
        raise AFTExportError(said("int8 needs calibration images: give {calib} (a folder, tar, .npy/.npz or "
                                  "cifar10:train)", "quantize"))

    def graph(self, model, opts: QuantizeOptions):
        """The graph to quantise: with ``quantize_aft_core``, the com.aft functions inlined (the
        core's MatMuls are inside them, where no quantiser reaches); else ``model`` itself."""
        if not (opts.quantize_aft_core and any(n.domain == DOMAIN for n in model.graph.node)):
            return model
        model = inline_functions(model)
        name_nodes(model)
        return model

    def lines(self, result: QuantizeResult) -> list[str]:
        """What int8 covers, and what its rest computes in."""
        recipe = result.recipe
        lines = [f"int8: {recipe['quantized_nodes']} nodes quantised, {len(recipe['excluded_nodes'])} kept in float "
                 f"({', '.join(recipe['excluded_modules']) or 'none'})"]  # fmt: skip
        for key, what in (("exclude_regex", "pattern"), ("exclude_op_types", "op type"), ("keep_fp32", "fp32 pattern")):
            lines += [f"  {what} {k!r}: {v} nodes" for k, v in recipe.get(key, {}).items()]
        rest = recipe.get("rest_precision")
        return lines + (_fp16_lines(result) if rest == "fp16" else
                        ["rest fp32: what is not int8 computes in fp32"] if rest == "fp32" else [])  # fmt: skip

    def computes_fp16(self, opts: QuantizeOptions) -> bool:
        return opts.rest_precision == "fp16"

    def quantize(self, model, cset: CalibrationSet, opts: QuantizeOptions, core: list[str], model_sha: str,
                 prep: Preprocessing, log) -> tuple[object, dict, dict]:  # fmt: skip
        """The quantised graph, its recipe, and what the run hands on (``cache``: the ranges to
        cache once the output is written; ``sensitivity``)."""
        chosen = placement.select(model, opts, core)
        exclude = chosen.exclude
        types = chosen.op_types
        entry = cache.cache_path(opts, model_sha, cset)
        cached = entry is not None and entry.is_file() and cache.cached_ranges_ok(entry, model, types)
        if entry is not None and entry.is_file() and not cached:
            log(f"calibration: the cache file {entry} is unreadable or incomplete; recomputing it")
        extra: dict = {}
        # fresh ranges go to $TMPDIR; the cache gets them only once the output is written
        # (quantize_model), so a run stopped anywhere leaves the cache as it was
        with tempfile.TemporaryDirectory(prefix="aft-ranges-") as tmp:
            ranges = entry if cached else Path(tmp) / "ranges.json"
            if not cached:
                calibrators.calibrate(model, cset.tensors, opts, prep, ranges)
            log(f"calibration: {len(cset)} images, {opts.method}, "
                + (f"ranges reused from the cache {entry}" if cached else
                   "ranges computed" + (f" and cached in {entry}" if entry else "")))  # fmt: skip
            qmodel = placement.ort_quantize(model, opts, exclude, ranges)
            if opts.sensitivity:
                qmodel, exclude, extra["sensitivity"] = sensitivity(model, qmodel, cset, opts, exclude, ranges, prep,
                                                                    log)  # fmt: skip
            if entry is not None and not cached:
                extra["cache"] = (entry, ranges.read_bytes())
        by_name = {n.name: n for n in model.graph.node}
        recipe = {
            "method": opts.method, "percentile": opts.percentile if opts.method == "percentile" else None,
            "count": len(cset), "seed": opts.seed, "batch_size": opts.batch_size,
            "per_channel": opts.per_channel, "symmetric": True, "activation_type": "int8",
            "weight_type": "int8", **({"weight_bits": 7} if opts.weight_bits == 7 else {}), "bias": "float",
            **chosen.record(),
            "excluded_nodes": exclude,
            "excluded_modules": sorted({node_module(by_name[n])[0] for n in exclude
                                        if n in by_name and node_module(by_name[n])}),
            "quantized_nodes": len(placement.quantized_nodes(qmodel, types)),
            "rest_precision": opts.rest_precision,
            "calibration_cache": "hit" if cached else ("written" if entry else "off"),
        }  # fmt: skip
        if opts.rest_precision == "fp16":
            qmodel, rest = fp16.int8_rest_to_fp16(qmodel, core, chosen.fp32_nodes())
            recipe.update(rest)
        return qmodel, recipe, extra


class Fp16:
    """Every float tensor in fp16 but the AFT core, ``exclude`` and ``keep_fp32``; no calibration."""

    name = "fp16"

    def settle(self, opts: QuantizeOptions, target) -> QuantizeOptions:
        return opts

    def check_choices(self, model, opts: QuantizeOptions) -> None:
        placement.check_exclude(model, opts)
        placement.keep_fp32_nodes(model, opts)

    def without_calibration(self) -> None:
        """Calibration images are optional: without them there is no agreement to measure."""

    def graph(self, model, opts: QuantizeOptions):
        return model

    def lines(self, result: QuantizeResult) -> list[str]:
        return _fp16_lines(result)

    def computes_fp16(self, opts: QuantizeOptions) -> bool:
        return True

    def quantize(self, model, cset: CalibrationSet | None, opts: QuantizeOptions, core: list[str], model_sha: str,
                 prep: Preprocessing, log) -> tuple[object, dict, dict]:  # fmt: skip
        placement.check_exclude(model, opts)
        kept = placement.keep_fp32_nodes(model, opts)
        qmodel, recipe = fp16.to_fp16(model, core, list(opts.exclude) + [n for v in kept.values() for n in v])
        return qmodel, {**recipe, **({"keep_fp32": {p: len(v) for p, v in kept.items()}} if kept else {})}, {}


# one strategy per precision quantize makes (options.PRECISIONS)
PRECISION_STRATEGIES = {s.name: s for s in (Int8(), Fp16())}
