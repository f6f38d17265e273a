"""aft-export: take Attention Free Transformer classifiers from PyTorch to the edge.

The package is built in floors, each importing only from the floors below it; see
ARCHITECTURE.md (tests/test_architecture.py keeps it so).

The Python API (:mod:`aft_export.api`: ``export``, ``quantize``, ``parity``, ... one function per
command) and the model floor's ``load_checkpoint``, ``create_model`` and ``list_models`` are
re-exported here and loaded on first use, so that importing a light module (the command line, to
print its help or an error) does not load torch.
"""

from aft_export.errors import AFTExportError
from aft_export.version import __version__

# the Python API (aft_export/api.py): one function per command, each loaded on first use
API = ("export", "quantize", "check", "build", "parity", "evaluate", "bench", "infer", "pipeline", "serve",
       "triton_repo", "train", "info", "doctor")  # fmt: skip
__all__ = ["AFTExportError", "__version__", *API, "create_model", "get_config", "list_models", "load_checkpoint"]
_LAZY = {"load_checkpoint": "aft_export.models.checkpoint", "create_model": "aft_export.models",
         "get_config": "aft_export.models", "list_models": "aft_export.models",
         **dict.fromkeys(API, "aft_export.api")}  # fmt: skip


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aft_export' has no attribute {name!r}")
