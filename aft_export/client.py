"""``python -m aft_export.client``: the client of served models, :mod:`aft_export.serving.client`."""

from aft_export.serving.client import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m aft_export.client"))
