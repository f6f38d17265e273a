"""aft-export models, info, train."""

from __future__ import annotations

import json

import click

from aft_export.cli.base import echo, exit_status, main, print_json
from aft_export.cli.params import (
    BATCH,
    COUNT,
    SEED,
    THREADS,
    Finite,
    InPlace,
    apply_options,
    bound,
    foreign_options,
    given,
)
from aft_export.options import (
    TrainConfig,
)


@main.command("models")
def models_cmd() -> None:
    """List the registered model configs."""
    from aft_export.api import describe_models

    echo(describe_models())


@main.command("info")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.option("--config", help="Registry config name, for plain state_dict files.")
@foreign_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info_cmd(artifact: str, as_json: bool, **kw) -> None:
    """Print what an artifact is: a checkpoint's config, parameter count, classes and metrics; an
    ONNX file's export target, opset, precision, com.aft layers and quantisation recipe (another
    tool's: its inputs, outputs, opsets, producer); an engine's manifest."""
    from aft_export.api import info
    from aft_export.workflow.report import format_info

    result = info(artifact, **kw)
    print_json(result.to_dict()) if as_json else echo(format_info(result.to_dict()))
    return exit_status(result.verdict)


def _train_options():
    T = TrainConfig
    return [
        bound(T, "epochs", "--epochs", type=COUNT),
        bound(T, "batch_size", "--batch-size", type=BATCH),
        bound(T, "lr", "--lr", type=Finite(min=0, min_open=True)),
        bound(T, "weight_decay", "--weight-decay", type=Finite(min=0)),
        bound(T, "warmup_epochs", "--warmup-epochs", type=Finite(min=0)),
        bound(T, "label_smoothing", "--label-smoothing", type=Finite(0, 1, max_open=True)),
        bound(T, "val_fraction", "--val-fraction", type=Finite(0, 1, max_open=True), help="Held-out validation share."),
        bound(T, "seed", "--seed", type=SEED),
        bound(T, "threads", "--threads", type=THREADS, show_default=False, help="Torch CPU threads (0: default)."),
    ]  # fmt: skip


@main.command("train")
@bound(TrainConfig, "model", "--model", "model_name", required=True,
       help="Registry config name (`aft-export models`).")
@bound(TrainConfig, "data", "--data", required=True, type=click.Path(), help="ImageFolder directory or tar.")
@bound(TrainConfig, "output", "--output", "-o", required=True, type=click.Path(dir_okay=False),
       help="Checkpoint to write.")
@bound(TrainConfig, "test_data", "--test-data", type=click.Path(), help="Labelled test set evaluated at the end.")
@apply_options(_train_options())
@bound(TrainConfig, "images", "--images", type=COUNT, help="Train on the first N images only (smoke tests).")
@bound(TrainConfig, "resume", "--resume", type=InPlace(dir_okay=False),
       help="Continue from an epoch checkpoint (it may be --output itself: the run goes on in place).")
@bound(TrainConfig, "progress", "--progress/--no-progress", help="A progress bar on stderr.")
def train_cmd(model_name, **kw) -> None:
    """Train a classifier; writes the checkpoint atomically after every epoch."""
    from aft_export.api import train

    result = train(model=model_name, **given(kw))
    click.echo(json.dumps(result.to_dict()))
    return exit_status(result.verdict)
