"""Files: atomic writes, hashing, output paths and the cache root. The ground floor.

Every file aft-export writes appears whole or not at all: it is written under a
temporary name in the destination directory and renamed (``os.replace``, atomic on
POSIX), and gets the mode the umask gives a new file. Directories likewise: a run
directory is built under a temporary name and renamed when complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from aft_export.errors import AFTExportError


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_output_path(path: str | os.PathLike) -> Path:
    """The path, once its directory is known to exist and be writable (else a clear error)."""
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        raise AFTExportError(f"output directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise AFTExportError(f"output directory {parent} is not writable")
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_mode() -> int:
    return 0o666 & ~_umask()


def dir_mode() -> int:
    return 0o777 & ~_umask()


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp_path)``, then rename onto ``path``: readers never see half a file,
    and a writer killed midway leaves only a hidden ``.<name>.*.tmp`` behind."""
    path = check_output_path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, file_mode())  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def copy_file(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Copy ``src`` to ``dst`` atomically; refuses to write onto ``src`` itself."""
    src, dst = Path(src), Path(dst)
    if dst.exists() and dst.resolve() == src.resolve():
        raise AFTExportError(f"refusing to copy {src} onto itself")
    return atomic_write(dst, lambda tmp: shutil.copyfile(src, tmp))


def atomic_write_text(path: str | os.PathLike, text: str, executable: bool = False) -> Path:
    out = atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    if executable:
        os.chmod(out, 0o777 & ~_umask())
    return out


@contextlib.contextmanager
def atomic_directory(final: str | os.PathLike):
    """Build a directory under a temporary name beside ``final``; rename it into place
    when the block completes, remove it when the block raises. Yields the work path."""
    final = Path(final)
    if final.exists() and (not final.is_dir() or any(final.iterdir())):
        raise AFTExportError(f"directory {final} already exists and is not empty; choose another")
    final.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(final.parent, os.W_OK):
        raise AFTExportError(f"cannot write into {final.parent}")
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        os.chmod(work, dir_mode())  # mkdtemp makes 0700
        yield work
        if final.exists():
            final.rmdir()
        os.replace(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def cache_root(*parts: str) -> Path:
    """``$AFT_CACHE_DIR``, else ``$XDG_CACHE_HOME/aft-export``, else ``~/.cache/aft-export``;
    ``parts`` name a sub-directory (``calibration``, ``ort-tensorrt``, ``datasets``)."""
    if os.environ.get("AFT_CACHE_DIR"):
        base = Path(os.environ["AFT_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aft-export"
    return base.joinpath(*parts)


def make_dirs(path: Path, what: str = "directory") -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AFTExportError(f"cannot create the {what} {path}: {exc}") from None
    return path
