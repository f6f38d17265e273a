"""The graph run on the calibration images, in memory that does not grow with them.

Every pass over the images is fed by a :class:`aft_export.data.calibration.CalibrationReader`
(ONNX Runtime's ``CalibrationDataReader`` protocol: ``get_next()`` gives one
``{input: batch}`` or None, ``rewind()`` starts again) and hands each run's fetched
values to a ``consume`` function; nothing is kept between runs.
"""

from __future__ import annotations

import numpy as np

from aft_export.data.calibration import CalibrationReader
from aft_export.data.images import Preprocessing
from aft_export.runners import ModelInfo, OrtRunner

# what one calibration run may hand back: the images of a batch are run in chunks whose
# activations fit in this many bytes, so memory does not grow with the batch or the set
CALIBRATION_FETCH_BYTES = 256 << 20
# and the working memory one inference run may take by the runner's estimate (which the
# unoptimised calibration probes exceed about twice: their reductions copy each value)
RUN_BYTES = 256 << 20


def runner(model, prep: Preprocessing, optimize: bool = True) -> OrtRunner:
    """The graph in ONNX Runtime, fed preprocessed calibration tensors."""
    return OrtRunner(model, info=ModelInfo([], (3, prep.size, prep.size), prep.mean, prep.std,
                                           input_format=prep.input_format), optimize=optimize)  # fmt: skip


def logits(model, prep: Preprocessing, tensors: np.ndarray) -> np.ndarray:
    """Logits in batches of up to 128 images, fewer where the graph's estimated working
    memory per image (Runner.memory_estimate) would take a run past RUN_BYTES."""
    run = runner(model, prep)
    per_image = run.memory_estimate(1)[1]
    return run.logits(tensors, batch_size=int(max(1, min(128, RUN_BYTES // max(per_image, 1)))))


def input_name(model) -> str:
    """The graph's one image input (the stage checks there is one), which a reader's batches are keyed by."""
    inits = {t.name for t in model.graph.initializer}
    return next(i.name for i in model.graph.input if i.name not in inits)


def reader(model, tensors: np.ndarray, batch_size: int) -> CalibrationReader:
    """A reader of ``tensors`` for ``model``'s input, at most ``batch_size`` images a batch."""
    return CalibrationReader(tensors, input_name(model), batch_size)


def stream(run: OrtRunner, feed: CalibrationReader, names, consume) -> None:
    """One pass of ``feed`` through ``run``: batches of at most ``feed.batch_size``
    images, made smaller so that the values in ``names`` one run hands back stay within
    CALIBRATION_FETCH_BYTES (the first image alone tells their size per image) and its
    estimated working memory within RUN_BYTES; each run's values go to ``consume``.
    The reader is rewound first and keeps its batch size."""
    names = list(names)
    limit = feed.batch_size
    feed.rewind()
    feed.batch_size = 1
    try:
        first = True
        while (batch := feed.get_next()) is not None:
            out = run.run(batch)
            fetched = {n: out[n] for n in names}
            if first:
                per_image = max(1, sum(a.nbytes for a in fetched.values()))
                run_per_image = max(1, run.memory_estimate(1)[1])
                feed.batch_size = int(max(1, min(limit, CALIBRATION_FETCH_BYTES // per_image,
                                                 RUN_BYTES // run_per_image)))  # fmt: skip
                first = False
            del out
            consume(fetched)
    finally:
        feed.batch_size = limit
