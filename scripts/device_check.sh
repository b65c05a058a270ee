#!/usr/bin/env bash
# The CUDA backend's check on a machine with a GPU, in one run (< 8 minutes
# on one H200 with 16 cores):
#
#   1. builds (scripts/build.sh; --setup runs scripts/setup.sh first);
#   2. runs the GPU tests (ctest -L gpu): every CUDA kernel against the CPU
#      kernel on random inputs, the backend's memory, queues and events, and
#      NCCL at N=1 (and N=2 where the machine has two GPUs);
#   3. runs every fixture (gpt2, llama, opt) on both backends at N=1 --
#      infer (logits), train (the loss log of 3 optimizer steps) and
#      generate (greedy tokens and per-step logits) -- and compares; with
#      two GPUs, infer and generate at N=2 as well; and llama's generate and
#      train plans in bf16 mixed precision (--param-dtype bf16);
#   4. a short benchmark: forward and decode tokens/s on both backends (the
#      CPU measured in the same run is the baseline), and GEMM utilization
#      against cuBLAS's own peak on this GPU (bench/cuda_kernels_bench);
#   5. writes a summary (DIR/summary.txt; DIR is --out, default
#      build/device-check) and exits non-zero when anything failed.
#
# usage: scripts/device_check.sh [--setup] [--skip-build] [--out DIR]
#                                [--backend cuda|cpu]
#
# --backend cpu runs every step with the CPU standing in for the device:
# it proves this script on a machine without a GPU (the GPU tests then
# skip), and is how the script itself is tested; its figures mean nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BACKEND=cuda
SETUP=0
BUILD=1
OUT_DIR=
while [ $# -gt 0 ]; do
  case "$1" in
    --setup) SETUP=1 ;;
    --skip-build) BUILD=0 ;;
    --out) OUT_DIR=$2; shift ;;
    --backend) BACKEND=$2; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "device_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$BACKEND" in cuda|cpu) ;; *)
  echo "device_check: --backend takes cuda or cpu, not '$BACKEND'" >&2; exit 2 ;;
esac
OUT_DIR=${OUT_DIR:-$ROOT/build/device-check}
mkdir -p "$OUT_DIR"
SUMMARY=$OUT_DIR/summary.txt
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
: > "$SUMMARY"
FAILURES=0
START=$(date +%s)

say() { echo "$*" | tee -a "$SUMMARY"; }
fail() { say "FAIL $*"; FAILURES=$((FAILURES + 1)); }
elapsed() { echo "$(( $(date +%s) - START )) s"; }

say "zplan device check, $(date -u '+%Y-%m-%d %H:%M UTC'), backend under test: $BACKEND"
say "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null; then
  say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
else
  say "gpu: none (nvidia-smi not found)"
  GPUS=0
fi

#--- 1. build ---------------------------------------------------------------
if [ "$SETUP" = 1 ]; then
  scripts/setup.sh > "$OUT_DIR/setup.log" 2>&1 || { fail "setup (see setup.log)"; exit 1; }
fi
if [ "$BUILD" = 1 ]; then
  # All the machine's cores: this is the GPU machine's build, not CI's.
  if ZPLAN_JOBS=$(nproc) scripts/build.sh > "$OUT_DIR/build.log" 2>&1; then
    say "build: ok ($(elapsed))"
  else
    fail "build (see build.log; on a fresh machine pass --setup)"
    exit 1
  fi
fi
BIN=$ROOT/build/bin
for tool in zcc zrun; do
  [ -x "$BIN/$tool" ] || { fail "no $BIN/$tool: build first"; exit 1; }
done
MPIRUN="$ROOT/test/bin/mpirun --oversubscribe --allow-run-as-root"

#--- 2. GPU tests -----------------------------------------------------------
if ctest --test-dir build -L gpu --output-on-failure > "$OUT_DIR/gpu-tests.log" 2>&1; then
  say "gpu tests: ok: $(grep -E 'tests passed' "$OUT_DIR/gpu-tests.log" | head -1)"
else
  fail "gpu tests: $(grep -E 'tests passed' "$OUT_DIR/gpu-tests.log" | head -1) (see gpu-tests.log)"
