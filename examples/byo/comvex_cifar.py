"""ComVEX's AFTWithLinearClassifier (comvex.aft, pip install comvex einops) at CIFAR-10 size:
AFT-full with a rank-16 position bias u v^T, hidden width 48 inside a 64-wide model.

comvex imports torchvision (for its RandAugment and UNet, which comvex.aft never uses). Where
no torchvision built for the installed torch imports (PyPI's links CUDA torch), a stand-in
that raises on any use lets comvex.aft import.
"""

import importlib.machinery
import sys
import types


def _torchvision_stand_in() -> None:
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001
        for name in ("torchvision", "torchvision.transforms", "torchvision.transforms.functional"):
            module = types.ModuleType(name)
            module.__spec__ = importlib.machinery.ModuleSpec(name, None)
            sys.modules[name] = module
        sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]
        sys.modules["torchvision.transforms"].functional = sys.modules["torchvision.transforms.functional"]


_torchvision_stand_in()
from comvex.aft import AFTConfig, AFTWithLinearClassifier


def build() -> AFTWithLinearClassifier:
    config = AFTConfig(image_size=32, image_channel=3, patch_size=4, num_layers=3, dim=64, num_classes=10,
                       hidden_dim=48, aft_mode="full", local_window_size=None, position_bias_dim=16,
                       ff_expand_scale=2)  # fmt: skip
    return AFTWithLinearClassifier(config)
