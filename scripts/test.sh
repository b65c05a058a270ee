#!/usr/bin/env bash
# Runs every test: GoogleTest unit tests and the lit suite, through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "${ZPLAN_JOBS:-2}"
