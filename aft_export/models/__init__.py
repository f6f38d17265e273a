from aft_export.models.classifier import AFTClassifier, ModelConfig, count_params
from aft_export.models.registry import create_model, describe_models, get_config, list_models

__all__ = ["AFTClassifier", "ModelConfig", "count_params", "create_model", "describe_models", "get_config",
           "list_models"]  # fmt: skip
