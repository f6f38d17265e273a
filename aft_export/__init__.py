"""aft-export: take Attention Free Transformer classifiers from PyTorch to the edge.

The package is built in floors, each importing only from the floors below it; see
ARCHITECTURE.md (tests/test_architecture.py keeps it so).
"""

from aft_export.checkpoint import load_checkpoint
from aft_export.errors import AFTExportError
from aft_export.models import create_model, get_config, list_models
from aft_export.version import __version__

__all__ = ["AFTExportError", "__version__", "create_model", "get_config", "list_models", "load_checkpoint"]
