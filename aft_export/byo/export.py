"""``export_model(model, out, ...)``: any ``nn.Module`` classifier to ONNX, verified.

The model's AFT layers become one ``com.aft`` node each (public implementations are
swapped for ours first and the swap verified, :mod:`aft_export.byo.verify`); the rest
is the exporter's own machinery (:func:`aft_export.export.exporter.export_checkpoint`
given the loaded model): the translation table, the function bodies, metadata, onnxsim,
ONNX Runtime verification, the TensorRT check and the atomic save.

    from aft_export.byo.export import export_model
    from aft_export.byo.preprocess import Preprocessing

    pre = Preprocessing(input_size=32, mean=(0.49, 0.48, 0.45), std=(0.25, 0.24, 0.26))
    result = export_model(my_model, "model.onnx", pre)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from aft_export.byo.preprocess import Preprocessing
from aft_export.byo.spec import UserModel, UserModelMeta, load_user_model, meta_for
from aft_export.errors import AFTExportError
from aft_export.export.exporter import ExportOptions, ExportResult, export_checkpoint
from aft_export.fileio import claim_output


@dataclass
class ByoExportResult(ExportResult):
    """The exporter's report, plus what became of each AFT layer and the swap check."""

    layers: list[dict] = field(default_factory=list)
    swap_check: dict | None = None
    warnings: list[str] = field(default_factory=list)


def _export(model: nn.Module, meta: UserModelMeta, out, options: ExportOptions | None, log) -> ByoExportResult:
    opts = options or ExportOptions()
    if opts.dynamic_hw:
        raise AFTExportError("a model trained elsewhere exports at its one input size (--input-size); "
                             "--dynamic-hw is for our AFT-conv checkpoints")  # fmt: skip
    warnings: list[str] = []

    def logged(*args):
        if args and str(args[0]).startswith("warning:"):
            warnings.append(str(args[0])[len("warning: "):])
        log(*args)

    result = export_checkpoint(meta.path or None, out, opts, log=logged, loaded=(model, meta))
    swap = meta.config.swap
    return ByoExportResult(**result.to_dict(), layers=swap.get("layers", []), swap_check=swap.get("swap_check"),
                           warnings=warnings)  # fmt: skip


def export_model(model: nn.Module, out, preprocessing: Preprocessing, options: ExportOptions | None = None, *,
                 name: str = "", log=print) -> ByoExportResult:  # fmt: skip
    """Export an in-memory classifier (weights loaded, any architecture) to ``out``.

    ``preprocessing`` says the input size, normalisation and class names; they are
    stored in the ONNX metadata as for our own checkpoints. Raises
    :class:`~aft_export.errors.AFTExportError` naming any AFT layer that cannot be
    mapped, or when the swapped model does not reproduce the original; nothing is
    written then."""
    if not isinstance(model, nn.Module):
        raise AFTExportError(f"export_model takes a torch.nn.Module, not a {type(model).__name__}")
    if not isinstance(preprocessing, Preprocessing):
        raise AFTExportError("export_model needs a Preprocessing (input_size, mean, std, classes)")
    model.eval()
    label = name or type(model).__name__
    user = UserModel(f"{type(model).__module__}.{type(model).__qualname__}", preprocessing, name=label)
    meta = meta_for(model, user, log)  # the same checks and metadata as for --model-def
    return _export(model, meta, out, options, log)


def export_user_model(user: UserModel, out, options: ExportOptions | None = None, log=print) -> ByoExportResult:
    """``aft-export export --model-def ... --weights ...``: build, load, swap, export. ``out``
    is claimed first: never the weights or the model's code (the command line adds every
    other file it was given: the preprocessing and class names files)."""
    code = user.model_def.rpartition(":")[0]
    with claim_output(out, inputs=[user.weights, code if code.endswith(".py") else None]):
        model, meta = load_user_model(user, log=log)
        return _export(model, meta, out, options, log)
