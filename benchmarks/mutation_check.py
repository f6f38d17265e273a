"""Break the code on purpose, one small break at a time, and say which test catches each.

    python benchmarks/mutation_check.py              # every break
    python benchmarks/mutation_check.py --list       # the breaks, and the tests each runs
    python benchmarks/mutation_check.py --only lr    # the breaks whose name holds this word

A test that cannot fail is a defect wherever it is. Each break below is the kind of change a
test of ours claims to guard against; for each, a copy of this checkout (its tracked and new
files, as ``git ls-files`` lists them) gets that one break, and the tests that should catch it
run there, with the break first on the import path. The script prints, per break, the tests
that failed (the ones that caught it) or ``NOT CAUGHT``, and exits 1 if any break was not
caught. The copy is made afresh for each break and removed after, so this checkout is never
touched. Not part of CI: it runs the guarding tests once per break (a few minutes; the Triton
server's load test is the slowest).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Break:
    name: str
    file: str  # relative to the checkout
    old: str  # text of the file, found exactly once
    new: str  # what it becomes
    tests: tuple[str, ...]  # pytest node ids (or files) that should fail


BREAKS = [
    Break("dynamic batching off in the generated config", "aft_export/serving/spec.py",
          'lines.append(f"dynamic_batching {{\\n  max_queue_delay_microseconds: {queue_delay_us}\\n}}")',
          "pass  # broken: no dynamic batching",
          ("tests/test_serve.py::test_eight_clients_under_load_zero_errors_and_batched",)),
    Break("TrainConfig's lr check removed", "aft_export/options.py",
          '"lr": (lambda v: finite(v) and v > 0, "a finite number > 0"),', "",
          ("tests/test_options.py",)),
    Break("drop_round_trips returns its input", "aft_export/quantization/fp16.py",
          "    from onnx import TensorProto\n\n    producer = {o: n for n in model.graph.node for o in n.output}\n"
          "    outputs = {o.name for o in model.graph.output}\n",
          "    return 0  # broken: nothing removed\n    from onnx import TensorProto\n\n"
          "    producer = {o: n for n in model.graph.node for o in n.output}\n"
          "    outputs = {o.name for o in model.graph.output}\n",
          ("tests/test_quantize.py::test_fp16_round_trips_removed_only_where_the_value_is_fp32",)),
    Break("the deploy table's parity filter removed", "aft_export/verify/deploy.py",
          'return self.status == "ok" and self.parity in ("pass", "reference")', 'return self.status == "ok"',
          ("tests/test_deploy.py::test_the_fastest_that_passes_is_marked_per_device_class",)),
    Break("OpenVINO's batch split returns the first request's logits for all", "aft_export/runners/openvino.py",
          "return {name: np.concatenate([r[name] for r in results]) for name in results[0]}",
          "return {name: np.concatenate([np.resize(results[0][name], r[name].shape) for r in results]) "
          "for name in results[0]}",
          ("tests/runners/test_openvino.py::test_a_batch_split_over_the_throughput_requests_gives_the_unsplit_logits",)),
    Break("the external data check lets a location leave the model's folder", "aft_export/readers.py",
          "            if not parts:\n                raise AFTExportError(one_line(f\"{said} {quoted}, outside the "
          "folder of the file that names it; {fix}\"))\n            parts.pop()",
          "            if parts:\n                parts.pop()",
          ("tests/hostile/test_hostile.py::test_hostile_input[triton-repo/external data that escapes onto a file "
           "outside]", "tests/test_onnxio.py::test_every_external_location_is_found_and_contained_functions_included")),
    Break("the deploy table measures a file given twice twice", "aft_export/verify/deploy.py",
          "        if key not in kept:\n            kept[key] = f",
          "        if True:\n            kept[key + str(len(kept))] = f",
          ("tests/test_deploy.py::test_the_table_checks_what_it_is_given_before_anything_runs",)),
    Break("fp16 takes an int8 option and ignores it", "aft_export/options.py",
          "            given = [n for n in INT8_ONLY if getattr(self, n) != defaults[n]]",
          "            given = []",
          ("tests/test_options.py::test_fp16_refuses_every_option_only_int8_reads",)),
]  # fmt: skip


def _copy(dest: Path) -> None:
    """This checkout's tracked and new files (not what .gitignore leaves out) into ``dest``."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _data() -> str:
    return os.environ.get("AFT_CIFAR10_DIR") or str(REPO.parent / "shared" / "data" / "cifar10")


def run(b: Break) -> tuple[list[str], float, str]:
    """The tests that failed with ``b`` applied (empty: not caught), the seconds, pytest's tail."""
    with tempfile.TemporaryDirectory(prefix="aft-mutation-") as tmp:
        work = Path(tmp)
        _copy(work)
        path = work / b.file
        text = path.read_text()
        if text.count(b.old) != 1:
            raise SystemExit(f"{b.name}: the text to break is in {b.file} {text.count(b.old)} times, not once; "
                             f"update this script")  # fmt: skip
        path.write_text(text.replace(b.old, b.new))
        env = {**os.environ, "PYTHONPATH": str(work), "AFT_CIFAR10_DIR": _data()}
        env.pop("CI", None)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-x",
                               *b.tests], cwd=work, env=env, capture_output=True, text=True)  # fmt: skip
        seconds = time.monotonic() - t0
        # the break must be what ran: the copy's package, not this checkout's
        where = subprocess.run([sys.executable, "-c", "import aft_export; print(aft_export.__file__)"], cwd=work,
                               env=env, capture_output=True, text=True).stdout.strip()  # fmt: skip
        if not where.startswith(str(work)):
            raise SystemExit(f"the copy's aft_export is not the one imported ({where}); nothing was measured")
    failed = re.findall(r"^FAILED (.+?)(?: - |$)", proc.stdout, re.MULTILINE)  # ids may hold spaces
    return failed, seconds, (proc.stdout + proc.stderr)[-1500:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="list the breaks and the tests each runs")
    ap.add_argument("--only", help="only the breaks whose name holds this word")
    args = ap.parse_args(argv)
    chosen = [b for b in BREAKS if not args.only or args.only.lower() in b.name.lower()]
    if args.list:
        for b in chosen:
            print(f"{b.name}\n  {b.file}\n  " + "\n  ".join(b.tests))
        return 0
    missed = []
    for b in chosen:
        failed, seconds, tail = run(b)
        if failed:
            print(f"caught    {b.name} ({seconds:.0f} s): {', '.join(failed)}")
        else:
            missed.append(b.name)
            print(f"NOT CAUGHT {b.name} ({seconds:.0f} s)\n{tail}")
    print(f"{len(chosen) - len(missed)} of {len(chosen)} breaks caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
