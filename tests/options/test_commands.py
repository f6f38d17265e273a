"""Every API function, driven with wrong values one keyword at a time (the valid required inputs given), is
refused at its door: one AFTExportError (a ParamError) that names the keyword, what it takes and what it got,
before any work (nothing written), exactly as the command line refuses the same value through the same
declaration (aft_export.options.commands). The notebook calls of issue 44 are cases here: each is one line,
or gives the corrected result."""

from __future__ import annotations

import inspect
import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import aft_export
from aft_export.errors import AFTExportError
from aft_export.options import params as kinds
from aft_export.options.commands import DECLARED, door
from aft_export.options.params import ParamError

# ---------------------------------------------------------------- wrong values, by what a parameter takes

NOT_NUMBERS = st.one_of(st.text(max_size=6).filter(lambda s: s != ""), st.just("16"), st.lists(st.integers(0, 9),
                        min_size=1, max_size=3), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
                        st.just(b"16"), st.just(True), st.just(False), st.just(np.bool_(True)))  # fmt: skip
NONFINITE = st.sampled_from([math.nan, math.inf, -math.inf, np.float32("nan"), np.float64("inf")])
NOT_PATHS = st.one_of(st.integers(), st.floats(allow_nan=True), st.just(b"m.onnx"), st.just(["a.onnx"]),
                      st.just({"path": "a"}), st.just(""), st.just(True), st.just("m\x00.onnx"))  # fmt: skip
# ints no float holds, and ints Python will not write out (more than 4300 digits): compared as ints, shown shortened
HUGE = st.sampled_from([10**400, -(10**400), 10**5000, 2**63])
NUL_OR_BREAK = st.sampled_from(["a\x00b", "node\nkeys=1", "x\r", "\u2028"])


def wrong(kind: kinds.Kind) -> st.SearchStrategy:
    """Values ``kind`` must refuse."""
    if isinstance(kind, kinds.Whole):
        out = [NOT_NUMBERS, NONFINITE, HUGE, st.floats(allow_nan=False, allow_infinity=False).filter(
            lambda x: not float(x).is_integer())]  # fmt: skip
        if kind.lo is not None:
            out.append(st.integers(max_value=kind.lo - 1))
        if kind.hi is not None:
            out.append(st.integers(min_value=kind.hi + 1))
        return st.one_of(out)
    if isinstance(kind, kinds.Number):
        out = [NOT_NUMBERS, NONFINITE] + ([HUGE] if kind.hi is not None else [st.just(10**400), st.just(10**5000)])
        if kind.lo is not None:
            out.append(st.floats(max_value=kind.lo, exclude_max=not kind.lo_open, allow_nan=False,
                                 allow_infinity=False))  # fmt: skip
        if kind.hi is not None:
            out.append(st.floats(min_value=kind.hi, exclude_min=not kind.hi_open, allow_nan=False,
                                 allow_infinity=False))  # fmt: skip
        return st.one_of(out)
    if isinstance(kind, kinds.Choice):
        strings = all(isinstance(v, str) for v in kind.values)
        others = st.text(max_size=8).filter(lambda s: s not in kind.values)
        return st.one_of(others, st.just(True), st.integers(0, 9) if strings else st.just("7"),
                         st.just(7.5), st.just([kind.values[0]]), NONFINITE)  # fmt: skip
    if isinstance(kind, kinds.Text):
        out = [st.integers(), st.floats(), st.just(b"text"), st.just({"a": 1}), st.just(True), NUL_OR_BREAK]
        return st.one_of(out + ([] if kind.empty else [st.just("")]))
    if isinstance(kind, kinds.Flag):
        return st.one_of(st.integers(), st.just("True"), st.just("no"), st.floats(), st.just([True]))
    if isinstance(kind, kinds.Triple):
        return st.one_of(st.just([0.5, 0.5]), st.just("1,2"), st.just("a,b,c"), st.just([math.nan, 0.5, 0.5]),
                         st.just("inf,0,0"), st.just(0.5), st.just({"r": 1}), st.just([True, 0.5, 0.5]),
                         st.just([10**400, 0, 0]), st.just([10**5000, 0, 0]),
                         *([st.just([0, 1, 1]), st.just("-1,1,1")] if kind.positive else []))  # fmt: skip
    if isinstance(kind, kinds.Classes):
        return st.one_of(st.integers(), st.just([]), st.just(["a", 2]), st.just({"a": 1}), st.just(b"c.txt"),
                         st.just(["cat", "dog\nbird"]), st.just("c\x00.txt"))  # fmt: skip
    if isinstance(kind, (kinds.Path, kinds.Model)):
        return NOT_PATHS
    raise AssertionError(f"no wrong values for {kind}")


