"""What a user hands us, read defensively: one reader for structured files and values, one
compiler for patterns.

Every structured file or value aft-export reads from a user goes through here: a preprocessing
file (``preprocess``, the ``NAME.preprocess.json`` beside another tool's ONNX file, a model
spec), a class names file, the metadata values of an ONNX file (ours, or another tool's that
copied our keys), an engine's manifest, a calibration recipe (a file, or the one an int8 file
records). Before a file is parsed its cost is bounded: its size (:data:`MAX_BYTES`), the
nesting of its lists and mappings (:data:`MAX_DEPTH`) and the number of values in it
(:data:`MAX_VALUES`, which YAML aliases could otherwise multiply); it is decoded as UTF-8. Each
failure is one :class:`~aft_export.errors.AFTExportError` naming the file. The typed getters
(:func:`whole`, :func:`numbers`, :func:`names`, :func:`text`) check a value's type, finiteness
and range and name the file and the key, never an option: a key in a file is not a flag the
user typed, so these messages write keys without backquotes.

Patterns (``exclude_regex``, ``keep_fp32``) are compiled once, by RE2 (the ``google-re2``
package), whose matching takes time linear in the length of the name whatever the pattern:
Python's ``re`` backtracks, and ``(((\\S+)+)+)+!`` against a 30-character node name runs until
it is killed. RE2's syntax is Python's without backreferences and lookaround (docs/quantize.md).
"""

from __future__ import annotations

import functools
import json
import math
import re
import stat
from pathlib import Path
from typing import Any

from aft_export.errors import AFTExportError, Named, Said, said

MAX_BYTES = 8 * 2**20  # a structured file (or one value) larger than this is not read
MAX_DEPTH = 32  # lists and mappings inside each other (ours need 4)
MAX_VALUES = 1_000_000  # values in one document, every list item and mapping entry counted
MAX_DIGITS = 100  # digits of one integer (int() of a long digit string takes quadratic time)
MAX_PATTERN = 1000  # characters of one regular expression
# the largest input side (or channel count) a size may say, in pixels (docs/errors.md). Here, not in
# options (which holds such values), because data and preprocess, on the floor below options, and
# onnxio read it, and this is the lowest module all three import
MAX_SIDE = 8192
# what ends a line where text lands in a file or a command line (str.splitlines splits on each); with NUL,
# which no path, C string or config file holds: what one line of text may not hold
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_LINE_ENDS = LINE_BREAKS | {"\x00"}

