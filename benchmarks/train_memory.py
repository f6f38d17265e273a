"""How close `train`'s memory estimate is to what a training step takes.

    python benchmarks/train_memory.py [--model aft_conv_cifar] [--batch 32 --batch 128]

For each batch size, in a fresh process: one warm-up step on one image, then one
training step (forward, backward, AdamW) on the batch; prints the growth of the
process's peak resident memory over that step beside the estimate
`aft_export.models.training.training_bytes_per_image` gives (every leaf module's output on one
image, twice, plus the input), which `train` compares with the memory available before
it starts. One thread, so that the figures do not depend on the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

STEP = """
import json, resource, sys
import torch, torch.nn.functional as F
from aft_export.models import create_model
from aft_export.models.training import training_bytes_per_image
torch.set_num_threads(1)
name, batch = sys.argv[1], int(sys.argv[2])
model = create_model(name).train()
c = model.cfg
x = torch.randn(batch, c.in_chans, c.img_size, c.img_size)
y = torch.randint(0, c.num_classes, (batch,))
opt = torch.optim.AdamW(model.parameters())
F.cross_entropy(model(x[:1]), y[:1]).backward(); opt.step(); opt.zero_grad()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
F.cross_entropy(model(x), y).backward(); opt.step()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
estimate = batch * training_bytes_per_image(create_model(name), (c.in_chans, c.img_size, c.img_size))
print(json.dumps({"measured_mb": (after - before) / 1024, "estimate_mb": estimate / 2**20}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="aft_conv_cifar")
    ap.add_argument("--batch", type=int, action="append")
    args = ap.parse_args()
    print(f"| model | batch | peak growth of one step (MB) | estimate (MB) | estimate / measured |")
    print("|---|---|---|---|---|")
    for batch in args.batch or [32, 128]:
        out = subprocess.run([sys.executable, "-c", STEP, args.model, str(batch)], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"| {args.model} | {batch} | {r['measured_mb']:.0f} | {r['estimate_mb']:.0f} | "
            f"{r['estimate_mb'] / r['measured_mb']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