def wrong_for(param) -> st.SearchStrategy:
    """Wrong values for a parameter: a repeatable one also gets a list holding one wrong value (a value alone,
    text above all, is one value: taken, never split)."""
    values = wrong(param.kind)
    if not param.repeat:
        return values
    bad_items = values.filter(lambda v: isinstance(v, (str, bytes, dict)) or not hasattr(v, "__iter__"))
    return st.one_of(bad_items, st.lists(bad_items, min_size=1, max_size=2))


# ---------------------------------------------------------------- the calls: valid required inputs, one keyword wrong


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Paths the required inputs name (the door checks what a value is, not what the file holds)."""
    root = tmp_path_factory.mktemp("door")
    names = {"ckpt": "m.pt", "onnx": "m.onnx", "data": "imgs", "out": "out.onnx", "repo": "repo"}
    for key in ("ckpt", "onnx"):
        (root / names[key]).write_bytes(b"")
    (root / "imgs").mkdir()
    return {k: str(root / v) for k, v in names.items()}


def required(command: str, files: dict[str, str]) -> tuple[tuple, dict]:
    """The arguments that make a call of ``command`` valid at its door."""
    f = files
    return {
        "export": ((f["ckpt"], f["out"]), {}), "quantize": ((f["onnx"], f["out"]), {}), "check": (([f["onnx"]],), {}),
        "build": ((f["onnx"],), {}), "parity": ((f["ckpt"], [f["onnx"]]), {}),
        "eval": (([f["onnx"]],), {"data": f["data"]}), "bench": (([f["onnx"]],), {}),
        "infer": ((f["onnx"], [f["data"]]), {}), "info": ((f["onnx"],), {}),
        "train": ((), {"model": "aft_simple_test", "data": f["data"], "output": f["out"]}),
        "serve": (([f["onnx"]],), {}), "triton-repo": (([f["onnx"]], f["repo"]), {}),
        "deepstream": (([f["onnx"]], f["repo"]), {}), "deepstream-check": (([f["data"]],), {}),
        "pipeline": ((f["ckpt"],), {}),
        "doctor": (("aft_conv_cifar",), {}),
    }[command]  # fmt: skip


def _call(command: str, name: str, value, files: dict[str, str]):
    function = getattr(aft_export, DECLARED[command].function or command.replace("-", "_"))
    args, kwargs = required(command, files)
    order = list(inspect.signature(function).parameters)
    if name in order[: len(args)]:  # a required argument: the wrong value in its own place
        args = tuple(value if order[i] == name else a for i, a in enumerate(args))
    else:
        kwargs = {**kwargs, name: value}
    return function(*args, **kwargs)


PARAMS = [(command, p.name) for command, declaration in sorted(DECLARED.items()) for p in declaration.params]


@pytest.mark.parametrize("command, name", PARAMS, ids=[f"{c}-{n}" for c, n in PARAMS])
@settings(max_examples=6, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)  # the first hostile value of the parameter's kind, every run (see hostile())
def test_every_keyword_refuses_wrong_values_at_the_door(command, name, files, data):
    param = DECLARED[command][name]
    value = data.draw(wrong_for(param), label=f"{command}({name}=...)") if data is not None else (
        (hostile(param.kind) or [object()])[0])  # fmt: skip
    root = Path(files["ckpt"]).parent  # where every path of the call points
    before = sorted(root.rglob("*"))
    with pytest.raises(AFTExportError) as err:
        _call(command, name, value, files)
    assert isinstance(err.value, ParamError) and (err.value.command, err.value.param) == (command, name), str(err.value)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"`{name}` takes ") and "; give " in message, message
    assert sorted(root.rglob("*")) == before  # nothing written


def hostile(kind: kinds.Kind) -> list:
    """The values of ../shared/docs/HOSTILE.md that ``kind`` must refuse, drawn by no chance: ints beyond a float's
    range and beyond Python's 4300-digit limit, a NUL, a line break where the value lands in a line."""
    if isinstance(kind, (kinds.Whole, kinds.Number)) or (isinstance(kind, kinds.Choice) and
                                                          not isinstance(kind.values[0], str)):  # fmt: skip
        return [10**400, -(10**400), 10**5000]
    if isinstance(kind, kinds.Triple):
        return [[10**400, 0, 0], [0, 0, 10**5000], "1,2,3\x00"]
    if isinstance(kind, kinds.Text):
        return ["a\x00b", "node\nkeys=1"]
    if isinstance(kind, kinds.Classes):
        return [["cat", "dog\nbird"], "c\x00.txt"]
    if isinstance(kind, (kinds.Path, kinds.Model)):
        return ["out\x00.onnx"]
    return []


