"""``python -m aft_export.cli``: the command line (the doctor runs its checks this way)."""

from aft_export.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
