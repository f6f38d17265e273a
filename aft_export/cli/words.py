"""The words of each command: the library names an option by its field in backquotes; each
command says it in its own flags (:func:`in_flags`, through :func:`option_table`), and takes its
renamed flags for one release (:func:`rename_args`)."""

from __future__ import annotations

import dataclasses
import re

import click

from aft_export.version import RENAMED_UNTIL

ROOT: list[click.Group] = []  # the aft-export group, registered by aft_export.cli.base


# ---------------------------------------------------------------- the words of each command

# The library names an option by its field, in backquotes: `data`, `images=0`
# (what a Python user passes), or another command's as a whole command line in backquotes,
# `aft-export export target=tensorrt8`. Each command turns them into its own flags through one
# table (:func:`option_table`): derived from its click parameters (an option's destination and
# its flag's own words both name it: `--tolerance` with destination tolerances answers to
# `tolerances` and `tolerance`), plus what is written here, per command: fields whose flag says
# something else (a key `field=value` for one value), and the flags renamed in issue 21 (one
# word per idea): old flag -> new flag. The old names keep working for one release, hidden from
# --help, with a note on stderr; an error about the option names the flag as it was typed.
# docs/cli.md lists them (tools/gen_cli_docs.py).


@dataclasses.dataclass(frozen=True)
class Words:
    fields: dict = dataclasses.field(default_factory=dict)  # field (or field=value) -> flag
    renamed: dict = dataclasses.field(default_factory=dict)  # old flag -> new flag


WORDS = {
    "train": Words(renamed={"--out": "--output", "--limit": "--images"}),
    "export": Words(renamed={"--batch": "--batch-dim", "--verify-images": "--images", "--verify-data": "--data"}),
    "quantize": Words({'cache_dir=""': "--no-cache"}, renamed={"--count": "--images"}),
    "parity": Words({"overrides": "--tolerance"}),
    "eval": Words({"limit": "--images"}, renamed={"--limit": "--images"}),
    "bench": Words(renamed={"--batch": "--batch-size"}),
    "build": Words(renamed={"--batch": "--batch-profile", "--hw": "--hw-profile"}),
    "check": Words({"versions": "--trt"}),
    # the stages the pipeline runs, in its own flags: quantisation samples --calib-images (its
    # `images`: the pipeline shows it when the calibration source has fewer), bench times
    # --bench-batch-size; the export verifies on the parity images (its `images=0`, no verification)
    "pipeline": Words({"images": "--calib-images", "images=0": "--parity-images 0",
                       "batch_sizes": "--bench-batch-size", "iters": "--bench-iters"},
                      renamed={"--out": "--output", "--eval-limit": "--eval-images", "--batch": "--bench-batch-size",
                               "--iters": "--bench-iters"}),
}  # fmt: skip

OPTION_WORD = re.compile(r"`([a-z][a-z0-9_]*)(?:=([^`]*))?`")  # `field` or `field=value`
COMMAND_LINE = re.compile(r"`aft-export ([a-z][a-z-]*)((?: [^`\s]+)*)`")  # `aft-export CMD ARG field=value ...`

renamed_used: list[tuple[str, str]] = []  # (old, new) typed in this run
running: list[click.Command] = []  # the command this run is running


def _long(opts) -> str | None:
    return max((o for o in opts if o.startswith("--")), key=len, default=None)


def option_table(command: click.Command) -> dict[str, tuple[str, click.Option | None]]:
    """The command's table: field (or ``field=value``) -> (its flag, the parameter)."""
    table: dict[str, tuple[str, click.Option | None]] = {}
    options = [p for p in command.params if isinstance(p, click.Option) and _long(p.opts)]
    for p in options:  # a flag's own words: --batch-size answers to batch_size
        for flag in (*p.opts, *p.secondary_opts):
            if flag.startswith("--"):
                table.setdefault(flag[2:].replace("-", "_"), (flag, p))
    for p in options:  # the destination: the field the option fills
        table[p.name] = (_long(p.opts), p)
    by_flag = {f: p for p in options for f in (*p.opts, *p.secondary_opts)}
    for key, flag in WORDS.get(command.name or "", Words()).fields.items():
        table[key] = (flag, by_flag.get(flag))
    return table


def renamed_flags(name: str) -> dict[str, str]:
    return WORDS.get(name, Words()).renamed


def _flag_text(table: dict, field: str, value: str | None) -> str | None:
    """``field=value`` in the command's flags, or None when the command has no such option."""
    if value is not None and f"{field}={value}" in table:
        return table[f"{field}={value}"][0]
    if field not in table:
        return None
    flag, param = table[field]
    if value is None:
        return flag
    if param is not None and param.is_flag:
        on = (value.lower() in ("true", "1", "yes")) != (flag in param.secondary_opts)
        return _long(param.opts) if on else (_long(param.secondary_opts) or f"no {_long(param.opts)}")
    if param is not None and param.multiple and value[:1] in "([":  # (1, 32): the flag once per value
        return " ".join(f"{flag} {v.strip()}" for v in value.strip("()[]").split(",") if v.strip())
    return f"{flag} {value}"


def _elsewhere(command: click.Command, field: str, value: str | None) -> str | None:
    """``field`` as the flag of the commands that have it, for a command that has not (a
    message its code shares with them: tests/test_words.py lists each such case)."""
    groups: dict[str, list[str]] = {}
    for name, other in ROOT[0].commands.items():
        text = None if other is command or other.hidden else _flag_text(option_table(other), field, value)
        if text is not None:
            groups.setdefault(text, []).append(name)
    return " or ".join(f"aft-export {'/'.join(names)} {text}" for text, names in groups.items()) or None


def in_flags(text: str, command: click.Command | None = None) -> str:
    """A library message in the words of ``command`` (default: the one running): each
    `field` or `field=value` as its flag (where it has none, as the flag of the commands that
    have it), each `aft-export CMD ...` line with that command's flags."""
    command = command if command is not None else (running[-1] if running else None)
    if command is None or "`" not in text:
        return text

    def line(m: re.Match) -> str:
        other = ROOT[0].commands.get(m.group(1))
        if other is None:
            return m.group(0)
        table, words = option_table(other), [f"aft-export {m.group(1)}"]
        for arg in m.group(2).split():
            field, eq, value = arg.partition("=")
            words.append((_flag_text(table, field, value if eq else None) or arg) if eq else arg)
        return " ".join(words)

    table = option_table(command)
    text = COMMAND_LINE.sub(line, text)
    return OPTION_WORD.sub(lambda m: (_flag_text(table, m.group(1), m.group(2))
                                      or _elsewhere(command, m.group(1), m.group(2)) or m.group(0)), text)  # fmt: skip


def rename_args(command: click.Command, args: list[str]) -> list[str]:
    """``args`` with the command's old flag names replaced by the new ones (a note on
    stderr for each). Option values are skipped, so a value that looks like an old flag
    stays a value; nothing after ``--`` is touched."""
    renamed = renamed_flags(command.name or "")
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
        message = re.sub(rf"(?<![\w-]){re.escape(new)}(?![\w-])", f"{old} (now {new})", message)
    return message
