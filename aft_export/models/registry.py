"""Named model configs. Tests iterate :func:`list_models`, so every entry is covered."""

from __future__ import annotations

import dataclasses
import difflib

from aft_export.errors import AFTExportError
from aft_export.models.classifier import AFTClassifier, ModelConfig, count_params

_REGISTRY: dict[str, ModelConfig] = {}


def register(name: str, cfg: ModelConfig) -> None:
    if name in _REGISTRY:
        raise ValueError(f"model {name!r} is registered twice")
    _REGISTRY[name] = cfg


def list_models() -> list[str]:
    return sorted(_REGISTRY)


def get_config(name: str, **overrides) -> ModelConfig:
    try:
        cfg = _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise AFTExportError(
            f"unknown model config {name!r}{hint}; `aft-export models` lists them"
        ) from None
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def describe_models() -> list[str]:
    """One line per registered config: variant, size, shape parameters, parameter count."""
    lines = []
    for name in list_models():
        cfg = get_config(name)
        extra = {"full": f"rank={cfg.rank}", "local": f"window={cfg.window}", "simple": "",
                 "conv": f"heads={cfg.heads} k={cfg.kernel_size}"}[cfg.variant]  # fmt: skip
        n = count_params(create_model(name))
        lines.append(f"{name:22s} {cfg.variant:6s} {cfg.img_size:>3d}px patch {cfg.patch_size:<2d} "
                     f"dim {cfg.dim:<3d} depth {cfg.depth:<2d} {extra:16s} {n / 1e6:6.2f}M params")  # fmt: skip
    return lines


def create_model(name_or_cfg: str | ModelConfig, **overrides) -> AFTClassifier:
    if isinstance(name_or_cfg, ModelConfig):
        cfg = dataclasses.replace(name_or_cfg, **overrides) if overrides else name_or_cfg
    else:
        cfg = get_config(name_or_cfg, **overrides)
    return AFTClassifier(cfg)


# The paper's ImageNet-1K models: 224 crop, patch 16 (T = 196), 12 layers, MLP x4.
_IMAGENET = dict(img_size=224, patch_size=16, num_classes=1000, depth=12, mlp_ratio=4.0)
register("aft_full_tiny_224", ModelConfig("full", dim=192, rank=128, **_IMAGENET))
register("aft_full_small_224", ModelConfig("full", dim=384, rank=128, **_IMAGENET))
register("aft_conv_tiny_224", ModelConfig("conv", dim=192, heads=32, kernel_size=11, **_IMAGENET))
# AFT-local and AFT-simple at the tiny size, for benchmarks beside the paper's two (window 7
# on the 14x14 token grid; the paper reports no ImageNet figures for these two)
register("aft_local_tiny_224", ModelConfig("local", dim=192, window=7, **_IMAGENET))
register("aft_simple_tiny_224", ModelConfig("simple", dim=192, **_IMAGENET))
register("aft_conv_small_224", ModelConfig("conv", dim=384, heads=384, kernel_size=11, **_IMAGENET))

# CIFAR-10 models (32x32, patch 4 -> 8x8 tokens), sized to train in about an hour
# on a 2-core CPU. A small conv stem in front of the patch projection.
_CIFAR = dict(img_size=32, patch_size=4, num_classes=10, dim=128, depth=4, mlp_ratio=2.0,
              stem_channels=16, drop_path=0.05)  # fmt: skip
register("aft_full_cifar", ModelConfig("full", **_CIFAR))
register("aft_local_cifar", ModelConfig("local", window=3, **_CIFAR))
register("aft_simple_cifar", ModelConfig("simple", **_CIFAR))
register("aft_conv_cifar", ModelConfig("conv", heads=16, kernel_size=3, **_CIFAR))

# Tiny models for unit tests: one per variant, milliseconds per forward.
_TEST = dict(img_size=32, patch_size=8, num_classes=10, dim=16, depth=2, mlp_ratio=2.0)
register("aft_full_test", ModelConfig("full", rank=4, **_TEST))
register("aft_local_test", ModelConfig("local", window=2, **_TEST))
register("aft_simple_test", ModelConfig("simple", **_TEST))
register("aft_conv_test", ModelConfig("conv", heads=4, kernel_size=3, stem_channels=4, **_TEST))
