"""Run the hostile-input table (tests/hostile/cases.py) over every command and count what happens.

    python benchmarks/hostile_inputs.py                      # this checkout
    python benchmarks/hostile_inputs.py --commit e2edc49     # the package as it was at a commit (git archive)
    python benchmarks/hostile_inputs.py --list traceback     # also list the cases with that verdict

Prints, per kind and per command, how many cases ended in each verdict of
tests/hostile/harness.py (traceback, destroyed input, leftovers, wrong exit status, not one
``error:`` line, a line that does not say what was wrong, ok). Cases marked ``base=False``
(thousands of threads, batches far beyond memory: the base commit would try them) and, when
not root, those that need root (a device node) are left out and counted as such. The same
cases are what tests/hostile/test_hostile.py asserts, all ``ok``.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile.cases import all_cases  # noqa: E402
from tests.hostile.harness import VERDICTS, run_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commit", help="run aft_export as it was at this commit (default: this checkout)")
    ap.add_argument("--list", nargs="*", default=[], help="verdicts whose cases to list")
    ap.add_argument("--kind", help="only cases of this kind")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="aft-hostile-") as tmp:
        if args.commit:  # that commit's package, first on the path (the cases stay this checkout's)
            pkg = Path(tmp) / "pkg"
            pkg.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.commit, "aft_export", "models",
                                      "calibration"], capture_output=True, check=True).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", str(pkg)], input=archive, check=True)
            sys.path.insert(0, str(pkg))
        return _run(args, Path(tmp))


def _run(args, tmp: Path) -> int:
    import aft_export

    git = ["git", "-C", str(REPO)]
    if args.commit:
        label = subprocess.run(
            [*git, "rev-parse", "--short", args.commit], capture_output=True, text=True
        ).stdout
    else:
        label = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        if subprocess.run(
            [*git, "status", "--porcelain", "--", "aft_export"], capture_output=True, text=True
        ).stdout:
            label += " + uncommitted changes"
    print(f"aft_export {label.strip()} from {Path(aft_export.__file__).parent}")

    from tests.hostile.world import build_world

    cases = [c for c in all_cases() if not args.kind or c.kind == args.kind]
    skipped = collections.Counter()
    world = build_world(tmp / "world")
    outcomes = []
    t0 = time.perf_counter()
    for i, case in enumerate(cases):
        if args.commit and not case.base:
            skipped["would exhaust the machine at that commit"] += 1
            continue
        if case.root and os.geteuid() != 0:
            skipped["needs root"] += 1
            continue
        work = tmp / f"c{i}"
        work.mkdir()
        outcomes.append(run_case(case, world, work))
        subprocess.run(["rm", "-rf", str(work)], check=False)
    seconds = time.perf_counter() - t0

    by_kind = collections.defaultdict(collections.Counter)
    by_cmd = collections.defaultdict(collections.Counter)
    for o in outcomes:
        by_kind[o.case.kind][o.verdict] += 1
        by_cmd[o.case.command][o.verdict] += 1
    print(
        f"{len(outcomes)} cases run in {seconds:.0f}s"
        + "".join(f"; {n} left out ({why})" for why, n in skipped.items())
    )
    for title, table in (("kind", by_kind), ("command", by_cmd)):
        print(f"\n| {title} | cases | " + " | ".join(VERDICTS) + " |")
        print("|---|---|" + "---|" * len(VERDICTS))
        total = collections.Counter()
        for key in sorted(table):
            total.update(table[key])
            print(
                f"| {key} | {sum(table[key].values())} | "
                + " | ".join(str(table[key][v]) for v in VERDICTS)
                + " |"
            )
        print(f"| all | {sum(total.values())} | " + " | ".join(str(total[v]) for v in VERDICTS) + " |")
    for verdict in args.list:
        print(f"\n{verdict}:")
        for o in outcomes:
            if o.verdict == verdict:
                print(f"  {o.case.id}: {o.detail}")
    return 0 if all(o.verdict == "ok" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
