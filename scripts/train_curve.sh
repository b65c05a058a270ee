#!/usr/bin/env bash
# The training curve in the README (docs/train-loss.svg): the bundled tiny
# GPT-2 (2 layers, hidden 64, byte-level vocabulary) trained from its random
# weights on the bundled corpus (data/gpl-3.0.bin, 35,149 bytes of the GPL-3
# text) with AdamW, once on 1 rank and once on 4 ranks with the same global
# batch (the curves must coincide: the batch rows do not depend on the
# ranks), every parameter sharded (--persistence-threshold 0).
# Needs a build (scripts/build.sh); takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/train-curve
mkdir -p "$out" docs
model=test/models/gpt2-opset17.onnx
mpi=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
steps=600
for ranks in 1 4; do
  rows=$((8 / ranks))
  ./build/bin/zcc "$model" --mode train --world-size "$ranks" \
    --input-shape input_ids=${rows}x64 --persistence-threshold 0 -o "$out/n$ranks.zplan"
  OPENBLAS_NUM_THREADS=1 "${mpi[@]}" -np "$ranks" ./build/bin/zrun "$out/n$ranks.zplan" train \
    --data data/gpl-3.0.bin --steps "$steps" --lr 3e-3 --warmup 30 --lr-schedule cosine \
    --min-lr 3e-4 --weight-decay 0.1 --log-every 100 --loss-log "$out/n$ranks.tsv"
done
python3 scripts/plot_loss.py "$out/n1.tsv" "$out/n4.tsv" -o docs/train-loss.svg \
  --label "1 rank, 8 rows x 64 tokens per step" \
  --label "4 ranks, 2 rows each (same batches)" \
  --title "tiny GPT-2 on the GPL-3 text (byte-level), AdamW, zrun train"
echo "wrote docs/train-loss.svg"
