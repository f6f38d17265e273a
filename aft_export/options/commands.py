"""Every command's parameters, each declared once (:mod:`aft_export.options.params`): what it
takes, whether it repeats, its default and its help, and how the command line spells it.

Both faces read the same declaration. The Python API checks each keyword it is given against it
at its door (:func:`declared`, :func:`door`), before any work; the command line's click options
are derived from it (:mod:`aft_export.cli.params`), so a value one face refuses the other refuses
too. The same word may mean different things in two commands (``images`` is a count >= 0 in
``export``, >= 1 in ``quantize``, image paths in ``infer``): a declaration belongs to its
command (:data:`DECLARED`). Defaults are the options dataclasses', read from there. The help texts
are the command line's, and name its flags: this table is where they are spelled.
"""

from __future__ import annotations

import difflib
import functools
import inspect

from aft_export.environment import say_ort_conflict
from aft_export.errors import RUNNING, Named, said
from aft_export.options import (BACKEND, BACKEND_HELP, DATA, INPUT_FORMATS, LIBRARIES, SIDE, THREADS, TOLERANCE,
                                BenchOptions, BuildOptions, DeepStreamOptions, DoctorOptions, EvalOptions,
                                ExportOptions, ParityOptions, PipelineOptions, QuantizeOptions, ServeOptions,
                                TrainConfig, TritonRepoOptions)  # fmt: skip
from aft_export.options.deepstream import DeepStreamCheckOptions
from aft_export.options.params import (REQUIRED, Choice, Classes, Command, Flag, KeywordError, Model, Param, Path, Text,
                                       Triple, Whole, params_of)  # fmt: skip
from aft_export.readers import shown
from aft_export.version import RENAMED_FIELDS


# ---------------------------------------------------------------- the declarations

COUNT = Whole(1)
BATCH = Whole(1)  # the upper bound is the memory a batch needs, estimated by each command
FOREIGN = "For an ONNX file another tool wrote (no aft-export metadata)"


def foreign() -> tuple[Param, ...]:
    """How to feed an ONNX file another tool wrote (ModelOpt, ONNX Runtime's quantiser), which carries none of
    our metadata."""
    return (
        Param("preprocess", Path(), help=f"{FOREIGN}: JSON/YAML file with input_size, mean, std, classes (or "
              "classes_file) [default: NAME.preprocess.json beside the file]."),
        Param("input_size", SIDE, help=f"{FOREIGN}: square input size."),
        Param("mean", Triple(), help=f"{FOREIGN}: r,g,b mean of (x / 255)."),
        Param("std", Triple(positive=True), help=f"{FOREIGN}: r,g,b std."),
        Param("classes", Classes(), help=f"{FOREIGN}: class names, one per line."),
        Param("input_format", Choice(INPUT_FORMATS), help=f"{FOREIGN}: what it takes (its graph says it too, and "
              "the two must agree): normalized, or raw pixels uint8-nhwc / float-nchw [default: what its graph says]."),
    )  # fmt: skip


def user_model() -> tuple[Param, ...]:
    """A model trained elsewhere: its code, weights and preprocessing (export, parity, pipeline)."""
    return (
        Param("model_def", Text(), help="A model trained elsewhere: MODULE:FACTORY or path/to/file.py:FACTORY, "
              "called with no arguments, returning the nn.Module."),
        Param("weights", Path(), help="With --model-def: its weights (.pt/.pth read weights-only, or .safetensors)."),
        Param("weights_key", Text(), help="With --model-def: the entry of the weights file that holds the "
              "state_dict (e.g. model, model_ema) [default: found, and said]."),
        Param("preprocess", Path(), help="With --model-def: JSON/YAML file with input_size, mean, std, classes_file "
              "(or a whole model spec with model_def and weights)."),
        Param("input_size", SIDE, help="With --model-def: square input size."),
        Param("mean", Triple(), help="With --model-def: r,g,b mean of (x / 255)."),
        Param("std", Triple(positive=True), help="With --model-def: r,g,b std."),
        Param("classes", Classes(), help="With --model-def: class names, one per line."),
    )  # fmt: skip


E, Q, B, T, P = ExportOptions, QuantizeOptions, BuildOptions, TrainConfig, PipelineOptions

