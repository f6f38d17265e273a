"""aft-export: take Attention Free Transformer classifiers from PyTorch to the edge.

The package is built in floors, each importing only from the floors below it; see
ARCHITECTURE.md (tests/test_architecture.py keeps it so).

The Python API (:mod:`aft_export.api`: ``export``, ``quantize``, ``parity``, ... one function per
command) and the model floor's ``load_checkpoint``, ``save_checkpoint``, ``create_model`` and ``list_models`` are
re-exported here and loaded on first use, so that importing a light module (the command line, to
print its help or an error) does not load torch.

Modules moved into folders in 0.1.x keep their old paths for one release (:data:`MOVED`):
``import aft_export.trt`` still works, with a DeprecationWarning, and reads the new module.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from aft_export.errors import AFTExportError
from aft_export.version import RENAMED_UNTIL, __version__

# the Python API (aft_export/api.py): one function per command, each loaded on first use
API = ("export", "quantize", "check", "build", "parity", "evaluate", "bench", "infer", "pipeline", "serve",
       "triton_repo", "deepstream", "deepstream_check", "train", "info", "doctor")  # fmt: skip
__all__ = ["AFTExportError", "__version__", *API, "create_model", "get_config", "list_models", "load_checkpoint",
           "save_checkpoint"]
_LAZY = {"load_checkpoint": "aft_export.models.checkpoint", "save_checkpoint": "aft_export.models.checkpoint",
         "create_model": "aft_export.models",
         "get_config": "aft_export.models", "list_models": "aft_export.models",
         **dict.fromkeys(API, "aft_export.api")}  # fmt: skip

# old module path -> new one, until the release that drops them (aft_export.version.RENAMED_UNTIL).
# The old paths that are the names of the API's functions (export, quantize, build, bench, parity,
# evaluate, info, doctor, pipeline, serve, train) cannot be kept: a module of that name would
# replace the function. docs/cli.md lists every move (tools/gen_cli_docs.py).
MOVED = {
    "checkpoint": "models.checkpoint", "weights": "models.weights", "sources": "models.sources",
    "resources": "models.resources", "preprocess": "data.preprocess", "datasets": "data.datasets",
    "calib": "data.calibration", "ranges": "quantization.ranges", "graph": "artifacts.graph",
    "onnxio": "artifacts.onnxio", "purpose": "artifacts.purpose", "compare": "verify.compare",
    "localize": "verify.localize", "deploy": "verify.deploy", "trt": "tensorrt.library", "nvtools": "tensorrt.nvtools",
    "tritonmodel": "serving.tritonmodel", "tritonrepo": "serving.repository", "tritonspec": "serving.spec",
    "predict": "serving.predict", "report": "workflow.report", "byo.cli": "cli.byo",
}  # fmt: skip
# moved where no alias can stand: the old path is an API function's name, or a folder's now
MOVED_WITHOUT_ALIAS = {
    "data": "data.images", "train": "models.training", "info": "artifacts.info", "evaluate": "verify.evaluate",
    "bench": "verify.bench", "parity": "verify.parity", "build": "tensorrt.build", "serve": "serving.server",
    "pipeline": "workflow.pipeline", "doctor": "workflow.doctor", "export": "exporting", "quantize": "quantization",
}  # fmt: skip


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``aft_export.OLD`` as a module that reads every name from its new place."""

    def find_spec(self, fullname, path=None, target=None):
        old = fullname[len("aft_export."):] if fullname.startswith("aft_export.") else None
        return importlib.util.spec_from_loader(fullname, self) if old in MOVED else None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        old = module.__name__[len("aft_export."):]
        new = importlib.import_module(f"aft_export.{MOVED[old]}")
        warnings.warn(f"aft_export.{old} is now aft_export.{MOVED[old]}; the old path goes in aft-export {RENAMED_UNTIL}",
                      DeprecationWarning, stacklevel=2)  # fmt: skip
        module.__getattr__ = lambda name: getattr(new, name)
        module.__doc__ = new.__doc__


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.append(_Moved())


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aft_export' has no attribute {name!r}")