HOSTILE = [(c, p.name, v) for c, p in ((c, p) for c, d in sorted(DECLARED.items()) for p in d.params)
           for v in hostile(p.kind)]  # fmt: skip


@pytest.mark.parametrize("command, name, value", HOSTILE, ids=[f"{c}-{n}-{i}" for i, (c, n, _) in enumerate(HOSTILE)])
def test_every_keyword_refuses_the_hostile_values_in_one_line(command, name, value, files):
    """Issue 52: each of these ended in OverflowError, ValueError (a repr of 5001 digits, an embedded null byte)
    or a value written into a file at 3aefeda. Now one ParamError naming the keyword, its value shortened."""
    with pytest.raises(ParamError) as err:
        _call(command, name, value, files)
    message = str(err.value)
    assert (err.value.command, err.value.param) == (command, name) and "\n" not in message, message
    assert message.startswith(f"`{name}` takes ") and len(message) < 600, message


def test_a_huge_int_is_shown_by_its_first_digits_and_length():
    with pytest.raises(ParamError, match=r"got 1000000000\.\.\. \(5001 digits\) \(int\)"):
        door("bench", {"threads": 10**5000})
    with pytest.raises(ParamError, match=r"beyond the range of a float"):
        door("train", {"lr": 10**400})  # in range (> 0), but no float holds it
    with pytest.raises(ParamError, match=r"more than a 64-bit integer holds"):
        door("export", {"images": 2**63})
    assert door("train", {"lr": 10**300})["lr"] == 1e300 and door("export", {"images": 2**63 - 1})["images"] == 2**63 - 1


@pytest.mark.parametrize("call, words, meant", [
    (lambda f: aft_export.export(f["ckpt"], f["out"], verify_images=8),
     "export() got an unexpected keyword argument 'verify_images'; it was renamed `images`: give `images` instead",
     "images"),
    (lambda f: aft_export.serve(f["onnx"], provider="cpu"),
     "serve() got an unexpected keyword argument 'provider'; it was renamed `backend`: give `backend` instead", "backend"),
    (lambda f: aft_export.bench(f["onnx"], batches=[1]),
     "bench() got an unexpected keyword argument 'batches'; it was renamed `batch_sizes`", "batch_sizes"),
    (lambda f: aft_export.quantize(f["onnx"], f["out"], precison="int8"),
     "quantize() got an unexpected keyword argument 'precison'; did you mean `precision`?", "precision"),
    (lambda f: aft_export.evaluate(f["onnx"], data=f["data"], frobnicate=1),
     "evaluate() got an unexpected keyword argument 'frobnicate'; see help(aft_export.evaluate) for its keywords",
     "frobnicate"),
    (lambda f: aft_export.info(f["onnx"], f["onnx"], f["onnx"]), "info(): too many positional arguments", ""),
], ids=["renamed", "provider", "renamed-field", "misspelt", "unknown", "positional"])  # fmt: skip
def test_a_call_the_function_does_not_take_is_one_line_and_a_type_error(call, words, meant, files):
    """An unknown keyword is worded as Python words it, naming the function, and the keyword it was renamed to or
    probably meant; a ParamError that is also a TypeError, so ``except TypeError`` still catches it."""
    with pytest.raises(TypeError) as err:
        call(files)
    assert isinstance(err.value, ParamError) and isinstance(err.value, AFTExportError)
    assert str(err.value).startswith(words) and "\n" not in str(err.value), str(err.value)
    assert err.value.param == meant


def test_the_wrong_values_are_wrong_and_the_right_ones_pass():
    """The generators are sound: every kind refuses what they make, and takes what a user means."""
    checks = [(kinds.Whole(0), [0, 16, np.int64(3), 16.0], ["16", True, 1.5, math.nan, -1]),
              (kinds.Number(0, 100, lo_open=True), [0.5, 100, np.float32(1.5), 3], [0, math.inf, "1", False]),
              (kinds.Choice((7, 8)), [7, np.int8(8), 8.0], ["7", 7.9, True]),
              (kinds.Choice(("a", "b")), ["a"], ["c", 1, ["a"]]),
              (kinds.Path(), ["m.onnx", Path("m.onnx")], [["m.onnx"], b"m", "", 1]),
              (kinds.Flag(), [True, np.bool_(False)], [1, "True", None]),
              (kinds.Triple(positive=True), ["1,2,3", [0.5, 0.5, 0.5], (1, 2, 3)], ["0,1,1", [1, 2], "a,b,c"]),
              (kinds.Classes(), ["c.txt", ["a", "b"]], [5, [], ["a", 1]])]  # fmt: skip
    for kind, good, bad in checks:
        for value in good:
            kind.accept(value)
        for value in bad:
            with pytest.raises(kinds.Refused):
                kind.accept(value)


