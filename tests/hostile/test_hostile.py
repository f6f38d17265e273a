"""The hostile-input table (tests/hostile/cases.py), every case in-process through the
command line: the exit status of the table, one ``error: <what>; <what to do>`` line,
no traceback, every input and the output directory byte-identical afterwards, nothing
left in $TMPDIR or the cache (tests/hostile/harness.py judges). The same table gives
the before/after figures: ``python benchmarks/hostile_inputs.py [--commit e2edc49]``."""

import os

import pytest

from tests.hostile.cases import all_cases
from tests.hostile.harness import run_case

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case, world, tmp_path):
    if case.root and os.geteuid() != 0:
        pytest.skip("makes a device node: needs root")
    outcome = run_case(case, world, tmp_path)
    assert outcome.verdict == "ok", (
        f"{outcome.verdict}: {outcome.detail}\nexit {outcome.exit_code}\n"
        f"stderr: {outcome.stderr[-2000:]}\nstdout: {outcome.stdout[-1000:]}"
    )


def test_the_table_is_large_and_covers_every_kind_and_command():
    """Every kind, and every command the table was written with, has cases that are
    more than an unknown option (a command added later gets the generic ones of
    tests/hostile/test_exit_table.py)."""
    kinds = {c.kind for c in CASES}
    assert kinds == {"crash", "files", "destroys", "nonsense", "nonfinite", "cost", "usage", "exit", "readers"}
    assert len(CASES) >= 150
    crafted = {c.command for c in CASES if c.kind != "usage" and c.code == 2}
    assert crafted >= {"info", "train", "export", "quantize", "parity", "bench", "pipeline", "check", "build",
                       "infer", "eval"}  # fmt: skip
    assert {c.code for c in CASES} >= {0, 1, 2, 3}
