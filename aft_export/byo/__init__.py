"""Bring your own model: AFT classifiers trained with other code export too.

* :mod:`aft_export.byo.modeldef`: ``--model-def MODULE:FACTORY`` or ``FILE.py:FACTORY``;
* :mod:`aft_export.byo.preprocess`: input size, mean/std and class names from flags or a file;
* :mod:`aft_export.byo.swap`: find AFT layers (ours, aft-pytorch, comvex, labml-nn), map the
  public ones to ours, refuse by name what cannot be mapped, verify the swap;
* :mod:`aft_export.byo.spec`: the user's model as one value (or a JSON/YAML spec file)
  that every command takes in place of a checkpoint;
* :mod:`aft_export.byo.export`: :func:`~aft_export.byo.export.export_model`, the Python API.

Weights files in the layouts training code writes are read by :mod:`aft_export.weights`.
This package imports nothing from its submodules, so lower floors (``checkpoint``) can
import ``aft_export.byo.spec`` without pulling in the exporter.
"""
