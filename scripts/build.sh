#!/usr/bin/env bash
# Configures (once) and builds zplan into build/ with Ninja. Extra arguments
# go to CMake on the first configure, e.g. -DZPLAN_ENABLE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -B build \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py \
    "$@"
fi
# Two cores on the project's machines; MLIR translation units are heavy.
ninja -C build -j "${ZPLAN_JOBS:-2}"