def test_a_repeatable_keyword_takes_one_value_or_a_list_never_characters():
    assert door("quantize", {"exclude_regex": "node_MatMul"})["exclude_regex"] == ("node_MatMul",)
    assert door("parity", {"tolerances": "fp16.max_abs=0.1"})["tolerances"] == ("fp16.max_abs=0.1",)
    assert door("bench", {"batch_sizes": 5})["batch_sizes"] == (5,)
    assert door("bench", {"batch_sizes": [1, np.int64(8)], "artifacts": Path("a.onnx")}) == {
        "batch_sizes": (1, 8), "artifacts": ("a.onnx",)}  # fmt: skip
    assert door("export", {"images": None, "output": os.fspath(Path("x.onnx"))}) == {"images": 64, "output": "x.onnx"}


# ---------------------------------------------------------------- issue 44's notebook calls


CALLS = [  # (call, the keyword refused): a traceback from inside, or a wrong result, before the door
    (lambda f: aft_export.export(f["ckpt"], f["out"], images="16"), "images"),
    (lambda f: aft_export.export(f["ckpt"], f["out"], model_def="m.py:build", input_size=float("inf")), "input_size"),
    (lambda f: aft_export.export(f["ckpt"], f["out"], model_def="m.py:build", classes=5), "classes"),
    (lambda f: aft_export.quantize(f["onnx"], f["out"], weight_bits="abc"), "weight_bits"),
    (lambda f: aft_export.infer(f["onnx"], 123), "images"),
    (lambda f: aft_export.triton_repo(f["onnx"], f["repo"], max_batch="8"), "max_batch"),
    (lambda f: aft_export.serve(f["onnx"], http_port="8000"), "http_port"),
    (lambda f: aft_export.export(f["ckpt"], output=["a.onnx"]), "output"),
    (lambda f: aft_export.export(f["ckpt"], f["out"], images=float("nan")), "images"),
    (lambda f: aft_export.evaluate(f["onnx"], data=f["data"], images=float("nan")), "images"),
    (lambda f: aft_export.quantize(f["onnx"], f["out"], weight_bits=7.9), "weight_bits"),
    # issue 52's: OverflowError, ValueError from repr, and an embedded null byte, at 3aefeda
    (lambda f: aft_export.quantize(f["onnx"], f["out"], method="percentile", percentile=10**400), "percentile"),
    (lambda f: aft_export.deepstream(f["onnx"], f["repo"], threshold=10**400), "threshold"),
    (lambda f: aft_export.quantize(f["onnx"], f["out"], mean=[10**400, 0, 0]), "mean"),
    (lambda f: aft_export.bench(f["onnx"], threads=10**5000), "threads"),
    (lambda f: aft_export.export(f["ckpt"], "out\x00.onnx"), "output"),
]


@pytest.mark.parametrize("index", range(len(CALLS)))
def test_each_notebook_call_is_one_line_naming_its_keyword(index, files):
    call, name = CALLS[index]
    with pytest.raises(ParamError) as err:
        call(files)
    assert err.value.param == name and "\n" not in str(err.value) and str(err.value).startswith(f"`{name}` takes ")


def test_the_notebook_calls_that_mean_something_give_the_corrected_result(tmp_path, tiny_onnx, cifar10):
    """A repeatable keyword given one value (bench's batch_sizes=5, quantize's exclude_regex, parity's
    tolerances) is that one value; the same file twice is measured once (the deploy table's note)."""
    ckpt = tiny_onnx.ckpt(tmp_path / "tiny.pt", "aft_simple_test")
    onnx = tiny_onnx.export(ckpt, tmp_path / "tiny.onnx")
    rows = aft_export.bench(onnx, batch_sizes=5, iters=1, warmup=0).to_dict()["rows"]
    assert [r["batch"] for r in rows] == [5]
    report = aft_export.parity(ckpt, [onnx], data=str(cifar10 / "test.tar"), images=4,
                               tolerances="fp32.max_abs=0.5")  # fmt: skip
    assert report.passed
    node = next(n for n in __import__("onnx").load(str(onnx)).graph.node if n.op_type == "MatMul").name
    q = aft_export.quantize(onnx, tmp_path / "q.onnx", calib=str(cifar10 / "train.tar"), images=8,
                            exclude_regex=node, no_cache=True)  # fmt: skip
    assert q.recipe["exclude_regex"] == {node: 1}