_SPECIAL = ((stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
            (stat.S_ISBLK, "block device"))  # fmt: skip


class Malformed(AFTExportError, ValueError):
    """A file, or a value under a key, that is not what it must be. Also a ValueError, so that a
    caller that shows a malformed value rather than stopping (``aft-export info``) catches it as
    one. ``reason``: what was wrong, without the advice (for a caller that gives its own)."""

    def __init__(self, where: str, key: str | None, problem: str, fix: str | None = None) -> None:
        self.reason = one_line(f"{key} {problem}" if key else problem)
        fix = fix or (f"correct {key} in {where}" if key else f"correct {where}")
        super().__init__(one_line(f"{where}: {key} {problem}; " + fix if key else f"{where} {problem}; " + fix))


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """``text`` with every character that is not printable (a newline, a carriage return, another
    control character, a line or paragraph separator, a byte of a command line that was not UTF-8)
    written as its escape, so that a message
    that quotes what a user wrote stays one line."""
    if text.isprintable():
        return text
    if isinstance(text, Said):  # our template is one line: the values are what a user wrote
        return Said(text.template, text.stage, {k: one_line(v) if isinstance(v, str) else v
                                                for k, v in text.values.items()})  # fmt: skip
    return "".join(c if c.isprintable() else _ESCAPES.get(c) or (
        f"\\x{ord(c):02x}" if ord(c) < 0x100 else
        f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else  # a byte that was not UTF-8 (surrogateescape)
        f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
        for c in text)  # fmt: skip


def reason(exc: Exception) -> str:
    """What was wrong, for a caller that wraps the error in its own advice."""
    return getattr(exc, "reason", None) or str(exc)


def shown(value: Any, limit: int = 60, as_json: bool = True) -> str:
    """A value as a message shows it, as JSON writes it where it can (null, true, Infinity; else
    its repr), cut to ``limit`` characters. An integer too long for its digits to be shown in
    whole (Python writes no more than 4300 of them) is its first digits and its length."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _SHOWN_BITS:
        return long_int(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr) if as_json else repr(value)
    except (ValueError, TypeError, RecursionError):  # a key that is not text, a cycle (YAML aliases)
        try:
            text = repr(value)
        except ValueError:  # a list holding an integer of more than 4300 digits
            text = f"a {type(value).__name__} holding an integer too long to show"
    return one_line(text if len(text) <= limit else text[: limit - 3] + "...")


_SHOWN_BITS = 190  # about 57 digits: longer integers are shown by their length


def long_int(value: int) -> str:
    """A long integer in a message: its sign, its first digits and its number of digits, computed
    without writing it out (``10**5000`` is ``1000000000... (5001 digits)``)."""
    magnitude = abs(value)
    digits = int(magnitude.bit_length() * math.log10(2)) + 1  # the count, or one too many
    if 10 ** (digits - 1) > magnitude:
        digits -= 1
    head = str(magnitude // 10 ** (digits - 10))
    return f"{'-' if value < 0 else ''}{head}... ({digits} digits)"


def as_typed(text: str, limit: int = 60) -> str:
    """A pattern as the user typed it, in single quotes (no escapes doubled; a control character
    written as its escape), cut to ``limit``."""
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"'{one_line(text)}'"


# ---------------------------------------------------------------- files


def regular_file(path: str | Path, what: str, fix: str = "check the path") -> Path:
    """``path`` if it is a regular file (through links), else one error: it does not exist, is a
    directory, or is a FIFO, socket or device (which reading would block on, or never end)."""
    path = Path(path)
    said = one_line(f"{what} {path}")  # a name may hold a newline
    try:
        st = path.stat()
    except FileNotFoundError:
        raise AFTExportError(f"{said} does not exist; " + fix) from None
    except OSError as exc:  # a component is a file, a name too long, a loop of links, no permission
        raise AFTExportError(f"{said} cannot be read ({exc.strerror or exc}); " + fix) from None
    if stat.S_ISDIR(st.st_mode):
        raise AFTExportError(f"{said} is a directory; " + fix)
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _SPECIAL if test(st.st_mode)), "special file")
        raise AFTExportError(f"{said} is a {kind}, not a regular file; " + fix)
    return path


def contained_file(folder: str | Path, name: str, said: str, fix: str, reserved: tuple[str, ...] = ()) -> tuple[str, Path]:
    """A file that a user's file names (``name``, relative to ``folder``, the folder of the file that
    names it), as ONNX names its external data: ``(the name normalised, the file with its links
    followed)``. Refused, as one line that starts with ``said`` (which file names it, and as what)
    and ends with ``fix``: an absolute name; a name that leaves ``folder``, by its ``..`` or through
    a link; one that does not exist, is a directory, a FIFO, a socket or a device (which reading
    would block on, or never end); one whose first part is among ``reserved`` (a name the output
    it is copied into uses itself). Nothing is read or written here: a caller reads (or copies)
    the returned path, and writes under the normalised name, which cannot leave the folder it is
    written into either."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise AFTExportError(one_line(f"{said} {shown(name)}, which is not a file name; " + fix))
    quoted = as_typed(name if len(name) <= 120 else f"{name[:50]}...{name[-67:]}", 120)  # a long one: both its ends
    if name.startswith("/") or Path(name).is_absolute():
        raise AFTExportError(one_line(f"{said} {quoted}, an absolute path: it must be a file in the folder of the "
                                      f"file that names it; " + fix))  # fmt: skip
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise AFTExportError(one_line(f"{said} {quoted}, outside the folder of the file that names it; " + fix))
            parts.pop()
        else:
            parts.append(part)
    if not parts:
        raise AFTExportError(one_line(f"{said} {quoted}, which is the folder itself, not a file; " + fix))
    relative = "/".join(parts)
    if parts[0] in reserved:
        raise AFTExportError(one_line(f"{said} {quoted}, the name of a file the output itself holds "
                                      f"({parts[0]}); rename that file, and the name given for it"))  # fmt: skip
    base = Path(folder).resolve()
    try:
        target = (base / name).resolve()
        st = target.stat()
    except FileNotFoundError:
        raise AFTExportError(one_line(f"{said} {quoted}, which does not exist in {base}; " + fix)) from None
    except (OSError, RuntimeError) as exc:  # a name too long, a loop of links, no permission
        why = getattr(exc, "strerror", None) or exc
        raise AFTExportError(one_line(f"{said} {quoted}, which cannot be read ({why}); " + fix)) from None
    if not target.is_relative_to(base):  # a link inside the folder to a file outside it
        raise AFTExportError(one_line(f"{said} {quoted}, a link to {target}, outside the folder of the file that "
                                      f"names it; " + fix))  # fmt: skip
    if stat.S_ISDIR(st.st_mode):
        raise AFTExportError(one_line(f"{said} {quoted}, which is a directory; " + fix))
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _SPECIAL if test(st.st_mode)), "special file")
        raise AFTExportError(one_line(f"{said} {quoted}, which is a {kind}, not a regular file; " + fix))
    return relative, target


