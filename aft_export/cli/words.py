"""The words of each command: the library names a parameter as data (:func:`aft_export.errors.said`),
and each command says it in its own flags, read from the declarations (:func:`flag_namer`); a
command line in a message is spelled from the declarations where it is written
(:func:`aft_export.options.commands.command_line`). Nothing is rewritten by pattern. Each command
takes its renamed flags for one release (:func:`rename_args`)."""

from __future__ import annotations

import os

import click

from aft_export.errors import Said, keyword_name
from aft_export.options.commands import DECLARED, RENAMED
from aft_export.version import RENAMED_UNTIL

# ---------------------------------------------------------------- renamed flags

# The flags renamed in issue 21 (one word per idea): old flag -> new flag, per command, from the renamed
# keywords (aft_export.options.commands.RENAMED). The old names keep working for one release, hidden from
# --help, with a note on stderr; an error about the option names the flag as it was typed. docs/cli.md lists
# them (tools/gen_cli_docs.py).


# command -> {old flag -> new flag}
RENAMED_FLAGS = {command: {"--" + old.replace("_", "-"): DECLARED[command][new].long for old, new in keywords.items()}
                 for command, keywords in RENAMED.items()}  # fmt: skip

renamed_used: list[tuple[str, str]] = []  # (old, new) typed in this run
running: list[click.Command] = []  # the command this run is running


# ---------------------------------------------------------------- parameters named as data


def flag_namer(running: str | None, command_line: click.Command | None = None):
    """The command line's :data:`~aft_export.errors.Namer` while ``running`` runs: a keyword of the
    stage that said it is the flag of the running command that gives it its value (the pipeline's
    --calib-images is quantize's `images`: :attr:`~aft_export.options.params.Param.gives`), or the
    running command's own flag of that name; else the stage's flag, as its command line (``aft-export
    quantize --images``); else the command lines of the commands that have it. All from the
    declarations, but an option of ``command_line`` alone (the old, hidden ``--provider``)."""
    command = DECLARED.get(running or "")

    def name(stage: str | None, keyword: str, value=None) -> str:
        if command is not None and (own := command.keyword(stage, keyword)) in command:  # what gives it, else its own
            return command[own].spelled(value)
        declared = DECLARED.get(stage or "")
        if declared is not None and keyword in declared:
            return f"aft-export {stage} {declared[keyword].spelled(value)}"
        groups: dict[str, list[str]] = {}  # no stage that has it: the commands that have it
        for other in DECLARED.values():
            if other is not command and keyword in other and not other[keyword].positional:
                groups.setdefault(other[keyword].spelled(value), []).append(other.name)
        if groups:
            return " or ".join(f"aft-export {'/'.join(names)} {text}" for text, names in groups.items())
        alone = [p for p in (command_line.params if command_line else ()) if p.name == keyword and p.opts]
        if alone:
            return alone[0].opts[0] if value is None else f"{alone[0].opts[0]} {value}"
        return keyword_name(stage, keyword, value)

    return name


def in_words(message) -> str:
    """A library message in the running command's words: a :class:`~aft_export.errors.Said` rendered
    from the declarations; any other text is text, shown as it is. With ``AFT_EXPORT_STRICT_WORDS``
    set (the test suite sets it), text that names a declared parameter in backquotes is a bug
    (:func:`named_as_text`): a message that lost its parameters on the way (an f-string around a
    ``said``)."""
    if isinstance(message, Said):
        return message.render(flag_namer(running[-1].name if running else None, running[-1] if running else None))
    text = str(message)
    if os.environ.get("AFT_EXPORT_STRICT_WORDS") and named_as_text(text):
        raise AssertionError(f"a message names {named_as_text(text)} as text, not as data: {text!r}")
    return text


def named_as_text(text: str) -> list[str]:
    """The declared parameters ``text`` names as `keyword` or `keyword=value` (none, where every
    message names them as data)."""
    if "`" not in text:
        return []
    keywords = {p.name for c in DECLARED.values() for p in c.params if not p.positional}
    return sorted(k for k in keywords if f"`{k}`" in text or f"`{k}=" in text)


def rename_args(command: click.Command, args: list[str]) -> list[str]:
    """``args`` with the command's old flag names replaced by the new ones (a note on
    stderr for each). Option values are skipped, so a value that looks like an old flag
    stays a value; nothing after ``--`` is touched."""
    renamed = RENAMED_FLAGS.get(command.name or "", {})
    if not renamed:
        return args
    takes_value = {o for p in command.params if isinstance(p, click.Option) and not p.is_flag and not p.count
                   for o in p.opts}  # fmt: skip
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in renamed:
            old, name = name, renamed[name]
            arg = name + eq + value
            if (old, name) not in renamed_used:
                renamed_used.append((old, name))
                click.echo(f"warning: {command.name} {old} is now {name}; the old name goes in aft-export "
                           f"{RENAMED_UNTIL}", err=True)  # fmt: skip
        out.append(arg)
        if not eq and name in takes_value and i + 1 < len(args):
            out.append(args[i + 1])
            i += 1
        i += 1
    return out


def as_typed(message: str) -> str:
    """An error about a renamed option names the flag the user typed, and its new name."""
    for old, new in renamed_used:
        message = _flag_replaced(message, new, f"{old} (now {new})")
    return message


def _flag_replaced(text: str, flag: str, by: str) -> str:
    """``text`` with each whole ``flag`` (not a part of a longer one, --images in --calib-images) as ``by``."""
    out, i = [], 0
    while (j := text.find(flag, i)) != -1:
        before = text[j - 1] if j else " "
        after = text[j + len(flag)] if j + len(flag) < len(text) else " "
        whole = not (before.isalnum() or before in "_-") and not (after.isalnum() or after in "_-")
        out.append(text[i:j] + (by if whole else flag))
        i = j + len(flag)
    return "".join(out) + text[i:]
