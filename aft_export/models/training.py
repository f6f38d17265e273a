"""Train an AFT classifier on an ImageFolder directory or tar.

The whole split is decoded to a uint8 tensor once; augmentation (random crop
with padding, horizontal flip) runs on batches. Randomness is derived from
``(seed, epoch)`` at each epoch start, so resuming from an epoch checkpoint
reproduces the uninterrupted run exactly.
"""

from __future__ import annotations

import math
import platform
import sys
import time
import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from aft_export.version import __version__
from aft_export.models.checkpoint import load_checkpoint, save_checkpoint
from aft_export.data.images import CIFAR10_MEAN, CIFAR10_STD, normalize
from aft_export.data.datasets import data_label, load_labelled
from aft_export.errors import AFTExportError, Judged, Named, Verdict, said
from aft_export.fileio import claim_output
from aft_export.options import TrainConfig
from aft_export.runners.base import available_memory
from aft_export.verify.evaluate import evaluate_model
from aft_export.models.classifier import AFTClassifier, count_params, leaf_output_bytes
from aft_export.models.registry import create_model


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded, fixed train/validation split of ``range(n)``."""
    perm = np.random.default_rng([seed, 0xA1F]).permutation(n)
    n_val = int(round(n * val_fraction))
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def augment(batch: torch.Tensor, gen: torch.Generator, pad: int = 4) -> torch.Tensor:
    """Random crop with zero padding and horizontal flip. batch: (B, H, W, 3) uint8."""
    b, h, w, c = batch.shape
    padded = F.pad(batch.permute(0, 3, 1, 2), (pad, pad, pad, pad))  # (B, 3, H+2p, W+2p)
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    rows = (dy[:, None] + torch.arange(h))[:, None, :, None].expand(b, c, h, w + 2 * pad)
    out = padded.gather(2, rows)  # (B, 3, H, W+2p)
    cols = (dx[:, None] + torch.arange(w))[:, None, None, :].expand(b, c, h, w)
    out = out.gather(3, cols)  # (B, 3, H, W)
    flip = torch.rand(b, generator=gen) < 0.5
    out = torch.where(flip[:, None, None, None], out.flip(3), out)
    return out.permute(0, 2, 3, 1)


def lr_at(step: int, total: int, warmup: int, base: float) -> float:
    """Linear warm-up to ``base``, then cosine decay to 1% of it."""
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * (0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def _param_groups(model: AFTClassifier, weight_decay: float):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        # no decay on biases, norms, position embedding/bias, AFT-conv gamma/beta
        if p.ndim <= 1 or name.endswith(("pos_embed", ".w", ".u", ".v", "raw_kernel")):
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def training_bytes_per_image(model: torch.nn.Module, input_size: tuple[int, int, int]) -> int:
    """Estimated training memory per image: every leaf module's output on one image, kept
    for the backward pass, counted twice (the activation and its gradient), and the input."""
    sizes, _ = leaf_output_bytes(model.eval(), torch.zeros((1, *input_size)))
    return 2 * sum(sizes) + 4 * math.prod(input_size)


def check_training_batch(model: AFTClassifier, batch_size: int) -> None:
    """Refuse up front a batch whose training memory exceeds what is available now."""
    cfg = model.cfg
    per_image = training_bytes_per_image(model, (cfg.in_chans, cfg.img_size, cfg.img_size))
    available = available_memory()
    if available is not None and batch_size * per_image > available:
        fits = max(1, available // per_image)
        raise AFTExportError(
            said("{batch_size_got} needs about {value:.1f} GB to train ({value2:.1f} MB per image: every layer's "
                 "activations and their gradients) but {value3:.1f} GB is available; use {fits} or less", "train",
                 batch_size_got=Named('batch_size', batch_size), fits=Named('batch_size', fits),
                 value=batch_size * per_image / 2**30, value2=per_image / 2**20, value3=available / 2**30)
        )


@dataclass
class TrainResult(Judged):
    """``train``: the checkpoint written (``output``) and its metrics (``to_dict()``: what the
    command prints)."""

    output: str
    metrics: dict
    verdict: Verdict = field(default_factory=Verdict)

    def to_dict(self) -> dict:
        return copy.deepcopy(self.metrics)


def train(cfg: TrainConfig) -> TrainResult:
    """Train, writing ``cfg.output`` atomically after every epoch: the checkpoint and its metrics. ``output``
    is claimed first: never the data, and one run at a time (``resume`` may name it:
    the run goes on in place)."""
    with claim_output(cfg.output, inputs=[cfg.data, cfg.test_data]):
        before = torch.get_num_threads()  # process-wide: cfg.threads holds for this training only
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        try:
            return TrainResult(str(cfg.output), _train(cfg))
        finally:
            torch.set_num_threads(before)


def _train(cfg: TrainConfig) -> dict:
    out = Path(cfg.output)

    model = create_model(cfg.model)
    mcfg = model.cfg
    check_training_batch(model, cfg.batch_size)
    data = load_labelled(cfg.data, mcfg.img_size, limit=cfg.images)
    if len(data.classes) != mcfg.num_classes:
        raise AFTExportError(
            f"{cfg.data} has {len(data.classes)} classes but {cfg.model} has {mcfg.num_classes} outputs; "
            f"train a model with as many outputs as the data has classes"
        )
    test = None
    if cfg.test_data:  # decoded before training: a bad test set fails now, not after the last epoch
        test = load_labelled(cfg.test_data, mcfg.img_size)
        if test.classes != data.classes:
            raise AFTExportError(f"{cfg.test_data} classes {test.classes} differ from the training classes; "
                                 f"give a test set of the same classes")  # fmt: skip
    train_idx, val_idx = split_indices(len(data), cfg.val_fraction, cfg.seed)
    images = torch.from_numpy(data.images)
    labels = torch.from_numpy(data.labels)
    mean, std = CIFAR10_MEAN, CIFAR10_STD

    steps_per_epoch = math.ceil(len(train_idx) / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    warmup = int(cfg.warmup_epochs * steps_per_epoch)
    torch.manual_seed(cfg.seed)
    model = create_model(cfg.model)  # re-create under the seed: identical init every run
    opt = torch.optim.AdamW(_param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.999))

    start_epoch, elapsed, history = 0, 0.0, []
    if cfg.resume:
        model, _, payload = load_checkpoint(cfg.resume, return_payload=True)
        state = payload.get("train_state")
        if not state:
            raise AFTExportError(f"{cfg.resume} has no training state to resume from (training finished)")
        if state["train_config"]["model"] != cfg.model:
            raise AFTExportError(f"{cfg.resume} is a {state['train_config']['model']} run, not {cfg.model}")
        opt = torch.optim.AdamW(_param_groups(model, cfg.weight_decay), lr=cfg.lr)
        opt.load_state_dict(state["optimizer"])
        start_epoch, elapsed, history = state["epoch"], state["elapsed_s"], list(state["history"])

    print(
        f"training {cfg.model} ({count_params(model):,} params) on {len(train_idx)} images, "
        f"validating on {len(val_idx)}, {cfg.epochs} epochs, {torch.get_num_threads()} threads",
        file=sys.stderr,
    )
    from tqdm import tqdm

    for epoch in range(start_epoch, cfg.epochs):
        t0 = time.time()
        model.train()
        gen = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        torch.manual_seed(cfg.seed * 100_003 + epoch)  # drop-path masks
        order = torch.from_numpy(train_idx)[torch.randperm(len(train_idx), generator=gen)]
        seen = correct = 0
        loss_sum = 0.0
        bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                   disable=not cfg.progress, file=sys.stderr, mininterval=2.0)  # fmt: skip
        for i in bar:
            step = epoch * steps_per_epoch + i
            for group in opt.param_groups:
                group["lr"] = lr_at(step, total_steps, warmup, cfg.lr)
            idx = order[i * cfg.batch_size : (i + 1) * cfg.batch_size]
            x = normalize(augment(images[idx], gen), mean, std)
            y = labels[idx]
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=cfg.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            seen += len(y)
            correct += (logits.argmax(1) == y).sum().item()
            loss_sum += loss.item() * len(y)
            rate = seen / max(time.time() - t0, 1e-9)
            bar.set_postfix(loss=f"{loss_sum / seen:.3f}", acc=f"{100 * correct / seen:.1f}",
                            img_s=f"{rate:.0f}", refresh=False)  # fmt: skip
        elapsed += time.time() - t0
        val_top1 = evaluate_model(model, data.images[val_idx], data.labels[val_idx], mean, std)[0] if len(val_idx) else None
        history.append({"epoch": epoch + 1, "train_loss": round(loss_sum / seen, 4),
                        "train_top1": round(100 * correct / seen, 2),
                        "val_top1": None if val_top1 is None else round(val_top1, 2)})  # fmt: skip
        print(f"epoch {epoch + 1}: {history[-1]} ({elapsed:.0f}s so far)", file=sys.stderr)
        train_state = {"epoch": epoch + 1, "optimizer": opt.state_dict(), "elapsed_s": elapsed,
                       "history": history, "train_config": recorded_config(cfg)}  # fmt: skip
        save_checkpoint(out, model, data.classes, mean, std, model_name=cfg.model,
                        provenance=_provenance(cfg, history, elapsed, len(train_idx)),
                        train_state=train_state)  # fmt: skip

    metrics = {"val_top1": history[-1]["val_top1"] if history else None}
    if test is not None:
        top1, top5 = evaluate_model(model, test.images, test.labels, mean, std)
        metrics.update(test_top1=round(top1, 2), test_top5=round(top5, 2), test_images=len(test),
                       test_data=data_label(cfg.test_data, out.parent))  # fmt: skip
    provenance = _provenance(cfg, history, elapsed, len(train_idx))
    provenance["metrics"] = metrics
    save_checkpoint(out, model, data.classes, mean, std, model_name=cfg.model, provenance=provenance)
    return metrics


def recorded_config(cfg: TrainConfig) -> dict:
    """The training config as the checkpoint records it: data by name (``cifar10:train``), or
    relative to the checkpoint (:func:`aft_export.data.datasets.data_label`); the checkpoint by its
    file name. Never an absolute path of the machine that trained it: checkpoints travel."""
    beside = Path(cfg.output).parent
    paths = {"data": cfg.data, "test_data": cfg.test_data, "resume": cfg.resume}
    recorded = {k: v and data_label(v, beside) for k, v in paths.items()}
    return {**asdict(cfg), **recorded, "output": Path(cfg.output).name}


def _provenance(cfg: TrainConfig, history: list, elapsed: float, n_train: int) -> dict:
    return {
        "data": data_label(cfg.data, Path(cfg.output).parent),
        "train_images": n_train,
        "epochs": len(history),
        "seed": cfg.seed,
        "train_config": {k: v for k, v in recorded_config(cfg).items() if k not in ("resume", "progress")},
        "history": history,
        "wall_time_s": round(elapsed, 1),
        "tool": f"aft-export {__version__}",
        "torch": str(torch.__version__),
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "metrics": {"val_top1": history[-1]["val_top1"] if history else None},
    }
