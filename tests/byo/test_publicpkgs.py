"""The guard of the byo tests: a missing public package fails under CI, skips elsewhere."""

import pytest

from tests.byo.publicpkgs import INSTALL, need

MISSING = "aft_export_no_such_public_package"


@pytest.mark.parametrize("ci", ["1", "true"])
def test_a_missing_package_fails_in_ci(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=f"needs {MISSING}.*fails instead of skipping"):
        need(MISSING)


@pytest.mark.parametrize("ci", [None, "false"])
def test_a_missing_package_skips_with_the_install_line_elsewhere(monkeypatch, ci):
    monkeypatch.delenv("CI", raising=False) if ci is None else monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception) as skipped:
        need(MISSING)
    assert INSTALL in str(skipped.value)


def test_an_installed_package_is_returned(monkeypatch):
    monkeypatch.setenv("CI", "1")
    assert need("json").__name__ == "json"
