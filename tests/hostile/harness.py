"""Run one hostile-input case in-process (click's CliRunner) and judge what happened.

A case runs in a private copy of the world, with ``$TMPDIR`` (``tempfile.tempdir``) and
the cache root (``$AFT_CACHE_DIR``) pointed at private, empty directories, from its
own working directory. Afterwards every entry of the case directory is compared with a
snapshot taken before (type, bytes, link target, device number), and the temporary and
cache directories must be as they were.

Verdicts, in the order they are reported (a case counts under the first that applies):
``traceback`` an exception other than SystemExit, or a traceback in the output;
``destroyed`` an input changed or vanished, or the file planted outside the case directory
(:func:`tests.hostile.world.plant_victim`) changed in size, time or bytes; ``leftovers`` a file or directory appeared
that the case does not allow (in its directory, $TMPDIR or the cache); ``exit`` another
exit status than the table's; ``format`` not exactly one ``error: <what>; <what to do>``
line last on stderr (or click's ``Usage:`` text); ``message`` the line does not say what
the table expects; ``ok``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.hostile.cases import Case
from tests.hostile.world import plant_victim, setup

VERDICTS = ("traceback", "destroyed", "leftovers", "exit", "format", "message", "ok")


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry below ``root`` (not following links): kind and content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            rel = str(p.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", st.st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode), st.st_rdev)
    return out


@dataclass
class Outcome:
    case: Case
    verdict: str
    exit_code: int | None
    stderr: str
    stdout: str
    detail: str = ""


def _error_line(stderr: str) -> tuple[bool, str]:
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    ok = bool(lines) and len(errors) == 1 and lines[-1] == errors[0] and "; " in errors[0]
    return ok, lines[-1] if lines else ""


def run_case(case: Case, world: Path, work: Path) -> Outcome:
    """Run ``case`` in ``work`` (created here, removed after) from a copy of ``world``."""
    from click.testing import CliRunner

    from aft_export.cli import main

    d, tmp, cache = work / "case", work / "tmp", work / "cache"
    shutil.copytree(world, d, symlinks=True)
    tmp.mkdir()
    cache.mkdir()
    victim = plant_victim(work)  # outside the case directory: no command may touch it
    planted = _stat(victim)
    setup(d, case.setup)
    argv = [a.replace("{d}", str(d)) for a in case.argv]
    before = snapshot(d)
    old_tempdir, old_cwd = tempfile.tempdir, os.getcwd()
    threads = _torch_threads()
    tempfile.tempdir = str(tmp)
    os.chdir(d)
    try:
        result = CliRunner().invoke(main, argv, env={"TMPDIR": str(tmp), "AFT_CACHE_DIR": str(cache),
                                                     "COLUMNS": "200"})  # fmt: skip
    finally:
        tempfile.tempdir = old_tempdir
        os.chdir(old_cwd)
        _torch_threads(threads)
    after = snapshot(d)
    stderr, stdout = result.stderr, result.stdout
    code = result.exit_code

    def outcome(verdict, detail=""):
        return Outcome(case, verdict, code, stderr, stdout, detail)

    exc = result.exception
    if (
        exc is not None and not isinstance(exc, SystemExit)
    ) or "Traceback (most recent call last)" in result.output:
        return outcome("traceback", f"{type(exc).__name__}: {exc}" if exc is not None else "")
    changed = sorted(k for k in before if after.get(k) != before[k])
    if _stat(victim) != planted:
        changed.insert(0, f"{victim.relative_to(work)}, outside the case directory")
    if changed:
        return outcome("destroyed", f"changed or removed: {changed[:5]}")
    allowed = case.creates if case.code != 2 else ()
    new = sorted(k for k in after if k not in before and not any(fnmatch.fnmatch(k, pat) for pat in allowed))
    new += [f"$TMPDIR/{p.name}" for p in tmp.iterdir()]
    new += (
        [f"cache/{p.relative_to(cache)}" for p in cache.rglob("*") if p.is_file()] if case.code == 2 else []
    )
    if new:
        return outcome("leftovers", f"left behind: {new[:5]}")
    if code != case.code:
        return outcome("exit", f"exit {code}, expected {case.code}")
    if case.code == 2:
        ok, line = _error_line(stderr)
        if not ok or "Usage:" in result.output:
            return outcome("format", f"last stderr line: {line[:200]!r}")
        if case.expect and not re.search(case.expect, line, re.IGNORECASE):
            return outcome("message", f"{line[:200]!r} does not match {case.expect!r}")
    elif case.expect and not re.search(case.expect, result.output, re.IGNORECASE):
        return outcome("message", f"output does not match {case.expect!r}")
    return outcome("ok")


def _stat(path: Path) -> tuple | None:
    """Size, modification time and bytes of a file (None: gone)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()


def _torch_threads(n: int | None = None) -> int | None:
    """Commands set torch's process-wide thread count; each case starts from the same one."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if n is not None:
        torch.set_num_threads(n)
    return torch.get_num_threads()
