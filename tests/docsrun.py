"""Run the documentation as a stranger would: every fenced ``bash`` and ``python`` block of
README.md and docs/*.md, as written, in order within its page, in a fresh copy of the
repository's tracked files with the shared folder beside it as ``../shared`` and nothing
else of ours reachable.

What a page may say to this runner, all of it visible to a reader:

- ``# not run here: <why>`` as a block's first line: the block is not run (a GPU, Jetson,
  Triton's container, hours of training, the test suite itself). Nothing else skips one.
- ``# exits N: <why>`` at the end of a command: the command fails by design with status N
  (any other status, 0 included, fails the page).
- ``<!-- output -->`` on the line before a ``text`` block that follows a runnable block:
  the block shows that block's output; every line shown must be a line it printed (digits
  may differ: timings, and the last digits of floats).

How a page runs (:func:`run_page`, inside a private mount namespace so that nothing done
here is seen outside it):

- the CIFAR-10 folder is bound beside the copies as ``../shared/data/cifar10``, then an empty
  directory is laid over the real one (and over the shared folder beside the repository), so a
  path of our machines that an artifact names leads nowhere;
- ``$AFT_CIFAR10_DIR`` is unset and the cache (``$AFT_CACHE_DIR``) is empty;
- bash blocks go, command by command, to one bash process per page (with job control, as
  when pasted into a terminal), python blocks to ``python FILE`` in that shell;
- a command that an earlier page of the session ran, on the same input files, is not run
  again: the files it wrote are put in place and its output shown (:class:`Memo`).

What it cannot see: the session's Python environment reuses the test environment's packages
(``tests/test_docs.py``: torch is not installed twice), so every extra CI installs is visible
to every page, installed there or not. A page's claim that needs an extra must install it
(README's main job installs ``rtx``, its serving block ``serve``); reading them is the check.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

RUNNABLE = ("bash", "python")
FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^#\s*not run here:\s*(\S.*)$")
EXITS = re.compile(r"#\s*exits (\d+)\b")
OUTPUT_MARK = "<!-- output -->"
HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
SENTINEL = "__docsrun_status__"
COMMAND_TIMEOUT = 420.0  # seconds one command may take (the README's pipeline: ~1.5 min on 2 cores)
MEMO_FIRST_WORDS = {"aft-export", "python", "pip"}  # commands whose effect is their output and files
OUTPUT_FLAGS = ("-o", "--output")  # what follows names the file a command writes, not one it reads


@dataclasses.dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    not_run: str | None = None  # why, from the block's marker
    output: str | None = None  # the output the page shows for it (a marked text block)


def page_blocks(path: Path, page: str) -> list[Block]:
    """The fenced blocks of a page, runnable or not, with their markers."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = "\n".join(lines[i + 1 : j])
        lang = m.group(1)
        first = body.splitlines()[0] if body.strip() else ""
        marker = NOT_RUN.match(first.strip())
        block = Block(page, i + 1, lang, body, marker.group(1) if marker else None)
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        if lang == "text" and prev.strip() == OUTPUT_MARK:
            runnable = [b for b in out if b.lang in RUNNABLE]
            if not runnable:
                raise ValueError(f"{page}:{i + 1}: {OUTPUT_MARK} with no runnable block before it")
            runnable[-1].output = body
        out.append(block)
        i = j + 1
    return out


def commands(text: str) -> list[str]:
    """A bash block's commands, as a terminal takes them: lines joined where they end in a
    backslash, a here-document with its command; blank and comment-only lines dropped."""
    out, cur, heredoc = [], "", None
    for line in text.splitlines():
        cur += line
        if heredoc is not None:  # a here-document's body goes with its command, to its end word
            if line.strip() != heredoc:
                cur += "\n"
                continue
            heredoc = None
        elif HEREDOC.search(line):
            heredoc = HEREDOC.search(line).group(1)
            cur += "\n"
            continue
        if line.endswith("\\"):
            cur += "\n"
            continue
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur)
        cur = ""
    if cur.strip():
        out.append(cur)
    return out


