"""``export_model(model, out, ...)``: any ``nn.Module`` classifier to ONNX, verified.

The model's AFT layers become one ``com.aft`` node each (public implementations are
swapped for ours first and the swap verified, :mod:`aft_export.byo.verify`); the rest
is the exporter's own machinery (:func:`aft_export.exporting.exporter.export_checkpoint`
given the loaded model): the translation table, the function bodies, metadata, onnxsim,
ONNX Runtime verification, the TensorRT check and the atomic save.

    from aft_export.byo.export import export_model
    from aft_export.data.images import Preprocessing

    pre = Preprocessing(input_size=32, mean=(0.49, 0.48, 0.45), std=(0.25, 0.24, 0.26))
    result = export_model(my_model, "model.onnx", pre)
"""

from __future__ import annotations

from torch import nn

from aft_export.data.images import Preprocessing
from aft_export.byo.spec import UserModel, meta_for
from aft_export.errors import AFTExportError
from aft_export.exporting.exporter import ExportOptions, ExportResult, export_checkpoint

def export_model(model: nn.Module, out, preprocessing: Preprocessing, options: ExportOptions | None = None, *,
                 name: str = "", log=print) -> ExportResult:  # fmt: skip
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
    meta = meta_for(model, user, log)  # the same checks and metadata as for a model_def
    return export_checkpoint(None, out, options, log=log, loaded=(model, meta))
