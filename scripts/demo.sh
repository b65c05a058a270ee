#!/usr/bin/env bash
# The main job on the bundled tiny GPT-2 (opset 17): compile it for 4 ranks
# into a plan, and show the schedule and the report (default schedule vs the
# hook-based ZeRO-3 baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
model=test/models/gpt2-opset17.onnx
out=build/demo
mkdir -p "$out"
flags=(--input-shape input_ids=2x16 --world-size 4 --mode infer
       --persistence-threshold 64 --bucket-size 64KiB)
echo "== zcc $model ${flags[*]} -o $out/gpt2.zplan --dump schedule,report"
./build/bin/zcc "$model" "${flags[@]}" -o "$out/gpt2.zplan" --dump schedule,report
