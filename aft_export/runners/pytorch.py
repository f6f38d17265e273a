"""PyTorch: a checkpoint (or a loaded model) on the CPU or a CUDA GPU."""

from __future__ import annotations

import numpy as np
import torch

from aft_export.checkpoint import load_checkpoint
from aft_export.errors import RuntimeMissing
from aft_export.runners.base import OUTPUT, ModelInfo, Runner


class TorchRunner(Runner):
    backend = "torch"

    def __init__(self, path: str, config: str | None = None, threads: int = 0, device: str = "cpu",
                 loaded=None) -> None:  # fmt: skip
        """``loaded``: a ``(model, CheckpointMeta)`` pair already in memory (the pipeline
        loads its checkpoint once), instead of reading ``path`` again."""
        if threads:
            torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()
        if device == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeMissing("no CUDA GPU is visible to PyTorch here (torch.cuda.is_available() is False)")
            # fp32 means fp32: TF32 convolutions (cuDNN's default) and matrix products are a
            # precision the model does not say, outside the fp32 parity limit
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            self.backend = "torch-cuda"
        self.device = torch.device(device)
        model, meta = loaded if loaded is not None else load_checkpoint(path, config=config)
        self.model = model.to(self.device).eval()
        self.meta = meta
        super().__init__(str(path), ModelInfo(meta.classes, meta.input_size, meta.mean, meta.std,
                                              source_sha256=meta.sha256))  # fmt: skip

    def run(self, feeds):
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(feeds[self.input_name])).to(self.device)
            return {OUTPUT: self.model(x).float().cpu().numpy()}
