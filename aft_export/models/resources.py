"""What aft-export ships besides code: the CIFAR-10 zoo and the calibration recipes.

Installed from a wheel they are package data (``aft_export.zoo`` and
``aft_export.recipes``, mapped in pyproject.toml from the repository's ``models/`` and
``calibration/``); in a source checkout used without installing, the folders themselves.
"""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # the package
REPO = HERE.parent


def _folder(installed: str, checkout: str) -> Path:
    """Inside the installed package, else the source checkout's folder (editable installs
    and PYTHONPATH use the checkout)."""
    return HERE / installed if (HERE / installed).is_dir() else REPO / checkout


def zoo_dir() -> Path:
    return _folder("zoo", "models")


def recipes_dir() -> Path:
    return _folder("recipes", "calibration")


def default_checkpoint() -> Path:
    return zoo_dir() / "aft_conv_cifar.pt"


def default_calibration() -> Path:
    return recipes_dir() / "cifar10.json"


def bundled_name(path: str | os.PathLike) -> str | None:
    """What a file aft-export ships is called in a record: ``bundled:`` and its place in the
    repository (``bundled:models/aft_conv_cifar.pt``, ``bundled:calibration/cifar10.json``), so that
    a run's record names a default by its name, as it names a data set, and no install path of
    this machine. None for any other file."""
    try:
        file = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):  # a path that cannot be resolved is not ours
        return None
    for folder, checkout in ((zoo_dir(), "models"), (recipes_dir(), "calibration")):
        if file.parent == folder.resolve() and file.is_file():
            return f"bundled:{checkout}/{file.name}"
    return None
