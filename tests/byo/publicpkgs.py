"""The public AFT packages the byo tests run against, imported as a test needs them.

CI installs them (pinned, --no-deps) and a missing one fails there; elsewhere the test
is skipped with the install line. comvex imports torchvision for RandAugment and UNet,
which comvex.aft never uses; no CPU torchvision build for this torch is on the package
index (its torchvision links CUDA torch and fails with "operator torchvision::nms does not
exist"), so where torchvision does not import, a stand-in module that raises on any use
takes its place while comvex.aft imports.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types


from tests.conftest import need_module

INSTALL = "pip install --no-deps -r tests/byo/requirements.txt"  # the pins live there (README, .ci/run)


def need(name: str):
    """The module; where it is missing a skip with the install line, and under CI (which
    installs them, .ci/run) a failure, as tests/conftest.py does for CIFAR-10."""
    return need_module(name, INSTALL)


class _Unavailable(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise RuntimeError(f"torchvision is a stand-in here ({self.__name__}.{attr} was used): comvex.aft does not "
                           f"need it; install a torchvision built for this torch to use comvex's augmentations")


def torchvision_stand_in() -> bool:
    """Put a stand-in torchvision in sys.modules if the real one does not import. True if it did."""
    try:
        import torchvision  # noqa: F401

        return False
    except Exception:  # noqa: BLE001 - ImportError, or RuntimeError from a CUDA build beside a CPU torch
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    tv, tr, fn = (_Unavailable(n) for n in ("torchvision", "torchvision.transforms",
                                            "torchvision.transforms.functional"))  # fmt: skip
    for m in (tv, tr, fn):  # importlib.util.find_spec (torch.onnx asks it) needs a spec
        m.__dict__["__spec__"] = importlib.machinery.ModuleSpec(m.__name__, None)
    tv.__dict__["transforms"], tr.__dict__["functional"] = tr, fn
    sys.modules.update({"torchvision": tv, "torchvision.transforms": tr, "torchvision.transforms.functional": fn})
    return True


def comvex_aft():
    need("einops")
    if "comvex.aft" not in sys.modules:
        torchvision_stand_in()
    return need("comvex.aft")
