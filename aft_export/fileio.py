"""Files: atomic writes, hashing, output paths and the cache root. The ground floor.

Every file aft-export writes appears whole or not at all: it is written under a
temporary name in the destination directory and renamed (``os.replace``, atomic on
POSIX), and gets the mode the umask gives a new file. Directories likewise: a run
directory is built under a temporary name and renamed when complete.

Inputs are sacred: an output path is checked before any work starts
(:func:`check_output_path`): never one of the command's inputs (the same path, or the
same file through a symbolic or hard link), never anything but a regular file (a
device node, a fifo, a directory); and :func:`claim_output` holds a lock beside it for
the whole run, so that a second run writing the same output fails at its start, not
at its end.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from aft_export.errors import AFTExportError


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes by ``algorithm`` (a :mod:`hashlib` name), read 1 MiB at a time."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    return file_digest(path)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "fifo"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):  # fmt: skip
        if test(mode):
            return name
    return "special file"


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file (the same path, or through a symbolic or hard link)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output_path(path: str | os.PathLike, inputs=(), directory: bool = False) -> Path:
    """The output ``path``, checked before any work starts: its directory exists and is
    writable; if it exists it is a regular file (a directory where ``directory``) and none
    of ``inputs`` (paths the command reads; the same file through a link counts).
    Raises a one-line AFTExportError otherwise."""
    path = Path(path)
    parent = path.parent
    if directory:  # a run directory's missing parents are made: the nearest existing one must take them
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise AFTExportError(f"output directory {parent} {what}; create it or choose another output path")
    if not os.access(parent, os.W_OK):
        raise AFTExportError(f"output directory {parent} is not writable; choose another output path")
    try:
        st = os.stat(path)
    except FileNotFoundError:  # nothing there (or a dangling link): nothing to protect
        return path
    except OSError as exc:
        raise AFTExportError(f"cannot use {path} as output ({exc.strerror}); choose another output path") from None
    kind = _kind(st.st_mode)
    wanted, plural = ("directory", "directories") if directory else ("regular file", "regular files")
    if kind != wanted:
        raise AFTExportError(f"output {path} is a {kind}, not a {wanted}; aft-export replaces only "
                             f"{plural}: choose another output path")  # fmt: skip
    for item in inputs or ():
        if item is not None and same_file(path, item):
            how = "" if os.path.abspath(path) == os.path.abspath(item) else " (through a link)"
            raise AFTExportError(f"output {path} is the input {item}{how}; writing it would overwrite its input: "
                                 f"choose another output path")  # fmt: skip
    return path


_HELD: dict[str, list] = {}  # lock file -> [descriptor, depth]: one process may claim an output twice


@contextlib.contextmanager
def output_lock(path: str | os.PathLike):
    """Hold an exclusive lock on ``path`` for the block (``.<name>.lock`` beside it, removed
    after; the kernel releases it if the process dies). A second run writing the same
    output fails here, at its start, naming the run that holds it. Re-entrant within a
    process (the command line and the library both claim an output)."""
    import fcntl

    path = Path(path)
    lock = path.parent.resolve() / f".{path.name}.lock"
    key = str(lock)
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield path
        finally:
            _HELD[key][1] -= 1
        return
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise AFTExportError(f"cannot create the lock file {lock} ({exc.strerror}); choose another output "
                                 f"path") from None  # fmt: skip
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise AFTExportError(f"another aft-export run (pid {holder}) is writing {path}; wait for it to finish "
                                 f"or choose another output path") from None  # fmt: skip
        try:  # the holder before us may have removed the file between our open and our lock
            current = os.stat(lock)
        except FileNotFoundError:
            current = None
        mine = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _HELD[key] = [fd, 1]
    try:
        yield path
    finally:
        del _HELD[key]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


@contextlib.contextmanager
def claim_output(path: str | os.PathLike, inputs=(), directory: bool = False):
    """:func:`check_output_path`, then :func:`output_lock` for the block: what every stage
    that writes an output does before its work starts. Yields the path."""
    path = check_output_path(path, inputs, directory)
    if directory:
        make_dirs(path.parent, "output directory")
    with output_lock(path):
        yield path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_mode() -> int:
    return 0o666 & ~_umask()


def dir_mode() -> int:
    return 0o777 & ~_umask()


def atomic_write(path: str | os.PathLike, write: Callable[[str], object], executable: bool = False) -> Path:
    """Call ``write(tmp_path)``, then rename onto ``path``: readers never see half a file (nor
    one without its mode: ``executable`` sets the x bits the umask allows before the rename),
    and a writer killed midway leaves only a hidden ``.<name>.*.tmp`` behind."""
    path = check_output_path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, dir_mode() if executable else file_mode())  # mkstemp makes 0600; dir_mode: rwx
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def copy_file(src: str | os.PathLike, dst: str | os.PathLike, executable: bool = False) -> Path:
    """Copy ``src`` (a regular file: a FIFO would block, a device never end) to ``dst`` atomically;
    refuses to write onto ``src`` itself."""
    src, dst = Path(src), Path(dst)
    if dst.exists() and dst.resolve() == src.resolve():
        raise AFTExportError(f"refusing to copy {src} onto itself")

    def copy(tmp: str) -> None:
        try:
            if not stat.S_ISREG(os.stat(src).st_mode):
                raise shutil.SpecialFileError("not a regular file")
            shutil.copyfile(src, tmp)
        except (shutil.SpecialFileError, OSError) as exc:  # a FIFO, unreadable, the disk full
            why = getattr(exc, "strerror", None) or exc
            raise AFTExportError(f"cannot copy {src!s:.300} to {dst.name!s:.100} ({why}); check both paths") from None

    return atomic_write(dst, copy, executable)


def atomic_write_text(path: str | os.PathLike, text: str, executable: bool = False) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text), executable)


@contextlib.contextmanager
def atomic_directory(final: str | os.PathLike):
    """Build a directory under a temporary name beside ``final``; rename it into place
    when the block completes, remove it when the block raises. Yields the work path."""
    final = Path(final)
    if final.exists() and not final.is_dir():
        raise AFTExportError(f"{final} exists and is not a directory; choose another run directory")
    if final.exists() and any(final.iterdir()):
        raise AFTExportError(f"directory {final} already exists and is not empty; choose another")
    make_dirs(final.parent, "output directory")
    if not os.access(final.parent, os.W_OK):
        raise AFTExportError(f"cannot write into {final.parent}; choose another run directory")
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        os.chmod(work, dir_mode())  # mkdtemp makes 0700
        yield work
        try:
            if final.exists():
                final.rmdir()
            os.replace(work, final)
        except OSError as exc:
            raise AFTExportError(f"cannot move the finished run to {final} ({exc.strerror}: something else wrote "
                                 f"there meanwhile); choose another directory") from None  # fmt: skip
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def relative_name(path: str | os.PathLike, beside: str | os.PathLike) -> str:
    """How an artifact names another file: relative to ``beside`` (the artifact's folder, so the
    two can travel together), or by its file name alone where they share no folder but the
    root (a relative path would spell the machine's folders out). Never an absolute path."""
    path, base = Path(os.path.abspath(path)), Path(os.path.abspath(beside))
    try:
        shared = Path(os.path.commonpath([path, base]))
    except ValueError:  # different drives
        shared = Path(path.anchor)
    return path.name if shared == Path(path.anchor) else Path(os.path.relpath(path, base)).as_posix()


@contextlib.contextmanager
def private_directory(prefix: str):
    """A new directory in ``$TMPDIR`` that only this user can read (mode 0700), removed with
    everything in it when the block ends, however it ends. Yields its path."""
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as work:
        yield Path(work)


def cache_root(*parts: str) -> Path:
    """``$AFT_CACHE_DIR``, else ``$XDG_CACHE_HOME/aft-export``, else ``~/.cache/aft-export``;
    ``parts`` name a sub-directory (``calibration``, ``ort-tensorrt``, ``datasets``)."""
    if os.environ.get("AFT_CACHE_DIR"):
        base = Path(os.environ["AFT_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aft-export"
    return base.joinpath(*parts)


def make_dirs(path: Path, what: str = "directory", hint: str = "choose another path") -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AFTExportError(f"cannot create the {what} {path} ({exc.strerror or exc}); " + hint) from None
    return path
