#!/usr/bin/env bash
# One command for users with an NVIDIA GPU or a Jetson: builds fp32, fp16 and int8
# TensorRT engines for a zoo model, runs the TensorRT/GPU tests and the parity check,
# and prints one table. Needs TensorRT (x86: pip install 'tensorrt>=10.3'; Jetson: the
# TensorRT JetPack installs) and CIFAR-10 ($AFT_CIFAR10_DIR, ../shared/data/cifar10, or
# a download). Usage: bash scripts/gpu_check.sh [MODEL] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-aft_conv_cifar}"
OUT="${2:-runs/gpu_check}"
mkdir -p "$OUT"

python - <<'PY'
import sys
from aft_export.errors import AFTExportError
from aft_export.trt import environment, import_tensorrt, require_gpu
env = environment()
try:
    import_tensorrt()      # the install steps if missing or too old
    require_gpu(env)       # and if no CUDA GPU is visible
except AFTExportError as exc:
    sys.exit(f"error: {exc}")
print(f"TensorRT {env['tensorrt']}, CUDA {env['cuda']}, {env['gpu']} (compute capability {env['compute_capability']})")
PY

aft-export export "models/$MODEL.pt" -o "$OUT/$MODEL.onnx"
aft-export quantize "$OUT/$MODEL.onnx" --precision fp16 --calib calibration/cifar10.json -o "$OUT/$MODEL.fp16.onnx"
aft-export quantize "$OUT/$MODEL.onnx" --precision int8 --calib calibration/cifar10.json -o "$OUT/$MODEL.int8.onnx"
for p in "" .fp16 .int8; do
  aft-export build "$OUT/$MODEL$p.onnx" -o "$OUT/$MODEL$p.engine" --batch 1,32,64 --timing-cache "$OUT/timing.cache"
done

python -m pytest -q -m "trt or gpu" -rs tests/

set +e
aft-export parity "models/$MODEL.pt" "$OUT/$MODEL.onnx" "$OUT/$MODEL.fp16.onnx" "$OUT/$MODEL.int8.onnx" \
  "$OUT/$MODEL.engine" "$OUT/$MODEL.fp16.engine" "$OUT/$MODEL.int8.engine" --data cifar10:test
status=$?
aft-export eval "models/$MODEL.pt" "$OUT/$MODEL.engine" "$OUT/$MODEL.fp16.engine" "$OUT/$MODEL.int8.engine" \
  --data cifar10:test
aft-export bench "$OUT/$MODEL.onnx" "$OUT/$MODEL.engine" "$OUT/$MODEL.fp16.engine" "$OUT/$MODEL.int8.engine"
exit $status
