#!/usr/bin/env bash
# The main job on the bundled tiny GPT-2 (opset 17): compile for 4 ranks and
# print the imported IR. Later stages (schedule, plan, zrun) join here as
# they land.
set -euo pipefail
cd "$(dirname "$0")/.."
model=test/models/gpt2-opset17.onnx
echo "== zcc $model --input-shape input_ids=2x16 --world-size 4 --mode infer --dump ir"
./build/bin/zcc "$model" --input-shape input_ids=2x16 --world-size 4 --mode infer --dump ir
