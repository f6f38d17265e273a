"""aft-export: take Attention Free Transformer classifiers from PyTorch to the edge.

The package is built in floors, each importing only from the floors below it; see
ARCHITECTURE.md (tests/test_architecture.py keeps it so).

The model floor's API is re-exported here and loaded on first use, so that importing a
light module (the command line, to print its help or an error) does not load torch.
"""

from aft_export.errors import AFTExportError
from aft_export.version import __version__

__all__ = ["AFTExportError", "__version__", "create_model", "get_config", "list_models", "load_checkpoint"]
_LAZY = {"load_checkpoint": "aft_export.models.checkpoint", "create_model": "aft_export.models",
         "get_config": "aft_export.models", "list_models": "aft_export.models"}  # fmt: skip


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aft_export' has no attribute {name!r}")
