"""Where the test suite's time goes: the wall seconds and the CPU seconds (user+sys) of each
test, in the pytest process itself and in the processes it started and waited for (a CLI
command, a docs page's stranger, a Triton server), by test and by file.

    python -m pytest -p tools.suite_cost              # also writes .suite-cost.json
    python tools/suite_cost.py [FILE] [--tests N]     # by file, most CPU first; N: the costliest tests

``AFT_SUITE_COST=PATH`` writes the record elsewhere. A test's setup (a module's or a session's
fixture made for it) counts for the test that first asked for it. Children's CPU is counted when
they are waited for (getrusage RUSAGE_CHILDREN), so a server stopped in a later test counts there.
Issue 34's budget is the whole suite's wall and CPU time (``/usr/bin/time -v python -m pytest``);
this says which tests to look at, and ``--durations=0`` agrees with its wall column.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest

DEFAULT = ".suite-cost.json"
_rows: list[dict] = []


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children, start = *_cpu(), time.perf_counter()
    yield
    own_after, children_after = _cpu()
    _rows.append({"test": item.nodeid, "wall": round(time.perf_counter() - start, 3),
                  "cpu": round(own_after - own, 3), "children_cpu": round(children_after - children, 3)})  # fmt: skip


def pytest_sessionfinish(session, exitstatus):
    path = Path(os.environ.get("AFT_SUITE_COST") or Path(session.config.rootpath) / DEFAULT)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"tests": _rows}, indent=1))
    tmp.replace(path)


def by_file(rows: list[dict]) -> list[dict]:
    """One row per test file: its tests' wall, own CPU and children's CPU summed, most CPU first."""
    files: dict[str, dict] = defaultdict(lambda: {"tests": 0, "wall": 0.0, "cpu": 0.0, "children_cpu": 0.0})
    for r in rows:
        f = files[r["test"].split("::")[0]]
        f["tests"] += 1
        for k in ("wall", "cpu", "children_cpu"):
            f[k] += r[k]
    out = [{"file": name, **{k: round(v, 1) if isinstance(v, float) else v for k, v in f.items()}}
           for name, f in files.items()]  # fmt: skip
    return sorted(out, key=lambda f: -(f["cpu"] + f["children_cpu"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default=DEFAULT, help=f"the record (default: {DEFAULT})")
    ap.add_argument("--tests", type=int, default=0, help="also list the N tests that cost the most CPU")
    args = ap.parse_args(argv)
    try:
        rows = json.loads(Path(args.file).read_text())["tests"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: cannot read {args.file} ({exc}); write it with: python -m pytest -p tools.suite_cost")
        return 2
    total = {k: sum(r[k] for r in rows) for k in ("wall", "cpu", "children_cpu")}
    print(f"{len(rows)} tests: wall {total['wall']:.1f} s, CPU {total['cpu'] + total['children_cpu']:.1f} s "
          f"(pytest {total['cpu']:.1f} s, its children {total['children_cpu']:.1f} s)")  # fmt: skip
    print(f"{'wall s':>8} {'CPU s':>8} {'own':>8} {'children':>8} {'tests':>5}  file")
    for f in by_file(rows):
        print(f"{f['wall']:8.1f} {f['cpu'] + f['children_cpu']:8.1f} {f['cpu']:8.1f} {f['children_cpu']:8.1f} "
              f"{f['tests']:5d}  {f['file']}")  # fmt: skip
    if args.tests:
        print(f"\nthe {args.tests} tests that cost the most CPU:")
        for r in sorted(rows, key=lambda r: -(r["cpu"] + r["children_cpu"]))[: args.tests]:
            print(f"{r['wall']:8.1f} {r['cpu'] + r['children_cpu']:8.1f}  {r['test']}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # the report piped into `head`: what it read is what was wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        raise SystemExit(0) from None
