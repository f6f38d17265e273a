import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def cifar10_dir() -> Path:
    """CIFAR-10 tars: $AFT_CIFAR10_DIR, else ../shared/data/cifar10 beside the repo."""
    return Path(os.environ.get("AFT_CIFAR10_DIR", REPO.parent / "shared" / "data" / "cifar10"))


@pytest.fixture(scope="session")
def cifar10() -> Path:
    path = cifar10_dir()
    if not (path / "test.tar").is_file():
        pytest.skip(f"CIFAR-10 not found at {path} (set AFT_CIFAR10_DIR)")
    return path
