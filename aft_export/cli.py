"""The ``aft-export`` command line. Commands are thin: build the options, call the library,
print what :mod:`aft_export.workflow.report` renders.

Defaults come from the options dataclasses (or the library function's signature), never
written twice. Library modules are imported inside the commands so that ``aft-export
--help`` starts without loading torch.

One error path for every command, decided here (:class:`_Group` and :class:`_Command`):

- every user error, ours (:class:`AFTExportError`) or click's (a bad option value, an
  unknown command, a missing argument, a directory where a file is wanted), is one line
  on stderr, ``error: <what was wrong>; <what to do>``, and the error's exit status (2:
  bad input); anything else is a bug and keeps its traceback;
- a command returns its exit status (:data:`aft_export.errors.EXIT_TABLE`, printed in
  every command's ``--help``): 0 ok, 1 a check failed, 2 bad input, 3 nothing failed but
  something was not verified;
- SIGINT and SIGTERM raise :class:`Interrupted` in the main thread, so every ``finally``
  and every atomic write's clean-up runs; the exit status is 128 + the signal (130,
  143). A second signal exits at once;
- before a command starts, each of its outputs (a parameter named ``output``) is checked
  against every path it reads and locked for the run (:func:`aft_export.fileio.claim_output`):
  no command overwrites its own input, and a second run writing the same output fails at its
  start;
- a command's exit status 1 or 3 is its checks' verdict (:class:`aft_export.errors.Verdict`,
  mapped by :func:`_exit`), never read from rendered text;
- every line of the library's it prints (an error, a log line, a rendered report) is put in
  that command's flags (:func:`in_flags`, through the command's :func:`option_table`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import logging
import math
import os
import re
import signal
import sys
import threading

import click

from aft_export.byo.cli import USER_MODEL_KEYS, model_source_from, require_aft_option, user_model_options
from aft_export.readers import MAX_SIDE
from aft_export.errors import EXIT_BAD_INPUT, EXIT_FOR, EXIT_OK, EXIT_SIGNAL_BASE, EXIT_TABLE, AFTExportError, Verdict
from aft_export.options import (BACKENDS, CALIB_COUNT, CALIB_SEED, DEFAULT_BACKEND, EXPORT_TARGETS, HW_LEVELS,
                                LIBRARIES, MAX_SEED, MAX_THREADS, METHODS, OP_FORMS, PRECISIONS, PROVIDER_BACKENDS,
                                QUANTIZED_OP_TYPES, REST_PRECISIONS, TARGETS, TRITON_BACKENDS, TRITON_DEVICES,
                                BenchOptions, BuildOptions, DoctorOptions, EvalOptions, ExportOptions,
                                ParityOptions, PipelineOptions, QuantizeOptions, ServeOptions, TrainConfig,
                                TritonRepoOptions)  # fmt: skip
from aft_export.version import __version__

BACKEND_LIST = ", ".join(f"{b.name} ({b.summary})" for b in BACKENDS.values())
BACKEND_HELP = (f"Where .onnx artifacts run: {BACKEND_LIST}. A GPU backend also runs checkpoints in PyTorch on "
                f"the GPU; engines run in TensorRT.")  # fmt: skip
PROVIDERS = click.Choice(list(PROVIDER_BACKENDS))  # the old --provider, an alias of --backend for one release
OUTPUT_PARAMS = ("output",)  # parameters that name what a command writes


# ---------------------------------------------------------------- values, checked where they are parsed


class Finite(click.FloatRange):
    """A float in a range that refuses NaN and infinity (click's FloatRange accepts both)."""

    name = "number"

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


COUNT = click.IntRange(min=1)  # images, iterations, epochs
NONNEGATIVE = click.IntRange(min=0)
BATCH = click.IntRange(min=1)  # the upper bound is the memory a batch needs, estimated by each command
THREADS = click.IntRange(0, MAX_THREADS)  # 0: the backend's default
SEED = click.IntRange(0, MAX_SEED)
PORT = click.IntRange(1, 65535)


# ---------------------------------------------------------------- the words of each command

# The library names an option by its field, in backquotes: `verify_data`, `verify_images=0`
# (what a Python user passes), or another command's as a whole command line in backquotes,
# `aft-export export target=tensorrt8`. Each command turns them into its own flags through one
# table (:func:`option_table`): derived from its click parameters (an option's destination and
# its flag's own words both name it: `--images` with destination verify_images answers to
# `verify_images` and `images`), plus what is written here, per command: fields whose flag says
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
    "eval": Words(renamed={"--limit": "--images"}),
    "bench": Words(renamed={"--batch": "--batch-size"}),
    "build": Words(renamed={"--batch": "--batch-profile", "--hw": "--hw-profile"}),
    "check": Words({"versions": "--trt"}),
    # the stages the pipeline runs, in its own flags: the export verifies on the parity images,
    # quantisation samples --calib-images, bench times --bench-batch-size
    "pipeline": Words({"verify_images": "--parity-images", "verify_data": "--data", "images": "--parity-images",
                       "count": "--calib-images", "batches": "--bench-batch-size", "iters": "--bench-iters"},
                      renamed={"--out": "--output", "--eval-limit": "--eval-images", "--batch": "--bench-batch-size",
                               "--iters": "--bench-iters"}),
}  # fmt: skip
RENAMED_UNTIL = "0.2.0"  # the release that drops the old names

OPTION_WORD = re.compile(r"`([a-z][a-z0-9_]*)(?:=([^`]*))?`")  # `field` or `field=value`
COMMAND_LINE = re.compile(r"`aft-export ([a-z][a-z-]*)((?: [^`\s]+)*)`")  # `aft-export CMD ARG field=value ...`

_renamed_used: list[tuple[str, str]] = []  # (old, new) typed in this run
_running: list[click.Command] = []  # the command this run is running


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
    for name, other in main.commands.items():
        text = None if other is command or other.hidden else _flag_text(option_table(other), field, value)
        if text is not None:
            groups.setdefault(text, []).append(name)
    return " or ".join(f"aft-export {'/'.join(names)} {text}" for text, names in groups.items()) or None


def in_flags(text: str, command: click.Command | None = None) -> str:
    """A library message in the words of ``command`` (default: the one running): each
    `field` or `field=value` as its flag (where it has none, as the flag of the commands that
    have it), each `aft-export CMD ...` line with that command's flags."""
    command = command if command is not None else (_running[-1] if _running else None)
    if command is None or "`" not in text:
        return text

    def line(m: re.Match) -> str:
        other = main.commands.get(m.group(1))
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


