"""What decoding one hostile image costs: peak memory of `aft_export.data.images.load_image`.

    python benchmarks/image_cost.py                   # this checkout
    python benchmarks/image_cost.py --commit e2edc49  # the package as it was at a commit (git archive)

Images: a 1 x 100000 strip (a grey ramp: a few hundred bytes as PNG; the short side is
scaled up to the model's input), the same strip standing, a 68-byte PNG whose header
claims 20000 x 20000, and an ordinary 640 x 480 photo-sized image for comparison. Each is
decoded for a model of each ``--size`` (default 32) in a fresh process; printed: the
growth of the process's peak resident memory, and the outcome (ok, or the first words of
the error). Careful: at e2edc49 a strip for a 224-pixel model peaks at about 20 GB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DECODE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy, PIL.Image
from aft_export.data.images import load_image

def kb(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field))

data = open(sys.argv[2], "rb").read()
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts again from the current size
before = kb("VmRSS:")
try:
    out = load_image(data, int(sys.argv[3]), name="x")
    what = f"ok {out.shape[0]}x{out.shape[1]}"
except BaseException as exc:
    what = f"{type(exc).__name__}: {' '.join(str(exc).split()[:6])}"
print(json.dumps({"mb": (kb("VmHWM:") - before) / 1024, "outcome": what}))
"""


def _images(root: Path) -> dict[str, Path]:
    import numpy as np
    from PIL import Image

    sys.path.insert(0, str(REPO))
    from tests.hostile.world import _bomb_png

    rng = np.random.default_rng(0)
    ramp = np.repeat((np.arange(100000) % 256).astype(np.uint8)[:, None], 3, axis=1)
    out = {
        "1x100000 strip": root / "wide.png",
        "100000x1 strip": root / "tall.png",
        "640x480": root / "photo.png",
    }
    Image.fromarray(ramp[None, :, :]).save(out["1x100000 strip"])
    Image.fromarray(ramp[:, None, :]).save(out["100000x1 strip"])
    Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)).save(out["640x480"])
    out["20000x20000 claimed"] = root / "bomb.png"
    _bomb_png(out["20000x20000 claimed"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commit", help="decode with aft_export as it was at this commit")
    ap.add_argument("--size", type=int, action="append", help="model input side (repeatable; default 32)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="aft-image-cost-") as tmp:
        pkg = REPO
        if args.commit:
            pkg = Path(tmp) / "pkg"
            pkg.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.commit, "aft_export"],
                                     capture_output=True, check=True).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", str(pkg)], input=archive, check=True)
        print(f"aft_export {args.commit or 'of this checkout'}")
        print("| image | bytes | model input | peak memory growth (MB) | outcome |")
        print("|---|---|---|---|---|")
        for name, path in _images(Path(tmp)).items():
            for size in args.size or [32]:
                out = subprocess.run([sys.executable, "-c", DECODE, str(pkg), str(path), str(size)],
                                     capture_output=True, text=True, check=True).stdout  # fmt: skip
                r = json.loads(out.strip().splitlines()[-1])
                print(f"| {name} | {path.stat().st_size} | {size} | {r['mb']:.1f} | {r['outcome']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
