#!/usr/bin/env bash
# The main job on the bundled tiny GPT-2 (opset 17): compile it for 4 ranks,
# show the schedule summary (the report: default schedule vs the hook-based
# ZeRO-3 baseline), run the plan on 4 MPI ranks, and show the result next to
# onnxruntime's.
set -euo pipefail
cd "$(dirname "$0")/.."
model=test/models/gpt2-opset17.onnx
out=build/demo
mkdir -p "$out"
flags=(--input-shape input_ids=2x16 --world-size 4 --mode infer
       --persistence-threshold 64 --bucket-size 64KiB)

echo "== zcc $model ${flags[*]} -o $out/gpt2.zplan --dump report"
./build/bin/zcc "$model" "${flags[@]}" -o "$out/gpt2.zplan" --dump report

python3 -c "
import numpy as np
np.save('$out/ids.npy', np.random.default_rng(0).integers(0, 256, (2, 16), dtype=np.int64))"

mpi=(mpirun -np 4 --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
echo
echo "== ${mpi[*]} zrun $out/gpt2.zplan run --input input_ids=$out/ids.npy --output logits=$out/logits.npy --stats"
OPENBLAS_NUM_THREADS=1 "${mpi[@]}" ./build/bin/zrun "$out/gpt2.zplan" run \
  --input input_ids="$out/ids.npy" --output logits="$out/logits.npy" --stats

echo
echo "== result"
python3 - "$model" "$out" <<'PY'
import sys
import numpy as np
import onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
ids = np.load(f"{out}/ids.npy")
logits = np.load(f"{out}/logits.npy")
reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
    ["logits"], {"input_ids": ids})[0]
error = np.abs(logits - reference).max() / np.abs(reference).max()
print(f"logits {logits.shape} {logits.dtype}; next token per sequence (zrun, 4 ranks): "
      f"{logits[:, -1].argmax(-1).tolist()}, (onnxruntime): {reference[:, -1].argmax(-1).tolist()}")
print(f"max |zrun - onnxruntime| / max |logit| = {error:.2e}")
PY
