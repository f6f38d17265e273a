"""docs/cli.md is what tools/gen_cli_docs.py writes from this checkout's --help texts."""

import difflib
import importlib.util

from tests.conftest import REPO


def _tool():
    spec = importlib.util.spec_from_file_location("gen_cli_docs", REPO / "tools" / "gen_cli_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current():
    tool = _tool()
    expected = tool.render()
    current = (REPO / "docs" / "cli.md").read_text()
    if current != expected:
        diff = "".join(list(difflib.unified_diff(current.splitlines(True), expected.splitlines(True), "docs/cli.md",
                                                 "--help now"))[:40])  # fmt: skip
        raise AssertionError(f"docs/cli.md is stale; regenerate it with: {tool.COMMAND}\n{diff}")


def test_cli_reference_has_every_command_and_rename():
    from aft_export.cli import main
    from aft_export.cli.words import RENAMED_FLAGS

    text = _tool().render()
    for name, command in main.commands.items():
        assert (f"## aft-export {name}\n" in text) != command.hidden, name
        assert f"Usage: aft-export {name} " in text, name
    for command, renamed in RENAMED_FLAGS.items():
        for old, new in renamed.items():
            assert f"| `{command}` | `{old}` | `{new}` |" in text


def _command_lines(text: str):
    """Each `aft-export CMD ...` line of the code blocks in ``text``, with its continuation
    lines (a trailing backslash, or indented lines in a text block), comments removed."""
    import re

    for block in re.findall(r"```(?:bash|text)\n(.*?)```", text, re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if "aft-export " not in line:
                i += 1
                continue
            parts = [line]
            while (parts[-1].rstrip().endswith("\\") or (i + 1 < len(lines) and lines[i + 1].startswith("    ")
                                                         and "aft-export " not in lines[i + 1])) and i + 1 < len(lines):
                i += 1
                parts.append(lines[i])
            yield " ".join(p.split(" #")[0] for p in parts)
            i += 1


def test_docs_use_the_flags_the_commands_have():
    """Every flag on an `aft-export CMD` line of README.md and docs/*.md exists on that
    command under its current name (the renamed ones are for old scripts, not the docs)."""
    import re

    from aft_export.cli import main

    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    bad, seen = [], 0
    for page in pages:
        if page.name == "cli.md":
            continue
        for line in _command_lines(page.read_text()):
            m = re.search(r"aft-export ([a-z-]+)", line)
            command = main.commands.get(m.group(1)) if m else None
            if command is None:
                continue
            flags = {o for p in command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
            for flag in re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", line[m.end():]):
                seen += 1
                if flag not in flags | {"--help"}:
                    bad.append(f"{page.relative_to(REPO)}: aft-export {m.group(1)} {flag}")
    assert seen > 100 and bad == []


# pages another branch adds (issue 23: docs/runtimes.md); linked from here already
PENDING = {"docs/runtimes.md"}


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    import re

    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.M)}  # fmt: skip


def test_links_in_the_docs_resolve():
    """Every relative link of README.md and docs/*.md names a file of the repository, and
    an anchor, where given, a heading of that page."""
    import re

    pages = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
    bad, seen = [], 0
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            seen += 1
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            rel = str(file.relative_to(REPO)) if file.is_relative_to(REPO) else str(file)
            if rel in PENDING:
                continue
            if not file.exists():
                bad.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
                bad.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert seen > 50 and bad == []


def test_no_page_cites_an_issue_or_a_closing_note():
    """A user cannot see our issues: a page says what changed and in which version, or the command that measures it."""
    import re

    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "models").glob("*.md"))]
    cited = [f"{p.relative_to(REPO)}:{i}: {line.strip()[:80]}" for p in pages
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\bissues? #?\d+|closing note", line, re.IGNORECASE)]  # fmt: skip
    assert cited == []


def test_the_readme_fits_on_two_screens():
    """The front door stays short: details go to docs/."""
    assert len((REPO / "README.md").read_text().splitlines()) <= 150