fi
skipped=$(grep -c '(Skipped)' "$OUT_DIR/gpu-tests.log")
[ "$skipped" -gt 0 ] && say "gpu tests: $skipped skipped (no device, or fewer GPUs than ranks)"
say "  ($(elapsed))"

#--- 3. fixtures on both backends -------------------------------------------
python3 - "$WORK" <<'PY'
import numpy as np, sys
work = sys.argv[1]
np.save(f"{work}/ids.npy", (np.arange(32, dtype=np.int64).reshape(2, 16) * 37) % 250)
PY
python3 test/generate/make_prompts.py --lengths 6,4,2 --prompts "$WORK/p.npy" \
  --prompt-lengths "$WORK/l.npy" > /dev/null
# Data-parallel generation: each of N ranks generates its own --batch rows
# of the prompt file's N x --batch.
python3 test/generate/make_prompts.py --lengths 6,4,2 --ranks 2 --prompts "$WORK/p2.npy" \
  --prompt-lengths "$WORK/l2.npy" > /dev/null

# run LABEL RANKS BACKEND ARGS...: zrun on RANKS ranks, output to LABEL.log.
run() {
  local label=$1 ranks=$2 backend=$3; shift 3
  $MPIRUN -np "$ranks" "$BIN/zrun" "$@" --backend "$backend" \
    > "$WORK/$label.log" 2>&1 || { fail "$label: zrun failed: $(grep -m1 'error' "$WORK/$label.log")"; return 1; }
}
# compare LABEL KIND REF OTHER TOLERANCE
compare() {
  local label=$1 result
  result=$(python3 scripts/compare_backends.py "$2" "$3" "$4" --tolerance "$5")
  case "$result" in ok*) say "$label: $result" ;; *) fail "$label: $result" ;; esac
}

check_fixture() {
  local model=$1 ranks=$2 plan
  local tag="$model N=$ranks"
  # infer
  plan=$WORK/$model-$ranks-infer.zplan
  if "$BIN/zcc" test/models/$model-opset17.onnx --input-shape input_ids=2x16 \
       --world-size "$ranks" --persistence-threshold 0 -o "$plan" > /dev/null 2>&1; then
    run "$model-$ranks-infer-cpu" "$ranks" cpu "$plan" run --input input_ids="$WORK/ids.npy" \
        --output logits="$WORK/$model-$ranks-cpu.npy" &&
    run "$model-$ranks-infer-dev" "$ranks" "$BACKEND" "$plan" run --input input_ids="$WORK/ids.npy" \
        --output logits="$WORK/$model-$ranks-dev.npy" --check &&
    compare "$tag infer logits" arrays "$WORK/$model-$ranks-cpu.npy" "$WORK/$model-$ranks-dev.npy" 1e-4
  else
    fail "$tag: zcc --mode infer failed"
  fi
  # generate
  plan=$WORK/$model-$ranks-gen.zplan
  if "$BIN/zcc" test/models/$model-opset17.onnx --mode generate --batch 3 --max-seq-len 32 \
       --prompt-len 8 --world-size "$ranks" --persistence-threshold 0 -o "$plan" > /dev/null 2>&1; then
    for side in cpu dev; do
      local backend=$BACKEND; [ $side = cpu ] && backend=cpu
      local prompts=p lengths=l
      [ "$ranks" = 2 ] && prompts=p2 lengths=l2
      run "$model-$ranks-gen-$side" "$ranks" "$backend" "$plan" generate --prompt "$WORK/$prompts.npy" \
          --prompt-lengths "$WORK/$lengths.npy" --max-new-tokens 8 \
          --output "$WORK/$model-$ranks-t-$side.npy" --logits-output "$WORK/$model-$ranks-g-$side.npy" || return
    done
    compare "$tag generate tokens" arrays "$WORK/$model-$ranks-t-cpu.npy" "$WORK/$model-$ranks-t-dev.npy" 0
    compare "$tag generate logits" arrays "$WORK/$model-$ranks-g-cpu.npy" "$WORK/$model-$ranks-g-dev.npy" 1e-3
  else
    fail "$tag: zcc --mode generate failed"
  fi
  [ "$ranks" = 1 ] || return 0
  # train: 3 AdamW steps of the same batches; losses are reductions over
  # the vocabulary in another order on the GPU, hence the looser bound.
  plan=$WORK/$model-train.zplan
  if "$BIN/zcc" test/models/$model-opset17.onnx --mode train --input-shape input_ids=2x16 \
       --world-size 1 --persistence-threshold 0 -o "$plan" > /dev/null 2>&1; then
    for side in cpu dev; do
      local backend=$BACKEND; [ $side = cpu ] && backend=cpu
      run "$model-train-$side" 1 "$backend" "$plan" train --data data/gpl-3.0.bin --steps 3 \
          --seed 0 --lr 1e-3 --loss-log "$WORK/$model-loss-$side.tsv" || return
    done
    compare "$tag train losses" losses "$WORK/$model-loss-cpu.tsv" "$WORK/$model-loss-dev.tsv" 1e-3
  else
    fail "$tag: zcc --mode train failed"
  fi
}

