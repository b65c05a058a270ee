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

# Training: the same model compiled with --mode train for 4 ranks (forward,
# causal-LM loss, backward, reduce-scatters into sharded gradients, sharded
# AdamW), trained on the bundled byte-level corpus, then its gradients
# checked against the committed PyTorch autograd golden.
train_flags=(--input-shape input_ids=2x32 --world-size 4 --mode train
             --persistence-threshold 0)
echo
echo "== zcc $model ${train_flags[*]} -o $out/train.zplan --dump report"
./build/bin/zcc "$model" "${train_flags[@]}" -o "$out/train.zplan" --dump report \
  | sed -n "/program 'train_micro_step'/,/program 'optimizer_step'/p" | sed '$d'

echo
echo "== ${mpi[*]} zrun $out/train.zplan train --data data/gpl-3.0.bin --steps 60 --lr 3e-3 --warmup 5 --log-every 10"
OPENBLAS_NUM_THREADS=1 "${mpi[@]}" ./build/bin/zrun "$out/train.zplan" train \
  --data data/gpl-3.0.bin --steps 60 --lr 3e-3 --warmup 5 --log-every 10

echo
echo "== gradients on 4 ranks against PyTorch autograd (test/models/goldens)"
./build/bin/zcc "$model" --input-shape input_ids=2x8 --world-size 4 --mode train \
  --persistence-threshold 0 -o "$out/grad.zplan" > /dev/null
python3 -c "
import numpy as np
np.save('$out/golden_ids.npy', np.load('test/models/goldens/gpt2-opset17.npz')['input_ids'])"
rm -rf "$out/gradients"
OPENBLAS_NUM_THREADS=1 "${mpi[@]}" ./build/bin/zrun "$out/grad.zplan" gradients \
  --input input_ids="$out/golden_ids.npy" --output-dir "$out/gradients"
python3 - "$out/gradients" <<'PY'
import sys
import numpy as np
golden = np.load("test/models/goldens/gpt2-opset17.npz")
out = sys.argv[1]
worst, name = 0.0, ""
for line in open(f"{out}/gradients.txt"):
    parameter, file = line.rstrip("\n").split("\t")
    ours, torch = np.load(f"{out}/{file}"), golden["grad:" + parameter]
    ratio = np.abs(ours - torch).max() / np.abs(torch).max()
    if ratio > worst:
        worst, name = ratio, parameter
loss = float(np.load(f"{out}/loss.npy"))
print(f"loss {loss:.6f} (torch {float(golden['loss']):.6f}); worst parameter gradient "
      f"max |zrun - torch| / max |torch| = {worst:.1e} ({name})")
PY

echo
echo "== generation: prefill + decode over a static KV cache on 4 ranks, each generating its own"
echo "   prompt, against onnxruntime's greedy loop (every parameter sharded and gathered once"
echo "   for the whole generation: 0 B per token)"
./build/bin/zcc "$model" --mode generate --batch 1 --max-seq-len 32 --prompt-len 8 \
  --world-size 4 --persistence-threshold 0 -o "$out/gen.zplan" --dump report --dump-dir "$out/gen-dumps" > /dev/null
sed -n '/^generation:/,/tokens\/s$/p' "$out/gen-dumps/report.txt"
python3 -c "
import numpy as np
np.save('$out/prompts.npy', np.array([[10, 20, 30, 40, 50, 60, 70, 80], [5, 6, 7, 0, 0, 0, 0, 0],
                                      [90, 91, 92, 93, 94, 0, 0, 0], [33, 0, 0, 0, 0, 0, 0, 0]],
                                     dtype=np.int64))
np.save('$out/lens.npy', np.array([8, 3, 5, 1], dtype=np.int64))"
OPENBLAS_NUM_THREADS=1 "${mpi[@]}" ./build/bin/zrun "$out/gen.zplan" generate \
  --prompt "$out/prompts.npy" --prompt-lengths "$out/lens.npy" --max-new-tokens 12 \
  --output "$out/tokens.npy" --logits-output "$out/logits.npy" --stats
python3 test/generate/reference.py "$model" --prompts "$out/prompts.npy" \
  --prompt-lengths "$out/lens.npy" --max-new-tokens 12 \
  --compare "$out/tokens.npy" "$out/logits.npy"

echo
echo "== one plan for training and generation on 4 ranks: 2 optimizer steps of 4 micro-steps,"
echo "   generating after micro-step 6 (inside step 2's accumulation window); the loss log"
echo "   equals training without generation, and the memory returns to its training level"
./build/bin/zcc "$model" --mode train,generate --input-shape input_ids=2x16 --batch 1 \
  --max-seq-len 16 --prompt-len 8 --world-size 4 --persistence-threshold 0 \
  -o "$out/one.zplan" --dump report --dump-dir "$out/one-dumps" > /dev/null
sed -n '/^timeline:/,$p' "$out/one-dumps/report.txt"
for generate in yes no; do
  extra=()
  if [ "$generate" = yes ]; then
    extra=(--generate-every 6 --prompt "$out/prompts.npy" --prompt-lengths "$out/lens.npy" \
      --max-new-tokens 8 --stats)
  fi
  OPENBLAS_NUM_THREADS=1 "${mpi[@]}" ./build/bin/zrun "$out/one.zplan" train \
    --data data/gpl-3.0.bin --steps 2 --grad-accum 4 --lr 3e-3 \
    --loss-log "$out/loss-$generate.tsv" "${extra[@]}" | grep -v "^zrun: step" || true
done
cmp "$out/loss-yes.tsv" "$out/loss-no.tsv" && echo "loss logs with and without generation: identical"
