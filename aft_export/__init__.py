"""aft-export: take Attention Free Transformer classifiers from PyTorch to the edge."""

__version__ = "0.1.0"

from aft_export.errors import AFTExportError  # noqa: E402
from aft_export.models import create_model, get_config, list_models  # noqa: E402


def load_checkpoint(path, **kwargs):
    """Load a checkpoint: returns ``(model in eval mode, metadata)``. See ``checkpoint.load``."""
    from aft_export.checkpoint import load_checkpoint as _load

    return _load(path, **kwargs)


__all__ = ["AFTExportError", "__version__", "create_model", "get_config", "list_models", "load_checkpoint"]