# Mixed precision (docs/mixed-precision.md): bf16 gathers, reductions and KV
# cache over f32 masters -- the cast, queue-conversion and bf16-cache
# kernels and NCCL's bf16 on the device; the same plans on both backends.
check_bf16() {
  local model=$1 plan tag="$1 N=1 bf16"
  plan=$WORK/$model-bf16-gen.zplan
  if "$BIN/zcc" test/models/$model-opset17.onnx --mode generate --batch 3 --max-seq-len 32 \
       --prompt-len 8 --world-size 1 --persistence-threshold 0 --param-dtype bf16 \
       -o "$plan" > /dev/null 2>&1; then
    for side in cpu dev; do
      local backend=$BACKEND; [ $side = cpu ] && backend=cpu
      run "$model-bf16-gen-$side" 1 "$backend" "$plan" generate --prompt "$WORK/p.npy" \
          --prompt-lengths "$WORK/l.npy" --max-new-tokens 8 \
          --output "$WORK/$model-bf16-t-$side.npy" --logits-output "$WORK/$model-bf16-g-$side.npy" || return
    done
    compare "$tag generate tokens" arrays "$WORK/$model-bf16-t-cpu.npy" "$WORK/$model-bf16-t-dev.npy" 0
    compare "$tag generate logits" arrays "$WORK/$model-bf16-g-cpu.npy" "$WORK/$model-bf16-g-dev.npy" 1e-3
  else
    fail "$tag: zcc --mode generate --param-dtype bf16 failed"
  fi
  plan=$WORK/$model-bf16-train.zplan
  if "$BIN/zcc" test/models/$model-opset17.onnx --mode train --input-shape input_ids=2x16 \
       --world-size 1 --persistence-threshold 0 --param-dtype bf16 --reduce-dtype bf16 \
       -o "$plan" > /dev/null 2>&1; then
    for side in cpu dev; do
      local backend=$BACKEND; [ $side = cpu ] && backend=cpu
      run "$model-bf16-train-$side" 1 "$backend" "$plan" train --data data/gpl-3.0.bin --steps 3 \
          --seed 0 --lr 1e-3 --loss-log "$WORK/$model-bf16-loss-$side.tsv" || return
    done
    compare "$tag train losses" losses "$WORK/$model-bf16-loss-cpu.tsv" "$WORK/$model-bf16-loss-dev.tsv" 1e-3
  else
    fail "$tag: zcc --mode train --param-dtype bf16 failed"
  fi
}

for model in gpt2 llama opt; do
  check_fixture $model 1
done
check_bf16 llama
if [ "$BACKEND" = cpu ] || [ "${GPUS:-0}" -ge 2 ]; then
  check_fixture gpt2 2
else
  say "N=2 fixtures: skipped (one GPU; NCCL at N=2 needs two)"
fi
say "  ($(elapsed))"

