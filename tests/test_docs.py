"""The documentation runs: every fenced bash and python block of README.md and docs/*.md is run
as written, in order within its page, by a stranger (tests/docsrun.py says how), or says at
the block why it cannot run here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO, cifar10_dir, unavailable
from tests.docsrun import RUNNABLE, commands, copy_tracked, output_matches, page_blocks

PAGES = ["README.md"] + sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))
USAGE = re.compile(r"\[-|\[[A-Z_]+\]|\.\.\.\]|\|[a-z-]+\]")  # [--flag], [DIR], [...], a|b]


def _blocks():
    return [b for page in PAGES for b in page_blocks(REPO / page, page)]


def test_usage_summaries_are_text_and_markers_say_why():
    """A block a reader may paste is runnable; a usage summary (``[--flag ...]``) is fenced as
    text; a block that cannot run here says why, in one line, at the block."""
    bad = []
    for b in _blocks():
        if b.lang not in RUNNABLE or b.not_run:
            continue
        for c in commands(b.text):
            if USAGE.search(re.sub(r"#.*", "", c)) and b.lang == "bash":
                bad.append(f"{b.page}:{b.line}: usage syntax in a runnable block (fence it as text): {c.strip()}")
    assert not bad, "\n".join(bad)
    reasons = [(b.page, b.line, b.not_run) for b in _blocks() if b.not_run]
    assert all(len(r) > 10 and "\n" not in r for _, _, r in reasons), reasons


def test_output_lines_are_matched_with_digits_as_wildcards():
    printed = "ok in 11.2s: 122 nodes\nPASS"
    assert output_matches("ok in 9.9s: 122 nodes\nPASS", printed) == []
    assert output_matches("ok in 9.9s: 122 nodes\nFAIL", printed) == ["FAIL"]


def _unshare_or_skip() -> None:
    why = None
    if os.geteuid() != 0:
        why = "needs root for a private mount namespace (unshare -m)"
    elif not shutil.which("unshare"):
        why = "needs unshare (util-linux)"
    elif subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        why = "unshare -m is not permitted here"
    if why:
        unavailable(f"the documentation test {why} (CI runs as root)")


@pytest.fixture(scope="session")
def stranger(tmp_path_factory, cifar10):
    """The session's stranger: a fresh environment whose packages are this one's (torch and
    friends are not installed twice) and whose aft-export is an editable install of a fresh
    copy; the pages' copies sit beside ``shared``, as a checkout sits beside ``../shared``."""
    _unshare_or_skip()
    session = tmp_path_factory.mktemp("docs")
    base = session / "base"
    base.mkdir()
    copy_tracked(REPO, base)
    venv.create(session / "venv", with_pip=True)
    py = session / "venv" / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(site, "deps.pth").write_text("".join(f"{p}\n" for p in paths))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "-e", str(base)],
                   check=True, capture_output=True, cwd=session)  # fmt: skip
    return session


def nothing_to_run(page: str, path: Path | None = None) -> str | None:
    """Why ``page`` (at ``path``, default in the repository) has nothing to run (None: it has a block to
    run): no bash or python block, or every one marked as not run here. Nothing run is a skip with that
    reason, never a pass."""
    blocks = [b for b in page_blocks(path or REPO / page, page) if b.lang in RUNNABLE]
    if not blocks:
        return f"{page} has no bash or python block"
    if all(b.not_run for b in blocks):
        return f"{page}: each of its {len(blocks)} bash and python blocks is marked not run here ({blocks[0].not_run})"
    return None


def test_a_page_whose_blocks_all_say_they_cannot_run_is_a_skip_not_a_pass(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```bash\n# not run here: it needs a GPU\naft-export doctor\n```\n\n```text\nshown\n```\n")
    assert page_blocks(page, "page.md")[0].not_run == "it needs a GPU"
    assert nothing_to_run("page.md", page).startswith("page.md: each of its 1 bash and python blocks is marked not")
    page.write_text(page.read_text() + "\n```bash\necho run\n```\n")
    assert nothing_to_run("page.md", page) is None and nothing_to_run("README.md") is None


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_as_written(page, stranger):
    why = nothing_to_run(page)
    if why:
        pytest.skip(why)  # nothing to run is not a pass of anything
    result_file = stranger / f"{re.sub(r'[^A-Za-z0-9]+', '-', page)}.json"
    run = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-m", "tests.docsrun", page,
                          "--repo", str(REPO), "--session", str(stranger), "--data", str(cifar10_dir()),
                          "--result", str(result_file)], cwd=REPO, capture_output=True, text=True,
                         timeout=1500)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(result_file.read_text())
    for step in result["steps"]:
        print(f"{page}:{step['block']} {step['seconds']:6.1f}s {'reused' if step['reused'] else ''} "
              f"{step['command'].strip()[:100] or step['output']}")  # fmt: skip
    for step in result["steps"]:
        where = f"{page}:{step['block']}: {step['command'].strip()}"
        assert step["status"] == step["expected"], (
            f"{where}\nexit status {step['status']}, expected {step['expected']}\n{step['output'][-4000:]}")
    assert not result["left_running"], f"{page}: still running after the page: {result['left_running']}"
    assert not result["shown_not_printed"], f"{page}: output shown but not printed: {result['shown_not_printed']}"
