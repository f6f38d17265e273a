"""aft-export models, info, train."""

from __future__ import annotations

import json

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import declared_options, given


@main.command("models")
def models_cmd() -> None:
    """List the registered model configs."""
    from aft_export.api import describe_models

    echo(describe_models())


@main.command("info")
@declared_options("info", {"classes": [click.option("--json", "as_json", is_flag=True,
                                                    help="Print JSON instead of text.")]})
def info_cmd(artifact: str, as_json: bool, **kw) -> None:
    """Print what an artifact is: a checkpoint's config, parameter count, classes and metrics; an
    ONNX file's export target, opset, precision, com.aft layers and quantisation recipe (another
    tool's: its inputs, outputs, opsets, producer); an engine's manifest."""
    from aft_export.api import info

    result = info(artifact, **kw)
    print_json(result.to_dict()) if as_json else echo(result.lines())
    return exit_status(result.verdict)


@main.command("train")
@declared_options("train")
def train_cmd(**kw) -> None:
    """Train a classifier; writes the checkpoint atomically after every epoch."""
    from aft_export.api import train

    result = train(**given(kw))
    click.echo(json.dumps(result.to_dict()))
    return exit_status(result.verdict)