def read_text(path: str | Path, what: str, fix: str = "check the path", limit: int = MAX_BYTES) -> str:
    """The text of a small file a user gave: a regular file, at most ``limit`` bytes, UTF-8."""
    path = regular_file(path, what, fix)
    too_large = (f"{one_line(f'{what} {path}')} is larger than the {limit // 2**20} MiB aft-export reads of such a file; give the "
                 f"file it should be")  # fmt: skip
    if path.stat().st_size > limit:  # said before a byte is read
        raise AFTExportError(too_large)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)  # at most: the file may have grown since
    except OSError as exc:
        raise AFTExportError(one_line(f"{what} {path} cannot be read ({exc.strerror or exc}); " + fix)) from None
    if len(data) > limit:
        raise AFTExportError(too_large)
    return decode(data, f"{what} {path}")


def decode(data: bytes, where: str) -> str:
    """``data`` as UTF-8 (a leading byte-order mark is dropped)."""
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(where, None, f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                        "save it as UTF-8") from None  # fmt: skip


# ---------------------------------------------------------------- documents

# a JSON string (skipped whole, escapes included) or a bracket: nesting is counted before parsing
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _json_depth(text: str) -> int:
    depth = deepest = 0
    for m in _JSON_TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    break
        elif c in "]}":
            depth -= 1
    return deepest


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits")
    return int(digits)


def parse_json(text: str, where: str, key: str | None = None, fix: str | None = None) -> Any:
    """A JSON document (a file's text, or one metadata value under ``key``), bounded."""
    if not isinstance(text, str):
        raise Malformed(where, key, f"is a {type(text).__name__}, not JSON text", fix)
    if len(text) > MAX_BYTES:
        raise Malformed(where, key, f"is {len(text):,} characters, more than the {MAX_BYTES // 2**20} MiB aft-export "
                                    f"reads", fix)  # fmt: skip
    if _json_depth(text) > MAX_DEPTH:
        raise Malformed(where, key, f"nests lists or mappings more than {MAX_DEPTH} deep", fix)
    try:
        data = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise Malformed(where, key, f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                        fix) from None  # fmt: skip
    except (ValueError, RecursionError) as exc:
        raise Malformed(where, key, f"is not valid JSON ({str(exc)[:100]})", fix) from None
    check_shape(data, where, key, fix)
    return data


def parse_yaml(text: str, where: str, fix: str | None = None) -> Any:
    """A YAML document (safe loading: plain data only), bounded like JSON."""
    try:
        import yaml
    except ImportError:
        raise AFTExportError(f"reading {where} needs PyYAML (pip install pyyaml), or write it as JSON") from None
    if len(text) > MAX_BYTES:
        raise Malformed(where, None, f"is more than the {MAX_BYTES // 2**20} MiB aft-export reads", fix)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise Malformed(where, None, f"is not valid YAML: {str(exc).splitlines()[0][:200]}", fix) from None
    except RecursionError:
        raise Malformed(where, None, f"nests lists or mappings more than {MAX_DEPTH} deep", fix) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value PyYAML's constructors refuse
        raise Malformed(where, None, f"is not valid YAML ({str(exc)[:100]})", fix) from None
    check_shape(data, where, None, fix)
    return data


