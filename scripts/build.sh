#!/usr/bin/env bash
# Configures (once) and builds zplan into build/ with Ninja.
#
#   scripts/build.sh            everything: tools, tests, the Python module
#   scripts/build.sh demo       what scripts/demo.sh runs: zcc and zrun
#
# Other arguments go to CMake on the first configure, e.g.
# -DZPLAN_ENABLE_CUDA=OFF. ZPLAN_JOBS sets the parallel jobs (default 2: the
# project's machines have two cores, and MLIR translation units are heavy).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
if [ "${1:-}" = "demo" ]; then
  targets=(zcc zrun)
  shift
fi
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -B build \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py \
    "$@"
fi
ninja -C build -j "${ZPLAN_JOBS:-2}" "${targets[@]}"
