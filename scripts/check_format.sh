#!/usr/bin/env bash
# Fails when a tracked C++ or CUDA source differs from what clang-format 19
# makes of it with the repository's .clang-format (LLVM style). ctest runs
# it as the test `format`; `scripts/check_format.sh --fix` rewrites the
# files in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format-19}
if ! command -v "$format" >/dev/null; then
  echo "check_format: $format not found (scripts/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.h' '*.cpp' '*.cu' '*.cuh' \
  | grep -v '^test/emulation/.*\.inc$')
if [ "${1:-}" = "--fix" ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
if ! "$format" --dry-run --Werror "${files[@]}" 2>/tmp/check_format.$$; then
  grep -oE '^[^: ]+:[0-9]+:[0-9]+: ' /tmp/check_format.$$ | cut -d: -f1 | sort -u \
    | sed 's/^/check_format: not formatted: /' >&2
  echo "check_format: run scripts/check_format.sh --fix (clang-format 19)" >&2
  rm -f /tmp/check_format.$$
  exit 1
fi
rm -f /tmp/check_format.$$
echo "check_format: ${#files[@]} files formatted as clang-format 19 formats them"
