"""The command-line options for a model trained elsewhere (``--model-def``, ``--weights``, ``--weights-key`` and
its preprocessing), shared by export, parity and pipeline, are declared with those commands
(:func:`aft_export.parameters.user_model`) and derived from there like every option; their destinations are the
API's keywords of the same names. This module keeps the old path ``aft_export.byo.cli`` importing for one
release (``aft_export.MOVED``)."""

from __future__ import annotations

# the keywords of a model trained elsewhere: a command given none of them and no checkpoint has nothing to load
USER_MODEL_KEYS = ("model_def", "weights", "weights_key", "preprocess", "input_size", "mean", "std", "classes")
