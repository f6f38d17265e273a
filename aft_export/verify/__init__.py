"""Checks of artifacts: metrics and tolerances, parity, evaluation, timing, what to deploy where."""
