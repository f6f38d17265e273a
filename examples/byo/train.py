"""Train one of the example models on CIFAR-10 with a plain PyTorch loop: "trained elsewhere".

    python examples/byo/train.py examples/byo/aft_pytorch_cifar.py OUT.pth --epochs 3

The weights are saved as DeiT's training code saves them: {"model": state_dict,
"args": argparse.Namespace, "epoch": N}. Images: cifar10:train, found as every command finds it
($AFT_CIFAR10_DIR, ../shared/data/cifar10 beside the checkout, or the one-time download).
"""

import argparse
import importlib.util
import time

import torch
import torch.nn.functional as F

from aft_export.data.images import normalize
from aft_export.data.datasets import load_labelled

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_file")
    parser.add_argument("out")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("model_file", args.model_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.build()
    data = load_labelled("cifar10:train", 32, limit=args.limit)
    x_all, y_all = normalize(data.images, MEAN, STD), torch.as_tensor(data.labels)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    steps = args.epochs * (len(y_all) // args.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=steps)
    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(y_all))
        correct = 0
        for i in range(len(y_all) // args.batch_size):
            idx = order[i * args.batch_size : (i + 1) * args.batch_size]
            x = x_all[idx]
            if torch.rand(()) < 0.5:
                x = x.flip(3)
            logits = model(x)
            loss = F.cross_entropy(logits, y_all[idx], label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            correct += (logits.argmax(1) == y_all[idx]).sum().item()
        print(f"epoch {epoch + 1}: train top-1 {100 * correct / len(y_all):.1f}% ({time.time() - start:.0f}s)")
    torch.save({"model": model.state_dict(), "args": args, "epoch": args.epochs}, args.out)


if __name__ == "__main__":
    main()
