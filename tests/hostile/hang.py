"""Run ``aft-export`` with one library function made to stop midway, for the signal tests.

    python -m tests.hostile.hang MODULE:FUNCTION[:N] READY_FILE -- aft-export arguments...

The N-th call (default the first) of ``MODULE.FUNCTION`` writes READY_FILE and sleeps:
the run is then exactly at that point (its temporary files, ranges directory, partial
run directory in place) when the test sends a signal. ``FUNCTION`` may be
``MODULE:FUNCTION:after`` to stop just after the call returns instead. The special target
``import:onnxruntime`` stops inside the import of ONNX Runtime (the import system's own
code), where a Ctrl-C must not print a traceback either.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import time
from pathlib import Path


def _stop(ready: Path, label: str):
    ready.write_text(label)
    time.sleep(600)


class _HangingImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, ready: Path) -> None:
        self.name, self.ready = name, ready

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name:
            _stop(self.ready, f"importing {fullname}")
        return None


def main() -> int:
    target, ready, sep, *argv = sys.argv[1:]
    assert sep == "--", "usage: python -m tests.hostile.hang MODULE:FUNCTION[:N|:after] READY -- ARGS"
    ready = Path(ready)
    module, _, rest = target.partition(":")
    if module == "import":
        sys.meta_path.insert(0, _HangingImport(rest, ready))
    else:
        name, _, when = rest.partition(":")
        mod = importlib.import_module(module)
        original = getattr(mod, name)
        nth = int(when) if when.isdigit() else 1
        calls = [0]

        def hanging(*args, **kwargs):
            calls[0] += 1
            if when == "after":
                result = original(*args, **kwargs)
                _stop(ready, f"after {target}")
                return result
            if calls[0] == nth:
                _stop(ready, target)
            return original(*args, **kwargs)

        setattr(mod, name, hanging)
    from aft_export.cli import main as cli

    return cli(argv, prog_name="aft-export", standalone_mode=False)


if __name__ == "__main__":
    sys.exit(main())
