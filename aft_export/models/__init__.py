"""Models: the AFT classifiers and their registry, checkpoints, weights files, model sources,
the shipped zoo and recipes, and training.

The registry's names are loaded on first use, so that the light modules here (the zoo's
folders, the checkpoint format's text) load no torch.
"""

__all__ = ["AFTClassifier", "ModelConfig", "count_params", "create_model", "describe_models", "get_config",
           "list_models"]  # fmt: skip
_FROM = {"AFTClassifier": "classifier", "ModelConfig": "classifier", "count_params": "classifier",
         "create_model": "registry", "describe_models": "registry", "get_config": "registry",
         "list_models": "registry"}  # fmt: skip


def __getattr__(name: str):
    if name in _FROM:
        import importlib

        return getattr(importlib.import_module(f"aft_export.models.{_FROM[name]}"), name)
    raise AttributeError(f"module 'aft_export.models' has no attribute {name!r}")
