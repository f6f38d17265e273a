"""Preprocessing and class names of a model trained elsewhere, from flags or a small file.

The format and its reader are :mod:`aft_export.data.preprocess` (on the model-and-data floor,
where the runners read the same format beside an ONNX file another tool wrote); this
module keeps the names the bring-your-own code has always imported. They end up in the
ONNX metadata under the same keys as for our own checkpoints, so every later command reads
them the same way.
"""

from __future__ import annotations

from aft_export.data.images import IMAGENET, Preprocessing  # noqa: F401 (the one preprocessing type; this name is the API)
from aft_export.data.preprocess import FIELDS, read_classes_file, read_mapping, resolve  # noqa: F401 (the API)