EXPORT = Command("export", (
    Param("checkpoint", Model(module=True), positional=True),
    Param("output", Path(), REQUIRED, short="-o", help="ONNX file to write."),
    Param("config", Text(), help="Registry config name, for plain state_dict files."),
    *params_of(E, "opset", "batch_dim", "dynamic_hw", "op_form", "target", "input_format", "output_format",
               "simplify", "allow_unsimplified", "images", "data"),
    *user_model(),
    *params_of(E, "require_aft"),
), options=E)  # fmt: skip

QUANTIZE = Command("quantize", (
    Param("model", Path(), REQUIRED, positional=True),
    Param("output", Path(), REQUIRED, short="-o", help="ONNX file to write."),
    *params_of(Q, "precision"),
    Param("calib", DATA, help="Calibration images: folder, tar, .npy/.npz, cifar10:train, or a recipe such as "
                              "calibration/cifar10.json (needed for int8)."),
    *params_of(Q, "method", "percentile", "images", "batch_size", "seed", "per_channel", "exclude", "exclude_regex",
               "exclude_op_types", "quantize_op_types", "keep_fp32", "target", "weight_bits", "rest_precision",
               "quantize_aft_core", "sensitivity", "budget", "allow_fewer"),
    *params_of(Q, "cache_dir", kind=Path("directory")),  # a directory: its "" (no cache) is no_cache's
    Param("no_cache", Flag(), False, help="Neither read nor write the calibration cache."),
    *params_of(Q, "input_size", "mean", "std"),
), options=Q)  # fmt: skip

CHECK = Command("check", (
    Param("models", Path(), (), repeat=True, positional=True),
    Param("trt_versions", Text(), (), repeat=True, flag="--trt", metavar="VERSION",
          help="TensorRT version to check (repeatable) [default: every supported one the file's export target is "
               "for: 8.5, 8.6, 10.3, 10.13, 11.4]; rtx-1.7: TensorRT-RTX's column (10.13's rules plus its documented "
               "differences)."),
    Param("rules", Flag(), False, help="List every rule the check applies, with the versions it exists in and its "
                                       "source."),
    Param("library", Choice(LIBRARIES), "auto",
          help="Where TensorRT or TensorRT-RTX is installed, its own ONNX parser reads each file too: which one."),
    Param("offline_only", Flag(), False, help="Only the offline rules, even where a TensorRT library is installed."),
    Param("build", Flag(), False, help="Also build each file with the installed library (in memory; nothing is "
                                       "written)."),
    Param("strict", Flag(), False, help="Exit 1 when the offline rules for the installed parser disagree with the "
                                        "parser itself."),
))  # fmt: skip

BUILD = Command("build", (
    Param("model", Path(), REQUIRED, positional=True),
    Param("output", Path(), short="-o",
          help="Engine file to write [default: MODEL.engine, or MODEL.rtx.engine for TensorRT-RTX]."),
    *params_of(B),
    *foreign(),
), options=B)  # fmt: skip

PARITY = Command("parity", (
    Param("checkpoint", Model(module=True), REQUIRED, positional=True),
    Param("artifacts", Path(), (), repeat=True, positional=True),
    Param("data", DATA, help="Images: ImageFolder directory or tar [default: the checkpoint's test data, else "
                             "cifar10:test]."),
    *params_of(ParityOptions, "images"),
    Param("tolerances", Text(), (), repeat=True, flag="--tolerance", metavar=TOLERANCE,
          help="Override a limit, e.g. fp16.max_abs=0.1 (repeatable)."),
    *params_of(ParityOptions, "backend"),
    *user_model(),
), options=ParityOptions)  # fmt: skip

EVAL = Command("eval", (
    Param("artifacts", Path(), REQUIRED, repeat=True, positional=True),
    Param("data", DATA, REQUIRED, help="Labelled ImageFolder directory or tar."),
    *params_of(EvalOptions, "batch_size"),
    Param("images", COUNT, help="Evaluate a fixed subset of N images [default: all]."),
    *params_of(EvalOptions, "backend"),
    *foreign(),
), function="evaluate", options=EvalOptions)  # fmt: skip

