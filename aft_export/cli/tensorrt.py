"""aft-export check and build: TensorRT's rules and parser, and engines."""

from __future__ import annotations

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import declared_options, given


@main.command("check")
@declared_options("check", {"trt_versions": [click.option("--json", "as_json", is_flag=True,
                                                          help="Print the JSON report.")]})
def check_cmd(models, as_json, **kw) -> None:
    """Check ONNX files offline against the rules of TensorRT's parser and builder, one column
    per version (no TensorRT runs); where TensorRT or TensorRT-RTX is installed, also with its own
    parser (and, with --build, its builder), reported beside the rules' column for that parser.

    Exit 0: the rules of every checked version pass every file (and the parser, where installed,
    parses it); 1: a version's rules (or the parser, or the builder) refuse one, or, with --strict,
    the rules and the parser disagree; 3: no refusal but warnings remain (or a version the check
    has no rules for); 2: bad input.
    """
    from aft_export.api import check

    result = check(models, **kw)
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("build")
@declared_options("build")
def build_cmd(model, output, **kw) -> None:
    """Build a TensorRT or TensorRT-RTX engine (precision as the ONNX graph says) and its manifest.

    TensorRT-RTX builds on a machine with no GPU; such an engine is built, not run. An ONNX file
    another tool wrote needs its preprocessing (the flags below, or NAME.preprocess.json beside
    it): the manifest records it, so the engine is fed as the file was.
    """
    from aft_export.api import build

    build(model, output, **given(kw))