def check_shape(data: Any, where: str, key: str | None = None, fix: str | None = None) -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH` or holding more than
    :data:`MAX_VALUES` values (walked without recursion; YAML aliases are counted each time)."""
    todo, count = [(data, 0)], 0
    while todo:
        value, depth = todo.pop()
        count += 1
        if count > MAX_VALUES:
            raise Malformed(where, key, f"holds more than {MAX_VALUES:,} values", fix)
        if isinstance(value, (dict, list, tuple)):
            if depth >= MAX_DEPTH:
                raise Malformed(where, key, f"nests lists or mappings more than {MAX_DEPTH} deep", fix)
            items = value.values() if isinstance(value, dict) else value
            todo.extend((v, depth + 1) for v in items)


def read_document(path: str | Path, what: str, fix: str = "check the path", yaml_ok: bool = True,
                  repair: str | None = None) -> Any:  # fmt: skip
    """A JSON (or, with ``yaml_ok``, YAML: ``.yaml``/``.yml``) file a user gave, read and parsed
    with every bound above. ``fix``: what to do about a path that is no readable file;
    ``repair``: about a file that is malformed (default: correct it)."""
    path = Path(path)
    suffix = path.suffix.lower()
    kinds = (".json", ".yaml", ".yml") if yaml_ok else (".json",)
    if suffix not in kinds:
        raise AFTExportError(one_line(f"{what} {path}: such files are {', '.join(kinds)}; give one of those"))
    text = read_text(path, what, fix)
    where = f"{what} {path}"
    if not text.strip():
        raise Malformed(where, None, "is empty", repair or f"write it as {'JSON or YAML' if yaml_ok else 'JSON'}")
    return parse_yaml(text, where, repair) if suffix in (".yaml", ".yml") else parse_json(text, where, None, repair)


def read_mapping(path: str | Path, what: str, fix: str = "check the path", yaml_ok: bool = True,
                 repair: str | None = None) -> dict:  # fmt: skip
    """A file holding one mapping whose keys are strings."""
    data = read_document(path, what, fix, yaml_ok, repair)
    where = f"{what} {path}"
    if not isinstance(data, dict):
        raise Malformed(where, None, f"must hold a mapping of keys to values, not a {type(data).__name__}",
                        repair or "write it as one mapping, {\"key\": value, ...}")  # fmt: skip
    odd = [k for k in data if not isinstance(k, str)]
    if odd:
        raise Malformed(where, None, f"has a key that is not text ({shown(odd[0])})", repair or "quote the key")
    return data


def read_keyfile(path: str | Path, what: str, fix: str = "check the path") -> dict[str, dict[str, str]]:
    """A GKeyFile (DeepStream's configs) as glib reads one: ``[group]`` lines, ``key=value`` lines, ``#``
    comments and blank lines; each group's values as text. A line of none of these kinds, a key twice in a group
    or a key before any group is malformed, named by its line."""
    text = read_text(path, what, fix)
    where = f"{what} {path}"
    groups: dict[str, dict[str, str]] = {}
    group = None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            group = groups.setdefault(stripped[1:-1], {})
            continue
        key, eq, value = line.partition("=")
        if group is None or not eq or not key.strip():
            raise Malformed(where, None, f"line {n} is not a [group] or a key=value line of one: {shown(line)}",
                            f"correct {where}")  # fmt: skip
        if key.strip() in group:
            raise Malformed(where, None, f"line {n} gives {key.strip()} a second time", f"correct {where}")
        group[key.strip()] = value.strip()
    return groups


def whole_text(value: str, where: str, key: str, lo: int, hi: int) -> int:
    """A whole number written as text (a GKeyFile value) from ``lo`` to ``hi``."""
    digits = value.strip()
    if not (digits.lstrip("-").isascii() and digits.lstrip("-").isdigit()) or len(digits) > MAX_DIGITS:
        raise Malformed(where, key, f"must be a whole number from {lo} to {hi}, got {shown(value)}")
    return whole(int(digits), where, key, lo, hi)


# ---------------------------------------------------------------- typed values (named by file and key)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    """A number a float holds, finite (a huge integer would overflow float())."""
    return _number(value) and (abs(value) < 2.0**1023 if isinstance(value, int) else math.isfinite(value))


def whole(value: Any, where: str, key: str, lo: int, hi: int, what: str = "a whole number",
          fix: str | None = None) -> int:  # fmt: skip
    """A whole number from ``lo`` to ``hi`` (an integral float such as 32.0 counts; not a bool)."""
    ok = _finite(value) and float(value).is_integer() and lo <= value <= hi
    if not ok:
        raise Malformed(where, key, f"must be {what} from {lo} to {hi}, got {shown(value)}", fix)
    return int(value)


def wholes(value: Any, where: str, key: str, lo: int, hi: int, count: int | None = None,
           fix: str | None = None) -> tuple[int, ...]:  # fmt: skip
    """A list of whole numbers from ``lo`` to ``hi`` (``count`` of them, where given)."""
    ok = (isinstance(value, (list, tuple)) and bool(value) and (count is None or len(value) == count)
          and all(_finite(v) and float(v).is_integer() and lo <= v <= hi for v in value))  # fmt: skip
    if not ok:
        size = f"{count} whole numbers" if count else "a list of whole numbers"
        raise Malformed(where, key, f"must be {size} from {lo} to {hi}, got {shown(value)}", fix)
    return tuple(int(v) for v in value)


def numbers(value: Any, where: str, key: str, count: int | None = None, positive: bool = False,
            fix: str | None = None) -> tuple[float, ...]:  # fmt: skip
    """``count`` finite numbers (any number of them, at least one, without ``count``); > 0 with
    ``positive``."""
    size = f"{count} numbers" if count else "a list of numbers"
    if not isinstance(value, (list, tuple)) or not value or (count is not None and len(value) != count):
        raise Malformed(where, key, f"must be {size}, got {shown(value)}", fix)
    if not all(_finite(v) and (v > 0 or not positive) for v in value):
        which = "finite and > 0" if positive else "finite"
        raise Malformed(where, key, f"must be {size}, each {which}, got {shown(list(value))}", fix)
    return tuple(float(v) for v in value)


def names(value: Any, where: str, key: str, fix: str | None = None, yaml: bool = False) -> tuple[str, ...]:
    """A non-empty list of distinct, non-empty strings. ``yaml``: the value was read from YAML,
    which reads an unquoted yes, no or number as another type (the message says to quote it)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise Malformed(where, key, f"must be a list of names, got {shown(value)}", fix)
    for i, v in enumerate(value):
        if not isinstance(v, str) or not v.strip():
            quote = yaml and not isinstance(v, str)
            hint = " (quote it: YAML reads yes, no and numbers as other types)" if quote else ""
            raise Malformed(where, key, f"must be a list of non-empty names (text); item {i + 1} is "
                                        f"{shown(v)}{hint}", fix)  # fmt: skip
        if not _LINE_ENDS.isdisjoint(v):  # a name is one line of a labels file
            raise Malformed(where, key, f"item {i + 1}, {shown(v)}, holds a NUL or a line break, which a name (a "
                                        f"line of a labels file) cannot hold", fix)  # fmt: skip
    seen, dup = set(), []
    for v in value:
        (dup.append(v) if v in seen else seen.add(v))
    if dup:
        raise Malformed(where, key, f"has names that repeat: {shown(sorted(set(dup))[:5])}", fix)
    return tuple(value)


def text(value: Any, where: str, key: str, fix: str | None = None) -> str:
    """A non-empty string of one line (a name, a path: no NUL, no line break)."""
    if not isinstance(value, str) or not value.strip():
        raise Malformed(where, key, f"must be text (a non-empty string), got {shown(value)}", fix)
    if not _LINE_ENDS.isdisjoint(value):
        raise Malformed(where, key, f"is {shown(value)}, which holds a NUL or a line break; give one line of text", fix)
    return value



# ---------------------------------------------------------------- patterns


MAX_REPEAT = 1000  # RE2's largest repetition count, {n} or {n,m}
_BRACES = re.compile(r"\{([0-9]*)(,?)([0-9]*)\}")  # {n}, {n,}, {n,m}; {,m} and {,}: Python's, not RE2's


def _repeats(pattern: str) -> list[tuple[str, str, str]]:
    """The brace repeats of ``pattern`` as written, ``(n, ",", m)``: those outside a character
    class and not escaped (``\\{`` and ``[{]`` are text)."""
    out, i, klass = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if klass:
            klass = c != "]"
        elif c == "[":
            klass = True
            i += 1 + (pattern[i + 1 : i + 2] == "^")
            i += pattern[i : i + 1] == "]"  # a ] first in a class is text
            continue
        elif c == "{":
            m = _BRACES.match(pattern, i)
            if m and (m.group(1) or m.group(2)):  # {} and {x} are text to both
                out.append(m.groups())
        i += 1
    return out


def matching(names: list[str], pattern: str, option: str = "exclude_regex") -> list[str]:
    """The names ``pattern`` matches from their start (as Python's ``re.match``, and ModelOpt's
    ``--nodes_to_exclude``, match node names), by RE2 (:func:`compile_pattern`: compiled once, in
    time linear in each name's length); ``option``: the option that gave it."""
    compiled = compile_pattern(pattern, option)
    return [n for n in names if compiled.match(n)]


@functools.lru_cache(maxsize=512)
def _re2(pattern: str):
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would write its own lines to stderr
    return re2.compile(pattern, options)


def compile_pattern(pattern: Any, option: str):
    """``pattern`` compiled by RE2 (linear-time matching; cached: compiled once whatever asks),
    for the option ``option`` (its field, named in the error). Refused, as one line: a pattern
    that is not a string, is empty (it would match every name), longer than
    :data:`MAX_PATTERN`, or that RE2 does not take (a syntax error, a backreference, a
    lookaround, a repetition above 1000, a program over RE2's memory bound), or that Python and RE2
    read differently (a repeat with no lower bound, ``{,m}``)."""
    example = "give a pattern such as 'blocks\\.3\\.' (RE2 syntax: docs/quantize.md)"
    if not isinstance(pattern, str):
        raise AFTExportError(said("{option} takes regular expressions (text), got {value}; {example}", None,
                                  option=Named(option), value=shown(pattern, as_json=False), example=example))
    if not pattern:
        raise AFTExportError(said("{option} pattern '' is empty, and the empty pattern matches every node name; "
                                  "{example}", None, option=Named(option), example=example))  # fmt: skip
    stray = next((c for c in pattern if 0xD800 <= ord(c) <= 0xDFFF), None)
    if stray is not None:  # a byte that is not UTF-8 on the command line (Python keeps it as a lone surrogate)
        raise AFTExportError(said("{option} pattern {value} is not UTF-8 text, as node names are; type it in UTF-8 "
                                  "(RE2 syntax: docs/quantize.md)", None, option=Named(option),
                                  value=as_typed(pattern)))  # fmt: skip
    if len(pattern) > MAX_PATTERN:
        raise AFTExportError(said("{option} pattern {value} is {value2:,} characters, more than the {MAX_PATTERN} "
                                  "a pattern may have; {example}", None, option=Named(option),
                                  value=as_typed(pattern, 40), value2=len(pattern), MAX_PATTERN=MAX_PATTERN,
                                  example=example))  # fmt: skip
    repeats = _repeats(pattern)
    # Python reads {,m} as 0 to m repeats, RE2 as the text "{,m}": refused rather than read otherwise
    bare = next((hi for lo, _, hi in repeats if not lo), None)
    if bare is not None:
        raise AFTExportError(said("{option} pattern {value} has a repeat with no lower bound ({{,{bare}}}), which "
                                  "Python reads as 0 to {value2} repeats and RE2 as text; write {{0,{bare}}} (or "
                                  "\\{{ for a brace); {example}", None, option=Named(option),
                                  value=as_typed(pattern), bare=bare, value2=bare or 'any number of',
                                  example=example))  # fmt: skip
    # a count RE2 would not take as one (above 10 digits it reads the braces as text): said as what it is
    counts = [int(n) for lo, _, hi in repeats for n in (lo, hi) if n]
    if any(n > MAX_REPEAT for n in counts):
        raise AFTExportError(said("{option} pattern {value} repeats {value2} times, more than the {MAX_REPEAT} RE2 "
                                  "allows; {example}", None, option=Named(option), value=as_typed(pattern),
                                  value2=max(counts), MAX_REPEAT=MAX_REPEAT, example=example))  # fmt: skip
    import re2

    try:
        return _re2(pattern)
    except re2.error as exc:
        why = exc.args[0] if exc.args else ""
        why = one_line(why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why or "RE2 cannot compile it"))
        raise AFTExportError(said("{option} pattern {value} is not a regular expression RE2 takes ({why}); "
                                  "{example}", None, option=Named(option), value=as_typed(pattern), why=why,
                                  example=example)) from None  # fmt: skip