BENCH = Command("bench", (
    Param("artifacts", Path(), REQUIRED, repeat=True, positional=True),
    *params_of(BenchOptions, "batch_sizes", "warmup", "iters"),
    Param("threads", THREADS, 0, show_default=False, help="CPU threads (0: the backend's default)."),
    # None: the deploy table's every runtime with a reference, else the default backend
    *params_of(BenchOptions, "backend", default=None, show_default=False,
               help=BACKEND_HELP + f" [default: {BenchOptions.backend}; with --reference: every runtime here]."),
    *params_of(BenchOptions, "reference", "data"),
    *params_of(BenchOptions, "images", default=None, show_default=False,  # None: BenchOptions.images
               help=f"With --reference: labelled images for top-1 (parity: the first 64) [default: "
                    f"{BenchOptions.images}]."),
    Param("profile", Flag(), False, help="Also the runtime's time per op type for each ONNX file and batch, in a "
                                         "session of its own: ONNX Runtime's profiler (fused ops under their own "
                                         "names), or OpenVINO's node counters with the kernel each op ran."),
    *foreign(),
), options=BenchOptions)  # fmt: skip

INFER = Command("infer", (
    Param("artifact", Model(), REQUIRED, positional=True),
    Param("images", Path("either"), REQUIRED, repeat=True, positional=True),
    Param("top_k", COUNT, 5),
    Param("backend", BACKEND, ParityOptions.backend, help=BACKEND_HELP),
))  # fmt: skip

INFO = Command("info", (
    Param("artifact", Model(), REQUIRED, positional=True),
    Param("config", Text(), help="Registry config name, for plain state_dict files."),
    *foreign(),
))  # fmt: skip

TRAIN = Command("train", params_of(T, "model", "data", "output", "test_data", "epochs", "batch_size", "lr",
                                   "weight_decay", "warmup_epochs", "label_smoothing", "val_fraction", "seed",
                                   "threads", "images", "resume", "progress"), options=T)  # fmt: skip


S = ServeOptions
SERVE = Command("serve", (
    Param("artifacts", Path(), REQUIRED, repeat=True, positional=True),
    *params_of(S, "host", "http_port", "grpc_port", "metrics_port", "max_batch", "instances", "top_k",
               "queue_delay_us", "backend", "threads", "drain_seconds"),
    *foreign(),
), options=S)  # fmt: skip

R = TritonRepoOptions
TRITON_REPO = Command("triton-repo", (
    Param("artifacts", Path(), REQUIRED, repeat=True, positional=True),
    Param("output", Path("directory"), REQUIRED, short="-o",
          help="Repository directory to create (must not exist, or be empty)."),
    *params_of(R, "max_batch", "instances", "top_k", "queue_delay_us", "device", "backend", "threads"),
), options=R)  # fmt: skip

D = DeepStreamOptions
DEEPSTREAM = Command("deepstream", (
    Param("artifacts", Path("either"), REQUIRED, repeat=True, positional=True),
    Param("output", Path("directory"), REQUIRED, short="-o",
          help="Directory to write (must not exist, or be empty): a config_infer_<file>.txt per file and labels.txt."),
    *params_of(D),
), options=D)  # fmt: skip

DEEPSTREAM_CHECK = Command("deepstream-check", (
    Param("configs", Path("either"), REQUIRED, repeat=True, positional=True),
    *params_of(DeepStreamCheckOptions),
), function="deepstream_check", options=DeepStreamCheckOptions)  # fmt: skip

PIPELINE = Command("pipeline", (
    Param("checkpoint", Model(module=True), positional=True),  # a module: refused by the pipeline, saying why
    *params_of(P, "output", "calib", "data", "precisions", "op_form", "targets", "calib_images", "parity_images",
               "eval_images", "bench_batch_sizes", "bench_iters", "threads", "tolerances", "triton_repo",
               "pixel_forms"),
    *user_model(),
    *params_of(P, "require_aft"),
), options=P)  # fmt: skip

D = DoctorOptions
DOCTOR = Command("doctor", (
    Param("model", Model(), "aft_conv_cifar", positional=True),
    *params_of(D),
), options=D)  # fmt: skip

DECLARED: dict[str, Command] = {c.name: c for c in (EXPORT, QUANTIZE, CHECK, BUILD, PARITY, EVAL, BENCH, INFER, INFO,
                                                     TRAIN, SERVE, TRITON_REPO, DEEPSTREAM, DEEPSTREAM_CHECK,
                                                     PIPELINE, DOCTOR)}  # fmt: skip


