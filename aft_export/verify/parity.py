"""Parity: every artifact against the fp32 PyTorch reference, with tolerances per precision.

The limits live in :mod:`aft_export.verify.compare` (one row per precision, overridable). Real
images are compared, plus stress inputs: scaled-up images (large activations) and
constant images. A failing ONNX artifact is localised (:mod:`aft_export.verify.localize`).
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from aft_export.artifacts.kinds import is_onnx
from aft_export.verify.compare import Tolerance, judge, metrics, tolerances_with
from aft_export.data.formats import gives_probabilities
from aft_export.data.images import LabelledImages, Preprocessing, normalize_array
from aft_export.data.datasets import load_labelled, verification_data
from aft_export.errors import AFTExportError, Judged, Named, RuntimeMissing, Verdict, said
from aft_export.version import ReadAsDict
from aft_export.exporting.exporter import ExportOptions, export_graph
from aft_export.verify.localize import localize
from aft_export.options import ParityOptions
from aft_export.data.preprocess import ForeignPreprocessing, preprocessing_note
from aft_export.runners import OrtRunner, TorchRunner, load_runner
from aft_export.runners.base import as_output


@dataclasses.dataclass
class InputParity(ReadAsDict):
    """An artifact on one input set (real, scaled_x4, saturated, constant): the metrics of
    :func:`~aft_export.verify.compare.metrics` and the limits they broke
    (:func:`~aft_export.verify.compare.judge`); its ``passed``: none broken."""

    metrics: dict
    failures: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {**copy.deepcopy(self.metrics), "passed": self.passed}


@dataclasses.dataclass
class ParityRow(ReadAsDict):
    """One artifact against the reference: where it ran (``backend``), its ``precision``, the limits it
    is held to (``tolerance``: those of ``judged_as`` where its runtime computes in a lossier
    precision), each input set's metrics (``inputs``), what it was fed (``preprocessing``,
    ``input_format``, ``output_format``: said where not ours or not normalised logits) and, where an
    ONNX file fails, where it diverges. Its ``passed`` is the one verdict of a row, which ``status`` and
    :func:`parity_verdict` read: every input set within its limits; a row skipped (``reason``: why it
    could not run here) has none (None: never a pass). An optional field that is None is not rendered."""

    artifact: str
    backend: str = ""
    precision: str = ""
    tolerance: Tolerance | None = None
    inputs: dict[str, InputParity] = dataclasses.field(default_factory=dict)
    judged_as: str | None = None
    preprocessing: str | None = None
    input_format: str | None = None
    output_format: str | None = None
    divergence: dict | None = None
    reason: str | None = None

    @classmethod
    def skipped(cls, artifact: str, reason: str) -> ParityRow:
        return cls(str(artifact), reason=reason)

    @property
    def failures(self) -> list[str]:
        """Every limit broken, named by its input set ("real: max abs ...")."""
        return [f"{name}: {f}" for name, one in self.inputs.items() for f in one.failures]

    @property
    def passed(self) -> bool | None:
        return None if self.reason is not None else not self.failures

    @property
    def status(self) -> str:
        return "skipped" if self.passed is None else "pass" if self.passed else "fail"

    def lines(self) -> list[str]:
        """Its line of ``parity``'s table: the real images' metrics, pass or its failures, and where a failing
        ONNX file diverges first."""
        if self.passed is None:
            return [f"{self.artifact[-32:]:32s} SKIPPED: {self.reason}"]
        m = self.inputs["real"].metrics
        # a file its runtime computes lossier (openvino-bf16) is judged by that precision's limits: said
        limits = f" ({self.judged_as} limits)" if self.judged_as else ""
        lines = [f"{self.artifact[-32:]:32s} {self.backend:13s} {self.precision:5s} {m['max_abs']:9.2e} "
                 f"{m['mean_abs']:9.2e} {m['max_rel']:9.2e} {m['cosine_min']:9.6f} {m['sqnr_db']:8.1f} "
                 f"{100 * m['top1_agreement']:6.1f}% {100 * m['top5_overlap']:5.1f}% {m['nonfinite']:4d}  "
                 + ("pass" if self.passed else "FAIL: " + "; ".join(self.failures)) + limits]  # fmt: skip
        div = self.divergence
        if div and div.get("first"):
            f = div["first"]
            why = (f"relative error {_beyond(f['rel'], div['limit_rel'])} > {div['limit_rel']:g}"
                   if f["rel"] > div["limit_rel"] else f"{f['nonfinite']} values not finite")
            lines.append(f"    diverges first at node {f['node']} ({f['op_type']}) from {_module(f)}: {why} "
                         f"({div['compared']} values compared with {div['reference']})")  # fmt: skip
        elif div and div.get("error"):
            lines.append(f"    could not localise the divergence: {div['error']}")
        elif div and div.get("worst"):
            w = div["worst"][0]
            lines.append(f"    no intermediate value leaves {div['limit_rel']:g} relative error "
                         f"({div['compared']} compared); the largest, {w['rel']:.3g}, is at node {w['node']} "
                         f"({w['op_type']}) from {_module(w)}")  # fmt: skip
        return lines

    def to_dict(self) -> dict:
        if self.passed is None:
            return {"artifact": self.artifact, "status": self.status, "reason": self.reason,
                    "passed": self.passed}  # fmt: skip
        out = {"artifact": self.artifact, "backend": self.backend, "precision": self.precision,
               "tolerance": None if self.tolerance is None else dataclasses.asdict(self.tolerance),
               "inputs": {name: one.to_dict() for name, one in self.inputs.items()},
               "failures": self.failures}  # fmt: skip
        for name in ("judged_as", "preprocessing", "input_format", "output_format"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out.update(passed=self.passed, status=self.status)
        if self.divergence is not None:
            out["divergence"] = copy.deepcopy(self.divergence)
        return out


@dataclasses.dataclass
class ParityResult(Judged):
    """``parity``: each artifact against the PyTorch reference (``artifacts``: one
    :class:`ParityRow` each, its metrics per input set, its limits, its failures, its own ``passed``:
    within its limits). ``differences``: with ``keep_differences``, each artifact's |logit - reference|
    on the real images (for plots; not in ``to_dict()``)."""

    reference: str
    data: str
    images: int
    artifacts: list[ParityRow]
    skipped: int
    verdict: Verdict
    differences: dict | None = dataclasses.field(default=None, repr=False)

    def to_dict(self) -> dict:
        return {"reference": self.reference, "data": self.data, "images": self.images,
                "artifacts": [r.to_dict() for r in self.artifacts], "passed": self.passed,
                "skipped": self.skipped, "verdict": self.verdict.to_dict()}  # fmt: skip

    def lines(self) -> list[str]:
        """The table ``parity`` prints: a line per artifact (:meth:`ParityRow.lines`)."""
        lines = [f"reference {self.reference} (torch fp32), {self.images} images from {self.data}",
                 f"{'artifact':32s} {'backend':13s} {'prec':5s} {'max abs':>9s} {'mean abs':>9s} {'max rel':>9s} "
                 f"{'cos min':>9s} {'SQNR dB':>8s} {'top1':>7s} {'top5':>6s} {'NaN':>4s}  result"]  # fmt: skip
        return lines + [line for row in self.artifacts for line in row.lines()] + [
            preprocessing_note(r.artifact, r.preprocessing) for r in self.artifacts if r.preprocessing]

    def with_skipped(self, skipped: dict[str, str]) -> ParityResult:
        """This result with the artifacts that could not run here (path -> why) as skipped rows, its verdict
        decided again here (a skipped artifact is never a pass: not verified)."""
        rows = self.artifacts + [ParityRow.skipped(a, why) for a, why in skipped.items()]
        return dataclasses.replace(self, artifacts=rows, skipped=self.skipped + len(skipped),
                                   verdict=parity_verdict(rows))


def _module(row: dict) -> str:
    """The PyTorch module of a localised node: ``""`` is the classifier itself, None unknown."""
    if row["module"] is None:
        return "an unknown module (neither the node nor the reference names one)"
    return f"module {row['module'] or '(root)'} [{row['module_type']}]"


def _beyond(value: float, limit: float) -> str:
    """``value`` (above ``limit``) with the digits that show it above: 0.250001 > 0.25, not 0.25 > 0.25."""
    for digits in range(3, 17):
        text = f"{value:.{digits}g}"
        if float(text) > limit:
            return text
    return repr(value)


def stress_inputs(images: np.ndarray, mean, std) -> dict[str, np.ndarray]:
    """Scaled-up real images, and constant black, white and mid-grey images (NCHW, normalised)."""
    n = min(8, len(images))
    _, c, h, w = images.shape
    m = np.asarray(mean, np.float32).reshape(1, c, 1, 1)
    s = np.asarray(std, np.float32).reshape(1, c, 1, 1)
    consts = np.stack([np.full((c, h, w), v, np.float32) for v in (0.0, 1.0, 0.5)])
    return {"scaled_x4": images[:n] * 4.0, "constant": (consts - m) / s}


def pixel_stress_inputs(pixels: np.ndarray) -> dict[str, np.ndarray]:
    """The stress inputs of a file that takes raw pixels, as decoded images (uint8 (N, H, W, 3)): no
    pixel is above 255, so the pixel domain's extremes stand in for scaled-up images: real images
    saturated (each value 0 or 255: the most contrast an image has), and constant black, white and
    mid-grey (0, 255, 128) images."""
    n = min(8, len(pixels))
    _, h, w, c = pixels.shape
    consts = np.stack([np.full((h, w, c), v, np.uint8) for v in (0, 255, 128)])
    return {"saturated": np.where(pixels[:n] >= 128, 255, 0).astype(np.uint8), "constant": consts}


def compatibility_problem(ref, art) -> str | None:
    """What makes an artifact described by ``art`` (a :class:`~aft_export.runners.ModelInfo`) another
    model than the reference described by ``ref``, said of the artifact (None: nothing): made from
    another checkpoint, other classes, another input size."""
    if art.source_sha256 and ref.source_sha256 and art.source_sha256 != ref.source_sha256:
        return (f"was exported from another checkpoint (sha256 {art.source_sha256[:12]}..., the reference's "
                f"{ref.source_sha256[:12]}...)")  # fmt: skip
    if len(art.classes) != len(ref.classes):
        return f"has {len(art.classes)} classes, the reference {len(ref.classes)}"
    if art.classes != ref.classes:
        return "names its classes otherwise than the reference"
    if tuple(art.input_size) != tuple(ref.input_size):
        return f"takes input {tuple(art.input_size)}, the reference {tuple(ref.input_size)}"
    return None


def check_compatible(reference, runner) -> None:
    """Refuse artifacts made from another model, or with other classes or input shapes."""
    problem = compatibility_problem(reference.info, runner.info)
    if problem:
        raise AFTExportError(f"{runner.path} {problem}; compare artifacts of the same model")


def _divergence(reference_runner, artifact, artifacts, runner, images, backend) -> dict:
    """Localise a failing ONNX artifact against an fp32 graph of the same model: an fp32
    ONNX among the artifacts if one was exported with the same options, else an export of
    the checkpoint made in memory with the options recorded in the artifact's metadata
    (a checker writes no files)."""
    meta = runner.info.extra
    reference = None
    for other in artifacts:
        if other == artifact or not is_onnx(other):
            continue
        try:
            cand = OrtRunner(str(other))
        except AFTExportError:
            continue
        same = all(cand.info.extra.get(k) == meta.get(k) for k in ("source_sha256", "aft_op_form", "opset",
                                                                    "export_target"))  # fmt: skip
        if cand.info.precision == "fp32" and same:
            reference = str(other)
            break
    try:
        if reference is None:
            opts = ExportOptions(op_form=meta.get("aft_op_form", "custom"), target=meta.get("export_target", "tensorrt"),
                                 images=0, simplify=False)  # fmt: skip
            reference_graph = export_graph(reference_runner.model, reference_runner.meta, opts).model
            label = "an fp32 export of the checkpoint, in memory"
        else:
            reference_graph, label = reference, reference
        return {"reference": label, **localize(reference_graph, artifact, images, runner.judged_as,
                                               backend=backend)}  # fmt: skip
    except AFTExportError as exc:
        return {"error": str(exc)}


def run_parity(checkpoint: str, artifacts: list[str], data=None, images: int = ParityOptions.images, overrides: list[str] | None = None,
               backend: str = ParityOptions.backend, reference: TorchRunner | None = None,
               keep_differences: bool = False, runners: dict | None = None,
               reference_logits: np.ndarray | None = None) -> ParityResult:  # fmt: skip
    """Compare every artifact with the fp32 PyTorch model: a :class:`ParityResult`.

    ``data``: a source (directory, tar, ``cifar10:test``) or images already decoded
    (:class:`~aft_export.data.images.LabelledImages`); None: the test data the checkpoint names,
    else ``cifar10:test`` (:func:`~aft_export.data.datasets.verification_data`); ``reference``: the checkpoint's runner
    if it is already loaded. ``keep_differences`` keeps, as the result's ``differences``, each
    artifact's |logit - reference| on the real images (for plots); ``runners``:
    runners already made, by artifact path; ``reference_logits``: the reference's logits on
    the real images, if the caller has them (the export's verification ran PyTorch on the
    same images: :attr:`~aft_export.exporting.exporter.ExportResult.reference_logits`); ``backend``:
    where the ONNX artifacts run (:data:`~aft_export.runtimes.BACKENDS`)."""
    tols = tolerances_with(overrides)
    if not artifacts:
        raise AFTExportError(f"nothing to compare with {checkpoint}; give one or more artifacts (ONNX files or "
                             f"engines)")  # fmt: skip
    if not isinstance(images, int) or images < 1:
        raise AFTExportError(said("{images} must be >= 1, got {got!r}; e.g. {eg}", "parity", got=images,
                                  eg=Named("images", ParityOptions.images)))  # fmt: skip
    reference = reference or TorchRunner(checkpoint)
    info = reference.info
    if not isinstance(data, LabelledImages):
        data = load_labelled(verification_data(data, reference.meta)[0], info.input_size[1], limit=images)
    decoded = data
    pixels = decoded.images[:images]
    x = normalize_array(pixels, info.mean, info.std)
    # each input set: the images a file of normalised input is fed (NCHW, normalised), and those a
    # file that takes raw pixels is fed (decoded images: it gets their pixels, the reference our
    # normalisation of them): scaled-up images exist only normalised, saturated ones only as pixels
    normal_sets = {"real": x, **stress_inputs(x, info.mean, info.std)}
    pixel_sets = {"real": pixels, **pixel_stress_inputs(pixels)}
    # the reference must itself be finite on the real images: a NaN reference turns every check off
    handed = reference_logits is not None and reference_logits.shape == (len(x), len(info.classes))
    if handed and not np.isfinite(reference_logits).all():
        raise AFTExportError(f"{reference.name} gives NaN or infinite logits on the real images; a reference made "
                             f"of them would mean nothing: re-export or retrain it")  # fmt: skip
    wanted: dict[tuple[str, str], np.ndarray] = {("normal", "real"): reference_logits} if handed else {}

    def want(kind: str, name: str) -> np.ndarray:
        """The reference's logits on a set (once each; "real" is the same images both ways)."""
        key = ("normal", name) if name == "real" else (kind, name)
        if key not in wanted:
            arr = normal_sets[name] if key[0] == "normal" else reference.feed(pixel_sets[name])
            wanted[key] = reference.finite_logits(arr) if name == "real" else reference.logits(arr)
        return wanted[key]

    want("normal", "real")  # first: a reference that is not finite stops here, before any artifact is loaded

    # an ONNX file another tool wrote (no metadata of ours) is fed as the reference is: the
    # checkpoint's preprocessing serves both
    theirs = ForeignPreprocessing.of(Preprocessing(info.input_size[-1], tuple(info.mean), tuple(info.std),
                                                   tuple(info.classes)), f"the reference {reference.name}")  # fmt: skip
    rows, differences = [], {}
    for artifact in artifacts:
        try:
            runner = (runners or {}).get(str(artifact)) or load_runner(artifact, backend, preprocessing=theirs)
        except RuntimeMissing as exc:  # reported as skipped, never as passed
            rows.append(ParityRow.skipped(str(artifact), str(exc)))
            continue
        check_compatible(reference, runner)
        prec = runner.info.precision
        tol = tols[runner.judged_as]  # a runtime that computes lossier (openvino-bf16) brings its limits
        row = ParityRow(str(artifact), runner.backend, prec, tol)
        if runner.judged_as != prec:
            row.judged_as = runner.judged_as
        if runner.info.preprocessing_from:  # another tool's file: fed as the reference says
            row.preprocessing = runner.info.preprocessing_from
        pixel_file = runner.info.takes.pixels
        if pixel_file:  # fed raw pixels: proven from them, against the checkpoint fed our normalisation
            row.input_format = runner.info.input_format
        if gives_probabilities(runner.info.output_format):  # compared as log-probabilities (runners.base.as_output)
            row.output_format = runner.info.output_format
        kind, sets = ("pixels", pixel_sets) if pixel_file else ("normal", normal_sets)
        for name, arr in sets.items():
            got = runner.pixel_logits(arr) if pixel_file else runner.logits(arr)
            expected = as_output(want(kind, name), runner.info.output_format)
            if name == "real" and keep_differences:
                differences[str(artifact)] = np.abs(got - expected).ravel()
            m = metrics(expected, got)
            row.inputs[name] = InputParity(m, judge(m, tol, stress=name != "real"))
        if not row.passed and is_onnx(artifact):
            row.divergence = (_divergence(reference, artifact, artifacts, runner, x, backend) if not pixel_file
                              and not gives_probabilities(runner.info.output_format) else
                              {"error": "not localised: localisation compares graphs of normalised input and "
                                        "logits out; export the same options without the pixel input or the "
                                        "probabilities to localise"})  # fmt: skip
        rows.append(row)
    return ParityResult(str(checkpoint), decoded.source, len(x), rows, sum(r.status == "skipped" for r in rows),
                        parity_verdict(rows), differences if keep_differences else None)  # fmt: skip


def parity_verdict(rows: list[ParityRow]) -> Verdict:
    """failed when an artifact fails its limits; not verified when one was skipped (its runtime
    is missing here: never a pass); else ok. Each row's ``status`` is its own ``passed``, read here."""
    return Verdict.of([f"{r.artifact} fails parity: {r.failures[0]}" for r in rows if r.status == "fail"],
                      [f"{r.artifact} skipped by parity: {r.reason}" for r in rows if r.status == "skipped"])
