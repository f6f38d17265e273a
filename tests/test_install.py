"""Install anywhere: the wheel, in a fresh environment, runs the default pipeline from
any directory with only AFT_CIFAR10_DIR set (the zoo and the recipes ship inside it)."""

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_the_wheel_runs_the_default_pipeline_from_anywhere(tmp_path, cifar10):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True, cwd=tmp_path)  # fmt: skip
    (wheel,) = dist.glob("aft_export-*.whl")
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
    # the dependencies (torch, onnx, ...) come from this environment, appended after the new
    # environment's own site-packages; aft_export itself only from the wheel
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                    str(site), str(wheel)], check=True)  # fmt: skip
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(AFT_CIFAR10_DIR=str(cifar10), AFT_CACHE_DIR=str(tmp_path / "cache"))
    where = subprocess.run([str(py), "-c", "import aft_export; print(aft_export.__file__)"], check=True,
                           capture_output=True, text=True, cwd=away, env=env).stdout  # fmt: skip
    assert where.startswith(str(site)), f"aft_export came from {where}, not the wheel"
    run = subprocess.run([str(py), "-m", "aft_export.cli", "pipeline"], capture_output=True, text=True, cwd=away,
                         env=env)  # fmt: skip
    (run_dir,) = (away / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    # 3: TensorRT-RTX engines built here that cannot run without a GPU (the [rtx] extra in CI)
    assert run.returncode == (3 if manifest["unverified"] else 0), run.stdout[-3000:] + run.stderr[-3000:]
    assert "PASS" in run.stdout and run_dir.name.startswith("aft_conv_cifar-") and (run_dir / "report.md").is_file()
    # the README's main job: the bundled model, measured as its card says
    assert manifest["inputs"]["model"] == "aft_conv_cifar" and manifest["passed"]
    card = json.loads((REPO / "models" / "zoo.json").read_text())
    card_top1 = next(z["top1"] for z in (card["models"] if isinstance(card, dict) else card) if z["name"] == "aft_conv_cifar")
    assert manifest["summary"][0]["top1"] == pytest.approx(card_top1, abs=0.1)