def _rename_args(command: click.Command, args: list[str]) -> list[str]:
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
            if (old, name) not in _renamed_used:
                _renamed_used.append((old, name))
                click.echo(f"warning: {command.name} {old} is now {name}; the old name goes in aft-export "
                           f"{RENAMED_UNTIL}", err=True)  # fmt: skip
        out.append(arg)
        if not eq and name in takes_value and i + 1 < len(args):
            out.append(args[i + 1])
            i += 1
        i += 1
    return out


def _as_typed(message: str) -> str:
    """An error about a renamed option names the flag the user typed, and its new name."""
    for old, new in _renamed_used:
        message = re.sub(rf"(?<![\w-]){re.escape(new)}(?![\w-])", f"{old} (now {new})", message)
    return message


# ---------------------------------------------------------------- one error path, one exit-code table


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: unwinds like KeyboardInterrupt (every clean-up runs) and
    is caught by nothing but the command line's top level."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_signalled: list[int] = []  # the signals received during this run


def _on_signal(signum, _frame) -> None:
    if _signalled:  # a second signal while the first one's clean-up runs: stop now
        os._exit(EXIT_SIGNAL_BASE + signum)
    _signalled.append(signum)
    raise Interrupted(signum)


@contextlib.contextmanager
def _signals_handled():
    """SIGINT and SIGTERM raise Interrupted for the block (main thread only), then the
    handlers before it come back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _signalled.clear()
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class _SayHandler(logging.Handler):
    """The library's log records (``logging.getLogger("aft_export")``) on stderr, in the
    running command's flags."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(in_flags(record.getMessage()), err=True)