#--- 4. benchmark -----------------------------------------------------------
# The model: bench/generate_bench.py's 156M-parameter Llama (random weights,
# built in about a minute where torch and transformers import, nothing
# downloaded); else the tiny llama fixture, whose figures only say how
# launch-bound the backend is. The CPU baseline gets every core.
BENCH_ONNX=test/models/llama-opset17.onnx
BENCH_NAME="llama fixture (tiny: launch-bound)"
if python3 -c "import torch, transformers" > /dev/null 2>&1; then
  if python3 -c "import sys; sys.path.insert(0, 'bench'); import generate_bench; generate_bench.ensure_model()" \
       > "$OUT_DIR/bench-model.log" 2>&1; then
    BENCH_ONNX=bench/.models/llama-156m/plain.onnx
    BENCH_NAME="llama-156m"
  else
    say "bench model: could not build it (see bench-model.log); using the fixture"
  fi
fi
THREADS=$(nproc)
cpu_flags() { [ "$1" = cpu ] && echo "--threads $THREADS"; }
# Forward: [8, 128], the last of 3 runs.
plan=$WORK/bench-infer.zplan
python3 -c "import numpy as np; np.save('$WORK/bench-ids.npy', (np.arange(8*128, dtype=np.int64).reshape(8, 128) * 7) % 250)"
if "$BIN/zcc" "$BENCH_ONNX" --input-shape input_ids=8x128 --world-size 1 \
     -o "$plan" > /dev/null 2>&1; then
  declare -A SECONDS_PER_RUN
  for side in cpu dev; do
    backend=$BACKEND; [ $side = cpu ] && backend=cpu
    if run "bench-infer-$side" 1 "$backend" "$plan" run --input input_ids="$WORK/bench-ids.npy" \
         --repeat 3 $(cpu_flags $side); then
      SECONDS_PER_RUN[$side]=$(grep -oE 'run time [0-9.]+' "$WORK/bench-infer-$side.log" | awk '{print $3}')
    fi
  done
  if [ -n "${SECONDS_PER_RUN[cpu]:-}" ] && [ -n "${SECONDS_PER_RUN[dev]:-}" ]; then
    say "$(python3 -c "
cpu, dev = ${SECONDS_PER_RUN[cpu]}, ${SECONDS_PER_RUN[dev]}
tokens = 8 * 128
print(f'forward $BENCH_NAME [8,128]: {tokens/dev:,.0f} tok/s on $BACKEND, {tokens/cpu:,.0f} tok/s on cpu ($THREADS threads): {cpu/dev:.1f}x')")"
  fi
else
  fail "bench: zcc of $BENCH_ONNX failed"
fi
# Decode: greedy tokens/s, batch 3, from --stats.
plan=$WORK/bench-gen.zplan
if "$BIN/zcc" "$BENCH_ONNX" --mode generate --batch 3 --max-seq-len 64 \
     --prompt-len 8 --world-size 1 -o "$plan" > /dev/null 2>&1; then
  for side in cpu dev; do
    backend=$BACKEND; [ $side = cpu ] && backend=cpu
    run "bench-gen-$side" 1 "$backend" "$plan" generate --prompt "$WORK/p.npy" \
        --prompt-lengths "$WORK/l.npy" --max-new-tokens 32 --output "$WORK/bench-t.npy" --stats \
        $(cpu_flags $side) &&
      say "decode $BENCH_NAME batch 3 on $backend: $(grep -m1 -oE 'decode .* tok/s' "$WORK/bench-gen-$side.log")"
  done
else
  fail "bench: zcc --mode generate of $BENCH_ONNX failed"
fi
if [ -x "$BIN/cuda_kernels_bench" ]; then
  if timeout 120 "$BIN/cuda_kernels_bench" > "$OUT_DIR/kernels-bench.log" 2>&1; then
    sed 's/^/  /' "$OUT_DIR/kernels-bench.log" | tee -a "$SUMMARY"
  else
    fail "cuda_kernels_bench (see kernels-bench.log)"
  fi
else
  say "cuda_kernels_bench: not built (no CUDA in this build)"
fi
cp "$WORK"/*.log "$OUT_DIR/" 2>/dev/null

#--- 5. summary -------------------------------------------------------------
say "total: $(elapsed), $FAILURES failure(s); logs in $OUT_DIR"
[ "$FAILURES" = 0 ]
