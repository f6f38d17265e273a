"""The ``aft-export`` command line: a thin shell over the library, one module per family of
commands (:mod:`.models`, :mod:`.export`, :mod:`.checks`, :mod:`.tensorrt`, :mod:`.serving`,
:mod:`.workflow`), on one machinery (:mod:`.base`: the group, the error path, exit statuses,
output claims; :mod:`.words`: each command's flags for the library's option names;
:mod:`.signals`; :mod:`.params`: the values and option groups the commands share;
:mod:`.byo`: the bring-your-own-model flags). Importing it loads no torch."""

from aft_export.cli.base import main

# each registers its commands, in this order (the order messages list commands that share a flag)
from aft_export.cli import models, export, checks, workflow, tensorrt, serving  # noqa: E402, F401, I001  # isort: skip

__all__ = ["main"]
