"""The suite's own guard: in CI a missing CIFAR-10 fails the run; locally it skips with the reason."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.fixture
def suite_without_data(tmp_path):
    """A one-test suite using this repository's conftest, pointed at a directory without data."""
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_needs_data.py").write_text("def test_needs_data(cifar10):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["AFT_CIFAR10_DIR"] = str(tmp_path / "no-data")

    def run(**extra):
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                               "--rootdir", str(tmp_path), str(tmp_path)], capture_output=True, text=True,
                              env={**env, **extra}, cwd=tmp_path, timeout=120)  # fmt: skip
        return proc.returncode, proc.stdout + proc.stderr

    return run


@pytest.mark.parametrize("ci", ["1", "true"])
def test_missing_data_fails_in_ci(suite_without_data, ci):
    rc, out = suite_without_data(CI=ci)
    assert rc == 1 and "1 error" in out, out
    assert "CIFAR-10 not found: train.tar, test.tar missing" in out and "fails instead of skipping" in out


@pytest.mark.parametrize("ci", [None, "false"])
def test_missing_data_skips_with_the_reason_elsewhere(suite_without_data, ci):
    rc, out = suite_without_data(**({} if ci is None else {"CI": ci}))
    assert rc == 0 and "1 skipped" in out and "CIFAR-10 not found" in out, out
