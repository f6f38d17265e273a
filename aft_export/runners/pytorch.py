"""PyTorch: a checkpoint (or a loaded model) on the CPU or a CUDA GPU."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch

from aft_export.errors import AFTExportError, RuntimeMissing
from aft_export.runners.base import OUTPUT, ModelInfo, Runner
from aft_export.models.classifier import leaf_output_bytes
from aft_export.models.checkpoint import NeedsConfig
from aft_export.models.sources import load_model


class TorchRunner(Runner):
    backend = "torch"

    def __init__(self, path, config: str | None = None, threads: int = 0, device: str = "cpu",
                 loaded=None) -> None:  # fmt: skip
        """``path``: a checkpoint, or any model source (:mod:`aft_export.models.sources`);
        ``loaded``: its ``(model, ModelMeta)`` pair already in memory (the pipeline loads
        its model once), instead of loading it again. ``threads``: PyTorch's intra-op thread
        count while this runner runs (0: the count the process has); set for the duration of
        each call and restored after it, never left set process-wide."""
        self._threads = threads
        self.threads = threads or torch.get_num_threads()
        if device == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeMissing("no CUDA GPU is visible to PyTorch here (torch.cuda.is_available() is False)")
            # fp32 means fp32: TF32 convolutions (cuDNN's default) and matrix products are a
            # precision the model does not say, outside the fp32 parity limit
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            self.backend = "torch-cuda"
        self.device = torch.device(device)
        try:
            model, meta = loaded if loaded is not None else load_model(path, config=config)
        except NeedsConfig as exc:  # the commands that run a reference take no config: say what they take
            raise AFTExportError(
                f"{exc.path} is a plain state_dict, which does not say its architecture, and a reference must; give "
                f"the aft-export checkpoint the files were exported from, or write one from it in Python "
                f"(`aft_export.load_checkpoint(path, config=NAME)`, then `aft_export.save_checkpoint(...)`: docs/python.md)"
            ) from None
        self.model = model.to(self.device).eval()
        self.meta = meta
        self._activation_bytes: tuple[int, int] | None = None
        super().__init__(str(path), ModelInfo.from_meta(meta))  # a source's str() is its label

    @contextmanager
    def _scoped_threads(self):
        """PyTorch's thread count is process-wide: this runner's, for one call, then the caller's again."""
        before = torch.get_num_threads()
        if not self._threads or self._threads == before:
            yield
            return
        torch.set_num_threads(self._threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def activation_bytes(self) -> tuple[int, int]:
        """Measured on one image on the CPU: the largest output of a leaf module (the
        MLP's hidden layer, a projection), and the input plus the logits; (0, 0) on a GPU,
        whose memory is not the host's."""
        if self._activation_bytes is None:
            self._activation_bytes = (0, 0)
            if self.device.type == "cpu":
                x = torch.zeros((1, *self.info.input_size))
                with self._scoped_threads():
                    sizes, out = leaf_output_bytes(self.model, x)
                self._activation_bytes = (max(sizes, default=0), x.numel() * 4 + out.numel() * 4)
        return self._activation_bytes

    def run(self, feeds):
        with self._scoped_threads(), torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(feeds[self.input_name])).to(self.device)
            return {OUTPUT: self.model(x).float().cpu().numpy()}