@contextlib.contextmanager
def _library_log():
    logger = logging.getLogger("aft_export")
    handler, propagate = _SayHandler(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # said here once, not again by Python's last-resort handler
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _close_progress_bars() -> None:
    """An error must not be printed glued to an unfinished progress bar (tqdm's bars end
    their line when closed)."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        with contextlib.suppress(Exception):
            bar.close()


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    _close_progress_bars()
    click.echo(f"error: {' '.join(_as_typed(in_flags(message)).split())}", err=True)
    return code


def _click_message(exc: click.ClickException) -> str:
    """click's error as our one line: what was wrong; where to look."""
    text = " ".join(exc.format_message().split()).rstrip(".")
    text = text[:1].lower() + text[1:]
    ctx = getattr(exc, "ctx", None)
    return f"{text}; see '{ctx.command_path if ctx else 'aft-export'} --help'"


def _interrupted_message(signum: int) -> str:
    name = signal.Signals(signum).name
    return f"stopped by {name}; nothing it was writing was left behind: run the command again to finish"


def _epilog_table(formatter) -> None:
    with formatter.section("Exit status"):
        formatter.write_dl(EXIT_TABLE)


class _Command(click.Command):
    """Every aft-export command: the exit-code table in its ``--help``, and its outputs
    claimed (checked against its inputs, locked) before it starts."""

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        _epilog_table(formatter)

    def parse_args(self, ctx, args):
        _running.append(self)  # from here on, library messages are put in this command's flags
        return super().parse_args(ctx, _rename_args(self, list(args)))

    def invoke(self, ctx):
        with contextlib.ExitStack() as stack:
            for out, directory, inputs in _outputs(self, ctx.params):
                stack.enter_context(_claim(out, inputs, directory))
            _cpu_notes(self, ctx.params)
            return super().invoke(ctx)


# the commands that run files, and the parameters naming them: on a CPU runner, a TensorRT int8 (rest
# fp16) gets a note naming the faster file there (aft_export.artifacts.purpose.cpu_advice)
RUNS_FILES = {"eval": ("artifacts",), "bench": ("artifacts",), "infer": ("artifact",),
              "parity": ("checkpoint", "artifacts"), "serve": ("artifacts",)}  # fmt: skip
# the runner choices (--provider, --backend) that run an ONNX file on the CPU; a command without the option: the CPU
# (OpenVINO computes an int8 file's fp16 rest in fp32, as fast as the portable int8: no note there)
CPU_CHOICES = (None, "cpu", "onnxruntime")


def _cpu_notes(command: click.Command, params: dict) -> None:
    """One note on stderr per file a CPU runner is about to run where a faster file exists or can be
    made for it (the exit status is unchanged: a note, not an error)."""
    if command.name not in RUNS_FILES or any(params.get(k) not in CPU_CHOICES for k in ("provider", "backend")):
        return
    if params.get("reference") is not None:  # bench's deploy table times every file on every runtime: it says so
        return
    from aft_export.artifacts.purpose import cpu_advice

    given = [v for name in RUNS_FILES[command.name] for v in _paths_in(params.get(name)) if v.lower().endswith(".onnx")]
    once: dict[str, str] = {}
    for path in given:
        once.setdefault(os.path.realpath(path), path)  # each file once, as first typed
    for path in once.values():
        advice = cpu_advice(path)
        if advice is not None:
            _say(f"note: {advice.text}", err=True)


def _claim(out, inputs, directory):
    from aft_export.fileio import claim_output

    return claim_output(out, inputs, directory)


def _paths_in(value) -> list[str]:
    """The strings of a parameter value that name something on disk (a ``FILE.py:FACTORY``
    names its file)."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    found = []
    for v in values:
        if not isinstance(v, str) or not v:
            continue
        if os.path.lexists(v):
            found.append(v)
        elif ":" in v and os.path.isfile(v.rpartition(":")[0]):
            found.append(v.rpartition(":")[0])
    return found


def _outputs(command: click.Command, params: dict):
    """(output, is a directory, the paths the command reads) for each output parameter."""
    by_name = {p.name: p for p in command.params}
    inputs = [p for name, value in params.items() if name not in OUTPUT_PARAMS
              and not isinstance(getattr(by_name.get(name), "type", None), InPlace) for p in _paths_in(value)]
    for name in OUTPUT_PARAMS:
        value = params.get(name)
        if isinstance(value, str) and value:
            kind = getattr(by_name.get(name), "type", None)
            if isinstance(kind, click.Path) and kind.file_okay != kind.dir_okay:
                directory = kind.dir_okay  # the parameter says (click has checked what exists)
            else:  # a plain string, or either: what is there says
                directory = os.path.isdir(value)
            yield value, directory, inputs


class _Group(click.Group):
    command_class = _Command

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        _epilog_table(formatter)

    def invoke(self, ctx):
        from aft_export.runners.ort import ort_conflict

        conflict = ort_conflict()
        if conflict:
            click.echo(f"warning: {conflict}", err=True)
        return super().invoke(ctx)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run a command; every outcome becomes an exit status here (see the module doc)."""
        _renamed_used.clear()
        _running.clear()
        with _signals_handled(), _library_log():
            try:
                rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
                code = rv if isinstance(rv, int) else EXIT_OK
            except click.exceptions.NoArgsIsHelpError as exc:  # `aft-export` alone: the help
                click.echo(exc.ctx.get_help())
                code = EXIT_OK
            except click.ClickException as exc:
                code = _fail(_click_message(exc), EXIT_BAD_INPUT)
            except Interrupted as exc:
                code = _fail(_interrupted_message(exc.signum), EXIT_SIGNAL_BASE + exc.signum)
            except (click.exceptions.Abort, KeyboardInterrupt):  # SIGINT outside our handler's reach
                code = _fail(_interrupted_message(signal.SIGINT), EXIT_SIGNAL_BASE + signal.SIGINT)
            except AFTExportError as exc:
                if _signalled:  # an interrupt a library turned into an error (an import it caught)
                    code = _fail(_interrupted_message(_signalled[0]), EXIT_SIGNAL_BASE + _signalled[0])
                else:
                    code = _fail(str(exc), exc.exit_code)
            except Exception:
                if not _signalled:
                    raise  # a bug: its traceback, so that it can be reported
                code = _fail(_interrupted_message(_signalled[0]), EXIT_SIGNAL_BASE + _signalled[0])
        if standalone_mode:
            sys.exit(code)
        return code


def default(owner, name: str):
    """The default of a dataclass field or of a function's keyword parameter."""
    if dataclasses.is_dataclass(owner):
        return next(f.default for f in dataclasses.fields(owner) if f.name == name)
    return inspect.signature(owner).parameters[name].default


def _say(text="", err: bool = False) -> None:
    """Print a line of the library's (a log line, a rendered report) in this command's flags."""
    click.echo(in_flags(str(text)), err=err)


def _echo(lines: list[str]) -> None:
    _say("\n".join(lines))


def _log(as_json: bool):
    return (lambda *a: _say(*a, err=True)) if as_json else _say


def _json(data) -> None:
    click.echo(json.dumps(data, indent=2))


def _floats3(value: str | None, name: str):
    if value is None:
        return None
    try:
        parts = tuple(float(v) for v in value.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3 or not all(math.isfinite(v) for v in parts):
        raise AFTExportError(f"{name} takes three comma-separated numbers (finite), e.g. 0.485,0.456,0.406; "
                             f"got {value!r}")  # fmt: skip
    return parts


class InPlace(click.Path):
    """A file a command continues and rewrites in place by design (``train --resume``):
    the one input an output may be."""


FOREIGN_KEYS = ("preprocess", "input_size", "mean", "std", "classes")  # the parameters foreign_options adds


def foreign_options(command):
    """``--preprocess``, ``--input-size``, ``--mean``, ``--std``, ``--classes``: how to feed an ONNX
    file another tool wrote (ModelOpt, ONNX Runtime's quantiser), which carries none of our metadata."""
    who = "For an ONNX file another tool wrote (no aft-export metadata)"
    options = [
        click.option("--preprocess", type=click.Path(dir_okay=False), help=f"{who}: JSON/YAML file with input_size, "
                     "mean, std, classes (or classes_file) [default: NAME.preprocess.json beside the file]."),
        click.option("--input-size", type=click.IntRange(1, MAX_SIDE), help=f"{who}: square input size."),
        click.option("--mean", help=f"{who}: r,g,b mean of (x / 255)."),
        click.option("--std", help=f"{who}: r,g,b std."),
        click.option("--classes", type=click.Path(dir_okay=False), help=f"{who}: class names, one per line."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def _foreign(kw: dict):
    """The ForeignPreprocessing of the foreign_options in ``kw`` (taken out of it); None when none was given."""
    from aft_export.data.preprocess import ForeignPreprocessing

    given = {k: kw.pop(k) for k in FOREIGN_KEYS if k in kw}
    if all(v is None for v in given.values()):
        return None
    return ForeignPreprocessing(**given)


def _provider_alias(ctx, param, value):
    """``--provider`` (cpu, cuda, tensorrt), the old name of ``--backend``: still read, with a note."""
    if value is not None:
        click.echo(f"warning: {ctx.command.name} --provider {value} is now --backend {PROVIDER_BACKENDS[value]}; the "
                   f"old name goes in aft-export {RENAMED_UNTIL}", err=True)  # fmt: skip
    return value


def backend_options(owner=None, help_text: str = BACKEND_HELP):
    """``--backend`` (the runners' own names, :data:`aft_export.options.BACKENDS`; its default ``owner``'s,
    else DEFAULT_BACKEND) and, hidden, the old ``--provider cpu|cuda|tensorrt`` it replaces (the library
    reads both: ``backend``, ``providers``)."""
    first = default(owner, "backend") if owner is not None else DEFAULT_BACKEND
    options = [click.option("--backend", type=click.Choice(list(BACKENDS)), default=first,
                            show_default=True, help=help_text),
               click.option("--provider", type=PROVIDERS, hidden=True, callback=_provider_alias,
                            help="The old name of --backend (cpu, cuda, tensorrt).")]  # fmt: skip
    return _apply(options)


def _given(ctx: click.Context, name: str) -> bool:
    """Whether the user typed the option (not its default)."""
    return ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)


def _exit(verdict: Verdict) -> int:
    """The exit status of a command whose checks concluded ``verdict`` (the exit-code table)."""
    return EXIT_FOR[verdict.status]


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="aft-export")
def main() -> None:
    """Export Attention Free Transformer classifiers to ONNX and TensorRT, verified.

    A user error is one line on stderr, `error: <what was wrong>; <what to do>`, with exit
    status 2; no command writes over its own inputs (docs/errors.md).
    """


@main.command("models")
def models_cmd() -> None:
    """List the registered model configs."""
    from aft_export.models import describe_models

    _echo(describe_models())


@main.command("info")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.option("--config", "config_name", help="Registry config name, for plain state_dict files.")
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info_cmd(artifact: str, config_name: str | None, as_json: bool, **kw) -> None:
    """Print what an artifact is: a checkpoint's config, parameter count, classes and metrics; an
    ONNX file's export target, opset, precision, com.aft layers and quantisation recipe (another
    tool's: its inputs, outputs, opsets, producer); an engine's manifest."""
    from aft_export.artifacts.info import describe_artifact
    from aft_export.workflow.report import format_info

    d = describe_artifact(artifact, config=config_name, preprocessing=_foreign(kw))
    _json(d) if as_json else _echo(format_info(d))


def _train_options():
    T = TrainConfig
    return [
        click.option("--epochs", type=COUNT, default=default(T, "epochs"), show_default=True),
        click.option("--batch-size", type=BATCH, default=default(T, "batch_size"), show_default=True),
        click.option("--lr", type=Finite(min=0, min_open=True), default=default(T, "lr"), show_default=True),
        click.option("--weight-decay", type=Finite(min=0), default=default(T, "weight_decay"), show_default=True),
        click.option("--warmup-epochs", type=Finite(min=0), default=default(T, "warmup_epochs"), show_default=True),
        click.option("--label-smoothing", type=Finite(0, 1, max_open=True), default=default(T, "label_smoothing"),
                     show_default=True),
        click.option("--val-fraction", type=Finite(0, 1, max_open=True), default=default(T, "val_fraction"),
                     show_default=True, help="Held-out validation share."),
        click.option("--seed", type=SEED, default=default(T, "seed"), show_default=True),
        click.option("--threads", type=THREADS, default=default(T, "threads"), help="Torch CPU threads (0: default)."),
    ]  # fmt: skip


def _apply(options):
    def wrap(fn):
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return wrap


@main.command("train")
@click.option("--model", "model_name", required=True, help="Registry config name (`aft-export models`).")
@click.option("--data", required=True, type=click.Path(), help="ImageFolder directory or tar.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Checkpoint to write.")
@click.option("--test-data", type=click.Path(), help="Labelled test set evaluated at the end.")
@_apply(_train_options())
@click.option("--images", type=COUNT, help="Train on the first N images only (smoke tests).")
@click.option("--resume", type=InPlace(dir_okay=False),
              help="Continue from an epoch checkpoint (it may be --output itself: the run goes on in place).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def train_cmd(model_name, data, output, test_data, no_progress, **kw) -> None:
    """Train a classifier; writes the checkpoint atomically after every epoch."""
    from aft_export.models.training import train

    metrics = train(TrainConfig(model=model_name, data=data, output=output, test_data=test_data,
                                progress=not no_progress, **kw))  # fmt: skip
    click.echo(json.dumps(metrics))
    return EXIT_OK


def _export_options():
    E = ExportOptions
    return [
        click.option("--opset", default=default(E, "opset"), show_default=True, help="ONNX opset (18 or newer)."),
        click.option("--batch-dim", "batch", default=default(E, "batch"), show_default=True,
                     help="The graph's batch dimension: 'dynamic' or a fixed batch size."),
        click.option("--dynamic-hw", is_flag=True, help="AFT-conv only: dynamic height and width."),
        click.option("--op-form", type=click.Choice(OP_FORMS), default=default(E, "op_form"), show_default=True,
                     help="custom: one com.aft node per AFT layer; decomposed: plain ONNX ops."),
        click.option("--target", type=click.Choice(TARGETS), default=default(E, "target"), show_default=True,
                     help="; ".join(f"{t.name}: {t.summary}" for t in EXPORT_TARGETS.values()) + "."),
        click.option("--simplify/--no-simplify", default=default(E, "simplify"), show_default=True, help="Run onnxsim."),
        click.option("--allow-unsimplified", is_flag=True, help="Keep the unsimplified graph if onnxsim fails."),
        click.option("--images", "verify_images", type=NONNEGATIVE, default=default(E, "verify_images"),
                     show_default=True,
                     help="Real images to verify the export on (0: skip; the exit status is then 3, not verified)."),
        click.option("--data", "verify_data", type=click.Path(),
                     help="Images to verify on: ImageFolder directory or tar [default: a zoo checkpoint's test set]."),
    ]  # fmt: skip


@main.command("export")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--config", "config_name", help="Registry config name, for plain state_dict files.")
@_apply(_export_options())
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@user_model_options
@require_aft_option
def export_cmd(checkpoint, output, config_name, as_json, **kw) -> None:
    """Export a checkpoint (or, with --model-def, a model trained elsewhere) to ONNX, simplify
    it and verify it against PyTorch.

    Exit 1: the verification failed, or the offline rules of every targeted TensorRT refuse the
    graph; 3: not verified (--images 0), or the rules of a targeted TensorRT version refuse or warn.
    """
    from aft_export.exporting.exporter import export_checkpoint
    from aft_export.workflow.report import format_export

    byo = {k: kw.pop(k) for k in list(kw) if k in USER_MODEL_KEYS}
    kw["require_aft"] = bool(kw["require_aft"])
    # `export W.pt --model-def ...`: with --model-def the positional file is the weights
    source, _ = model_source_from(checkpoint, byo, config_name, role="weights")
    if source is None:
        raise AFTExportError("give a CHECKPOINT to export, or --model-def and --weights for a model trained elsewhere")
    result = export_checkpoint(source, output, ExportOptions(**kw), log=_log(as_json))
    _json(result.to_dict()) if as_json else _echo(format_export(result.to_dict()))
    return _exit(result.verdict)


def _quantize_options():
    Q = QuantizeOptions
    return [
        click.option("--method", type=click.Choice(METHODS), default=default(Q, "method"), show_default=True,
                     help="int8 range calibration."),
        click.option("--percentile", type=Finite(0, 100, min_open=True), default=default(Q, "percentile"),
                     show_default=True, help="For --method percentile."),
        click.option("--images", "count", type=COUNT,
                     help=f"Calibration images to sample [default: the recipe's, else {CALIB_COUNT}]."),
        click.option("--batch-size", type=BATCH, default=default(Q, "batch_size"), show_default=True,
                     help="Calibration batch size."),
        click.option("--seed", type=SEED,
                     help=f"Seed of the calibration sample [default: the recipe's, else {CALIB_SEED}]."),
        click.option("--per-channel/--per-tensor", default=default(Q, "per_channel"), show_default=True,
                     help="int8 weight scales."),
        click.option("--exclude", multiple=True,
                     help="Node name to keep out of int8 (int8), or in fp32 (fp16) (repeatable)."),
        click.option("--exclude-regex", multiple=True, metavar="REGEX",
                     help="int8: keep the nodes whose names this regular expression matches (from the start, as "
                          "re.match and ModelOpt's --nodes_to_exclude) out of int8 (repeatable)."),
        click.option("--exclude-op-type", "exclude_op_types", multiple=True, metavar="OP",
                     help="int8: keep every node of this op type out of int8 (repeatable)."),
        click.option("--quantize-op-type", "op_types", multiple=True, metavar="OP",
                     help=f"int8: an op type to quantise (repeatable) [default: {', '.join(QUANTIZED_OP_TYPES)}]."),
        click.option("--keep-fp32", multiple=True, metavar="REGEX",
                     help="Keep the nodes whose names this regular expression matches in fp32: out of int8 and "
                          "out of fp16 (repeatable)."),
        click.option("--target", type=click.Choice(TARGETS),
                     help="The export target the file is for; it decides int8's defaults (--rest-precision, "
                          "--weight-bits). Another target than the fp32 file's puts the graph in that target's form "
                          "first (from the default tensorrt export only): --target portable makes the CPU's int8 "
                          "(rest fp32, 7-bit weights) [default: the fp32 file's target]."),
        click.option("--weight-bits", type=click.Choice(["7", "8"]), callback=lambda c, p, v: v and int(v),
                     help="int8: weights in 8 bits, or 7 (no overflow in OpenVINO's int8 kernels on CPUs without "
                          "VNNI) [default: " + ", ".join(f"{t.int8_weight_bits} for {n}" for n, t in
                                                         EXPORT_TARGETS.items()) + "]."),
        click.option("--rest-precision", type=click.Choice(REST_PRECISIONS),
                     help="int8: what the graph computes in outside its int8 layers; fp16 keeps the AFT core and "
                          "LayerNorm in fp32 (opset 19, fp16 scales) [default: "
                          + ", ".join(f"{t.int8_rest} for {n}" for n, t in EXPORT_TARGETS.items()) + "]."),
        click.option("--quantize-aft-core", is_flag=True,
                     help="int8: quantise the AFT core too (inlines the com.aft functions; ONNX Runtime "
                          "does not fuse those MatMuls, so slower on CPU; not advised)."),
        click.option("--sensitivity", is_flag=True, help="int8: rank nodes, keep the worst in float until --budget."),
        click.option("--budget", type=Finite(0, 100), default=default(Q, "budget"), show_default=True,
                     help="Sensitivity: allowed %% top-1 disagreement with fp32 on the calibration images."),
        click.option("--allow-fewer", is_flag=True, help="Use fewer calibration images if the source has fewer."),
    ]  # fmt: skip


@main.command("quantize")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--precision", type=click.Choice(["int8", "fp16"]), required=True,
              help="int8: explicit Q/DQ, the rest in --rest-precision; fp16: mixed precision (AFT core and "
                   "LayerNorm in fp32).")
@click.option("--calib", help="Calibration images: folder, tar, .npy/.npz, cifar10:train, or a recipe "
              "such as calibration/cifar10.json (needed for int8).")
@_apply(_quantize_options())
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Calibration cache [default: ~/.cache/aft-export/calibration].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the calibration cache.")
@click.option("--input-size", type=click.IntRange(1, MAX_SIDE), help="For models without aft-export metadata: square "
              "input size.")
@click.option("--mean", help="For models without metadata: r,g,b mean of (x / 255).")
@click.option("--std", help="For models without metadata: r,g,b std.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def quantize_cmd(model, output, calib, exclude, cache_dir, no_cache, mean, std, as_json, **kw) -> None:
    """Write an int8 (Q/DQ) or fp16 graph from an fp32 ONNX export, calibrated on real images.

    Exit 1: the offline rules of every targeted TensorRT refuse the graph; 3: fp16 values took
    NaN/Inf on the calibration images, or the rules of a targeted TensorRT version refuse or warn.
    """
    from aft_export.quantization.stage import quantize_model
    from aft_export.workflow.report import format_quantize

    opts = QuantizeOptions(exclude=tuple(exclude), cache_dir="" if no_cache else cache_dir,
                           mean=_floats3(mean, "--mean"), std=_floats3(std, "--std"), **kw)  # fmt: skip
    result = quantize_model(model, output, calib, opts, log=_log(as_json))
    _json(result.to_dict()) if as_json else _echo(format_quantize(result.to_dict()))
    return _exit(result.verdict)


@main.command("parity")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("artifacts", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Images: ImageFolder directory or tar.")
@click.option("--images", type=COUNT, default=ParityOptions.images, show_default=True, help="Number of real images.")
@click.option("--tolerance", "overrides", multiple=True, metavar="PREC.FIELD=VALUE",
              help="Override a limit, e.g. fp16.max_abs=0.1 (repeatable).")
@backend_options(ParityOptions)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@user_model_options
def parity_cmd(checkpoint, artifacts, data, images, overrides, backend, provider, as_json, **byo) -> None:
    """Compare artifacts with the fp32 PyTorch checkpoint (or, with --model-def and --weights,
    the user's own module: then every argument is an artifact). An ONNX file another tool wrote
    (ModelOpt, ONNX Runtime's quantiser: no aft-export metadata) is fed as the reference is.

    Exit 0: all passed; 1: one failed; 3: none failed but one was skipped (its runtime
    is missing here); 2: bad input (a reference whose outputs are not finite, too).
    """
    from aft_export.verify.parity import run_parity
    from aft_export.workflow.report import format_parity

    # with --model-def the reference is the user's own module and every argument is an artifact
    reference, first = model_source_from(checkpoint, byo, role="artifact")
    artifacts = (first, *artifacts) if first is not None else artifacts
    report = run_parity(reference, list(artifacts), data, images=images, overrides=list(overrides), backend=backend,
                        providers=provider)  # fmt: skip
    _json(report) if as_json else _echo(format_parity(report))
    return _exit(Verdict.from_dict(report["verdict"]))


@main.command("bench")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--batch-size", "batches", multiple=True, type=BATCH, default=BenchOptions.batches,
              show_default=True, help="Batch size to time (repeatable).")
@click.option("--warmup", type=NONNEGATIVE, default=BenchOptions.warmup, show_default=True)
@click.option("--iters", type=COUNT, default=BenchOptions.iters, show_default=True)
@click.option("--threads", type=THREADS, default=0, help="CPU threads (0: the backend's default).")
@backend_options(BenchOptions, BACKEND_HELP + " With --reference: every runtime here unless --backend is given.")
@click.option("--reference", type=click.Path(dir_okay=False),
              help="The checkpoint the files were made from: the deploy table, every file on every runtime here, "
                   "proven against it (parity, top-1) and timed, the fastest that passes marked per device.")
@click.option("--data", help="With --reference: labelled images for parity and top-1 [default: the checkpoint's "
                             "test data, else cifar10:test].")
@click.option("--images", type=COUNT, default=BenchOptions.images, show_default=True,
              help="With --reference: labelled images for top-1 (parity: the first 64).")
@click.option("--profile", is_flag=True, help="Also ONNX Runtime's time per op type for each ONNX file and batch "
              "(its profiler, in a session of its own; fused ops under their own names).")
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def bench_cmd(ctx, artifacts, batches, warmup, iters, threads, backend, provider, reference, data, images, profile,
              as_json, **kw) -> None:  # fmt: skip
    """Latency p50/p90/p99 and throughput of checkpoints, ONNX files and engines.

    With --reference CHECKPOINT: what to deploy where. Every file on every runtime here (PyTorch,
    ONNX Runtime, OpenVINO; TensorRT and the CUDA providers where a GPU is), each row proven
    against the checkpoint (parity within its precision's limits, top-1) and timed in interleaved
    rounds at batch 1 and the largest batch; the fastest row that passes is marked per device.

    Exit 0: every artifact timed at every batch size (with --reference: no row failed parity);
    1: with --reference, a row failed parity; 3: one was skipped (its runtime or a GPU is missing
    here, or a fixed-batch graph at another batch size; with --reference, a runtime could not
    read a file); 2: bad input.
    """
    from aft_export.workflow.report import deploy_lines, format_bench

    if reference is not None:
        from aft_export.verify.deploy import bench_against

        if profile or _foreign(kw) is not None:
            raise AFTExportError("`reference` compares our files with their checkpoint: give neither `profile` nor "
                                 "another tool's preprocessing with it (bench those files without `reference`)")
        from aft_export.options import backend_of

        explicit = _given(ctx, "backend") or provider is not None
        table = bench_against(reference, list(artifacts), data, images=images, batches=tuple(batches),
                              warmup=warmup, iters=iters, threads=threads,
                              backend=backend_of(backend, provider) if explicit else None,
                              log=lambda m: _say(m, err=True))  # fmt: skip
        _json(table.to_dict()) if as_json else _echo(deploy_lines(table.to_dict(), markdown=False))
        return _exit(table.verdict)
    given = [name for name in ("data", "images") if _given(ctx, name)]
    if given:
        raise AFTExportError(f"`{given[0]}` gives the labelled images of the deploy table: give `reference` (the "
                             f"checkpoint the files were made from) with it")  # fmt: skip
    from aft_export.verify.bench import bench

    report = bench(list(artifacts), list(batches), warmup=warmup, iters=iters, threads=threads, backend=backend,
                   providers=provider, profile=profile, preprocessing=_foreign(kw))  # fmt: skip
    _json(report) if as_json else _echo(format_bench(report))
    return _exit(Verdict.from_dict(report["verdict"]))


@main.command("pipeline")
@click.argument("checkpoint", required=False, type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(file_okay=False),
              help="Run directory [default: runs/<model>-<UTC time>].")
@click.option("--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@click.option("--data", help=f"Labelled images for parity and eval [default: {PipelineOptions.data}].")
@click.option("--precision", "precisions", multiple=True, type=click.Choice(sorted(PRECISIONS)),
              help=f"Reduced precisions to build [default: {' and '.join(PipelineOptions.precisions)}].")
@click.option("--op-form", type=click.Choice(OP_FORMS), help=f"[default: {PipelineOptions.op_form}]")
@click.option("--target", "targets", multiple=True, type=click.Choice(TARGETS),
              help="Export target(s), repeatable: "
                   + ", ".join(f"{t.name} ({t.stem}*.onnx)" for t in EXPORT_TARGETS.values())
                   + f" [default: {', '.join(PipelineOptions.targets)}]; see export --help.")
@click.option("--calib-images", type=COUNT, help="Calibration images to sample [default: the recipe's].")
@click.option("--parity-images", type=COUNT,
              help=f"Real images parity compares [default: {PipelineOptions.parity_images}].")
@click.option("--eval-images", type=COUNT,
              help="Evaluate a fixed subset of N images [default: all].")
@click.option("--bench-batch-size", "bench_batches", multiple=True, type=BATCH,
              help=f"Bench batch sizes [default: {' and '.join(map(str, PipelineOptions.bench_batches))}].")
@click.option("--bench-iters", type=COUNT,
              help=f"Bench runs per batch size [default: {PipelineOptions.bench_iters}].")
@click.option("--threads", type=THREADS, help="CPU threads (0: the backend's default) [default: 0].")
@click.option("--tolerance", "tolerances", multiple=True, metavar="PREC.FIELD=VALUE", help="Parity limit override.")
@click.option("--triton-repo", is_flag=True, default=None,
              help="Also write RUN/triton: a Triton model repository of the artifacts (aft-export triton-repo).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@user_model_options
@require_aft_option
def pipeline_cmd(checkpoint, as_json, **kw) -> None:
    """Export, quantise, check, build engines (TensorRT with a GPU, else TensorRT-RTX on the CPU),
    check parity, evaluate, and say what to deploy where (every file on every runtime here, proven
    and timed, the fastest that passes marked) in one run directory. With no CHECKPOINT: the
    bundled zoo model.

    Exit 0: every artifact passed parity; 1: one failed (the run directory still has
    the full report); 3: none failed but one was not verified (an engine not run here for want
    of a GPU, an artifact skipped by parity, fp16 values that took NaN/Inf, or the offline TensorRT
    rules refusing or warning for a targeted version); 2: bad input.
    """
    from aft_export.workflow.pipeline import run_pipeline
    from aft_export.workflow.report import format_pipeline_result

    source, extra = model_source_from(checkpoint, {k: kw.pop(k) for k in list(kw) if k in USER_MODEL_KEYS},
                                      role="artifact")  # fmt: skip
    if extra is not None:
        raise AFTExportError(f"give either CHECKPOINT ({checkpoint}) or --model-def, not both")
    given = {k: tuple(dict.fromkeys(v)) if isinstance(v, tuple) else v for k, v in kw.items() if v not in (None, ())}
    opts = PipelineOptions(**given)
    result = run_pipeline(source, opts, log=_log(as_json))  # None: the bundled zoo model
    if as_json:
        _json({"run_dir": result.run_dir, "passed": result.passed, "unverified": result.unverified,
               "verdict": result.verdict.to_dict(), "summary": result.summary})
    else:
        _echo(format_pipeline_result(result, opts.bench_batches))
    return _exit(result.verdict)


@main.command("doctor")
@click.argument("model", required=False, default="aft_conv_cifar")
@click.option("--output", "-o", type=click.Path(file_okay=False),
              help="Run directory [default: runs/doctor-<model>-<UTC time>].")
@click.option("--data", default=default(DoctorOptions, "data"), show_default=True,
              help="Labelled images for the export's verification, parity and eval.")
@click.option("--calib", help="Calibration images or recipe [default: calibration/cifar10.json].")
@click.option("--calib-images", type=COUNT, help="Calibration images to sample [default: the recipe's].")
@click.option("--parity-images", type=COUNT, default=default(DoctorOptions, "parity_images"), show_default=True)
@click.option("--eval-images", type=COUNT, help="Evaluate a fixed subset of N images [default: all].")
@click.option("--bench-iters", type=COUNT, default=default(DoctorOptions, "bench_iters"), show_default=True,
              help="Bench runs per batch size.")
@click.option("--timeout", type=Finite(min=0, min_open=True), default=default(DoctorOptions, "timeout"),
              show_default=True, help="Seconds one check may take.")
@click.option("--json", "as_json", is_flag=True,
              help="Print doctor.json instead of the summary (the check lines go to stderr).")
def doctor_cmd(model, as_json, **kw) -> None:
    """Every check for a GPU or Jetson machine, one line each: export, quantise (fp16, int8),
    TensorRT engines, NVIDIA's trtexec/polygraphy on each file, parity, eval and bench on the
    CPU and on CUDA; writes RUN/doctor.json (environment, each check's command, exit status,
    time and output tail) to attach to a bug report. MODEL: a zoo name or a checkpoint.

    Exit 0: every check passed; 1: one failed (the others still ran); 3: none failed but one
    was skipped (no GPU, TensorRT or trtexec here: not everything was verified); 2: bad input.
    """
    from aft_export.workflow.doctor import run_doctor, summary

    result = run_doctor(model, DoctorOptions(**kw), log=_log(as_json))
    _json(result.to_dict()) if as_json else _echo(summary(result))
    return _exit(result.verdict)


@main.command("check")
@click.argument("models", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--trt", "trt_versions", multiple=True, metavar="VERSION",
              help="TensorRT version to check (repeatable) [default: every supported one the file's export "
                   "target is for: 8.5, 8.6, 10.3, 10.13, 11.4]; rtx-1.7: TensorRT-RTX's column (10.13's rules "
                   "plus its documented differences).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@click.option("--rules", "list_rules", is_flag=True,
              help="List every rule the check applies, with the versions it exists in and its source.")
@click.option("--library", type=click.Choice(LIBRARIES), default="auto", show_default=True,
              help="Where TensorRT or TensorRT-RTX is installed, its own ONNX parser reads each file too: which one.")
@click.option("--offline-only", is_flag=True, help="Only the offline rules, even where a TensorRT library is installed.")
@click.option("--build", "also_build", is_flag=True,
              help="Also build each file with the installed library (in memory; nothing is written).")
@click.option("--strict", is_flag=True,
              help="Exit 1 when the offline rules for the installed parser disagree with the parser itself.")
def check_cmd(models, trt_versions, as_json, list_rules, library, offline_only, also_build, strict) -> None:
    """Check ONNX files offline against the rules of TensorRT's parser and builder, one column
    per version (no TensorRT runs); where TensorRT or TensorRT-RTX is installed, also with its own
    parser (and, with --build, its builder), reported beside the rules' column for that parser.

    Exit 0: the rules of every checked version pass every file (and the parser, where installed,
    parses it); 1: a version's rules (or the parser, or the builder) refuse one, or, with --strict,
    the rules and the parser disagree; 3: no refusal but warnings remain (or a version the check
    has no rules for); 2: bad input.
    """
    from aft_export.trtcheck import check_model, format_report, format_rules, rules_table

    if list_rules:
        rows = rules_table(list(trt_versions) or None)
        _json(rows) if as_json else _echo(format_rules(rows))
        return EXIT_OK
    if not models:
        raise click.UsageError("give one or more ONNX files to check (or --rules to list the rules)")
    from aft_export.tensorrt.build import check_verdict
    from aft_export.workflow.report import format_real_check

    reports = [check_model(m, list(trt_versions) or None) for m in models]
    real = _real_checks(models, reports, library, also_build, offline_only)
    verdicts = [check_verdict(r, x, strict) for r, x in zip(reports, real)]
    if as_json:  # with the installed library: its result, and the verdict and exit code of both
        data = [{**r.to_dict(), **({"real": x, "verdict": v.to_dict(), "exit_code": EXIT_FOR[v.status]} if x else {})}
                for r, x, v in zip(reports, real, verdicts)]  # fmt: skip
        _json(data if len(data) > 1 else data[0])
    else:
        _say("\n\n".join("\n".join(format_report(r) + format_real_check(x)) for r, x in zip(reports, real)))
    return _exit(Verdict.combine(*verdicts))


def _real_checks(models, reports, library: str, also_build: bool, offline_only: bool) -> list:
    """Each file through the installed library's parser (None per file where none is installed,
    or with --offline-only; --library naming a missing one is an error)."""
    from aft_export.errors import RuntimeMissing
    from aft_export.tensorrt.library import import_library

    if offline_only:
        return [None] * len(models)
    try:
        _, name, version = import_library(library)
    except RuntimeMissing:
        if library != "auto":
            raise
        return [None] * len(models)
    from aft_export.tensorrt.build import offline_column, real_check
    from aft_export.trtcheck import check_model

    column = offline_column(name, version)
    out = []
    for model, report in zip(models, reports):
        status = report.status.get(column)
        if status in (None, "not targeted"):
            status = check_model(model, [column]).status[column]
        out.append(real_check(model, status, column, name, also_build))
    return out


def _build_options():
    B = BuildOptions
    return [
        click.option("--batch-profile", "batch", default=default(B, "batch"), show_default=True,
                     help="The engine's batch sizes MIN,OPT,MAX (or one number)."),
        click.option("--hw-profile", "hw", help="AFT-conv exported with --dynamic-hw: height/width MIN,OPT,MAX."),
        click.option("--workspace-mb", type=COUNT, default=default(B, "workspace_mb"), show_default=True,
                     help="Builder workspace limit."),
        click.option("--timing-cache", type=click.Path(dir_okay=False),
                     help="Timing cache file: loaded if present, saved after."),
        click.option("--dla-core", type=NONNEGATIVE, help="Jetson: build for this DLA core, with GPU fallback."),
        click.option("--version-compatible", is_flag=True,
                     help="Engine loadable by later TensorRT of the same major, and 10.x engines by 11.x (8.6 by "
                          "10.x); needs TensorRT 8.6+."),
        click.option("--tf32", is_flag=True, help="Allow TF32 for fp32 math (Ampere+: faster, ~1e-3 relative error)."),
        click.option("--hardware-compatibility", type=click.Choice(sorted(HW_LEVELS)),
                     default=default(B, "hardware_compatibility"), show_default=True,
                     help="Engine loadable on other GPUs of that level."),
        click.option("--library", type=click.Choice(LIBRARIES), default=default(B, "library"), show_default=True,
                     help="tensorrt: standard TensorRT (builds on the GPU it is for; Hopper, Jetson); tensorrt-rtx: "
                          "TensorRT for RTX (builds ahead of time on any CPU, runs on RTX GPUs); auto: TensorRT "
                          "where installed, else TensorRT-RTX."),
        click.option("--compute-capability", "compute_capabilities", multiple=True, metavar="X.Y",
                     help="TensorRT-RTX: target GPU (repeatable; 7.5, 8.0, 8.6, 8.9, 12.0, 12.1) [default: the "
                          "library's, 8.6 and later]."),
    ]  # fmt: skip


@main.command("build")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Engine file to write [default: MODEL.engine, or MODEL.rtx.engine for TensorRT-RTX].")
@_apply(_build_options())
@foreign_options
def build_cmd(model, output, compute_capabilities, **kw) -> None:
    """Build a TensorRT or TensorRT-RTX engine (precision as the ONNX graph says) and its manifest.

    TensorRT-RTX builds on a machine with no GPU; such an engine is built, not run. An ONNX file
    another tool wrote needs its preprocessing (the flags below, or NAME.preprocess.json beside
    it): the manifest records it, so the engine is fed as the file was.
    """
    from aft_export.tensorrt.build import build_engine

    pre = _foreign(kw)
    build_engine(model, output, BuildOptions(compute_capabilities=tuple(compute_capabilities), **kw), log=_say,
                 preprocessing=pre)  # fmt: skip


@main.command("infer")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.argument("images", nargs=-1, required=True, type=click.Path())
@click.option("--top-k", type=COUNT, default=5, show_default=True)
@backend_options()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def infer_cmd(artifact, images, top_k, backend, provider, as_json) -> None:
    """Top-k classes from a checkpoint, ONNX file or engine for images or folders of images."""
    from aft_export.serving.predict import classify
    from aft_export.workflow.report import format_predictions

    result = classify(artifact, images, top_k=top_k, backend=backend, providers=provider)
    _json(result) if as_json else _echo(format_predictions(result))


@main.command("eval")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--data", required=True, type=click.Path(), help="Labelled ImageFolder directory or tar.")
@click.option("--batch-size", type=BATCH, default=EvalOptions.batch_size, show_default=True)
@click.option("--images", "limit", type=COUNT, help="Evaluate a fixed subset of N images [default: all].")
@backend_options(EvalOptions)
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def eval_cmd(artifacts, data, batch_size, limit, backend, provider, as_json, **kw) -> None:
    """Top-1/top-5 of each checkpoint, ONNX file or engine on a labelled set, side by side, with
    each one's top-1 agreement with the first.

    Exit 0: every artifact evaluated; 3: one was skipped (its runtime or a GPU is missing
    here); 2: bad input (an artifact whose outputs are not finite, too).
    """
    from aft_export.verify.evaluate import eval_verdict, evaluate_artifacts
    from aft_export.workflow.report import format_eval

    rows = evaluate_artifacts(list(artifacts), data, batch_size=batch_size, limit=limit, backend=backend,
                              providers=provider, preprocessing=_foreign(kw))  # fmt: skip
    _json(rows) if as_json else _echo(format_eval(rows))
    return _exit(eval_verdict(rows))


def _triton_options(owner):
    return [
        click.option("--max-batch", type=BATCH, help="Largest batch [default: 32 for a dynamic-batch ONNX file, an "
                     "engine's profile maximum; a fixed-batch export is served without batching]."),
        click.option("--instances", type=COUNT, default=default(owner, "instances"), show_default=True,
                     help="Model instances (one runner each)."),
        click.option("--top-k", type=COUNT, default=default(owner, "top_k"), show_default=True,
                     help="Classes in topk_index and topk_label."),
        click.option("--queue-delay-us", type=NONNEGATIVE, default=default(owner, "queue_delay_us"), show_default=True,
                     help="How long the dynamic batcher holds a request for others to join it."),
    ]  # fmt: skip


@main.command("serve")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--host", default=default(ServeOptions, "host"), show_default=True,
              help="Address HTTP, gRPC and metrics listen on (0.0.0.0: every interface).")
@click.option("--http-port", type=PORT, default=default(ServeOptions, "http_port"), show_default=True)
@click.option("--grpc-port", type=PORT, default=default(ServeOptions, "grpc_port"), show_default=True)
@click.option("--metrics-port", type=PORT, default=default(ServeOptions, "metrics_port"), show_default=True)
@_apply(_triton_options(ServeOptions))
@backend_options(ServeOptions, help_text=f"Where ONNX files run, inside Triton's Python backend stub: {BACKEND_LIST}; "
                                         f"engines run in TensorRT.")
@click.option("--threads", type=THREADS, default=default(ServeOptions, "threads"), show_default=True,
              help="Threads per model instance, ONNX Runtime's or OpenVINO's (0: the CPUs this process may use, "
                   "shared out among the instances of every model; printed at start).")
@click.option("--drain-seconds", type=click.IntRange(0, 3600), default=default(ServeOptions, "drain_seconds"),
              show_default=True, help="On SIGINT/SIGTERM, how long Triton waits for the requests in flight.")
@foreign_options
def serve_cmd(artifacts, **kw) -> int:
    """Serve ONNX files or engines with NVIDIA Triton (the tritonserver of the serve extra;
    the models run in its Python backend): per artifact NAME, model NAME takes normalised
    FP32 [3,H,W] images and NAME_image encoded ones (BYTES); both return logits, topk_index,
    topk_label. Prints one line once every model is ready. SIGINT/SIGTERM stop it: the
    requests in flight are answered, every process it started ends, and the exit status
    is 130/143."""
    from aft_export.serving.server import serve

    pre = _foreign(kw)
    served = serve(list(artifacts), ServeOptions(preprocessing=pre, **kw), log=_say)
    return EXIT_SIGNAL_BASE + served.signal if served.signal else EXIT_OK


@main.command("triton-repo")
@click.argument("artifacts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False),
              help="Repository directory to create (must not exist, or be empty).")
@_apply(_triton_options(TritonRepoOptions))
@click.option("--device", type=click.Choice(TRITON_DEVICES), default=default(TritonRepoOptions, "device"),
              show_default=True, help="Where ONNX models run (instance_group kind; auto: Triton's KIND_AUTO, the "
                                      "GPUs where there are any, else the CPU); engines always on the GPU.")
@click.option("--backend", type=click.Choice(TRITON_BACKENDS), default=default(TritonRepoOptions, "backend"),
              show_default=True, help="Triton's backend for ONNX files: onnxruntime (onnxruntime_onnx, CPU or GPU) or "
                                      "openvino (CPU; the file with its functions inlined, a complete config).")
@click.option("--threads", type=THREADS, default=default(TritonRepoOptions, "threads"), show_default=True,
              help="Threads per instance: ONNX Runtime's intra_op_thread_count, OpenVINO's INFERENCE_NUM_THREADS "
                   "(0: the backend's default, the container's cores; with --instances N give cores/N).")
def triton_repo_cmd(artifacts, output, **kw) -> None:
    """Write a Triton model repository (config.pbtxt per model, onnxruntime_onnx, openvino or
    tensorrt_plan, dynamic batching, warm-up requests, a preprocessing model and ensembles
    for encoded images, a Dockerfile, README.md and client.py) for a Triton container."""
    from aft_export.serving.repository import write_repository

    result = write_repository(list(artifacts), output, TritonRepoOptions(**kw))
    _echo([f"wrote {result.path}: " + ", ".join(result.models), f"see {result.path}/README.md to run it"])


if __name__ == "__main__":  # pragma: no cover
    main()
