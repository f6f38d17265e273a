import pytest

from tests.hostile.world import build_world


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    """The shared starting files of every hostile-input case (built once)."""
    return build_world(tmp_path_factory.mktemp("hostile") / "world")
