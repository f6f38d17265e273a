"""The trained zoo: every checkpoint loads, has a card, and measures what its card says."""

import json

import pytest
import torch

from aft_export import load_checkpoint
from aft_export.evaluate import evaluate_checkpoint
from tests.conftest import REPO

ZOO_DIR = REPO / "models"
ZOO = json.loads((ZOO_DIR / "zoo.json").read_text())["models"] if (ZOO_DIR / "zoo.json").exists() else []
NAMES = [z["name"] for z in ZOO]


def test_zoo_has_one_model_per_variant():
    assert sorted(z["variant"] for z in ZOO) == ["conv", "full", "local", "simple"]
    assert sorted(p.stem for p in ZOO_DIR.glob("*.pt")) == sorted(NAMES)


def test_accuracy_floors():
    top1 = [z["top1"] for z in ZOO]
    assert min(top1) >= 60.0 and max(top1) >= 75.0, top1


@pytest.mark.parametrize("entry", ZOO, ids=NAMES)
def test_checkpoint_and_card(entry):
    path = ZOO_DIR / f"{entry['name']}.pt"
    model, meta = load_checkpoint(path)
    assert meta.sha256 == entry["sha256"]
    assert "train_state" not in torch.load(path, weights_only=True)
    assert meta.config.variant == entry["variant"] and meta.provenance["epochs"] == entry["epochs"]
    card = (ZOO_DIR / f"{entry['name']}.md").read_text()
    assert f"**{entry['top1']:.2f}%**" in card and entry["sha256"] in card


@pytest.mark.slow
@pytest.mark.parametrize("entry", ZOO, ids=NAMES)
def test_measured_top1_matches_card(entry, cifar10):
    result = evaluate_checkpoint(ZOO_DIR / f"{entry['name']}.pt", str(cifar10 / "test.tar"))
    assert result["images"] == 10000
    # CPU evaluation is deterministic up to float summation order across thread counts
    assert abs(result["top1"] - entry["top1"]) <= 0.1
