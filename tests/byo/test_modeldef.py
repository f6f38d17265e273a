import sys

import pytest
from torch import nn

from aft_export.byo.modeldef import build_model, load_factory
from aft_export.errors import AFTExportError

HERE = "tests/byo/user_models.py"


def test_module_and_file_forms_build_the_same_model():
    a = build_model("tests.byo.user_models:own_architecture")
    b = build_model(f"{HERE}:own_architecture")
    assert isinstance(a, nn.Module) and type(a).__name__ == type(b).__name__ == "OwnArchitecture"
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all((sa[k] == sb[k]).all() for k in sa)


def test_a_file_imports_its_neighbours_and_leaves_sys_path_as_it_was(tmp_path):
    (tmp_path / "helper.py").write_text("from torch import nn\nWIDTH = 5\n")
    (tmp_path / "net.py").write_text("from torch import nn\nimport helper\n\n"
                                     "def build():\n    return nn.Linear(helper.WIDTH, 2)\n")
    before = list(sys.path)
    model = build_model(f"{tmp_path / 'net.py'}:build")
    assert model.in_features == 5
    assert sys.path == before


@pytest.mark.parametrize("spec, message", [
    ("no_colon_here", "expected MODULE:FACTORY"),
    ("tests.byo.user_models:", "expected MODULE:FACTORY"),
    ("surely_not_a_module_xyz:build", "does not import: ModuleNotFoundError"),
    ("missing/dir/net.py:build", "does not exist"),
    ("tests.byo.user_models:nope", "has no 'nope'; callables there: .*own_architecture"),
    ("tests.byo.user_models:IMG", "not a callable"),
    ("tests.byo.user_models:not_a_module", "returned a list, not a torch.nn.Module"),
    ("tests.byo.user_models:raises", "raised ValueError: depth must be positive"),
])  # fmt: skip
def test_bad_model_definitions_are_one_clear_error(spec, message):
    with pytest.raises(AFTExportError, match=message):
        build_model(spec)


def test_a_file_that_fails_to_import_names_the_error(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\nraise RuntimeError('CUDA out of memory at import')\n")
    with pytest.raises(AFTExportError, match=r"broken.py does not import: RuntimeError: CUDA out of memory"):
        load_factory(f"{bad}:build")
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def build(:\n")
    with pytest.raises(AFTExportError, match="does not import: SyntaxError"):
        load_factory(f"{syntax}:build")
