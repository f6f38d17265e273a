"""The options' own checks, from Python: the command line's click types refuse most bad values before they
reach these (``train --lr nan`` never gets to TrainConfig), so each check is driven here directly. Each bad
value is one line, naming the field in backquotes or the word of its message, never a flag."""

from __future__ import annotations

import math

import pytest

from aft_export.errors import AFTExportError
from aft_export.options import MAX_SEED, MAX_THREADS, QuantizeOptions, TrainConfig
from aft_export.verify.bench import bench as run_bench

NAN, INF = math.nan, math.inf


def _refused(make, said: str) -> str:
    with pytest.raises(AFTExportError) as err:
        make()
    message = str(err.value)
    assert "\n" not in message and "--" not in message and said in message, message
    return message


TRAIN = {  # field: bad values (the check's message names the field)
    "lr": [NAN, INF, -INF, 0, -1e-3, "0.1", None],
    "epochs": [0, -1, 1.5, True, "3"],
    "batch_size": [0, -8, 2.5],
    "weight_decay": [NAN, -0.1, INF],
    "warmup_epochs": [NAN, -1],
    "label_smoothing": [1.0, -0.1, NAN],
    "val_fraction": [1.0, -0.5, NAN],
    "seed": [-1, MAX_SEED + 1, 0.5],
    "images": [0, -5, 2.5],
}


@pytest.mark.parametrize("field,value", [(f, v) for f, values in TRAIN.items() for v in values])
def test_train_config_refuses_each_bad_value_naming_its_field(field, value):
    _refused(lambda: TrainConfig("aft_simple_test", "data", "out.pt", **{field: value}), f"`{field}` takes ")


def test_train_config_takes_good_values():
    config = TrainConfig("aft_simple_test", "data", "out.pt", lr=1e-4, epochs=1, images=10, seed=MAX_SEED)
    assert (config.lr, config.epochs, config.images, config.seed) == (1e-4, 1, 10, MAX_SEED)


QUANTIZE = {  # field: bad values; each refused by its declaration, in its words (what the field takes)
    "percentile": [0, NAN, 101, INF, -1], "images": [0, -5, 1.5], "batch_size": [0, -1, 2.5],
    "seed": [-1, MAX_SEED + 1, 0.5], "weight_bits": [6, 9, 7.5, "7"], "budget": [NAN, -1, 101, INF],
    "precision": ["int4", None.__class__], "method": ["max"], "target": ["trt"], "rest_precision": ["bf16"],
    "per_channel": [0, "yes"], "exclude": ["", [1]], "cache_dir": [b"dir"], "input_size": [0, 8193], "mean": [(1, 2)],
}


@pytest.mark.parametrize("field,value", [(f, v) for f, values in QUANTIZE.items() for v in values])
def test_quantize_options_refuse_each_bad_value(field, value):
    from aft_export.options.params import params_of

    (param,) = params_of(QuantizeOptions, field)
    _refused(lambda: QuantizeOptions(**{field: value}), f"`{field}` takes {param.takes()}, got ")


def test_a_quantize_option_is_declared_once_and_checked_by_its_declaration():
    """The dataclass field is the declaration: the command's parameter is it (its kind, default and help),
    and the API's door and the dataclass refuse a value alike."""
    from aft_export.api import quantize
    from aft_export.options.commands import DECLARED

    seed = DECLARED["quantize"]["seed"]
    assert seed.default is QuantizeOptions.seed is None and seed.kind.hi == MAX_SEED and "recipe" in seed.help
    for make in (lambda: QuantizeOptions(seed=-1), lambda: quantize("m.onnx", "o.onnx", seed=-1)):
        _refused(make, f"`seed` takes {seed.takes()}, got -1 (int)")


@pytest.mark.parametrize("field,value", [("weight_bits", 7), ("method", "entropy"), ("percentile", 99.0),
                                         ("budget", 1.0), ("per_channel", False), ("sensitivity", True),
                                         ("exclude_regex", ("node",)), ("rest_precision", "fp32")])  # fmt: skip
def test_fp16_refuses_every_option_only_int8_reads(field, value):
    """Given with fp16 (another value than its default), an int8 option is refused rather than ignored."""
    said = f"{field}={value}" if isinstance(value, bool) else field
    _refused(lambda: QuantizeOptions(precision="fp16", **{field: value}), f"`{said}` is an int8 option (")
    QuantizeOptions(precision="int8", **{field: value})  # int8 takes it


def test_quantize_options_take_good_values():
    opts = QuantizeOptions(percentile=100, images=1, batch_size=1, seed=MAX_SEED, weight_bits=7, budget=0)
    assert (opts.percentile, opts.weight_bits, opts.budget) == (100, 7, 0)
    assert QuantizeOptions(precision="fp16").precision == "fp16"  # the defaults are no int8 option given


@pytest.mark.parametrize("threads", [-1, MAX_THREADS + 1, 1.5, NAN, "2", True])
def test_the_bench_stage_refuses_what_is_not_a_thread_count(threads):
    # the stage holds its values to bench's declarations, as its door does (the pipeline calls the stage)
    _refused(lambda: run_bench([], threads=threads), f"`threads` takes a whole number from 0 to {MAX_THREADS}")


@pytest.mark.parametrize("bad", [dict(batches=[]), dict(batches=[0]), dict(iters=0), dict(warmup=-1)])
def test_the_bench_stage_refuses_what_bench_does_not_take(bad):
    _refused(lambda: run_bench([], **bad), f"`{next(iter(bad)).replace('batches', 'batch_sizes')}` takes")


def test_the_bench_stage_takes_0_to_the_most_threads():
    for threads in (0, 1, MAX_THREADS):
        assert run_bench([], threads=threads).rows == []


def test_a_repeatable_field_holds_a_tuple_whatever_it_was_given():
    """A repeatable option given one text is that one value, never its characters; a list becomes a tuple."""
    assert QuantizeOptions(exclude="node").exclude == ("node",)
    assert QuantizeOptions(keep_fp32=["a", "b"]).keep_fp32 == ("a", "b")
