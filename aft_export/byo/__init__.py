"""Bring your own model: AFT classifiers trained with other code export too.

* :mod:`aft_export.byo.modeldef`: ``model_def`` ``MODULE:FACTORY`` or ``FILE.py:FACTORY``;
* :mod:`aft_export.data.preprocess` (the reader, on the model-and-data floor): input size,
  mean/std and class names from flags or a file;
* :mod:`aft_export.byo.swap`: find AFT layers (ours, aft-pytorch, comvex, labml-nn), map the
  public ones to ours, refuse by name what cannot be mapped, verify the swap;
* :mod:`aft_export.byo.spec`: the user's model as one value (or a JSON/YAML spec file)
  that every command takes in place of a checkpoint;
* :mod:`aft_export.byo.export`: :func:`~aft_export.byo.export.export_model`, the Python API.

Weights files in the layouts training code writes are read by :mod:`aft_export.models.weights`.
The core (checkpoint, runners, export, parity) never imports this package: it plugs in
from above. Importing it registers model spec files (``.yaml``, ``.yml``, ``.json``) as a
model source (:func:`aft_export.models.sources.register_reader`); the reader imports
:mod:`aft_export.byo.spec` (torch) only when a spec is opened.
"""

from aft_export.models.sources import SPEC_SUFFIXES, register_reader


def _read_spec(path: str):
    from aft_export.byo.spec import read_spec

    return read_spec(path)


register_reader(SPEC_SUFFIXES, _read_spec, "a model spec file")
