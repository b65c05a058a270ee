#!/usr/bin/env bash
# Builds whatever scripts/build.sh has not built yet (after `build.sh demo`:
# the tests and the Python module), then runs every test through ctest: the
# GoogleTest unit tests, the lit suite (one ctest test named `lit`) and the
# formatting check (`format`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${ZPLAN_JOBS:-2}"