# Keywords renamed in issue 21 (one word per idea), per command: old keyword -> new keyword. The command
# line reads the old flags for one release (aft_export.cli.words derives them from here); Python names the
# new keyword when the old one is given (:func:`renamed`).
RENAMED: dict[str, dict[str, str]] = {
    "train": {"out": "output", "limit": "images"},
    "export": {"batch": "batch_dim", "verify_images": "images", "verify_data": "data"},
    "quantize": {"count": "images"},
    "eval": {"limit": "images"},
    "bench": {"batch": "batch_sizes"},
    "build": {"batch": "batch_profile", "hw": "hw_profile"},
    "pipeline": {"out": "output", "eval_limit": "eval_images", "batch": "bench_batch_sizes", "iters": "bench_iters"},
}  # fmt: skip


def renamed(command: str, keyword: str) -> str | None:
    """The keyword of ``command`` that ``keyword`` was renamed to (issue 21's names, an options field's old
    name, and ``provider``, the old name of ``backend``), else None."""
    declared = DECLARED[command]
    options = RENAMED_FIELDS.get(declared.options, {}) if declared.options is not None else {}
    backend = {"provider": "backend"} if "backend" in declared and declared["backend"].kind == BACKEND else {}
    new = {**backend, **options, **RENAMED.get(command, {})}.get(keyword)
    return new if new is not None and new in declared else None


def command_line(command: str, *arguments, **values) -> str:
    """A command line to type, ``aft-export COMMAND ARGUMENTS --flag value ...``, spelled from
    ``command``'s declarations: the same on both faces (it is typed in a shell). A switch set to a
    true value is its flag, to a false one its flag that turns it off; a repeatable one's list gives
    the flag once per value. A keyword ``command`` does not declare is a KeyError: a bug here."""
    declared = DECLARED[command]
    return " ".join(["aft-export", command, *map(str, arguments), *(declared[k].spelled(v) for k, v in values.items())])


def door(command: str, values: dict) -> dict:
    """Each of ``values`` (keyword -> value) checked against ``command``'s declaration and turned into
    what the stages take (a repeatable one into a tuple, a path into text); the first refusal is one
    :class:`ParamError`. A keyword the command does not declare passes through unchecked (an
    argument of the function alone, such as a callback)."""
    declared = DECLARED[command]
    return {k: declared[k].check(v, command) if k in declared else v for k, v in values.items()}


def refused_call(command: str, function: str, signature: inspect.Signature, kwargs: dict,
                 error: TypeError) -> KeywordError:
    """The one line for a call ``signature`` does not take (:class:`~aft_export.options.params.KeywordError`):
    an unknown keyword worded as Python words it, ``export() got an unexpected keyword argument
    'verify_images'``, naming the keyword it was renamed to or, by its spelling, probably meant; any
    other (too many arguments, a required one missing) is Python's own words after the function's name."""
    unknown = [k for k in kwargs if k not in signature.parameters]
    if not unknown:
        return KeywordError(f"{function}(): {error}; see help(aft_export.{function})", command, "")
    keyword = unknown[0]
    new = renamed(command, keyword)
    known = [*signature.parameters, *(p.name for p in DECLARED[command].params)]
    meant = new or next(iter(difflib.get_close_matches(keyword, known, n=1, cutoff=0.6)), None)
    got = shown(keyword, as_json=False)
    if new:
        fix = said("it was renamed {new}: give {new} instead", command, new=Named(new))
    elif meant:
        fix = said("did you mean {meant}?", command, meant=Named(meant))
    else:
        fix = f"see help(aft_export.{function}) for its keywords"
    return KeywordError(said("{function}() got an unexpected keyword argument {got}; {fix}", command,
                             function=function, got=got, fix=fix), command, meant or keyword)  # fmt: skip


def declared(command: str):
    """Decorate the API function of ``command``: every argument it is given is checked at its door
    (:func:`door`) before the function runs; the function sees what the stages take. A call its
    signature does not take (an unknown keyword above all) is one line too (:func:`refused_call`)."""

    def wrap(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def at_the_door(*args, **kwargs):
            say_ort_conflict()  # two ONNX Runtime wheels in one directory: said before anything runs
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise refused_call(command, function.__name__, signature, kwargs, error) from None
            bound.arguments.update(door(command, dict(bound.arguments)))
            running = RUNNING.set(DECLARED[command])  # its stages' messages name its keywords (errors.keyword_name)
            try:
                return function(*bound.args, **bound.kwargs)
            finally:
                RUNNING.reset(running)

        at_the_door.declaration = DECLARED[command]
        return at_the_door

    return wrap
