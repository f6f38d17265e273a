"""What an artifact is, read without running it: ``aft-export info``.

Every artifact the project writes or takes: a checkpoint (or any model source), an ONNX file
(ours: export target, opset, precision, ``com.aft`` layers, the quantisation recipe and its
calibration set's hash; another tool's: what the file itself says, its inputs, outputs,
opsets and producer, and the preprocessing it would be fed with, where one is given or lies
beside it), and an engine with its manifest: :func:`artifact_info` (an :class:`InfoResult`), whose
details :mod:`aft_export.workflow.report` renders. Reads only: a broken part (an engine without its manifest) is said in the result,
not raised, so the rest is still shown.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from aft_export.errors import AFTExportError, Judged, Verdict, listed, said
from aft_export.fileio import sha256_file
from aft_export.artifacts.ends import Claim, disagreements, engine_format, graph_ends
from aft_export.artifacts.graph import DOMAIN, aft_kind
from aft_export.artifacts.onnxio import (ArtifactMeta, compute_nodes, external_files, foreign_kind, graph_precision,
                                         load_onnx)  # fmt: skip
from aft_export.data.preprocess import GIVEN, ForeignPreprocessing
from aft_export.artifacts.purpose import engine_made_for, file_purpose
from aft_export.readers import reason
from aft_export.artifacts.kinds import CHECKPOINT, ENGINE, NAMED, ONNX, expected, is_model_source, kind_of
from aft_export.data.formats import FORMATS, NORMALIZED, gives_probabilities
from aft_export.runners import onnx_info
from aft_export.runners.ort import GraphSignature
from aft_export.models.sources import load_model
from aft_export.tensorrt.manifest import check_manifest, manifest_path, manifest_problems

# our metadata shown as they are (the rest: classes, preprocessing, the recipe, read below)
OUR_KEYS = ("model_name", "variant", "export_target", "opset", "aft_op_form", "source_checkpoint", "source_sha256",
            "tool", "torch_version", "dynamic_batch", "dynamic_hw", "input_format", "output_format")  # fmt: skip
# our metadata that say how the model is fed (JSON lists, read by ArtifactMeta's typed properties)
DESCRIBING = ("classes", "input_size", "mean", "std")


@dataclass
class InfoResult(Judged):
    """``info``: what an artifact is (``kind``: checkpoint, onnx or engine) and what that kind says
    (``details``, the fields of its JSON). Describing checks nothing, but what it could not read as
    said (``malformed`` metadata, metadata its graph ``contradicted``) leaves it not verified."""

    kind: str
    details: dict
    verdict: Verdict = field(default_factory=Verdict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, **copy.deepcopy(self.details)}

    def lines(self) -> list[str]:
        """What ``info`` prints, by kind."""
        return _info_lines({"kind": self.kind, **self.details})


def _info_lines(d: dict) -> list[str]:
    """``aft-export info``: what :func:`describe_artifact` read, by kind."""
    kind = NAMED.get(d.get("kind"), CHECKPOINT)
    if kind is ONNX:
        return _info_onnx(d)
    if kind is ENGINE:
        return _info_engine(d)
    c, h, w = d["input_size"]
    metrics = d["metrics"]
    lines = [f"checkpoint   {d['path']}", f"sha256       {d['sha256']}",
             f"model        {d['model_name'] or '(unnamed)'}  AFT-{d['config']['variant']}",
             f"params       {d['params']:,}", f"input        {c}x{h}x{w} RGB, mean {d['mean']}, std {d['std']}",
             "config       " + ", ".join(f"{k}={v}" for k, v in d["config"].items()),
             f"classes      {len(d['classes'])}: {', '.join(d['classes'])}",
             "metrics      " + (", ".join(f"{k}={v}" for k, v in metrics.items()) if metrics else "(none recorded)")]
    if d["training"]:
        lines.append("training     " + ", ".join(f"{k}={v}" for k, v in d["training"].items()))
    return lines


def _shape(v: dict) -> str:
    return f"{v['name']} {v['type']} [{', '.join('?' if s is None else str(s) for s in v['shape'])}]"


def _preprocessing_line(p: dict) -> str:
    size = p.get("input_size") or ["?"]
    return f"{'x'.join(map(str, size))} RGB, mean {p.get('mean', '?')}, std {p.get('std', '?')}"


def _in_graph(d: dict) -> str:
    """What of the preprocessing a file does itself: a pixel file normalises its input; one for
    DeepStream gives probabilities."""
    said = []
    takes = FORMATS.get(d.get("input_format") or NORMALIZED)
    if takes is not None and takes.pixels:
        said.append(f"it takes {takes.name}: {takes.said}")
    if gives_probabilities(d.get("output_format")):
        said.append(f"it gives {d['output_format']}")
    return f"; {'; '.join(said)}" if said else ""


def _info_onnx(d: dict) -> list[str]:
    opsets = ", ".join(f"{k} {v}" for k, v in d["opsets"].items())
    ops = ", ".join(f"{k} {v}" for k, v in list(d["op_types"].items())[:8])
    lines = [f"onnx         {d['path']} ({d['bytes'] / 1e6:.2f} MB" + (f", weights in {', '.join(d['external_data'])}"
                                                                       if d["external_data"] else "") + ")",
             f"sha256       {d['sha256']}", f"producer     {d['producer'] or '(not named)'}, IR {d['ir_version']}",
             f"opsets       {opsets}", f"precision    {d['precision']} (from the graph)",
             f"compute      {compute_nodes(d['compute'])} nodes (from the graph)", f"for          {d['for']}",
             *[f"input        {_shape(v)}" for v in d["inputs"]], *[f"output       {_shape(v)}" for v in d["outputs"]],
             f"nodes        {d['nodes']}: {ops}{', ...' if len(d['op_types']) > 8 else ''}"]  # fmt: skip
    if not d["aft_export"]:
        pre = d["preprocessing"]
        lines.append("written by   another tool (no aft-export metadata)"
                     + (f": {d['written_as']}" if d.get("written_as") else ""))
        if "missing" in pre:
            lines.append("preprocess   none given: " + pre["missing"])
        else:
            lines += [f"preprocess   {_preprocessing_line(pre)} (from {pre['from']})" + _in_graph(d),
                      f"classes      {len(pre['classes'])}: {', '.join(pre['classes'])}"]  # fmt: skip
        return lines
    layers = d["com_aft_layers"]
    lines += [f"model        {d.get('model_name') or '(unnamed)'}  {d.get('variant', '')}".rstrip(),
              f"target       {d.get('export_target', '?')} (opset {d.get('opset', '?')}), op form {d.get('aft_op_form', '?')}",
              "com.aft      " + (", ".join(f"{k} x{v}" for k, v in layers.items()) + f" ({d['com_aft_functions']} "
                                 f"function bodies)" if layers else "none (plain ONNX ops)"),
              f"source       {d.get('source_checkpoint', '?')} (sha256 {d.get('source_sha256', '?')[:16]}...)",
              f"preprocess   {_preprocessing_line(d['preprocessing'])}" + _in_graph(d),
              f"classes      {len(d['classes'])}: {', '.join(d['classes'])}", *_malformed_line(d)]  # fmt: skip
    recipe = d.get("recipe_summary")
    if recipe:
        lines.append("recipe       " + ", ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
                                                for k, v in recipe.items()))  # fmt: skip
    lines.append(f"written by   {d.get('tool', 'aft-export')}")
    return lines


def _malformed_line(d: dict, label: str = "metadata") -> list[str]:
    lines = [f"{label:<12} malformed, not shown: {', '.join(d['malformed'])}"] if d.get("malformed") else []
    return lines + [f"{label:<12} contradicted by the {'graph' if label == 'metadata' else 'profile'}: {line}"
                    for line in d.get("contradicted", [])]


def _info_engine(d: dict) -> list[str]:
    lines = [f"engine       {d['path']} ({d['bytes'] / 1e6:.2f} MB)"]
    if "manifest_error" in d:
        return lines + [f"manifest     {d['manifest']}: " + d["manifest_error"]]
    inp = d["input"] or {}
    targets = ", ".join(d["compute_capabilities"]) or ", ".join(d.get("compute_capabilities_default") or []) or "?"
    outputs = ", ".join(f"{v} {k}" for k, v in d["layer_outputs"].items())
    lines += [f"sha256       {d['sha256']} (matches {d['manifest']})",
              f"library      {d['library']} {d['library_version']}, {d['precision']}, built "
              + (f"on {d['gpu']}" if d["built_on_gpu"] else "ahead of time on a CPU") + f" in {d['build_seconds']} s",
              f"runs on      compute capability {targets}", f"for          {d['for']}",
              f"input        {inp.get('name')} min {inp.get('min')} opt {inp.get('opt')} max {inp.get('max')}",
              f"from         {d['onnx']} (sha256 {str(d['onnx_sha256'])[:16]}...)",
              f"network      {d['num_layers']} layers; layers producing {outputs or '?'}",
              *([f"compute      {compute_nodes(d['compute'])} layers (TensorRT's parsed network)"]
                if d.get("compute") else [])]  # fmt: skip
    m = d["model"]
    if m:
        lines.append(f"preprocess   {_preprocessing_line(m)}"
                     + (f" (from {d['preprocessing_from']}: the ONNX file had no aft-export metadata)"
                        if d["preprocessing_from"] else "") + _in_graph(d))  # fmt: skip
        if m.get("classes"):
            lines.append(f"classes      {len(m['classes'])}: {', '.join(m['classes'])}")
    lines += _malformed_line(d, "manifest")
    lines.append(f"written by   {d['tool']} at {d['created_utc']}")
    return lines


def artifact_info(path, config: str | None = None, preprocessing: ForeignPreprocessing | None = None) -> InfoResult:
    """:func:`describe_artifact`'s description of ``path`` as ``info``'s result."""
    details = describe_artifact(path, config=config, preprocessing=preprocessing)
    kind = details.pop("kind")
    reasons = [f"{path}: malformed {', '.join(details['malformed'])}"] if details.get("malformed") else []
    reasons += [details["manifest_error"]] if details.get("manifest_error") else []
    return InfoResult(kind, details, Verdict.of(unverified=reasons + details.get("contradicted", [])))


def describe_artifact(path, config: str | None = None, preprocessing: ForeignPreprocessing | None = None) -> dict:
    """What ``path`` is: ``kind`` (checkpoint, onnx or engine) and what that kind can say.
    ``config``: the registry config of a plain state_dict file; ``preprocessing``: how an ONNX
    file another tool wrote would be fed (else the JSON beside it). An option the artifact
    cannot take (``config`` for an ONNX file, ``preprocessing`` for a file that says how it is
    fed) is a user error, not ignored."""
    path = Path(path)
    if not path.exists():
        raise AFTExportError(f"artifact {path} does not exist; check the path")
    if path.is_dir():
        raise AFTExportError(f"{path} is a directory; give a checkpoint, an ONNX file or an engine")
    kind = kind_of(path)
    if kind is ONNX:
        _refuse_config(config, path, "an ONNX file")
        return describe_onnx(path, preprocessing)
    if kind is ENGINE:
        _refuse_config(config, path, "an engine")
        _refuse_preprocessing(preprocessing, path, "an engine, whose manifest says how it is fed")
        return describe_engine(path)
    if kind is not None and kind.model_source:
        _refuse_preprocessing(preprocessing, path, "a checkpoint or model spec, not an ONNX file")
        from aft_export.models.checkpoint import describe  # here: describing an ONNX file loads no torch

        return {"kind": "checkpoint", **describe(path, loaded=load_model(str(path), config=config))}
    raise AFTExportError(f"{path}: unknown artifact type; give {expected()}")


def _refuse_config(config: str | None, path: Path, what: str) -> None:
    if config is not None:
        raise AFTExportError(said("{config} names the architecture of a plain state_dict checkpoint, and {path} is "
                                  "{what}, which needs none; leave {config} out", "info", path=path, what=what))  # fmt: skip


def refuse_unused_preprocessing(preprocessing: ForeignPreprocessing | None, artifacts) -> None:
    """Preprocessing given where no file among ``artifacts`` takes it: each is a checkpoint, a model
    spec, an engine or an ONNX file with our metadata, which say how they are fed. Said, not
    ignored. A file that is missing or unreadable is left to the command, which says what is wrong."""
    if preprocessing is None or not artifacts:
        return
    for artifact in map(Path, artifacts):
        kind = kind_of(artifact)
        if not artifact.is_file():
            return
        if kind is ONNX:
            try:
                if not ArtifactMeta.of(load_onnx(artifact, external_data=False), str(artifact)).ours:
                    return  # another tool's file: it takes what was given
            except AFTExportError:
                return
        elif not (kind is ENGINE or is_model_source(artifact)):
            return
    names = str(artifacts[0]) if len(artifacts) == 1 else "each of " + ", ".join(str(a) for a in artifacts)
    _refuse_preprocessing(preprocessing, names, "a file that says how it is fed (a checkpoint, an engine or an "
                                                "aft-export ONNX file)")  # fmt: skip


def _refuse_preprocessing(preprocessing: ForeignPreprocessing | None, path: Path | str, what: str) -> None:
    given = [name for name in GIVEN if preprocessing is not None and getattr(preprocessing, name) is not None]
    if given:
        words = (listed(given[:-1], "info") + " and " if len(given) > 1 else "") + listed(given[-1:], "info")
        raise AFTExportError(said("{words} {says} how to feed an ONNX file another tool wrote, and {path} is {what}; "
                                  "leave {them} out", "info", words=words, says="says" if len(given) == 1 else "say",
                                  path=path, what=what, them="it" if len(given) == 1 else "them"))  # fmt: skip


def described(meta: ArtifactMeta) -> tuple[dict, list[str]]:
    """The keys of ``meta`` that say how the model is fed (:data:`DESCRIBING`), parsed and checked
    by their typed properties, and the keys it holds malformed (not JSON, nested too deep, not a
    list of the right items): said, not raised."""
    values, malformed = {}, []
    for key in DESCRIBING:
        if key not in meta and not meta.broken:
            continue
        try:
            values[key] = list(getattr(meta, key))
        except (KeyError, ValueError):  # readers.Malformed is a ValueError
            malformed.append(key)
    return values, malformed


def _values(signature) -> list[dict]:
    return [{"name": v.name, "type": v.type, "shape": v.shape} for v in signature]


def describe_onnx(path: Path, preprocessing: ForeignPreprocessing | None = None) -> dict:
    model = load_onnx(path, external_data=False)
    meta = ArtifactMeta.of(model, str(path))
    if meta.ours:
        _refuse_preprocessing(preprocessing, path, "an aft-export ONNX file, whose metadata says how it is fed")
    sig = GraphSignature(model)
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    data_files = sorted(f.name for f in external_files(model, path))  # initializers', Constants' and functions'; checked
    out = {
        "kind": "onnx", "path": str(path), "bytes": path.stat().st_size, "sha256": sha256_file(path),
        "external_data": data_files, "producer": " ".join(p for p in (model.producer_name, model.producer_version) if p),
        "ir_version": model.ir_version, "opsets": opsets, "nodes": len(model.graph.node),
        "op_types": dict(Counter(n.op_type for n in model.graph.node).most_common()),
        "inputs": _values(sig.get_inputs()), "outputs": _values(sig.get_outputs()),
        "precision": graph_precision(model), "aft_export": meta.ours, **file_purpose(model),
    }  # fmt: skip
    ends = graph_ends(model)  # what it takes and gives: the graph's word, whatever its metadata says
    ends_said = {"input_format": ends.takes.name, "output_format": ends.gives}
    if not meta.ours:  # another tool's file: what it is, and how it would be fed, if anyone said
        out.update({"written_as": foreign_kind(model), **ends_said})
        try:
            info = onnx_info(model, str(path), path, preprocessing)
            out["preprocessing"] = {"input_size": list(info.input_size), "mean": list(info.mean),
                                    "std": list(info.std), "classes": info.classes, "from": info.preprocessing_from}  # fmt: skip
        except AFTExportError as exc:
            out["preprocessing"] = {"missing": exc.message}  # (its parameters kept, for each face)
        return out
    calls = Counter(aft_kind(n) or n.op_type for n in model.graph.node if n.domain == DOMAIN)  # by variant
    values, malformed = described(meta)
    contradicted = disagreements(ends, Claim.of_meta(meta, malformed), str(path))
    out.update({
        **{k: meta[k] for k in OUR_KEYS if k in meta}, **ends_said,
        **({"contradicted": contradicted} if contradicted else {}),
        "com_aft_layers": dict(sorted(calls.items())), "com_aft_functions": sum(f.domain == DOMAIN for f in model.functions),
        "preprocessing": {k: values[k] for k in ("input_size", "mean", "std") if k in values},
        "classes": values.get("classes", []), **({"malformed": malformed} if malformed else {}),
    })  # fmt: skip
    if "quantization" in meta:
        try:
            recipe = meta.json("quantization")
        except ValueError as exc:
            recipe = exc
        if isinstance(recipe, dict):
            out["recipe"], out["recipe_summary"] = recipe, recipe_summary(recipe)
        else:
            why = reason(recipe) if isinstance(recipe, ValueError) else "not a JSON object"
            out["recipe_summary"] = {"error": f"malformed quantization metadata ({why})"}
    return out


def describe_engine(path: Path) -> dict:
    out = {"kind": "engine", "path": str(path), "bytes": path.stat().st_size, "manifest": manifest_path(path).name}
    try:
        manifest = check_manifest(path, {})  # exists, parses, the engine's sha256 matches; no TensorRT needed
    except AFTExportError as exc:
        return {**out, "manifest_error": exc.message}
    # an entry of the wrong type is "malformed, not shown", as if absent; the rest is shown
    bad = manifest_problems(manifest)
    manifest = {k: v for k, v in manifest.items() if k not in bad}
    model = ArtifactMeta(manifest.get("model", {}), str(path))
    values, malformed = described(model)
    malformed = bad + [f"model.{k}" for k in malformed]
    try:  # no graph: the manifest says what the engine takes, held to the profile it records
        takes, contradicted = engine_format(manifest.get("model"), manifest.get("input") or {}, str(path)).name, []
    except AFTExportError as exc:
        takes, contradicted = None, [exc.message]
    network = manifest.get("network") or {}
    return {
        **out, "sha256": manifest.get("engine_sha256"), "library": manifest.get("library", "tensorrt"),
        "library_version": manifest.get("library_version") or manifest.get("tensorrt"),
        "precision": manifest.get("precision"), "input": manifest.get("input"),
        "compute_capabilities": manifest.get("compute_capabilities") or [],
        "compute_capabilities_default": manifest.get("compute_capabilities_default"),
        "gpu": manifest.get("gpu"), "built_on_gpu": manifest.get("built_on_gpu"), "created_utc": manifest.get("created_utc"),
        "tool": manifest.get("tool"), "onnx": manifest.get("onnx"), "onnx_sha256": manifest.get("onnx_sha256"),
        "build_seconds": manifest.get("build_seconds"), "layer_outputs": network.get("outputs", {}),
        "num_layers": network.get("num_layers"), "compute": network.get("compute") or {},
        "for": engine_made_for(manifest),
        "model_name": model.get("model_name", ""),
        "source_sha256": model.get("source_sha256", ""), "preprocessing_from": model.get("preprocessing_from", ""),
        "model": values, "build_options": manifest.get("build_options", {}), "input_format": takes,
        "output_format": model.get("output_format", "logits"),
        **({"malformed": malformed} if malformed else {}), **({"contradicted": contradicted} if contradicted else {}),
    }  # fmt: skip


def recipe_summary(recipe: dict) -> dict:
    """The parts of a quantisation recipe a person reads first (the report shows them)."""
    calib = recipe.get("calibration") if isinstance(recipe.get("calibration"), dict) else {}
    return {k: v for k, v in {
        "precision": recipe.get("precision"), "method": recipe.get("method"), "percentile": recipe.get("percentile"),
        "calibration": (f"{calib.get('count')} images of {calib.get('source')} (seed {calib.get('seed')}, sha256 "
                        f"{str(calib.get('sha256'))[:16]}...)") if calib else None,
        "quantized_nodes": recipe.get("quantized_nodes"), "excluded_modules": recipe.get("excluded_modules"),
        "fp32_op_types": recipe.get("fp32_op_types"), "tool": recipe.get("tool"),
    }.items() if v is not None}  # fmt: skip

