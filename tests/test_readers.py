"""The one reader of what users hand us (aft_export/readers.py, issue 35): every structured file
or value is bounded (size, nesting, values), UTF-8, and checked by key; every pattern is RE2's.

The property test feeds generated documents (deep, huge, of the wrong types, non-finite, not
UTF-8) to the reader and to each use of it (a preprocessing file, ONNX metadata, a manifest's
model entry) and finds no exception but the project's. The command-line cases of the issue
are in tests/hostile/cases.py (kind ``readers``)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aft_export import readers
from aft_export.data.images import Preprocessing
from aft_export.errors import AFTExportError
from aft_export.artifacts.onnxio import ArtifactMeta
from aft_export.data.preprocess import resolve
from tests.conftest import need_module

# ---------------------------------------------------------------- generated documents

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**90, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from([32, 0, -1, 8193, 32.0, 32.5, "32", "0.5,0.5,0.5", [3, 32, 32], [0.5, 0.5, 0.5], [0, 0, 0]]),
)  # fmt: skip
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)  # fmt: skip
KEYS = st.sampled_from(["input_size", "mean", "std", "classes", "classes_file", "other"])
MAPPINGS = st.dictionaries(KEYS, VALUES, max_size=5)


@st.composite
def documents(draw) -> bytes:
    """A document as bytes: a mapping of the preprocessing keys to anything, wrapped in lists up
    to thousands deep, or nested where a value goes, or bytes that are not UTF-8."""
    kind = draw(st.sampled_from(["mapping", "wrapped", "deep value", "bytes", "huge number"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    text = json.dumps(draw(MAPPINGS), allow_nan=True)
    if kind == "wrapped":
        depth = draw(st.integers(0, 3000))
        text = "[" * depth + text + "]" * depth
    elif kind == "deep value":
        depth = draw(st.integers(1, 3000))
        text = json.dumps({"input_size": 32, "mean": [0.5] * 3, "std": [0.5] * 3})[:-1] + ', "classes": ' + (
            "[" * depth + '"a"' + "]" * depth) + "}"  # fmt: skip
    elif kind == "huge number":
        text = '{"input_size": ' + "9" * draw(st.integers(1, 6000)) + ', "mean": [0.5, 0.5, 0.5], "std": [1, 1, 1]}'
    encoding = draw(st.sampled_from(["utf-8", "latin-1", "utf-16"]))
    return text.encode(encoding, errors="replace")


def _only_ours(call, also=()) -> None:
    """``call`` returns, or raises the project's error (or ``also``, what its contract says): nothing
    else (no RecursionError, OverflowError, TypeError, UnicodeDecodeError...)."""
    try:
        call()
    except (AFTExportError, *also):
        pass


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=documents(), suffix=st.sampled_from([".json", ".yaml"]))
def test_generated_documents_raise_nothing_but_the_projects_error(tmp_path, data, suffix):
    if suffix == ".yaml":
        need_module("yaml", "pip install -e '.[test]'")
    path = tmp_path / f"pre{suffix}"
    path.write_bytes(data)
    _only_ours(lambda: readers.read_mapping(path, "preprocessing file"))
    _only_ours(lambda: resolve(path))  # the preprocessing file, each key checked
    text = data.decode("utf-8", errors="replace")
    meta = ArtifactMeta({"classes": text, "input_size": text, "mean": text, "std": text}, "m.onnx")
    for key in ("classes", "input_size", "mean", "std"):
        _only_ours(lambda: getattr(meta, key), also=(KeyError,))  # KeyError: absent, which callers say
    _only_ours(lambda: Preprocessing.from_metadata({"input_size": text, "mean": text, "std": text}, path="m.onnx"))


@settings(max_examples=100, deadline=None, database=None)
@given(value=VALUES)
def test_generated_values_under_every_key_and_entry_raise_nothing_but_the_projects_error(value):
    """A value of any type under a metadata key, as a manifest's whole model entry, or handed to
    each typed getter."""
    _only_ours(lambda: ArtifactMeta(value, "e.engine").classes, also=(KeyError,))  # absent: callers say it
    _only_ours(lambda: ArtifactMeta({"input_size": value}, "e.engine").input_size)
    for get in (lambda: readers.whole(value, "f", "k", 1, 8192), lambda: readers.wholes(value, "f", "k", 1, 8192),
                lambda: readers.numbers(value, "f", "k", 3, positive=True), lambda: readers.names(value, "f", "k"),
                lambda: readers.text(value, "f", "k"), lambda: readers.check_shape(value, "f")):  # fmt: skip
        _only_ours(get)


# ---------------------------------------------------------------- each bound, each type, by name


@pytest.mark.parametrize("text, said", [
    ("[" * 5000 + "]" * 5000, r"nests lists or mappings more than 32 deep"),
    ('{"a": ' + "[" * 33 + "]" * 33 + "}", r"nests lists or mappings more than 32 deep"),
    ('{"input_size": ' + "1" * 200 + "}", r"is not valid JSON \(an integer of 200 digits\)"),
    ("{oops", r"is not valid JSON \(Expecting property name"),
    ("", r"is not valid JSON"),
])  # fmt: skip
def test_json_past_a_bound_is_one_error_naming_where_and_the_key(text, said):
    with pytest.raises(readers.Malformed, match=r"^m\.onnx's metadata: mean " + said) as err:
        readers.parse_json(text, "m.onnx's metadata", "mean")
    assert isinstance(err.value, ValueError) and "\n" not in str(err.value)  # callers that show it catch ValueError


def test_a_file_is_regular_bounded_and_utf8(tmp_path):
    import os

    with pytest.raises(AFTExportError, match=r"f\.json does not exist; check the path"):
        readers.read_text(tmp_path / "f.json", "preprocessing file")
    (tmp_path / "d.json").mkdir()
    with pytest.raises(AFTExportError, match=r"d\.json is a directory"):
        readers.read_text(tmp_path / "d.json", "preprocessing file")
    os.mkfifo(tmp_path / "p.json")
    with pytest.raises(AFTExportError, match=r"p\.json is a named pipe \(FIFO\), not a regular file"):
        readers.read_text(tmp_path / "p.json", "preprocessing file")  # refused before open(): no blocking
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(readers.MAX_BYTES + 1)  # sparse
    with pytest.raises(AFTExportError, match=r"big\.json is larger than the 8 MiB"):
        readers.read_text(big, "preprocessing file")
    latin = tmp_path / "l.json"
    latin.write_bytes('{"classes": ["café"]}'.encode("latin-1"))
    with pytest.raises(readers.Malformed, match=r"l\.json is not UTF-8 text \(byte 0xe9 at offset 17\); save it as UTF-8"):
        readers.read_mapping(latin, "preprocessing file")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": 1}).encode())
    assert readers.read_mapping(bom, "preprocessing file") == {"a": 1}


def test_typed_values_name_the_file_and_the_key_and_no_flag():
    """A key in a file is written as it is there (input_size), never in backquotes, which the
    command line would turn into a flag the user did not type."""
    cases = [
        (lambda: readers.whole(math.inf, "pre.json", "input_size", 1, 8192), "input_size must be a whole number from "
                                                                            "1 to 8192, got Infinity"),
        (lambda: readers.whole(None, "pre.json", "input_size", 1, 8192), "got null"),
        (lambda: readers.whole(True, "pre.json", "input_size", 1, 8192), "got true"),
        (lambda: readers.numbers([0.5, math.nan, 0.5], "pre.json", "mean", 3), "mean must be 3 numbers, each finite"),
        (lambda: readers.numbers([0.5, 0, 0.5], "pre.json", "std", 3, positive=True), "each finite and > 0"),
        (lambda: readers.numbers([10**400, 1, 1], "pre.json", "std", 3), "each finite"),
        (lambda: readers.names(["cat", 1], "pre.yaml", "classes", yaml=True), "item 2 is 1 (quote it: YAML reads"),
        (lambda: readers.names(["cat", "cat"], "pre.json", "classes"), 'names that repeat: ["cat"]'),
        (lambda: readers.text(5, "pre.json", "classes_file"), "classes_file must be text"),
    ]
    for call, said in cases:
        with pytest.raises(readers.Malformed) as err:
            call()
        message = str(err.value)
        assert message.startswith(("pre.json: ", "pre.yaml: ")) and said in message and "`" not in message, message
    with pytest.raises(readers.Malformed) as err:  # JSON has no unquoted yes: no advice to quote
        readers.names(["cat", 1], "pre.json", "classes")
    assert str(err.value).startswith("pre.json: classes must be a list of non-empty names (text); item 2 is 1; ")
    assert readers.whole(32.0, "f", "k", 1, 8192) == 32 and readers.numbers([1, 2.5, 3], "f", "k", 3) == (1, 2.5, 3)


def test_yaml_aliases_cannot_multiply_a_small_file(tmp_path):
    need_module("yaml", "pip install -e '.[test]'")
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines))
    with pytest.raises(readers.Malformed, match=r"holds more than 1,000,000 values"):
        readers.read_mapping(path, "preprocessing file")


def test_a_preprocessing_files_values_are_checked_and_said_by_its_keys(tmp_path):
    pre = {"input_size": 32, "mean": [0.5] * 3, "std": [0.5] * 3}
    (tmp_path / "names").mkdir()
    for extra, said in [({"input_size": 1e300 * 1e300}, "input_size must be a whole number of pixels"),
                        ({"input_size": [3, 32, 16]}, r"input_size \[3, 32, 16\] is not the shape of a square"),
                        ({"input_size": [1, 1, 3, 32, 32]}, r"input_size \[1, 1, 3, 32, 32\] is not the shape"),
                        ({"input_size": [32]}, r"input_size \[32\] is not the shape of a square"),
                        ({"input_size": "32px"}, r"input_size must be a whole number of pixels .*got \"32px\""),
                        ({"input_size": "9" * 200}, r"input_size must be a whole number of pixels"),
                        ({"classes_file": 5}, "classes_file must be text"),
                        ({"classes_file": "names"}, "names is a directory; correct classes_file in"),
                        ({"classes": "cat"}, "classes must be a list of names")]:  # fmt: skip
        path = tmp_path / "p.json"
        path.write_text(json.dumps({**pre, **extra}, allow_nan=True))
        with pytest.raises(AFTExportError, match=said) as err:
            resolve(path)
        assert "`" not in str(err.value)  # named by the file's key, not as an option
    path.write_text(json.dumps({**pre, "mean": "0.4,0.5,0.6", "classes": ["a", "b"]}))
    assert resolve(path) == Preprocessing(32, (0.4, 0.5, 0.6), (0.5, 0.5, 0.5), ("a", "b"))
    for size in ([1, 3, 224, 224], [3, 224, 224], [224, 224], "224", 224.0):  # as the previous release read them
        path.write_text(json.dumps({**pre, "input_size": size}))
        assert resolve(path).input_size == 224, size
    with pytest.raises(AFTExportError, match="`input_size`"):  # a value given as an option is said as one
        resolve(path, input_size="0")


# ---------------------------------------------------------------- patterns


def test_patterns_are_re2_compiled_once_and_refused_as_one_line():
    names = ["blocks." + "a" * 5000 + "!", "blocks.0.mlp/" + "x" * 5000]
    catastrophic = readers.compile_pattern(r"(((\S+)+)+)+!", "exclude_regex")  # Python's re backtracks for hours
    assert type(catastrophic).__module__.startswith("re2")
    assert [bool(catastrophic.match(n)) for n in names] == [True, False]
    assert readers.compile_pattern(r"(((\S+)+)+)+!", "exclude_regex") is catastrophic  # compiled once
    for pattern, said in [("", "is empty, and the empty pattern matches every node name"),
                          ("a{4294967295}", "repeats 4294967295 times, more than the 1000 RE2 allows"),
                          ("a{2,1001}", "repeats 1001 times"), ("(", "missing \\)"), ("(?=x)", "RE2 takes"),
                          (r"(a)\1", "RE2 takes"), ("x" * 1001, "1,001 characters"), (5, "takes regular expressions"),
                          # Python reads {,5} as 0 to 5 repeats, RE2 as text: refused, not read otherwise
                          ("a{,5}", r"'a\{,5\}' has a repeat with no lower bound \(\{,5\}\), which Python reads as 0 "
                                    r"to 5 repeats and RE2 as text; write \{0,5\}"),
                          ("a{,}", r"no lower bound \(\{,\}\)"),
                          ("(?x)a b", r"RE2 takes \(invalid perl operator: \(\?x\)"),
                          ("(?#note)a", r"RE2 takes \(invalid perl operator: \(\?#\)"),
                          # a newline (or another control character) in what the user typed is written escaped
                          ("a\nb(", r"pattern 'a\\nb\(' is not a regular expression RE2 takes \(missing \): a\\nb\(\)"),
                          ("x\u2028(", r"pattern 'x\\u2028\('")]:  # fmt: skip
        with pytest.raises(AFTExportError, match=r"^`keep_fp32` .*" + said) as err:
            readers.compile_pattern(pattern, "keep_fp32")
        assert len(str(err.value).splitlines()) == 1
    assert readers.compile_pattern(r"a\{4294967295}", "keep_fp32").match("a{4294967295}")  # escaped braces are text
    for text, name in ((r"a\{,5}", "a{,5}"), ("x[{,5}]", "x,"), ("x[]{,5}]", "x]"), ("x[{2000}]", "x2")):
        assert readers.compile_pattern(text, "keep_fp32").match(name)  # braces escaped or in a class are text


def test_every_message_is_one_line_whatever_the_user_wrote(tmp_path):
    """A file name, a key or a value holding a newline or a line separator is written escaped."""
    with pytest.raises(readers.Malformed) as err:
        readers.whole("1\n2", "pre\r.json", "input\u2028size", 1, 8)
    assert str(err.value).startswith(r"pre\r.json: input\u2028size must be") and len(str(err.value).splitlines()) == 1
    assert err.value.reason.startswith(r"input\u2028size must be")
    with pytest.raises(AFTExportError, match=r"pre\\n\.json does not exist") as err:
        readers.read_text(tmp_path / "pre\n.json", "preprocessing file")
    assert len(str(err.value).splitlines()) == 1


def test_the_options_compile_each_pattern_when_they_are_made():
    from aft_export.options import QuantizeOptions

    with pytest.raises(AFTExportError, match="`exclude_regex` pattern '' is empty"):
        QuantizeOptions(exclude_regex=("",))
    with pytest.raises(AFTExportError, match=r"`keep_fp32` pattern 'a\{4294967295\}' repeats"):
        QuantizeOptions(keep_fp32=("a{4294967295}",))
    assert QuantizeOptions(exclude_regex=(r"blocks\.[0-9]+\.mlp",)).exclude_regex == (r"blocks\.[0-9]+\.mlp",)


def test_a_key_metadata_holds_is_read_or_said_malformed():
    """``in`` and ``[]`` agree: a key that is there gives its text, or, where its value is not text
    (a hand-edited manifest's model entry), the one-line error that says so; never a KeyError."""
    meta = ArtifactMeta({"model_name": "m", "classes": 5}, "e.engine")
    assert "model_name" in meta and meta["model_name"] == "m" and "nope" not in meta
    assert "classes" in meta
    with pytest.raises(readers.Malformed, match=r"^e\.engine's metadata: classes is not text"):
        meta["classes"]
    with pytest.raises(readers.Malformed, match=r"classes is not text"):
        meta.classes
    with pytest.raises(KeyError):
        meta["nope"]


def test_the_json_beside_a_file_is_read_only_where_values_are_missing_and_said_as_that_file(tmp_path):
    """quantize (which takes no class names) given input_size, mean and std does not read the JSON
    beside the file, so a bad classes_file there does not stop it; a caller that takes classes
    still reads it for them. A JSON beside the file that is no readable file is said as that
    file to correct or remove: no option named it."""
    from aft_export.data.preprocess import BESIDE_ONLY, ForeignPreprocessing

    model = tmp_path / "theirs.onnx"
    beside = tmp_path / "theirs.preprocess.json"
    beside.write_text(json.dumps({"input_size": 32, "mean": [0.5] * 3, "std": [0.5] * 3, "classes_file": "nope"}))
    values = dict(input_size=32, mean=(0.5,) * 3, std=(0.5,) * 3)
    quantize = ForeignPreprocessing(**values, takes=("input_size", "mean", "std"))
    assert quantize.complete and not BESIDE_ONLY.complete and not ForeignPreprocessing(**values).complete
    pre, origin = quantize.for_artifact(model)
    assert pre.input_size == 32 and pre.classes is None and "theirs.preprocess.json" not in origin
    with pytest.raises(AFTExportError, match=r"nope does not exist; correct classes_file in"):
        ForeignPreprocessing(**values).for_artifact(model)  # eval takes classes: the file is read for them
    beside.unlink()
    beside.mkdir()
    with pytest.raises(AFTExportError) as err:
        BESIDE_ONLY.for_artifact(model)
    assert str(err.value) == (f"preprocessing file {beside} is a directory; correct or remove theirs.preprocess.json "
                              f"beside theirs.onnx")  # fmt: skip
    with pytest.raises(AFTExportError, match=r"is a directory; check `preprocess`$"):  # a file the option named
        ForeignPreprocessing(preprocess=str(beside)).for_artifact(model)


def test_a_pattern_with_a_byte_that_is_not_utf8_is_refused_before_re2_encodes_it():
    """A command line's byte that is not UTF-8 reaches Python as a lone surrogate, which RE2 cannot encode
    (it raised UnicodeEncodeError): one line, the byte shown as the user typed it."""
    from aft_export.errors import AFTExportError
    from aft_export.readers import compile_pattern, one_line

    with pytest.raises(AFTExportError, match=r"^`keep_fp32` pattern 'node\\xff' is not UTF-8 text, as node names are; "):
        compile_pattern("node\udcff", "keep_fp32")
    assert one_line("a\udcffb\u2028") == "a\\xffb\\u2028"
