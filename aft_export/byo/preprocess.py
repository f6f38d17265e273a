"""Deprecated alias of :mod:`aft_export.data.preprocess`, kept only while ``aft_export/byo/cli.py``
imports ``read_mapping`` and ``resolve`` from here; delete it when the command line reads
:mod:`aft_export.data.preprocess` (issue 34). Nothing else imports it."""

from __future__ import annotations

from aft_export.data.preprocess import read_mapping, resolve  # noqa: F401 - byo/cli.py's import
