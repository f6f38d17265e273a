#!/usr/bin/env bash
# One command for users with an NVIDIA GPU or a Jetson: exports a zoo model, quantises it,
# builds fp32/fp16/int8 TensorRT engines, checks them with trtexec/polygraphy, runs the
# TensorRT/GPU tests, parity, eval and bench. Every step runs even when an earlier one
# failed; the whole table is printed at the end and OUT_DIR/gpu_check.json (environment,
# every step's command, exit code, seconds and output tail) is written for bug reports.
# Without TensorRT or a GPU the steps that need them are skipped with the reason.
# Exit code 1 if any step failed. Needs CIFAR-10 ($AFT_CIFAR10_DIR, ../shared/data/cifar10,
# or a download) and, for the engines, TensorRT (x86: pip install 'tensorrt>=10.3';
# Jetson: the TensorRT JetPack installs).
# Usage: bash scripts/gpu_check.sh [MODEL] [OUT_DIR] [--help for more options]
# The logic lives in gpu_check.py; PYTHON picks the interpreter (default: python, python3).
set -uo pipefail
PY="${PYTHON:-$(command -v python || command -v python3)}"
exec "$PY" "$(dirname "$0")/gpu_check.py" "$@"
