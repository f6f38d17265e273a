"""The layer swap of a model trained elsewhere, verified before anything is exported.

:func:`prepare_export` is what the exporter does first for a
:class:`~aft_export.models.checkpoint.ModelMeta`: plan the swap (:mod:`aft_export.byo.swap`),
build the swapped copy, and run both through PyTorch runners on the verification
images, topped up with seeded random inputs to :data:`SWAP_INPUTS`.
The swapped model must match the original within
:data:`~aft_export.verify.compare.SWAP_MAX_ABS` wherever the original's logits are finite,
and be finite everywhere; otherwise nothing is exported.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from torch import Tensor, nn

from aft_export.byo.swap import apply_swap, plan_swap, quiet_stdout
from aft_export.models.checkpoint import ModelMeta
from aft_export.verify.compare import SWAP_MAX_ABS, SwapAgreement, swap_agreement
from aft_export.errors import AFTExportError, said
from aft_export.options import ExportOptions
from aft_export.runners import TorchRunner

# the inputs a layer swap is verified on (the verification images, topped up with seeded random ones), and the
# batch they run in
SWAP_INPUTS = 64
SWAP_BATCH = 16


def _outputs(model: nn.Module, x: Tensor, batch: int) -> np.ndarray:
    with torch.inference_mode(), quiet_stdout():
        return torch.cat([model(x[i : i + batch]).float() for i in range(0, len(x), batch)]).numpy()


def verify_swap(original: nn.Module, swapped: nn.Module, inputs: Tensor, atol: float = SWAP_MAX_ABS,
                batch: int = SWAP_BATCH) -> SwapAgreement:  # fmt: skip
    """Any module (a whole classifier or one layer) against its swapped copy, per input:
    :func:`~aft_export.verify.compare.swap_agreement` of their outputs."""
    return swap_agreement(_outputs(original, inputs, batch), _outputs(swapped, inputs, batch), atol)


def _inputs(meta: ModelMeta, images: np.ndarray | None) -> np.ndarray:
    size = meta.config.img_size
    real = np.ascontiguousarray(images[:SWAP_INPUTS], dtype=np.float32) if images is not None else None
    extra = SWAP_INPUTS - (0 if real is None else len(real))
    noise = torch.randn(extra, 3, size, size, generator=torch.Generator().manual_seed(0)).numpy()
    return noise if real is None else np.concatenate([real, noise])


def prepare_export(model: nn.Module, meta: ModelMeta, images: np.ndarray | None,
                   options: ExportOptions | None = None, log=print) -> tuple[nn.Module, dict]:  # fmt: skip
    """Our layers in place of theirs, verified on ``images`` (real, normalised) and random
    inputs; returns the swapped copy (the original is left untouched) and the report
    (``layers``, and ``swap_check``: the :class:`~aft_export.verify.compare.SwapAgreement`), also
    recorded, rendered, in ``meta.config`` (the ONNX metadata's ``config``). A layer with the
    parameters of a public layout that does not compute it (a look-alike) stays as it is, with a
    warning naming it and the difference; under ``options.require_aft`` that, or a model with no
    AFT layer, is an error."""
    if options is not None and options.dynamic_hw:
        raise AFTExportError(said("a model trained elsewhere exports at its one input size ({input_size}); "
                                  "{dynamic_hw} is for our AFT-conv checkpoints", None))  # fmt: skip
    require = bool(options is not None and options.require_aft)
    inputs = _inputs(meta, images)
    plan = plan_swap(model, torch.from_numpy(inputs[:2]))
    for r in plan.layers:
        log(f"  {r.path or '(root)'}: {r.source} -> " + {"ours": f"kept ({r.to})", "mapped": r.to,
                                                         "unused": f"not exported ({r.reason})",
                                                         "look-alike": f"plain ops ({r.reason})"}[r.action])
    lookalikes = [r for r in plan.layers if r.action == "look-alike"]
    for r in lookalikes:
        what = (f"{r.path or '(root)'} ({r.source}) has the parameters of {r.to} but does not compute it: "
                f"{r.reason}")  # fmt: skip
        if require:
            raise AFTExportError(said("{what}; {require_aft} refuses a layer that does not export as com.aft (fix "
                                      "the layer, or export without {require_aft} to keep it as plain ops)", None,
                                      what=what))
        log(f"warning: {what}; it exports as plain ONNX ops, with no com.aft node")
    if plan.aft_layers == 0 and not lookalikes:
        if require:
            raise AFTExportError(said("no AFT layer recognised in {model_def_got}; {require_aft} refuses a model "
                                      "that exports without com.aft nodes", None,
                                      model_def_got=meta.config.model_def))  # fmt: skip
        log(f"warning: no AFT layer recognised in {meta.config.model_def} (ours, aft-pytorch, comvex.aft, "
            f"labml-nn, or a module with the parameters of one of their layers); it exports as plain ONNX ops, "
            f"with no com.aft node")  # fmt: skip
    swapped = apply_swap(model, plan)
    with quiet_stdout():  # some public layers print on every call
        want = TorchRunner(meta.path, loaded=(model, meta)).logits(inputs, SWAP_BATCH)
        got = TorchRunner(meta.path, loaded=(swapped, meta)).logits(inputs, SWAP_BATCH)
    real = 0 if images is None else min(len(images), SWAP_INPUTS)
    check = replace(swap_agreement(want, got), real_inputs=real)
    if not check.passed:
        raise AFTExportError(
            f"the swapped model differs from the original: max abs {check.max_abs:.3g} over images whose "
            f"original logits are finite (limit {check.atol:g}), {check.swapped_nonfinite_values} "
            f"non-finite values; nothing was written"
        )
    if plan.replacements:
        log(f"swap verified on {check.inputs} inputs ({check.real_inputs} real): max abs "
            f"{check.max_abs:.3g} (limit {check.atol:g})"
            + (f"; the original overflows on {check.original_nonfinite_images}, ours is finite"
               if check.original_nonfinite_images else ""))  # fmt: skip
    meta.config.variant = "+".join(plan.variants) or "none"
    meta.config.swap = {**plan.to_dict(), "swap_check": check.to_dict()}
    return swapped, {"layers": meta.config.swap["layers"], "swap_check": check}