def words(command: str) -> list[str]:
    """The shell words of a command, its comment dropped."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        return list(lex)
    except ValueError:  # an unbalanced quote: the command is kept whole
        return command.split()


def expected_status(command: str) -> int:
    m = EXITS.search(command.splitlines()[-1])
    return int(m.group(1)) if m else 0


def output_matches(shown: str, printed: str) -> list[str]:
    """The lines a page shows that the run did not print (digits are wildcards)."""
    def norm(s: str) -> str:
        return re.sub(r"\d+", "0", " ".join(s.split()))

    have = {norm(line) for line in printed.splitlines()}
    return [line for line in shown.splitlines() if line.strip() and norm(line) not in have]


# ---------------------------------------------------------------- the session's memo


class Memo:
    """Commands run once per session: a command's key is its words and the bytes of every
    file it names that exists when it starts, but the one it writes (``-o FILE``: an earlier
    block's copy there is not an input); what it wrote and printed is kept."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def key(self, command_words: list[str], cwd: Path) -> str:
        h = hashlib.sha256(json.dumps(command_words).encode())
        written = {b for a, b in zip(command_words, command_words[1:]) if a in OUTPUT_FLAGS}
        for w in command_words:
            if w in written or w.startswith(tuple(f"{f}=" for f in OUTPUT_FLAGS)):
                continue
            for part in sorted({w, w.partition("=")[2], w.rpartition(":")[0]} - {""}):
                p = cwd / part
                try:
                    named = "\n" not in part and p.is_file()
                except OSError:  # not a path
                    named = False
                if named:
                    h.update(part.encode() + hashlib.sha256(p.read_bytes()).digest())
        return h.hexdigest()[:24]

    def get(self, key: str) -> dict | None:
        meta = self.root / key / "meta.json"
        return json.loads(meta.read_text()) if meta.is_file() else None

    def put(self, key: str, cwd: Path, written: list[str], status: int, output: str) -> None:
        entry = self.root / key
        if entry.exists():
            return
        tmp = self.root / f".{key}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for rel in written:
            dest = tmp / "files" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cwd / rel, dest)
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "meta.json").write_text(json.dumps({"status": status, "output": output, "written": written}))
        os.replace(tmp, entry)

    def restore(self, key: str, cwd: Path) -> None:
        files = self.root / key / "files"
        for rel in self.get(key)["written"]:
            dest = cwd / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(files / rel, dest)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    state = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            try:
                st = p.stat()
            except OSError:
                continue
            state[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return state


# ---------------------------------------------------------------- one shell per page


def session_groups(sid: int) -> set[int]:
    """The process groups of the processes in session ``sid`` (Linux: /proc/PID/stat)."""
    groups = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the name: state ppid pgrp session
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:
            groups.add(int(fields[2]))
    return groups


class Shell:
    """One bash process with job control; commands go in one at a time and each one's
    status comes back after a sentinel line."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stuck = False  # a command did not finish in time: the shell's replies no longer match
        threading.Thread(target=self._read, daemon=True).start()
        self.send("set -m", timeout=10)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, command: str, timeout: float = COMMAND_TIMEOUT) -> tuple[int | None, str]:
        """(status, output); status None: the command did not finish in time."""
        self.proc.stdin.write(f"{command}\n__docsrun=$?; echo; echo {SENTINEL}$__docsrun\n")
        self.proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stuck = True
                return None, "".join(out)
            if line is None:
                return None, "".join(out) + "[the shell exited]\n"
            if line.startswith(SENTINEL):
                text = "".join(out)
                return int(line[len(SENTINEL):].strip() or 0), text[:-1] if text.endswith("\n") else text
            out.append(line)

    def close(self, grace: float = 20.0) -> list[str]:
        """Wait for the background jobs the page started, up to ``grace`` seconds; then stop
        everything. Returns the jobs still running at the deadline (the page's fault)."""
        deadline = time.monotonic() + grace
        left: list[str] = []
        while not self.stuck:
            status, out = self.send("jobs -l", timeout=10)
            left = [line for line in out.splitlines() if line.strip() and "Done" not in line and "Exit" not in line
                    and "Interrupt" not in line and "Terminated" not in line]  # fmt: skip
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        # every process of the shell's session (with job control each job is a group of its own);
        # read from /proc, not from the shell: after a command that timed out its replies lag
        groups = session_groups(self.proc.pid) | {self.proc.pid}
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for group in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
            if sig == signal.SIGTERM and len(groups) > 1:
                time.sleep(5)  # a server's clean stop
        self.proc.wait(timeout=10)
        return left


# ---------------------------------------------------------------- a page


@dataclasses.dataclass
class Step:
    block: int  # the block's line in the page
    command: str
    expected: int
    status: int | None
    output: str
    seconds: float
    reused: bool = False


def copy_tracked(repo: Path, dest: Path) -> None:
    """A fresh clone, as far as files go: the tracked files of the working tree."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True).stdout
    for rel in filter(None, tracked.decode().split("\0")):
        src = repo / rel
        if not src.is_file():  # deleted in the working tree
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


def stranger_env(session: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AFT_", "PYTEST", "PYTHON", "VIRTUAL_ENV", "CI"))}  # fmt: skip
    venv = session / "venv"
    # the environment running the tests is not on the stranger's PATH
    outside = [p for p in env.get("PATH", "/usr/bin:/bin").split(":") if p and not p.startswith(sys.prefix)]
    env.update(AFT_CACHE_DIR=str(home / "aft-cache"), VIRTUAL_ENV=str(venv),
               PATH=":".join([str(venv / "bin"), *outside]), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_QUIET="1", PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    return env


def run_page(page: str, repo: Path, session: Path) -> dict:
    """Run one page's blocks in a fresh copy (called inside the mount namespace)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", page).strip("-")
    clone = session / slug
    shutil.rmtree(clone, ignore_errors=True)
    clone.mkdir()
    copy_tracked(repo, clone)
    home = session / f".home-{slug}"
    shutil.rmtree(home, ignore_errors=True)
    (home / "aft-cache").mkdir(parents=True)
    memo = Memo(session / "memo")
    blocks = [b for b in page_blocks(clone / page, page) if b.lang in RUNNABLE]
    shell = Shell(clone, stranger_env(session, home))
    steps: list[Step] = []
    shown_missing: list[dict] = []
    try:
        for n, block in enumerate(blocks):
            if block.not_run:
                steps.append(Step(block.line, "", 0, 0, f"not run here: {block.not_run}", 0.0))
                continue
            if block.lang == "python":
                script = session / f".{slug}.{block.line}.py"
                script.write_text(block.text + "\n")
                # a python block's key: its text, and the files its strings name
                strings = re.findall(r"[\"']([^\"'\n]+)[\"']", block.text)
                units = [(f"python {script}", ["python", block.text, *strings], 0)]
            else:
                background = any(words(c)[-1:] == ["&"] for c in commands(block.text))
                units = [(c, None if background else words(c), expected_status(c)) for c in commands(block.text)]
            printed = []
            for command, key_words, expected in units:
                memoised = key_words is not None and (block.lang == "python" or key_words[0] in MEMO_FIRST_WORDS)
                key = memo.key(key_words, clone) if memoised else None
                hit = memo.get(key) if key else None
                t0 = time.monotonic()
                if hit is not None:
                    memo.restore(key, clone)
                    status, output, reused = hit["status"], hit["output"], True
                else:
                    before = snapshot(clone) if key else None
                    status, output = shell.send(command)
                    reused = False
                    if key and status == expected:
                        after = snapshot(clone)
                        memo.put(key, clone, sorted(p for p, st in after.items() if before.get(p) != st), status,
                                 output)  # fmt: skip
                steps.append(Step(block.line, command, expected, status, output, time.monotonic() - t0, reused))
                printed.append(output)
                if status != expected:
                    break
            if steps and steps[-1].status != steps[-1].expected:
                break
            if block.output is not None:
                missing = output_matches(block.output, "\n".join(printed))
                if missing:
                    shown_missing.append({"block": block.line, "missing": missing})
    finally:
        left = shell.close()
    return {"page": page, "steps": [dataclasses.asdict(s) for s in steps], "left_running": left,
            "shown_not_printed": shown_missing}  # fmt: skip


def hide_and_bind(data: Path, repo: Path, session: Path) -> None:
    """Inside a private mount namespace: the CIFAR-10 folder beside the copies as
    ``shared/data/cifar10``, then an empty directory over the real one and over the shared
    folder beside the repository (where our checkpoints' data used to be named)."""
    beside = session / "shared" / "data" / "cifar10"
    beside.mkdir(parents=True, exist_ok=True)
    empty = session / ".empty"
    empty.mkdir(exist_ok=True)
    subprocess.run(["mount", "--bind", str(data), str(beside)], check=True)
    hide = {data.resolve()} | {p.resolve() for p in [repo.parent / "shared"] if p.is_dir()}
    for path in sorted(hide, key=lambda p: len(p.parts)):
        if not path.is_dir():  # inside one hidden already
            continue
        subprocess.run(["mount", "--bind", str(empty), str(path)], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page")
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--session", required=True, type=Path)
    ap.add_argument("--data", required=True, type=Path, help="the CIFAR-10 folder (train.tar, test.tar)")
    ap.add_argument("--result", required=True, type=Path)
    args = ap.parse_args(argv)
    hide_and_bind(args.data, args.repo, args.session)
    result = run_page(args.page, args.repo, args.session)
    args.result.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
